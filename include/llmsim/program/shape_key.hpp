/// \file llmsim/program/shape_key.hpp
/// The exact shape keys under which system files store measured efficiencies
/// (`accelerator.op.<kind>.accurate_efficient_factor`), built in a fixed buffer so lookups work in
/// constant expressions too. Formats (SimuMax system files, ../shared/reference/simumax/FORMAT.md):
///   matmul:   `b=1, m=4096, k=5120, n=1536, layout=TN, accumulate=False, out_dtype=bf16`
///   sdp_*:    `batch=1, seq_len=4096, head_num=32, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True`
#pragma once

#include <llmsim/spec/strategy.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

// GCC 12 reports -Wstringop-overflow on the bounded appends below once they are inlined into a
// long chain (it bounds `length` by the sum of the worst cases, not by the check); the writes
// are guarded, so the warning is silenced for this struct only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
/// A short text assembled at compile time or run time without allocation.
struct shape_key {
  char chars[224]{};
  std::size_t length = 0;

  constexpr shape_key& append(std::string_view s) {  // NOLINT: one overload per value kind
    for (char c : s) {
      if (length == sizeof chars) break;  // keys are far shorter; never overruns
      chars[length++] = c;
    }
    return *this;
  }
  constexpr shape_key& append(std::int64_t v) {
    char digits[24]{};
    std::size_t n = 0;
    const bool negative = v < 0;
    std::uint64_t u = negative ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) digits[n++] = '-';
    for (; n > 0 && length < sizeof chars; ++length) chars[length] = digits[--n];
    return *this;
  }
  /// Python spelling of a flag, as the keys write it. (Not an `append` overload: a literal would pick bool.)
  constexpr shape_key& append_flag(bool v) { return append(v ? std::string_view("True") : std::string_view("False")); }
  [[nodiscard]] constexpr std::string_view view() const { return {chars, length}; }
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// How a GEMM reads its operands: TN = forward (x · Wᵀ), NN = gradient of the input (dy · W),
/// NT = gradient of the weight (dyᵀ · x).
enum class gemm_layout : std::uint8_t { tn, nn, nt };

/// One GEMM as the system file keys it.
struct gemm_shape {
  std::int64_t b = 1, m = 0, k = 0, n = 0;
  gemm_layout layout = gemm_layout::tn;
  bool accumulate = false;  ///< adds into an existing output (the fp32 main grad)
  dtype_kind out_dtype = dtype_kind::bf16;

  /// Floating-point operations: one multiply-add per (b, m, n, k) point.
  [[nodiscard]] constexpr double flop_count() const {
    return 2.0 * static_cast<double>(b) * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  }
  [[nodiscard]] constexpr shape_key key() const {
    shape_key s;
    s.append("b=").append(b).append(", m=").append(m).append(", k=").append(k).append(", n=").append(n);
    s.append(", layout=").append(layout == gemm_layout::tn ? "TN" : layout == gemm_layout::nn ? "NN" : "NT");
    s.append(", accumulate=").append_flag(accumulate).append(", out_dtype=").append(enum_name(out_dtype));
    return s;
  }
};

/// One flash-attention call as the system file keys it (heads are those of one tensor-parallel rank).
struct attention_shape {
  std::int64_t batch = 1, seq_len = 0, head_num = 0, kv_head_num = 0, qk_head_dim = 0, v_head_dim = 0;
  bool qkv_contiguous = true;  ///< TE receives q, k, v as views of one fused QKV output
  [[nodiscard]] constexpr shape_key key() const {
    shape_key s;
    s.append("batch=").append(batch).append(", seq_len=").append(seq_len).append(", head_num=").append(head_num);
    s.append(", kv_head_num=").append(kv_head_num).append(", qk_head_dim=").append(qk_head_dim);
    s.append(", v_head_dim=").append(v_head_dim).append(", qkv_contiguous=").append_flag(qkv_contiguous);
    return s;
  }
};

/// The stage of a TE GroupedLinear GEMM as the grouped-GEMM table keys it.
enum class grouped_stage : std::uint8_t { forward, input_gradient, weight_gradient, weight_gradient_unaccumulated };

/// One grouped GEMM over a rank's experts as the system file keys it (M, N, K of the forward GEMM).
struct grouped_gemm_shape {
  std::int64_t experts = 1, m = 0, n = 0, k = 0;
  bool fp8 = false;
  bool main_grad_fp32 = true;
  grouped_stage stage = grouped_stage::forward;
  [[nodiscard]] constexpr shape_key key() const {
    shape_key s;
    s.append("ng=").append(experts).append(", M=").append(m).append(", N=").append(n);
    s.append(", K=")
        .append(k)
        .append(", dtype=")
        .append(fp8 ? "fp8" : "bf16")
        .append(", out_dtype=bf16, main_grad_dtype=")
        .append(main_grad_fp32 ? "fp32" : "bf16");
    switch (stage) {
      case grouped_stage::forward:
        s.append(", stage=fwd, grad=False, accumulate=False, use_split_accumulator=False, single_output=True");
        break;
      case grouped_stage::input_gradient:
        s.append(", stage=bwd_grad_act, grad=True, accumulate=False, use_split_accumulator=True, single_output=False");
        break;
      case grouped_stage::weight_gradient:
        s.append(", stage=bwd_grad_w, grad=True, accumulate=True, use_split_accumulator=True, single_output=False");
        break;
      case grouped_stage::weight_gradient_unaccumulated:
        s.append(", stage=bwd_grad_w, grad=True, accumulate=False, use_split_accumulator=True, single_output=False");
        break;
    }
    return s;
  }
};

LLMSIM_END_NAMESPACE
