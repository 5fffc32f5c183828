/// \file llmsim/llm_analysis/latency.hpp
/// llm-analysis's roofline latency of one forward pass (analysis.py `get_latency_fwd*`): each
/// module takes max(compute at the achieved TFLOP/s, its weight and activation bytes at the
/// achieved HBM bandwidth); tensor-parallel all-reduces and ZeRO all-gathers at link bandwidth.
#pragma once

#include <llmsim/llm_analysis/analysis.hpp>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// The forward pass of the layers of one pipeline stage plus the embeddings (seconds).
struct forward_latency {
  double total = 0;
  double attn = 0, mlp = 0, layernorm = 0, tp_comm = 0, sharded_dp_comm = 0;  ///< over the stage's layers
  double input_embedding = 0, output_embedding_loss = 0;
};

namespace detail {
constexpr double larger(double a, double b) { return a > b ? a : b; }
}  // namespace detail

/// Attention of one layer. llm-analysis quirk: its activation bytes are always those of flash
/// attention without recomputation, whatever `flash_attn`, `softmax_dropout` and the recomputation
/// are (analysis.py passes the recomputation where the flash_attn flag belongs).
constexpr double latency_attn(const analysis& a, double b, double s, bool inference) {
  const double compute = a.seconds_of_flops(a.flops_attn(b, s) / a.tp());
  const double weights = a.seconds_of_hbm(a.params_attn() * a.weight_bytes() / a.tp());
  const double acts = a.seconds_of_hbm(a.activation_attn(b, s, inference, true, false, activation_recomputation::NONE));
  return detail::larger(compute, weights + acts);
}

/// The two all-to-alls of an MoE layer: top-k copies of every token, over NVLink while ep <= 8.
constexpr double latency_moe_alltoall(const analysis& a, double b, double s) {
  const double bytes = a.top_k() * b * s * a.h() * a.act_bytes();
  const double bw = a.par.ep_size <= 8 ? a.intra_node_bandwidth() : a.inter_node_bandwidth();
  return bytes / (bw * giga);
}

/// MLP of one layer. llm-analysis quirk: the activation bytes read ignore gated linear units and
/// MLP quantization (defaults of the activation formula).
constexpr double latency_mlp(const analysis& a, double b, double s, bool inference, activation_recomputation rec) {
  const double compute = a.seconds_of_flops(a.flops_mlp(b, s) / a.tp());
  const double weights = a.seconds_of_hbm(a.params_mlp() / a.ep() * a.weight_bytes() / a.tp());
  activation_options o;
  o.recomputation = rec;
  const double acts = a.seconds_of_hbm(a.activation_mlp(b, s, inference, o));
  const double alltoall = a.model.config.moe_num_experts > 1 ? 2 * latency_moe_alltoall(a, b, s) : 0;
  return detail::larger(compute, weights + acts) + alltoall;
}

/// One norm: 5 FLOPs per element or its fp32 activation read. llm-analysis quirk: always fp32 bytes
/// (the layernorm_dtype_bytes given is not passed on).
constexpr double latency_layernorm(const analysis& a, double b, double s) {
  const double compute = a.seconds_of_flops(s * b * a.h() * 5);
  const double memory = a.seconds_of_hbm(a.activation_layernorm(b, s, 4));
  return detail::larger(compute, memory);
}

/// One ring all-reduce of the layer output across tp (NVLink), at least the minimum message latency.
constexpr double latency_tp_comm(const analysis& a, double b, double s, double dtype_bytes) {
  if (a.par.tp_size == 1) return 0;
  const double elems = 2 * b * s * a.h() * (a.tp() - 1) / a.tp();
  return detail::larger(elems * dtype_bytes / (a.intra_node_bandwidth() * giga), a.gpu.intra_node_min_message_latency);
}

/// All-gather of one layer's weights across the sharded data-parallel group (NCCL's
/// S (n-1) / (B n), nccl-tests doc/PERFORMANCE.md). llm-analysis quirk: charged under every ZeRO
/// stage, also ZeRO-0/1/2 which gather no weights, and it bounds the layer time from below.
constexpr double latency_sharded_dp_comm(const analysis& a) {
  const auto allgather = [](double bytes, double n, double bw) { return bytes * (n - 1) / (bw * n); };
  const double mlp_bytes = a.params_mlp() / a.ep() * a.weight_bytes();
  const double other_bytes = (a.params_attn() + a.params_router() + a.params_layernorm()) * a.weight_bytes();
  const double bw = (a.par.dp_size * a.par.tp_size <= 8 ? a.intra_node_bandwidth() : a.inter_node_bandwidth()) * giga;
  return allgather(mlp_bytes, a.dp() / a.ep(), bw) + allgather(other_bytes, a.dp(), bw);
}

/// One layer: attention + MLP + two norms + two all-reduces, or the weight all-gather if longer.
constexpr layer_latency latency_layer(const analysis& a, double b, double s, bool inference,
                                      activation_recomputation rec) {
  layer_latency l;
  l.attn = latency_attn(a, b, s, inference);
  l.mlp = latency_mlp(a, b, s, inference, rec);
  l.layernorm = 2 * latency_layernorm(a, b, s);
  l.tp_comm = 2 * latency_tp_comm(a, b, s, a.act_bytes());
  l.sharded_dp_comm = latency_sharded_dp_comm(a);
  l.total = detail::larger(l.attn + l.mlp + l.layernorm + l.tp_comm, l.sharded_dp_comm);
  return l;
}

/// The input embedding: a read of the whole table plus an all-reduce.
constexpr double latency_input_embedding(const analysis& a, double b, double s) {
  return a.seconds_of_hbm(a.vocab() * a.h() * a.embed_bytes()) + latency_tp_comm(a, b, s, a.embed_bytes());
}

/// The logits GEMM. llm-analysis quirk: divided by pp_size as well as tp_size, although only the
/// last stage computes it.
constexpr double latency_output_embedding_loss(const analysis& a, double b, double s) {
  return a.seconds_of_flops(2 * s * b * a.vocab() * a.h() / a.tp() / static_cast<double>(a.par.pp_size));
}

/// The forward pass of one stage (analysis.py `get_latency_fwd`).
constexpr forward_latency latency_forward(const analysis& a, double b, double s, bool inference,
                                          activation_recomputation rec) {
  const double n = a.layers_per_gpu();
  const layer_latency l = latency_layer(a, b, s, inference, rec);
  forward_latency f;
  f.attn = l.attn * n;
  f.mlp = l.mlp * n;
  f.layernorm = l.layernorm * n;
  f.tp_comm = l.tp_comm * n;
  f.sharded_dp_comm = l.sharded_dp_comm * n;
  f.input_embedding = latency_input_embedding(a, b, s);
  f.output_embedding_loss = latency_output_embedding_loss(a, b, s);
  f.total = l.total * n + f.input_embedding + f.output_embedding_loss;
  return f;
}

}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
