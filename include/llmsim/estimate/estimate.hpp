/// \file llmsim/estimate/estimate.hpp
/// One training iteration of Megatron-LM predicted from a model, a strategy and a system:
/// stage programs → kernel and collective costs → 1F1B schedule → data-parallel gradient sync and
/// optimizer step; memory from the same leaves. Result names follow SimuMax's docs/tutorial.md.
///
/// ```cpp
/// constexpr auto r = llmsim::estimate(llama3_8b, tp2_dp4, h100);
/// static_assert(r.mem.peak_mem < 80_GiB);
/// ```
#pragma once

#include <llmsim/core/units.hpp>
#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/network_cost.hpp>
#include <llmsim/program/dense.hpp>
#include <llmsim/program/layer.hpp>
#include <llmsim/program/leaf.hpp>
#include <llmsim/schedule/one_f_one_b.hpp>
#include <llmsim/spec/validate.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// Named model parameters of the estimate that are not in any config file.
namespace parameters {
/// Megatron-LM DDP bucket size in elements: max(40M, 1M * dp) (`distributed_data_parallel_config.bucket_size`).
inline constexpr double ddp_bucket_min_elements = 40000000.0;
inline constexpr double ddp_bucket_elements_per_dp_rank = 1000000.0;
/// Straggler slowdown of synchronised multi-node steps, SimuMax v1.2 (`perf_llm.py`, straggler model):
/// 1 + log2(n) / (log2(n) + 1) * 0.09 * sqrt(log2(n)) for n nodes in the slowest group.
inline constexpr double straggler_coefficient = 0.09;
/// TransformerEngine's cuBLAS workspace per GEMM stream: 32 MiB + 1 KiB on compute capability >= 9
/// (Hopper, Blackwell), 4 MiB before (`get_cublas_workspace_size_bytes`); one for regular GEMMs and
/// one per compute stream (4) for grouped GEMMs, allocated on first use and kept.
inline constexpr double te_workspace_bytes_sm90 = 32.0 * 1024 * 1024 + 1024;
inline constexpr double te_workspace_bytes_older = 4.0 * 1024 * 1024;
inline constexpr double te_grouped_gemm_streams = 4;
}  // namespace parameters

/// The kinds of pipeline stage whose programs differ.
enum class stage_kind : std::uint8_t { first, middle, last };
inline constexpr std::array<std::string_view, 3> stage_kind_names{"first_stage", "middle_stage", "last_stage"};

/// One block of a stage: a shared leaf list run `repeat` times.
struct stage_block {
  const leaf_block* block = nullptr;
  std::int64_t repeat = 0;
  std::int64_t first_layer = -1;  ///< index of its first decoder layer in the stage (-1: not layers)
};

/// Leaves of one pipeline stage: [embedding] [recomputed layers] [other layers] [final norm, LM head, loss].
struct stage_program {
  std::array<stage_block, 6> blocks{};
  std::size_t count = 0;
  std::int64_t layers = 0;

  constexpr void add(const leaf_block& b, std::int64_t repeat, std::int64_t first_layer) {
    if (b.count == 0 || repeat == 0) return;
    blocks[count++] = {&b, repeat, first_layer};
  }
};

/// Cost and memory of one stage kind.
struct stage_result {
  stage_kind kind = stage_kind::first;
  std::int64_t rank = 0;    ///< the pipeline rank it describes (middle: the one holding most micro-batches)
  std::int64_t layers = 0;
  // Time of one micro-batch.
  seconds fwd_compute_time{}, bwd_compute_time{}, recompute_time{};
  seconds fwd_tp_comm_time{}, bwd_tp_comm_time{}, recompute_tp_comm_time{};
  seconds p2p_time{};      ///< sends and receives to neighbours of one micro-batch (fwd + bwd)
  seconds chunk_time{};    ///< forward + backward + p2p of one micro-batch
  // Time of the iteration tail.
  seconds dp_time{};       ///< gradient reduce-scatter (all-reduce) and parameter all-gather
  seconds optim_time{};    ///< optimizer step
  std::int64_t dp_buckets = 0;
  // Memory.
  double params = 0;
  double expert_params = 0;  ///< of which routed-expert parameters
  bytes weight_mem{}, grad_mem{}, optimizer_state_mem{}, te_dummy_wgrad_mem{}, workspace_mem{}, model_mem{};
  bytes fwd_activation_cache_per_micro_batch{};
  bytes peak_activation_mem_in_1F1B{};
  std::int64_t micro_batches_in_flight = 1;
  bytes fwd_peak_allocated_mem{}, bwd_peak_allocated_mem{};
  bytes peak_mem{}, peak_mem_with_reserved{};
  peak_site peak_path{};
  std::int32_t efficiency_lookups = 0, efficiency_misses = 0;
};

/// The exposed time of one iteration by cause (first stage's view, SimuMax `breakdown_result`).
struct time_breakdown {
  seconds fwd_compute_time{}, bwd_compute_time{}, recompute_time{};
  seconds intra_exposed_time{};  ///< tensor-parallel collectives
  seconds inter_exposed_time{};  ///< pipeline sends and receives
  seconds bubble_time{};
  seconds dp_exposed_time{};
  seconds optim_time{};
  seconds straggler_time{};
};

/// Network tiers chosen for the groups.
struct comm_summary {
  std::string_view tp_net{}, pp_net{}, dp_net{};
  seconds tp_time_per_iter{};  ///< all tensor-parallel collectives of the first stage over the iteration
  seconds p2p_time_per_transfer{};
  seconds dp_time{};
};

/// Time, throughput and MFU of one iteration.
struct cost_result {
  seconds duration_time_per_iter{};
  seconds pipeline_time{};  ///< the 1F1B part, before gradient sync and optimizer
  double mfu = 0;                 ///< model FLOPs (6ND + attention) / (time * peak), as SimuMax reports it
  double mfu_6nd_with_attn = 0;   ///< the same quantity under SimuMax's explicit name
  double throughput_per_accelerator = 0;  ///< tokens per second per GPU
  double all_tokens_per_iter = 0;
  flops model_flops_per_iter{};  ///< per GPU
  time_breakdown breakdown_result{};
  comm_summary comm_result{};
  std::int32_t efficiency_lookups = 0, efficiency_misses = 0;  ///< compute_details: shapes priced from the table vs fallback
};

/// Memory of the stages; `peak_mem` is the largest, and the verdict against the device.
struct mem_result {
  bytes peak_mem{};
  bytes peak_mem_with_reserved{};
  double memory_reserved_ratio = 0;  ///< mem_factor: allocated / reserved
  std::int64_t peak_stage = 0;        ///< index into `stages`
  bytes device_mem{};                 ///< accelerator.mem_gbs GiB (`device_memory`)
  bool fits = true;                   ///< peak_mem <= device_mem on every stage
  bytes over_by{};                    ///< peak_mem - device_mem when it does not fit, else 0
};

/// A whole estimate.
struct estimate_result {
  cost_result cost{};
  mem_result mem{};
  std::array<stage_result, 3> stages{};
  std::size_t stage_count = 0;
  std::int64_t padded_vocab = 0;
  double param_count = 0;  ///< whole model

  [[nodiscard]] constexpr const stage_result* stage(stage_kind k) const {
    for (std::size_t i = 0; i < stage_count; ++i)
      if (stages[i].kind == k) return &stages[i];
    return nullptr;
  }
};

// ---- model-level counts ------------------------------------------------------------------------

namespace detail {
/// GEMM parameters of one layer's attention (QKV + output projection, or MLA's five projections).
constexpr double attention_linear_params(const model_spec& m) {
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  if (m.attention_type == attention_kind::mla) {
    const double qd = static_cast<double>(*m.qk_head_dim + *m.qk_pos_emb_head_dim), vd = static_cast<double>(*m.v_head_dim);
    const double kl = static_cast<double>(*m.kv_lora_rank), pe = static_cast<double>(*m.qk_pos_emb_head_dim), qk = static_cast<double>(*m.qk_head_dim);
    const double q = m.q_lora_rank ? h * static_cast<double>(*m.q_lora_rank) + static_cast<double>(*m.q_lora_rank) * H * qd : h * H * qd;
    return q + h * (kl + pe) + kl * H * (qk + vd) + H * vd * h;
  }
  const double d = static_cast<double>(head_dim(m));
  return h * static_cast<double>(m.head_num + 2 * m.kv_head_num) * d + H * d * h;
}
/// Norm parameters of one layer (input, pre-MLP, and MLA's two latent norms).
constexpr double layer_norm_params(const model_spec& m) {
  const double per = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0);
  double n = 2 * per * static_cast<double>(m.hidden_size);
  if (m.attention_type == attention_kind::mla) n += static_cast<double>(m.q_lora_rank.value_or(0) + *m.kv_lora_rank);
  return n;
}
constexpr double mlp_matrices(const model_spec& m) { return m.use_swiglu ? 3.0 : 2.0; }
/// Dense MLP parameters of one layer.
constexpr double dense_mlp_params(const model_spec& m) { return mlp_matrices(m) * static_cast<double>(m.hidden_size) * static_cast<double>(m.intermediate_size.value_or(0)); }
/// MoE MLP parameters of one layer with `experts` routed experts counted: router, shared and routed experts.
constexpr double moe_mlp_params(const model_spec& m, double experts) {
  const double h = static_cast<double>(m.hidden_size);
  const double shared = static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0));
  return h * static_cast<double>(m.expert_num) + mlp_matrices(m) * h * shared + experts * mlp_matrices(m) * h * static_cast<double>(expert_ffn_size(m));
}
constexpr std::int64_t dense_layer_count(const model_spec& m) { return is_moe(m) ? (m.dense_layers < m.layer_num ? m.dense_layers : m.layer_num) : m.layer_num; }
}  // namespace detail

namespace detail {
/// Parameters with `routed` experts counted per MoE layer (all of them, or the top-k a token visits).
constexpr double parameters_with_experts(const model_spec& m, std::int64_t vocab, double routed) {
  const double h = static_cast<double>(m.hidden_size);
  const double attn = attention_linear_params(m) + layer_norm_params(m);
  const auto dense = static_cast<double>(dense_layer_count(m));
  const double moe = static_cast<double>(m.layer_num) - dense;
  const double embeddings = static_cast<double>(vocab) * h * (m.tie_word_embeddings ? 1.0 : 2.0);
  const double final_norm = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0) * h;
  return dense * (attn + dense_mlp_params(m)) + moe * (attn + moe_mlp_params(m, routed)) + embeddings + final_norm;
}
}  // namespace detail

/// Parameters of the whole model (embedding and LM head counted separately unless tied).
/// MoE: all routed experts; see `active_parameter_count` for the ones a token uses.
constexpr double parameter_count(const model_spec& m, std::int64_t vocab) {
  return detail::parameters_with_experts(m, vocab, static_cast<double>(m.expert_num));
}
/// Parameters one token passes through: only its top-k routed experts (DeepSeek-V3: 37B of 671B).
constexpr double active_parameter_count(const model_spec& m, std::int64_t vocab) {
  return detail::parameters_with_experts(m, vocab, static_cast<double>(m.topk.value_or(1)));
}

/// Model FLOPs of one token in training (forward + backward = 3x forward): 6 per GEMM parameter a
/// token passes through (Kaplan et al. 2020 "6N"; MoE: its top-k routed experts, shared experts and
/// the router) plus attention scores over the full sequence (QKᵀ and PV: 2·s·H·(d_qk + d_v) per
/// layer forward, non-causal as SimuMax counts it) plus the LM head (6·h·V); lookups are free.
constexpr double flops_per_token(const model_spec& m, std::int64_t vocab, std::int64_t seq_len) {
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  const auto dense = static_cast<double>(detail::dense_layer_count(m));
  const double moe = static_cast<double>(m.layer_num) - dense;
  const double attn = detail::attention_linear_params(m);
  const double gemm = dense * (attn + detail::dense_mlp_params(m)) + moe * (attn + detail::moe_mlp_params(m, static_cast<double>(m.topk.value_or(1))));
  const double qk = m.attention_type == attention_kind::mla ? static_cast<double>(*m.qk_head_dim + *m.qk_pos_emb_head_dim) : static_cast<double>(head_dim(m));
  const double v = m.attention_type == attention_kind::mla ? static_cast<double>(*m.v_head_dim) : static_cast<double>(head_dim(m));
  const double L = static_cast<double>(m.layer_num);
  return 6.0 * gemm + 6.0 * L * static_cast<double>(seq_len) * H * (qk + v) + 6.0 * h * static_cast<double>(vocab);
}

// ---- stage programs ------------------------------------------------------------------------------

/// The distinct blocks of a job, built once and shared by all stages (identical layers are
/// priced once, then counted).
struct job_blocks {
  leaf_block embedding{}, head{};
  leaf_block tied_head{};  ///< the head on the embedding's stage when it shares the embedding weight
  leaf_block dense_layer{}, dense_layer_recomputed{}, moe_layer{}, moe_layer_recomputed{};
};

constexpr job_blocks build_blocks(const build_context& c) {
  job_blocks j;
  j.embedding.push(embedding_leaf(c));
  const bool rc = recompute_active(c.s());
  if (detail::dense_layer_count(c.m()) > 0) {
    j.dense_layer = decoder_layer_leaves(c, false, false);
    if (rc) j.dense_layer_recomputed = decoder_layer_leaves(c, false, true);
  }
  if (is_moe(c.m()) && detail::dense_layer_count(c.m()) < c.m().layer_num) {
    j.moe_layer = decoder_layer_leaves(c, true, false);
    if (rc) j.moe_layer_recomputed = decoder_layer_leaves(c, true, true);
  }
  j.head.push(norm_leaf(c, "final_layernorm"));
  j.head.push(linear_leaf(c, "output_layer", true, c.m().hidden_size, c.vocab / c.s().tp_size));
  j.head.push(cross_entropy_leaf(c));
  j.tied_head = j.head;
  j.tied_head.leaves[1].params = 0;
  return j;
}

/// The leaves of a stage holding decoder layers [first_layer, first_layer + layers) of the model:
/// layers before `dense_layers` are dense (Megatron --first-k-dense-replace), the rest MoE; the
/// first `recompute_layer_num` layers of each stage follow the recompute plan (--recompute-method block).
constexpr stage_program build_stage(const job_blocks& j, const build_context& c, std::int64_t first_layer, std::int64_t layers, bool has_embedding, bool has_head) {
  stage_program p;
  p.layers = layers;
  if (has_embedding) p.add(j.embedding, 1, -1);
  const std::int64_t dense_total = detail::dense_layer_count(c.m());
  std::int64_t dense = dense_total - first_layer;
  dense = dense < 0 ? 0 : (dense > layers ? layers : dense);
  const std::int64_t moe = layers - dense;
  const std::int64_t recomputed = recompute_active(c.s()) ? (c.s().recompute_layer_num < layers ? c.s().recompute_layer_num : layers) : 0;
  const std::int64_t dense_rc = recomputed < dense ? recomputed : dense;
  const std::int64_t moe_rc = recomputed - dense_rc < moe ? recomputed - dense_rc : moe;
  if (dense_rc > 0) p.add(j.dense_layer_recomputed, dense_rc, 0);
  if (dense - dense_rc > 0) p.add(j.dense_layer, dense - dense_rc, dense_rc);
  if (moe_rc > 0) p.add(j.moe_layer_recomputed, moe_rc, dense);
  if (moe - moe_rc > 0) p.add(j.moe_layer, moe - moe_rc, dense + moe_rc);
  if (has_head) p.add(has_embedding && c.m().tie_word_embeddings ? j.tied_head : j.head, 1, -1);
  return p;
}

namespace detail {

/// Gradient sync of one stage: Megatron DDP buckets of max(40M, 1M·dp) elements; with the
/// distributed optimizer each bucket's gradients are reduce-scattered and its bf16 parameters
/// all-gathered after the step; plain DP all-reduces each bucket. Not overlapped with backward
/// (the validation runs do not pass --overlap-grad-reduce).
constexpr seconds data_parallel_time(const system_spec& sys, const strategy_spec& s, double params, double grad_bytes_per_param,
                                     std::int64_t& buckets, comm_group which = comm_group::dp) {
  const std::int64_t group = which == comm_group::edp ? edp_size(s) : dp_size(s) * s.cp_size;
  buckets = 0;
  if (group <= 1 || params <= 0) return {};
  const network_tier& tier = resolve_tier(sys, s, which);
  const double per_bucket = parameters::ddp_bucket_min_elements > parameters::ddp_bucket_elements_per_dp_rank * static_cast<double>(group)
                                ? parameters::ddp_bucket_min_elements
                                : parameters::ddp_bucket_elements_per_dp_rank * static_cast<double>(group);
  const double full = static_cast<double>(static_cast<std::int64_t>(params / per_bucket));  // floor of a positive count
  const double rest = params - full * per_bucket;
  buckets = static_cast<std::int64_t>(full) + (rest > 0 ? 1 : 0);
  auto bucket_time = [&](double elements) {
    if (elements <= 0) return seconds{};
    if (s.zero_state >= 1) {
      return collective_time(sys, s, tier, {collective_kind::reduce_scatter, elements * grad_bytes_per_param, group, which}) +
             collective_time(sys, s, tier, {collective_kind::all_gather, elements * static_cast<double>(dtype_bytes(s.dtype)), group, which});
    }
    return collective_time(sys, s, tier, {collective_kind::all_reduce, elements * grad_bytes_per_param, group, which});
  };
  return bucket_time(per_bucket) * full + bucket_time(rest);
}

/// Optimizer step of one stage (Megatron distributed optimizer with Adam), memory-bound passes on
/// the accelerator's default bandwidth entry, each a kernel paying its latency:
/// zero the grad buffer; scale gradients by 1/dp before reduction (dp > 1); NaN/norm check of the
/// local gradients; after the reduce-scatter, over this rank's shard: grad-norm, clip, Adam (reads
/// grad, m, v, fp32 master; writes m, v, master), and the copy of the master weights to bf16.
constexpr seconds optimizer_time(const system_spec& sys, const strategy_spec& s, double params, double grad_bytes_per_param, double expert_params = 0) {
  if (params <= 0) return {};
  const double dense_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
  const double expert_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(edp_size(s)) : 1.0;
  const double grads = params * grad_bytes_per_param;
  const double local = (params - expert_params) * dense_shard + expert_params * expert_shard;
  auto pass = [&](double b) { return memory_time(sys, memory_kind::default_kind, b); };
  seconds t = pass(grads) + pass(grads);
  if (dp_size(s) * s.cp_size > 1) t += pass(2 * grads);
  t += pass(local * grad_bytes_per_param) + pass(2 * local * grad_bytes_per_param);
  t += pass(local * grad_bytes_per_param + 2 * 12.0 * local);
  t += pass(local * (4.0 + static_cast<double>(dtype_bytes(s.dtype))));
  return t;
}

}  // namespace detail

namespace detail {
/// log2 of x > 0 in constant expressions (<cmath> is not constexpr on Clang 14): the exponent by
/// halving, the mantissa m in [1, 2) by ln m = 2 atanh((m - 1) / (m + 1)), a series that converges
/// to double precision in 20 terms there.
constexpr double log2_of(double x) {
  double exponent = 0;
  while (x >= 2.0) { x /= 2.0; exponent += 1.0; }
  while (x < 1.0) { x *= 2.0; exponent -= 1.0; }
  const double y = (x - 1.0) / (x + 1.0), y2 = y * y;
  double term = y, sum = 0;
  for (int k = 0; k < 20; ++k) { sum += term / (2.0 * k + 1.0); term *= y2; }
  return exponent + 2.0 * sum / 0.69314718055994530942;  // ln 2
}
/// Square root of x >= 0 by Newton's iteration.
constexpr double sqrt_of(double x) {
  if (x <= 0) return 0;
  double r = x > 1 ? x : 1.0;
  for (int i = 0; i < 60; ++i) r = 0.5 * (r + x / r);
  return r;
}
}  // namespace detail

/// Bytes one micro-batch holds over a stage, and the largest forward and backward footprints.
struct stage_memory {
  double held = 0, fwd_peak = 0, bwd_peak = 0;
  peak_site fwd_site{}, bwd_site{};
};

/// Walks the stage's blocks: forward, the last repetition of a block sees the most held bytes;
/// backward in reverse, the first repetition processed does.
constexpr stage_memory walk_stage(const stage_program& prog) {
  stage_memory out;
  std::array<block_memory, 6> walks{};
  for (std::size_t bi = 0; bi < prog.count; ++bi) {
    const stage_block& sb = prog.blocks[bi];
    const double n = static_cast<double>(sb.repeat);
    walks[bi] = walk_memory(*sb.block);
    const double f = out.held + (n - 1) * walks[bi].held + walks[bi].fwd_peak;
    if (f >= out.fwd_peak) {
      out.fwd_peak = f;
      out.fwd_site = {static_cast<std::int64_t>(bi), sb.first_layer < 0 ? -1 : sb.first_layer + sb.repeat - 1, sb.block->leaves[walks[bi].fwd_leaf].name, "forward"};
    }
    out.held += n * walks[bi].held;
  }
  double g = out.held;
  for (std::size_t bi = prog.count; bi > 0; --bi) {
    const stage_block& sb = prog.blocks[bi - 1];
    const double v = g + walks[bi - 1].bwd_peak;
    if (v > out.bwd_peak) {
      out.bwd_peak = v;
      out.bwd_site = {static_cast<std::int64_t>(bi - 1), sb.first_layer < 0 ? -1 : sb.first_layer + sb.repeat - 1, sb.block->leaves[walks[bi - 1].bwd_leaf].name, walks[bi - 1].bwd_pass};
    }
    g -= static_cast<double>(sb.repeat) * walks[bi - 1].held;
  }
  return out;
}

/// The estimate of specs that already passed `validate(m, s, sys)` (perf_llm validates once at configure).
constexpr estimate_result estimate_validated(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  if (s.zero_state >= 2) detail::report_error("llmsim::estimate", "strategy.zero_state", "strategy.zero_state={} is not modelled (Megatron-LM's distributed optimizer is ZeRO-1; use 0 or 1)", s.zero_state);
  if (s.cp_size > 1) detail::report_error("llmsim::estimate", "strategy.cp_size", "strategy.cp_size={} (context parallelism) is not modelled yet", s.cp_size);
  if (s.fp8) detail::report_error("llmsim::estimate", "strategy.fp8", "strategy.fp8=true is not modelled yet");
  if (m.attention_type == attention_kind::mla && s.tp_size > 1) detail::report_error("llmsim::estimate", "strategy.tp_size", "strategy.tp_size={} with multi-head latent attention is not modelled yet (MLA is modelled with tp=1, experts split by ep)", s.tp_size);

  estimate_result out;
  const std::int64_t p = s.pp_size;
  out.padded_vocab = padded_vocab(m, s.tp_size);
  out.param_count = parameter_count(m, out.padded_vocab);
  build_context c{&m, &s, &sys, s.tp_size > 1 ? &resolve_tier(sys, s, comm_group::tp) : nullptr, out.padded_vocab,
                  is_moe(m) && s.ep_size > 1 ? &resolve_tier(sys, s, comm_group::ep) : nullptr,
                  is_moe(m) && s.etp_size > 1 ? &resolve_tier(sys, s, comm_group::etp) : nullptr};
  const stage_layers split = split_layers(m, s);

  const double E = static_cast<double>(dtype_bytes(s.dtype));
  const double grad_bytes = c.main_grad_bytes();
  const network_tier* pp_tier = p > 1 ? &resolve_tier(sys, s, comm_group::pp) : nullptr;
  // Activation sent between stages: the (sequence-parallel local) hidden states of one micro-batch.
  const double p2p_bytes = c.local_tokens() * static_cast<double>(m.hidden_size) * E;
  const seconds p2p = p > 1 ? collective_time(sys, s, *pp_tier, {collective_kind::p2p, p2p_bytes, 2, comm_group::pp}) : seconds{};

  // Stage kinds present.
  std::array<stage_kind, 3> kinds{};
  std::size_t nk = 0;
  kinds[nk++] = stage_kind::first;
  if (p > 2) kinds[nk++] = stage_kind::middle;
  if (p > 1) kinds[nk++] = stage_kind::last;

  const bool te_dummy = te_at_least(s, s.te_dummy_wgrad_min_version) && s.use_fused_grad_accumulation;
  const bool te_grouped_dummy = te_at_least(s, s.te_grouped_linear_dummy_wgrad_min_version) && s.use_fused_grad_accumulation;
  const job_blocks blocks = build_blocks(c);
  for (std::size_t ki = 0; ki < nk; ++ki) {
    stage_result& r = out.stages[ki];
    r.kind = kinds[ki];
    r.rank = r.kind == stage_kind::first ? 0 : r.kind == stage_kind::middle ? 1 : p - 1;
    r.layers = r.kind == stage_kind::first ? split.first : r.kind == stage_kind::middle ? split.middle : split.last;
    const bool has_embedding = r.kind == stage_kind::first;
    const bool has_head = r.kind == stage_kind::last || p == 1;
    const std::int64_t first_layer = r.kind == stage_kind::first ? 0 : r.kind == stage_kind::middle ? split.first : m.layer_num - split.last;
    const stage_program prog = build_stage(blocks, c, first_layer, r.layers, has_embedding, has_head);

    // Time of one micro-batch; memory walk over blocks (identical layers counted, not rebuilt).
    std::array<std::pair<std::int64_t, std::int64_t>, 64> shapes{};
    std::size_t shape_count = 0;
    for (std::size_t bi = 0; bi < prog.count; ++bi) {
      const stage_block& sb = prog.blocks[bi];
      const leaf_block& b = *sb.block;
      const double n = static_cast<double>(sb.repeat);
      for (const leaf& l : b) {
        r.fwd_compute_time += l.fwd * n;
        r.bwd_compute_time += l.bwd * n;
        r.recompute_time += l.replay() * n;
        r.fwd_tp_comm_time += l.fwd_comm * n;
        r.bwd_tp_comm_time += l.bwd_comm * n;
        r.recompute_tp_comm_time += l.replay_comm() * n;
        r.params += l.params * n;
        if (l.expert_params) r.expert_params += l.params * n;
        r.efficiency_lookups += l.efficiency_lookups * static_cast<std::int32_t>(sb.repeat);
        r.efficiency_misses += l.efficiency_misses * static_cast<std::int32_t>(sb.repeat);
        if (l.weight_rows > 0 && (!l.grouped || te_grouped_dummy)) {
          bool seen = false;
          for (std::size_t i = 0; i < shape_count; ++i) seen = seen || (shapes[i].first == l.weight_rows && shapes[i].second == l.weight_cols);
          if (!seen && shape_count < shapes.size()) shapes[shape_count++] = {l.weight_rows, l.weight_cols};
        }
      }
    }
    // Memory of one micro-batch over the stage (interleaved: over one model chunk, which holds
    // layers / v of the stage plus the embedding or head when it has them).
    const stage_memory whole = walk_stage(prog);
    const std::int64_t v = s.interleaving_size;
    const stage_memory chunk = v > 1 ? walk_stage(build_stage(blocks, c, first_layer, r.layers / v, has_embedding, has_head)) : whole;
    const double held = whole.held;
    const double fwd_peak = chunk.fwd_peak, bwd_peak = chunk.bwd_peak;
    const peak_site fwd_site = chunk.fwd_site, bwd_site = chunk.bwd_site;

    const bool receives = r.kind != stage_kind::first, sends = r.kind != stage_kind::last;
    // Interleaved: every chunk boundary is a transfer, including the wrap from the last rank to the first.
    const double transfers = s.interleaving_size > 1 ? 4.0 * static_cast<double>(s.interleaving_size) : (receives ? 2.0 : 0.0) + (sends && p > 1 ? 2.0 : 0.0);
    r.p2p_time = p2p * transfers;
    r.chunk_time = r.fwd_compute_time + r.bwd_compute_time + r.recompute_time + r.fwd_tp_comm_time + r.bwd_tp_comm_time +
                   r.recompute_tp_comm_time + r.p2p_time;
    std::int64_t expert_buckets = 0;
    r.dp_time = detail::data_parallel_time(sys, s, r.params - r.expert_params, grad_bytes, r.dp_buckets) +
                detail::data_parallel_time(sys, s, r.expert_params, grad_bytes, expert_buckets, comm_group::edp);
    r.dp_buckets += expert_buckets;
    r.optim_time = detail::optimizer_time(sys, s, r.params, grad_bytes, r.expert_params);

    // Model memory: bf16 weights, main grads, fp32 master + Adam m, v sharded by ZeRO-1 over dp·cp
    // (dense parameters) and over the expert-data-parallel group (expert parameters).
    const double shard = s.zero_state >= 1 ? static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
    const double expert_shard = s.zero_state >= 1 ? static_cast<double>(edp_size(s)) : 1.0;
    r.weight_mem = bytes{static_cast<std::int64_t>(r.params * E)};
    r.grad_mem = bytes{static_cast<std::int64_t>(r.params * grad_bytes)};
    r.optimizer_state_mem = bytes{static_cast<std::int64_t>((r.params - r.expert_params) * 12.0 / shard + r.expert_params * 12.0 / expert_shard)};
    double dummy = 0;
    if (te_dummy)  // TE >= 2.3 keeps one bf16 wgrad buffer per distinct weight shape (get_dummy_wgrad)
      for (std::size_t i = 0; i < shape_count; ++i) dummy += static_cast<double>(shapes[i].first) * static_cast<double>(shapes[i].second) * E;
    r.te_dummy_wgrad_mem = bytes{static_cast<std::int64_t>(dummy)};
    // cuBLAS workspaces TE allocates through PyTorch (unknown compute capability: a current GPU).
    const double cc = sys.accelerator.compute_capability;
    const double workspace = (cc == 0 || cc >= 9) ? parameters::te_workspace_bytes_sm90 : parameters::te_workspace_bytes_older;
    r.workspace_mem = bytes{static_cast<std::int64_t>(workspace * (1 + (r.expert_params > 0 ? parameters::te_grouped_gemm_streams : 0)))};
    r.model_mem = r.weight_mem + r.grad_mem + r.optimizer_state_mem + r.te_dummy_wgrad_mem + r.workspace_mem;
    r.fwd_activation_cache_per_micro_batch = bytes{static_cast<std::int64_t>(held)};
    // 1F1B: rank k holds p - k micro-batches of activations at its peak (warm-up forwards + one).
    double others = 0;
    if (v > 1) {
      // Interleaved 1F1B (Megatron forward_backward_pipelining_with_interleaving): rank k runs
      // (p - k - 1) * 2 + (v - 1) * p warm-up chunk forwards, so holds that many chunks (each
      // layers / v of the stage) plus the one in flight.
      const std::int64_t total_chunks = s.micro_batch_num * v;
      std::int64_t warmup = (p - r.rank - 1) * 2 + (v - 1) * p;
      warmup = warmup < total_chunks ? warmup : total_chunks;
      const std::int64_t in_flight = warmup + 1 < total_chunks ? warmup + 1 : total_chunks;
      r.micro_batches_in_flight = (in_flight + v - 1) / v;
      others = static_cast<double>(in_flight - 1) * held / static_cast<double>(v);
    } else {
      r.micro_batches_in_flight = p - r.rank < s.micro_batch_num ? p - r.rank : s.micro_batch_num;
      others = static_cast<double>(r.micro_batches_in_flight - 1) * held;
    }
    r.peak_activation_mem_in_1F1B = bytes{static_cast<std::int64_t>(fwd_peak > bwd_peak ? fwd_peak : bwd_peak)};
    r.fwd_peak_allocated_mem = r.model_mem + bytes{static_cast<std::int64_t>(others + fwd_peak)};
    r.bwd_peak_allocated_mem = r.model_mem + bytes{static_cast<std::int64_t>(others + bwd_peak)};
    r.peak_mem = r.fwd_peak_allocated_mem > r.bwd_peak_allocated_mem ? r.fwd_peak_allocated_mem : r.bwd_peak_allocated_mem;
    r.peak_path = fwd_peak > bwd_peak ? fwd_site : bwd_site;
    r.peak_mem_with_reserved = bytes{static_cast<std::int64_t>(static_cast<double>(r.peak_mem.value) / s.mem_factor)};
  }
  out.stage_count = nk;

  // Pipeline: rank timings; middle ranks share the middle program.
  std::vector<stage_timing> timings;
  timings.reserve(static_cast<std::size_t>(p));
  for (std::int64_t rank = 0; rank < p; ++rank) {
    const stage_kind k = rank == 0 ? stage_kind::first : rank == p - 1 ? stage_kind::last : stage_kind::middle;
    const stage_result* st = out.stage(k);
    timings.push_back({st->fwd_compute_time + st->fwd_tp_comm_time,
                       st->bwd_compute_time + st->recompute_time + st->bwd_tp_comm_time + st->recompute_tp_comm_time, p2p});
  }
  pipeline_result pipe;
  if (s.interleaving_size > 1) {
    // Interleaved 1F1B: v model chunks per rank shrink the fill and drain to (p - 1)(t_f + t_b) / v
    // (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters",
    // §2.2.2); every micro-batch crosses a stage boundary v times each way on every rank.
    // With pp_comm_async (Megatron --overlap-p2p-communication) the steady-state transfers run
    // behind compute; the fill and drain still wait for them.
    const double v = static_cast<double>(s.interleaving_size);
    double steady = 0, fill = 0;
    for (const auto& t : timings) {
      const double compute = t.forward.value + t.backward.value, transfers = 4.0 * v * t.p2p.value;
      const double per_mb = s.pp_comm_async ? compute : compute + transfers;
      steady = per_mb > steady ? per_mb : steady;
      fill = compute + transfers > fill ? compute + transfers : fill;
    }
    pipe.total = seconds{steady * static_cast<double>(s.micro_batch_num) + fill * static_cast<double>(p - 1) / v};
    pipe.finish.assign(timings.size(), pipe.total);
  } else {
    pipe = simulate_1f1b(timings, s.micro_batch_num);
  }
  double straggler = 1.0;
  if (s.enable_straggler_model) {
    const std::int64_t nodes = (s.world_size + sys.num_per_node - 1) / sys.num_per_node;
    std::int64_t n = nodes < dp_size(s) ? nodes : dp_size(s);
    n = n < edp_size(s) ? n : edp_size(s);
    if (n > 1) {
      const double l2 = detail::log2_of(static_cast<double>(n));
      straggler = 1.0 + l2 / (l2 + 1.0) * parameters::straggler_coefficient * detail::sqrt_of(l2);
    }
  }
  const seconds pipeline = pipe.total * straggler;
  seconds duration{};
  for (std::size_t ki = 0; ki < nk; ++ki) {
    const seconds t = pipeline + out.stages[ki].dp_time + out.stages[ki].optim_time;
    if (t > duration) duration = t;
  }

  cost_result& cost = out.cost;
  cost.duration_time_per_iter = duration;
  cost.pipeline_time = pipeline;
  cost.all_tokens_per_iter = static_cast<double>(s.seq_len * global_batch_size(s));
  cost.throughput_per_accelerator = cost.all_tokens_per_iter / duration.value / static_cast<double>(s.world_size);
  cost.model_flops_per_iter = flops{flops_per_token(m, out.padded_vocab, s.seq_len) * cost.all_tokens_per_iter / static_cast<double>(s.world_size)};
  const double peak = compute_entry(sys, compute_kind::default_kind).tflops * 1e12;
  cost.mfu = cost.model_flops_per_iter.value / duration.value / peak;
  cost.mfu_6nd_with_attn = cost.mfu;
  const stage_result& first = out.stages[0];
  const double mb = static_cast<double>(s.micro_batch_num);
  auto& br = cost.breakdown_result;
  br.fwd_compute_time = first.fwd_compute_time * mb;
  br.bwd_compute_time = first.bwd_compute_time * mb;
  br.recompute_time = first.recompute_time * mb;
  br.intra_exposed_time = (first.fwd_tp_comm_time + first.bwd_tp_comm_time + first.recompute_tp_comm_time) * mb;
  br.inter_exposed_time = first.p2p_time * mb;
  br.bubble_time = pipe.total - first.chunk_time * mb;
  if (br.bubble_time.value < 1e-9 * pipe.total.value) br.bubble_time = seconds{};  // rounding of m equal chunks
  br.dp_exposed_time = first.dp_time;
  br.optim_time = first.optim_time;
  br.straggler_time = pipeline - pipe.total;
  cost.comm_result.tp_net = s.tp_size > 1 ? c.tp_tier->name.view() : std::string_view("none");
  cost.comm_result.pp_net = p > 1 ? pp_tier->name.view() : std::string_view("none");
  cost.comm_result.dp_net = dp_size(s) * s.cp_size > 1 ? resolve_tier(sys, s, comm_group::dp).name.view() : std::string_view("none");
  cost.comm_result.tp_time_per_iter = br.intra_exposed_time;
  cost.comm_result.p2p_time_per_transfer = p2p;
  cost.comm_result.dp_time = first.dp_time;
  for (std::size_t ki = 0; ki < nk; ++ki) {
    cost.efficiency_lookups += out.stages[ki].efficiency_lookups;
    cost.efficiency_misses += out.stages[ki].efficiency_misses;
  }

  mem_result& mem = out.mem;
  mem.memory_reserved_ratio = s.mem_factor;
  for (std::size_t ki = 0; ki < nk; ++ki) {
    if (out.stages[ki].peak_mem > mem.peak_mem) {
      mem.peak_mem = out.stages[ki].peak_mem;
      mem.peak_stage = static_cast<std::int64_t>(ki);
    }
  }
  mem.peak_mem_with_reserved = bytes{static_cast<std::int64_t>(static_cast<double>(mem.peak_mem.value) / s.mem_factor)};
  // The verdict compares allocated bytes with the device, as `fits_on` does; the reserved figure
  // (allocator caching, mem_factor) is reported beside it.
  mem.device_mem = device_memory(sys);
  mem.fits = mem.peak_mem <= mem.device_mem;
  mem.over_by = mem.fits ? bytes{} : mem.peak_mem - mem.device_mem;
  return out;
}

/// Runs the whole estimate. Validates the three specs first (one error path).
constexpr estimate_result estimate(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  validate(m, s, sys);
  return estimate_validated(m, s, sys);
}

LLMSIM_END_NAMESPACE
