/// \file llmsim/program/op.hpp
/// One unpriced operation of a leaf: a GEMM, a grouped GEMM, an attention kernel, a memory-bound
/// kernel or a collective, with the pass it belongs to, its shape, its floating-point work and
/// the bytes it moves. Programs emit ops; cost/op_cost.hpp prices them (the only place that does).
#pragma once

#include <llmsim/program/shape_key.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE

/// The communication groups of a Megatron-LM job. Context parallelism's attention talks over two
/// levels of the cp group (TransformerEngine context_parallel.py): `cp_a2a`, the ranks a Ulysses
/// all-to-all spans (all of cp for "a2a", the first hierarchical level for "a2a+p2p"), and
/// `cp_ring`, the ranks the KV ring passes through (all of cp for "p2p", the second level).
enum class comm_group : std::uint8_t { tp, cp, pp, dp, ep, etp, edp, cp_a2a, cp_ring };
inline constexpr std::array<std::string_view, 9> comm_group_names{"tp",  "cp",  "pp",     "dp",     "ep",
                                                                  "etp", "edp", "cp_a2a", "cp_ring"};

/// Which pass of training runs an op. Backward is split into the input gradient and the weight
/// gradient (what zero-bubble schedules move apart); a recompute replays the forward ops.
enum class pass_kind : std::uint8_t { forward, backward_input, backward_weight };

enum class op_kind : std::uint8_t {
  gemm,          ///< one GEMM keyed by `gemm` (or unkeyed batched GEMMs: `keyed = false`)
  grouped_gemm,  ///< TE GroupedLinear keyed by `grouped`
  attention,     ///< a fused attention kernel keyed by `attention`
  memory,        ///< a memory-bound kernel: `bytes` moved on the `memory` bandwidth entry
  collective,    ///< a collective of `bytes` (the full buffer) over `group`
};

struct op {
  op_kind kind = op_kind::memory;
  pass_kind pass = pass_kind::forward;
  compute_kind compute = compute_kind::default_kind;  ///< the `accelerator.op` entry of compute work
  memory_kind memory = memory_kind::default_kind;     ///< the `accelerator.bandwidth` entry of its traffic
  collective_kind collective = collective_kind::all_reduce;
  comm_group group = comm_group::tp;
  bool keyed = true;  ///< a compute op looked up by its shape key
  /// A collective that runs beside the pass's previous compute op of its leaf, on its own stream
  /// (TE ring attention posts the next step's KV send / receive before a step's attention and waits
  /// for it after): only what outlasts that op is exposed (cost/op_cost.hpp `price_op`).
  bool beside_previous = false;
  /// With `beside_previous`: a TP collective TE's userbuffers overlap with that GEMM
  /// (strategy.tp_comm_overlap), split into `userbuffers_chunks` steps and taking
  /// `userbuffers_sms` SMs from it (0: copy engines), the GEMM running on the other SMs throughout
  /// with `userbuffers_sm_margin`; priced by cost/op_cost.hpp `userbuffers_exposed`.
  userbuffers_method userbuffers = userbuffers_method::none;
  std::int64_t userbuffers_chunks = 0, userbuffers_sms = 0;
  bool userbuffers_sm_margin = true;
  double flops = 0;  ///< floating-point work (compute ops)
  double bytes = 0;  ///< traffic (compute and memory ops) or buffer size (collectives)
  gemm_shape gemm{};
  attention_shape attention{};
  grouped_gemm_shape grouped{};

  [[nodiscard]] constexpr bool is_backward() const { return pass != pass_kind::forward; }
};

/// A memory-bound kernel of `pass` moving `bytes` on bandwidth entry `kind`.
constexpr op memory_op(pass_kind pass, double bytes, memory_kind kind = memory_kind::default_kind) {
  op o;
  o.kind = op_kind::memory;
  o.pass = pass;
  o.memory = kind;
  o.bytes = bytes;
  return o;
}
/// A collective of `pass` over `group` on a buffer of `bytes`.
constexpr op collective_op(pass_kind pass, collective_kind kind, comm_group group, double bytes) {
  op o;
  o.kind = op_kind::collective;
  o.pass = pass;
  o.collective = kind;
  o.group = group;
  o.bytes = bytes;
  return o;
}
/// A GEMM of `pass` with its shape and traffic (`compute`: matmul, or fp8_matmul under FP8).
constexpr op gemm_op(pass_kind pass, const gemm_shape& g, double traffic, compute_kind compute = compute_kind::matmul) {
  op o;
  o.kind = op_kind::gemm;
  o.pass = pass;
  o.compute = compute;
  o.gemm = g;
  o.flops = g.flop_count();
  o.bytes = traffic;
  return o;
}
/// Batched GEMMs no system table keys (unfused attention's Q·Kᵀ and P·V, the Mamba SSD scan's
/// Triton kernels, DeepSeek-V4's indexer): priced by the kind's `efficient_factor`, or on a
/// kernel-model system as a GEMM of the model (its sustained share, compute and streaming in
/// quadrature) though no such kernel was in the fit: an assumption.
constexpr op unkeyed_gemm_op(pass_kind pass, double flops, double traffic) {
  op o;
  o.kind = op_kind::gemm;
  o.pass = pass;
  o.compute = compute_kind::matmul;
  o.keyed = false;
  o.flops = flops;
  o.bytes = traffic;
  return o;
}
/// Backward FLOPs of fused attention over its forward: five matmuls (QKᵀ recomputed, dV, dP, dQ,
/// dK) against the forward's two (Dao 2023, FlashAttention-2 §4.1 counts backward as 2.5 × forward).
inline constexpr double flash_backward_flop_factor = 2.5;
/// A fused attention kernel (sdp_fwd or sdp_bwd) over shape `a`, `skipped` the fraction of its
/// score pairs a declared sparsity removes (`attention_sparse_ratio`).
constexpr op attention_op(pass_kind pass, const attention_shape& a, double traffic, double skipped = 0) {
  op o;
  o.kind = op_kind::attention;
  o.pass = pass;
  o.compute = pass == pass_kind::forward ? compute_kind::sdp_fwd : compute_kind::sdp_bwd;
  o.attention = a;
  o.flops = a.forward_flop_count(skipped);
  if (pass != pass_kind::forward) o.flops *= flash_backward_flop_factor;
  o.bytes = traffic;
  return o;
}
/// A grouped GEMM (group_matmul; fp8_group_matmul or fp4_group_matmul in quantized layers).
constexpr op grouped_gemm_op(pass_kind pass, const grouped_gemm_shape& g, double flops, double traffic) {
  op o;
  o.kind = op_kind::grouped_gemm;
  o.pass = pass;
  o.compute = g.fp4   ? compute_kind::fp4_group_matmul
              : g.fp8 ? compute_kind::fp8_group_matmul
                      : compute_kind::group_matmul;
  o.grouped = g;
  o.flops = flops;
  o.bytes = traffic;
  return o;
}

LLMSIM_END_NAMESPACE
