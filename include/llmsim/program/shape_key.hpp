/// \file llmsim/program/shape_key.hpp
/// The exact shape keys under which system files store measured efficiencies
/// (`accelerator.op.<kind>.accurate_efficient_factor`), built in a fixed buffer so lookups work in
/// constant expressions too. Formats (SimuMax system files, ../shared/reference/simumax/FORMAT.md):
///   matmul:   `b=1, m=4096, k=5120, n=1536, layout=TN, accumulate=False, out_dtype=bf16`
///   sdp_*:    `batch=1, seq_len=4096, head_num=32, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True`
///             (seq_len is the query length; training self-attention has keys as long)
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

/// Which (query, key) pairs an attention call's FLOPs count.
enum class attention_pairs : std::uint8_t {
  /// All q_len · kv_len pairs. Training counts its causal self-attention this way, as SimuMax does
  /// (its sdp tables and efficient factors are measured against the unmasked count, so the mask's
  /// saving is in the efficiency; `attention_sparse_ratio` removes a declared fraction).
  all,
  /// The pairs a causal mask keeps when the q_len queries are the last q_len of the kv_len
  /// positions (bottom-right aligned, as in chunked prefill and decode over a KV cache: vLLM, and
  /// FlashAttention >= 2.1 `causal=True` with seqlen_q < seqlen_k): query i (0-based) sees
  /// kv − q + i + 1 keys, so q·kv − q(q−1)/2 pairs (q = kv: the triangle with its diagonal,
  /// q(q+1)/2). FlashAttention-3's benchmark count (hopper/benchmark_attn.py `flops`, average key
  /// length (max(0, kv − q) + kv)/2) is the same without the half diagonal.
  causal,
};

/// One flash-attention call as the system file keys it (heads are those of one tensor-parallel rank).
/// Queries and keys/values have their own lengths: training self-attention has q_len = kv_len =
/// seq_len; a decode step has q_len = 1 over a cache of kv_len tokens.
struct attention_shape {
  std::int64_t batch = 1, q_len = 0, kv_len = 0, head_num = 0, kv_head_num = 0, qk_head_dim = 0, v_head_dim = 0;
  bool qkv_contiguous = true;  ///< TE receives q, k, v as views of one fused QKV output
  attention_pairs pairs = attention_pairs::all;

  /// (query, key) pairs one head of one sequence scores (with q_len > kv_len under the causal
  /// mask, the first q_len − kv_len queries see no key).
  [[nodiscard]] constexpr double score_pairs() const {
    const double q = static_cast<double>(q_len), kv = static_cast<double>(kv_len);
    if (pairs == attention_pairs::all) return q * kv;
    const double seen = q < kv ? q : kv;  // queries that see at least one key
    return seen * kv - seen * (seen - 1) / 2;
  }
  /// The share of all q_len x kv_len pairs that score_pairs() counts (1 for `all`, and for an
  /// empty call).
  [[nodiscard]] constexpr double counted_share() const {
    const double all = static_cast<double>(q_len) * static_cast<double>(kv_len);
    return all > 0 ? score_pairs() / all : 1;
  }
  /// Forward FLOPs, less a `skipped` fraction of the pairs: one multiply-add per pair and head
  /// dimension for QKᵀ (qk_head_dim) and for PV (v_head_dim), over every head of every sequence
  /// (Dao 2023, FlashAttention-2 §4.1: 4·seqlen²·d·heads forward for q = kv = seqlen unmasked). A
  /// decode step (q = 1) over kv = N: 2·N·heads·(qk + v), 4·N·heads·d for equal head dims.
  [[nodiscard]] constexpr double forward_flop_count(double skipped = 0) const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(head_num) * score_pairs() *
           static_cast<double>(qk_head_dim + v_head_dim) * (1.0 - skipped);
  }
  /// The table key. SimuMax measures training self-attention and keys it by `seq_len` (= q_len =
  /// kv_len); a call with kv_len != q_len adds `kv_seq_len`, which no such table holds, so it is
  /// priced by the kind's efficient_factor rather than by a self-attention entry of the wrong shape.
  [[nodiscard]] constexpr shape_key key() const {
    shape_key s;
    s.append("batch=").append(batch).append(", seq_len=").append(q_len);
    if (kv_len != q_len) s.append(", kv_seq_len=").append(kv_len);
    s.append(", head_num=").append(head_num);
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
  bool fp4 = false;  ///< NVFP4 operands (keyed `dtype=fp4`; llmsim's extension)
  /// Serving: the mean rows of an expert that has any (a decode batch leaves experts empty and
  /// its rows a fraction of the group's), which the kernel model prices; 0: `m`. Not keyed.
  double active_rows = 0;
  /// Serving: one kernel over every expert (vLLM's fused_moe, TensorRT-LLM's CUTLASS MoE), not
  /// TransformerEngine's per-expert GEMM calls of training. Not keyed.
  bool single_kernel = false;
  [[nodiscard]] constexpr shape_key key() const {
    shape_key s;
    s.append("ng=").append(experts).append(", M=").append(m).append(", N=").append(n);
    s.append(", K=")
        .append(k)
        .append(", dtype=")
        .append(fp4   ? "fp4"
                : fp8 ? "fp8"
                      : "bf16")
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
