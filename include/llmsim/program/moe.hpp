/// \file llmsim/program/moe.hpp
/// Leaves of multi-head latent attention (DeepSeek-V2 §2.1) and of a mixture-of-experts MLP with
/// Megatron-LM's all-to-all token dispatcher and grouped GEMMs (TransformerEngine GroupedLinear).
///
/// MLA: q_down (h→q_lora_rank) + RMSNorm + q_up (→ heads·(qk+rope)), or one q projection
/// without q compression; kv_down (h→kv_lora_rank+rope) + RMSNorm + kv_up (→ heads·(qk+v)); the
/// rotary part and the q/k concatenations run as copies (Megatron's unfused MLA path makes q, k, v
/// contiguous for TE); flash attention with qk head dim qk+rope and v head dim v; output projection.
/// Under tensor parallelism (Megatron-LM `MLASelfAttention`, multi_latent_attention.py, with the
/// TE layer spec of gpt_layer_specs.py): the down projections are TELinear with
/// parallel_mode="duplicated" — the whole weight on every tp rank, run on the rank's own tokens
/// (s/t under sequence parallelism, all s without), no collective; the latent norms run on those
/// tokens; the up projections (and the q projection without q compression) are column-parallel
/// over heads, the output projection row-parallel; with SP the rope part of the kv down
/// projection (k_pos_emb) is gathered from the sequence-parallel region. transformer_engine.py
/// gives duplicated weights the `sequence_parallel` attribute, so with SP their gradients (each
/// rank's s/t tokens' share) are summed over tp in finalize_model_grads.py
/// (`_allreduce_non_tensor_model_parallel_grads`, one coalesced all-reduce after the gradient sync).
///
/// MoE: router GEMM (h→experts) with its softmax; permutation (two memory-bound kernels on the
/// `permute_fwd` / `permute_bwd` bandwidth entries) and the all-to-all dispatch over ep (plus the
/// routing probabilities with `dispatch_probs`); grouped GEMMs keyed by the system's `group_matmul`
/// table; (prob-weighted) SwiGLU; unpermutation and the all-to-all combine; shared experts as an
/// ordinary MLP; the shared + routed sum. Routing is balanced; with
/// `moe_pad_expert_input_to_capacity` every expert receives exactly its capacity.
#pragma once

#include <llmsim/program/context_parallel.hpp>
#include <llmsim/program/dense.hpp>
#include <llmsim/program/leaf.hpp>

LLMSIM_BEGIN_NAMESPACE

/// Token counts of one MoE layer on one rank.
struct moe_tokens {
  double local = 0;       ///< tokens of the micro-batch on this rank (T0)
  double dispatched = 0;  ///< token copies this rank's router keeps: topk·T0, padded to or cut at capacity
  double expert = 0;      ///< token copies entering this rank's grouped GEMMs (×etp: ETP ranks gather)
  double sent_rows = 0;   ///< rows the flex (DeepEP) dispatch sends: T0 × distinct ranks per token
  std::int64_t local_experts = 1;
};

namespace detail {
/// Smallest whole number >= x (x >= 0), in constant expressions.
constexpr double ceil_nonnegative(double x) {
  const auto whole = static_cast<double>(static_cast<std::int64_t>(x));
  return whole < x ? whole + 1 : whole;
}
}  // namespace detail

/// Token copies per expert that one rank's router keeps, Megatron-LM's expert capacity
/// (megatron/core/transformer/moe/moe_utils.py `get_capacity`, called with num_tokens = T0·topk):
/// ceil(topk·T0 / E × capacity factor). Padded (`moe_pad_expert_input_to_capacity`): every expert
/// gets exactly that many; otherwise balanced routing sends topk·T0/E to each and copies beyond the
/// capacity are dropped (only a factor below 1 drops any).
constexpr double routed_copies(const model_spec& m, double copies) {
  const double experts = static_cast<double>(m.expert_num);
  const double capacity = detail::ceil_nonnegative(copies / experts * m.capacity);
  if (m.moe_pad_expert_input_to_capacity) return capacity * experts;
  return copies < capacity * experts ? copies : capacity * experts;
}

/// Expected number of distinct ranks a token's top-k experts sit on, with E experts split evenly
/// over ep ranks and the k experts drawn uniformly without repeats (balanced routing):
/// ep · (1 − C(E − E/ep, k) / C(E, k)). DeepEP (deepseek-ai/DeepEP `Buffer.get_dispatch_layout`,
/// `is_token_in_rank`) sends a token once to each such rank, not once per expert.
constexpr double distinct_expert_ranks(std::int64_t experts, std::int64_t ep, std::int64_t topk) {
  const std::int64_t elsewhere = experts - experts / ep;  // experts not on a given rank
  double none_here = 1;                                   // P(no expert of the token on that rank)
  for (std::int64_t i = 0; i < topk; ++i)
    none_here *= elsewhere - i > 0 ? static_cast<double>(elsewhere - i) / static_cast<double>(experts - i) : 0.0;
  return static_cast<double>(ep) * (1 - none_here);
}

/// `base` to the power `n` >= 0 by squaring (constexpr; std::pow is not before C++26).
constexpr double power_of(double base, std::int64_t n) {
  double result = 1;
  for (; n > 0; n /= 2, base *= base)
    if (n % 2 == 1) result *= base;
  return result;
}

/// Expected fraction of `experts` that at least one of `tokens` tokens routes to, each token
/// picking `topk` of them uniformly (balanced routing): 1 − (1 − k/E)^T. A decode step of a small
/// batch reads only these experts' weights (vLLM's fused_moe and TRT-LLM's MoE kernels skip
/// experts with no tokens).
constexpr double expected_active_fraction(std::int64_t experts, std::int64_t topk, double tokens) {
  if (experts <= 1) return 1;
  const double miss = 1 - static_cast<double>(topk) / static_cast<double>(experts);
  return 1 - power_of(miss, static_cast<std::int64_t>(tokens));
}

/// Bytes a grouped GEMM's forward reads of its `w` weight elements stored at `stored` bytes each:
/// all of them in training, the activated experts' in inference.
constexpr double grouped_weight_read(const build_context& c, double w, double stored) {
  if (c.inference == nullptr) return w * stored;
  const auto& m = c.m();
  return w * c.inference->expert_weight_bytes *
         expected_active_fraction(m.expert_num, m.topk.value_or(1), c.inference->routed_tokens);
}

/// Serving: the mean rows of this rank's experts that get any, `tokens` over the activated ones
/// (0 in training, where every expert's rows are the table's M).
constexpr double active_expert_rows(const build_context& c, std::int64_t experts, double tokens) {
  if (c.inference == nullptr) return 0;
  const auto& m = c.m();
  const double active = expected_active_fraction(m.expert_num, m.topk.value_or(1), c.inference->routed_tokens) *
                        static_cast<double>(experts);
  return active > 0 ? tokens / active : 0;
}

/// Whether a serving forward runs its experts inside the tensor-parallel group (ep <= tp): every
/// rank holds all the tokens after attention's all-reduce, runs its experts' (or its slice of every
/// expert's) rows for all of them, and one all-reduce over tp sums the partial outputs (vLLM
/// FusedMoE with reduce_results / tensor_model_parallel_all_reduce, with or without
/// --enable-expert-parallel when the expert group is the tp group; SGLang and TensorRT-LLM's TP MoE
/// alike). Wider expert groups (data-parallel attention) exchange tokens all-to-all.
constexpr bool serving_tp_moe(const build_context& c) {
  return c.inference != nullptr && c.s().ep_size <= c.s().tp_size;
}

/// Token counts of one MoE layer on this rank, for the strategy's dispatcher.
constexpr moe_tokens moe_token_counts(const build_context& c) {
  const auto& m = c.m();
  const auto& s = c.s();
  moe_tokens t;
  t.local_experts = m.expert_num / s.ep_size;
  const double topk = static_cast<double>(m.topk.value_or(1));
  if (serving_tp_moe(c)) {  // all tokens on every rank; its experts get 1/ep of their copies
    t.local = c.tokens();
    t.dispatched = routed_copies(m, topk * t.local) / static_cast<double>(s.ep_size);
    t.expert = t.dispatched;
    return t;
  }
  // Inference runs no sequence parallelism, but a tensor-parallel group holds one copy of its tokens:
  // each rank routes its 1/tp share (Megatron's dispatcher under SP).
  t.local = c.inference != nullptr ? c.tokens() / static_cast<double>(s.tp_size) : c.local_tokens();
  t.dispatched = routed_copies(m, topk * t.local);
  t.expert = t.dispatched * static_cast<double>(s.etp_size);  // each ETP rank routed its own tokens
  if (s.moe_dispatcher_policy == dispatcher_kind::flex)
    t.sent_rows = t.local * distinct_expert_ranks(m.expert_num, s.ep_size, m.topk.value_or(1));
  return t;
}

/// The copies of Megatron's MLA between the projections and flash attention: rotary embedding of
/// the positional q and k parts, q = cat(q_nope, q_rope), k = cat(k_nope, k_rope broadcast over
/// heads), v made contiguous; backward: rotary of both gradients, the q and k gradients split back
/// (the k_rope gradient summed over heads) and v's gradient copied. Each is one kernel.
constexpr leaf mla_glue_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::mla_rope_and_concat;
  l.kind = leaf_kind::activation;
  const auto& m = c.m();
  const double E = c.element_bytes();
  const double T = c.tokens();  // after the up projections: the whole sequence, this rank's heads
  const double H = static_cast<double>(m.head_num / c.s().tp_size);
  const double nope = static_cast<double>(*m.qk_head_dim), rope = static_cast<double>(*m.qk_pos_emb_head_dim),
               v = static_cast<double>(*m.v_head_dim);
  const double q = T * H * (nope + rope) * E, k = q, vv = T * H * v * E;
  const double q_rope = T * H * rope * E, k_rope = T * rope * E;
  for (const pass_kind pass : {pass_kind::forward, pass_kind::backward_input})
    for (const double bytes : {2 * q_rope, 2 * k_rope, 2 * q, 2 * k, 2 * vv}) c.memory(l, pass, bytes);
  l.input = q + vv;
  l.fwd_peak = q + k + vv;
  l.bwd_peak = q + k + vv;
  return l;
}

/// Flash attention of MLA: QKᵀ over qk+rope dims, PV over v dims, all heads on the rank, `len.q`
/// queries over `len.kv` keys (K is as wide as Q: the rope part broadcast to every head).
constexpr leaf mla_attention_leaf(const build_context& c, const attention_lengths& len) {
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const std::int64_t heads = m.head_num / t;
  const std::int64_t qd = *m.qk_head_dim + *m.qk_pos_emb_head_dim, vd = *m.v_head_dim;
  const double E = c.element_bytes();
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(len.q), skv = static_cast<double>(len.kv);
  const double q = b * sq * static_cast<double>(heads * qd), k = b * skv * static_cast<double>(heads * qd),
               v = b * skv * static_cast<double>(heads * vd), o = b * sq * static_cast<double>(heads * vd),
               lse = b * sq * static_cast<double>(heads);
  const attention_shape shape{.batch = c.s().micro_batch_size,
                              .q_len = len.q,
                              .kv_len = len.kv,
                              .head_num = heads,
                              .kv_head_num = m.kv_head_num / t,
                              .qk_head_dim = qd,
                              .v_head_dim = vd,
                              .qkv_contiguous = true,
                              .pairs = len.pairs};
  const double sparse = skipped_pair_share(c, len);
  c.emit(l, attention_op(pass_kind::forward, shape, (q + k + v + o + lse) * E, sparse));
  c.emit(l, attention_op(pass_kind::backward_input, shape, (2 * q + 2 * k + 2 * v + o + lse) * E, sparse));
  l.input = (q + k + v) * E;
  l.cache = (q + k + v + lse) * E;
  if (c.quantized) l.cache += o * E;  // its output O, which linear_proj keeps only in FP8 (see attention_leaf)
  l.fwd_peak = (q + k + v + lse + o) * E;
  l.bwd_peak = (2 * q + 2 * k + 2 * v + lse + o) * E;
  return l;
}

/// MLA attention of a decode step, in the absorbed form (DeepSeek-V2 paper §2.1.3: W_UK folds into
/// the queries, W_UV into the output; vLLM's MLA backend and FlashMLA decode this way): every head
/// of the rank attends over the cached latent itself, one key "head" of kv_lora_rank + rope dims
/// and one value "head" of kv_lora_rank dims shared by all heads — multi-query attention over the
/// compressed cache, which is what a step reads. (Prefill runs the expanded form, `mla_attention_leaf`.)
constexpr leaf mla_latent_attention_leaf(const build_context& c, const attention_lengths& len) {
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const std::int64_t heads = m.head_num / c.s().tp_size;
  const std::int64_t qd = *m.kv_lora_rank + *m.qk_pos_emb_head_dim, vd = *m.kv_lora_rank;
  const double E = c.element_bytes();
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(len.q), skv = static_cast<double>(len.kv);
  const double q = b * sq * static_cast<double>(heads * qd), o = b * sq * static_cast<double>(heads * vd);
  const double latent = b * skv * static_cast<double>(qd);  // the cached latent and rope key
  const attention_shape shape{.batch = c.s().micro_batch_size,
                              .q_len = len.q,
                              .kv_len = len.kv,
                              .head_num = heads,
                              .kv_head_num = 1,
                              .qk_head_dim = qd,
                              .v_head_dim = vd,
                              .qkv_contiguous = false,
                              .pairs = len.pairs};
  c.emit(l, attention_op(pass_kind::forward, shape, (q + o) * E + latent * kv_element_bytes(c)));
  l.input = q * E;
  l.fwd_peak = (q + o) * E;
  return l;
}

/// Unfused MLA attention (use_flash_sdp = false; Megatron's `DotProductAttention` core): as
/// `math_attention_leaf`, with K as wide as Q (qk + rope per head, the rope part broadcast) and V
/// and the output v_head_dim wide: batched Q·Kᵀ and P·V GEMMs over every pair, the softmax (and
/// dropout) passes over the score matrix; Q, K, V and the probabilities (with dropout its mask and
/// output) kept for backward, backward twice the forward GEMM FLOPs.
constexpr leaf mla_math_attention_leaf(const build_context& c, const attention_lengths& len) {
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const std::int64_t heads = m.head_num / c.s().tp_size;
  const std::int64_t qd = *m.qk_head_dim + *m.qk_pos_emb_head_dim, vd = *m.v_head_dim;
  const double E = c.element_bytes(), H = static_cast<double>(heads);
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(len.q), skv = static_cast<double>(len.kv);
  const double q = b * sq * H * static_cast<double>(qd), k = b * skv * H * static_cast<double>(qd),
               v = b * skv * H * static_cast<double>(vd), o = b * sq * H * static_cast<double>(vd);
  const double P = b * H * sq * skv;  // elements of one score matrix over this rank's heads
  const attention_shape counted{.batch = c.s().micro_batch_size,
                                .q_len = len.q,
                                .kv_len = len.kv,
                                .head_num = heads,
                                .qk_head_dim = qd,
                                .v_head_dim = vd};
  const double gemm_flops = counted.forward_flop_count(c.s().attention_sparse_ratio);  // unfused: every pair
  const double dropout_mask = c.s().enable_dropout ? P : 0, dropout_out = c.s().enable_dropout ? P * E : 0;
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, gemm_flops, (q + k + v + 2 * P + o) * E));
  c.memory(l, pass_kind::forward, 2 * P * E);
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, 2 * gemm_flops, (2 * q + 2 * k + 2 * v + 4 * P + o) * E));
  c.memory(l, pass_kind::backward_input, 3 * P * E);
  if (c.s().enable_dropout) {
    c.memory(l, pass_kind::forward, 2 * P * E + dropout_mask);
    c.memory(l, pass_kind::backward_input, 2 * P * E + dropout_mask);
  }
  l.input = (q + k + v) * E;
  l.cache = (q + k + v) * E + P * E + dropout_mask + dropout_out;
  l.fwd_peak = 2 * P * E + dropout_mask + dropout_out + o * E;
  l.bwd_peak = 2 * P * E + (q + k + v) * E;
  return l;
}

/// A down projection of MLA under tp > 1: Megatron's TELinear with parallel_mode="duplicated" —
/// the whole `in_features` x `out_features` weight on every tp rank, applied to the rank's own
/// tokens (`local_tokens`: s/t with SP), no collective either way; three GEMMs as `linear_leaf`'s.
/// With SP the weight gradient covers s/t tokens only (`tp_duplicated`: summed over tp later).
constexpr leaf duplicated_linear_leaf(const build_context& c, leaf_id id, std::int64_t in_features,
                                      std::int64_t out_features) {
  const std::int64_t s = c.sequence() / (c.sequence_parallel() ? c.s().tp_size : 1);
  return detail::linear_gemms(
      c, id, detail::linear_geometry_of(c, true, false, false, in_features, out_features, s, c.local_tokens()));
}

/// An MLA down projection: with tp = 1 a plain linear, else the duplicated TELinear.
constexpr leaf mla_down_leaf(const build_context& c, leaf_id id, std::int64_t in_features, std::int64_t out_features) {
  if (c.s().tp_size == 1) return linear_leaf(c, id, true, in_features, out_features);
  return duplicated_linear_leaf(c, id, in_features, out_features);
}

/// MLA's core attention: over the context-parallel ring, the latent form of a decode step, flash
/// attention or the unfused kernels.
constexpr leaf mla_core_attention_leaf(const build_context& c) {
  if (c.s().cp_size > 1) return context_parallel_attention_leaf(c);
  if (c.inference != nullptr && c.s().seq_len == 1) return mla_latent_attention_leaf(c, self_attention(c));
  if (c.s().use_flash_sdp) return mla_attention_leaf(c, self_attention(c));
  return mla_math_attention_leaf(c, self_attention(c));
}

/// The attention half of an MLA layer (input norm … output projection, residual add); heads split
/// over tp from the up projections on (see the file comment).
constexpr void push_mla_attention(leaf_block& b, const build_context& c) {
  const auto& m = c.m();
  const std::int64_t h = m.hidden_size, H = m.head_num / c.s().tp_size;
  const std::int64_t qd = *m.qk_head_dim + *m.qk_pos_emb_head_dim;
  b.push(norm_leaf(c, leaf_id::input_layernorm));
  if (m.q_lora_rank) {
    b.push(mla_down_leaf(c, leaf_id::linear_q_down_proj, h, *m.q_lora_rank));
    b.push(norm_leaf(c, leaf_id::q_layernorm, *m.q_lora_rank, norm_kind::rmsnorm));
    b.push(linear_leaf(c, leaf_id::linear_q_up_proj, true, *m.q_lora_rank, H * qd));
  } else {
    b.push(linear_leaf(c, leaf_id::linear_q_proj, true, h, H * qd));
  }
  leaf kv_down = mla_down_leaf(c, leaf_id::linear_kv_down_proj, h, *m.kv_lora_rank + *m.qk_pos_emb_head_dim);
  kv_down.cache = 0;  // reads the same normed input the q projection keeps
  if (c.sequence_parallel()) {
    // k_pos_emb: gather_from_sequence_parallel_region (all-gather forward, reduce-scatter backward).
    const double k_pos = c.tokens() * static_cast<double>(*m.qk_pos_emb_head_dim) * c.element_bytes();
    c.collective(kv_down, pass_kind::forward, comm_group::tp, collective_kind::all_gather, k_pos);
    c.collective(kv_down, pass_kind::backward_input, comm_group::tp, collective_kind::reduce_scatter, k_pos);
    kv_down.fwd_peak += k_pos;
  }
  b.push(kv_down);
  b.push(norm_leaf(c, leaf_id::kv_layernorm, *m.kv_lora_rank, norm_kind::rmsnorm));
  b.push(linear_leaf(c, leaf_id::linear_kv_up_proj, true, *m.kv_lora_rank, H * (*m.qk_head_dim + *m.v_head_dim)));
  b.push(mla_glue_leaf(c));
  b.push(mla_core_attention_leaf(c));
  b.push(linear_leaf(c, leaf_id::linear_proj, false, H * *m.v_head_dim, h));
  b.push(residual_leaf(c, leaf_id::attention_residual_add));
}

constexpr leaf quantized_grouped_linear_leaf(const build_context& c, leaf_id id, std::int64_t experts, double tokens,
                                             std::int64_t in_features, std::int64_t out_features);

/// A grouped GEMM over this rank's experts: `tokens` rows in total, weights in × out per expert.
constexpr leaf grouped_linear_leaf(const build_context& c, leaf_id id, std::int64_t experts, double tokens,
                                   std::int64_t in_features, std::int64_t out_features) {
  if (c.quantized) return quantized_grouped_linear_leaf(c, id, experts, tokens, in_features, out_features);
  leaf l;
  l.id = id;
  l.kind = leaf_kind::linear_column;
  const double E = c.element_bytes();
  const double x = tokens * static_cast<double>(in_features), y = tokens * static_cast<double>(out_features);
  const double w = static_cast<double>(experts) * static_cast<double>(in_features) * static_cast<double>(out_features);
  const double flop_count = 2.0 * tokens * static_cast<double>(in_features) * static_cast<double>(out_features);
  const auto tokens_per_expert = static_cast<std::int64_t>(tokens) / experts;
  auto shape = [&](grouped_stage stage) {
    grouped_gemm_shape g{experts, tokens_per_expert,          out_features, in_features,
                         false,   c.main_grad_bytes() == 4.0, stage};
    g.active_rows = active_expert_rows(c, experts, tokens);
    g.single_kernel = c.inference != nullptr;
    return g;
  };
  // TE GroupedLinear stages as the grouped-GEMM table keys them (M, N, K of the forward GEMM).
  const double fwd_bytes = c.inference == nullptr ? (x + y + w) * E : (x + y) * E + grouped_weight_read(c, w, E);
  c.emit(l, grouped_gemm_op(pass_kind::forward, shape(grouped_stage::forward), flop_count, fwd_bytes));
  c.emit(l,
         grouped_gemm_op(pass_kind::backward_input, shape(grouped_stage::input_gradient), flop_count, (x + y + w) * E));
  if (c.s().use_fused_grad_accumulation) {
    c.emit(l, grouped_gemm_op(pass_kind::backward_weight, shape(grouped_stage::weight_gradient), flop_count,
                              (x + y + w) * E + w * c.main_grad_bytes()));
  } else {  // written in bf16, then added into the main grad by Megatron's grad hook
    c.emit(l, grouped_gemm_op(pass_kind::backward_weight, shape(grouped_stage::weight_gradient_unaccumulated),
                              flop_count, (x + y + w) * E + w * E));
    c.memory(l, pass_kind::backward_weight, w * E + 2 * w * c.main_grad_bytes());
  }
  l.params = w;
  l.expert_params = true;
  l.input = x * E;
  l.cache = x * E;
  l.fwd_peak = (x + y) * E;
  l.bwd_peak = (x + y) * E + (c.s().use_fused_grad_accumulation ? 0 : w * E);
  l.weight_rows = out_features;  // TE >= 2.10 keeps one dummy wgrad buffer per expert weight shape
  l.weight_cols = in_features;
  l.grouped = true;
  return l;
}

/// A grouped GEMM of a quantized layer (TE GroupedLinear under the recipe): the stages of
/// `grouped_linear_leaf` on the recipe's grouped op kind (keyed `dtype=fp8`, or `fp4` for NVFP4),
/// operands read quantized, with the casts of `quantized_linear_leaf` (no tensor-parallel gathers:
/// the tokens arrive by the dispatcher). fc1's input follows SimuMax's `QuantizedGroupLinearCol`:
/// by default the bf16 input is saved and re-quantized column-wise in backward (its quantizer is
/// recomputed); with `cache_groupgemm_col_fp8_inputs` the quantized input is saved instead. fc2
/// saves its quantized input, as TE does, but its bf16 input under moe_act recompute
/// (`detail::saves_original_input`).
constexpr leaf quantized_grouped_linear_leaf(const build_context& c, leaf_id id, std::int64_t experts, double tokens,
                                             std::int64_t in_features, std::int64_t out_features) {
  leaf l;
  l.id = id;
  l.kind = leaf_kind::linear_column;
  const quantized_format f = c.format();
  const double E = c.element_bytes(), qa = f.activation, qw = f.weight;
  const double x = tokens * static_cast<double>(in_features), y = tokens * static_cast<double>(out_features);
  const double w = static_cast<double>(experts) * static_cast<double>(in_features) * static_cast<double>(out_features);
  const double flop_count = 2.0 * tokens * static_cast<double>(in_features) * static_cast<double>(out_features);
  const auto tokens_per_expert = static_cast<std::int64_t>(tokens) / experts;
  const bool fp4 = f.grouped_gemm == compute_kind::fp4_group_matmul;
  auto shape = [&](grouped_stage stage) {
    grouped_gemm_shape g{experts, tokens_per_expert,          out_features, in_features,
                         true,    c.main_grad_bytes() == 4.0, stage};
    g.fp4 = fp4;
    g.active_rows = active_expert_rows(c, experts, tokens);
    g.single_kernel = c.inference != nullptr;
    return g;
  };
  const bool bf16_input_saved = (id == leaf_id::experts_linear_fc1 && !c.s().cache_groupgemm_col_fp8_inputs) ||
                                detail::saves_original_input(c, id);
  detail::quantize(c, l, pass_kind::forward, x, qa, bf16_input_saved ? 1 : f.copies);
  detail::quantize_weight(c, l, w);
  c.emit(l, grouped_gemm_op(pass_kind::forward, shape(grouped_stage::forward), flop_count,
                            x * qa + grouped_weight_read(c, w, qw) + y * E));
  detail::quantize(c, l, pass_kind::backward_input, y, qa, f.copies);
  c.emit(l, grouped_gemm_op(pass_kind::backward_input, shape(grouped_stage::input_gradient), flop_count,
                            y * qa + w * qw + x * E));
  if (bf16_input_saved) detail::quantize(c, l, pass_kind::backward_weight, x, qa, 1);  // the column-wise copy
  if (c.s().use_fused_grad_accumulation) {
    c.emit(l, grouped_gemm_op(pass_kind::backward_weight, shape(grouped_stage::weight_gradient), flop_count,
                              (x + y) * qa + w * qw + w * c.main_grad_bytes()));
  } else {
    c.emit(l, grouped_gemm_op(pass_kind::backward_weight, shape(grouped_stage::weight_gradient_unaccumulated),
                              flop_count, (x + y) * qa + w * qw + w * E));
    c.memory(l, pass_kind::backward_weight, w * E + 2 * w * c.main_grad_bytes());
  }
  l.params = l.quantized_params = w;
  l.quantized_weight_bytes = w * qw * f.copies;
  l.expert_params = true;
  l.input = x * E;
  l.cache = bf16_input_saved ? x * E : x * qa;
  l.fwd_peak = (x + y) * E + x * qa * f.copies;
  l.bwd_peak = (x + y) * E + y * qa * f.copies + (c.s().use_fused_grad_accumulation ? 0 : w * E);
  l.weight_rows = out_features;
  l.weight_cols = in_features;
  l.grouped = true;
  return l;
}

/// What group-limited and aux-loss-free routing add to the router's score / top-k passes (priced
/// with its GEMMs), as Megatron-LM's unfused path (moe_router_fusion false, its default) runs them (moe_utils.py
/// `topk_routing_with_score_function`, `group_limited_topk`), over `scores` bytes (tokens x experts):
/// - group-limited, forward: each group's best experts read from the scores, the selected groups'
///   mask materialised over the experts (expand + reshape), `masked_fill` reading scores and mask
///   and writing the masked scores: 5 passes (the per-group tensors, tokens x groups, are small);
///   backward: without the expert bias the probabilities come from the masked scores, so their
///   gradient goes back through `masked_fill` (read and write: 2 passes); with it they are gathered
///   from the unmasked scores and the mask carries no gradient.
/// - expert bias, forward: scores + bias for the selection (read and write: 2 passes); no gradient.
///   Its update (token counts per expert, all-reduced once per step for all layers) moves
///   experts x layers counters: negligible, not priced.
constexpr void emit_routing_kernels(leaf& r, const build_context& c, double scores) {
  const auto& m = c.m();
  if (m.moe_router_fusion) return;  // TE fused_topk_with_score_function: one kernel, priced with the GEMMs
  const bool bias = m.moe_router_enable_expert_bias;
  if (m.moe_router_num_groups) {
    c.memory(r, pass_kind::forward, 5 * scores);
    if (!bias) c.memory(r, pass_kind::backward_input, 2 * scores);
  }
  if (bias) c.memory(r, pass_kind::forward, 2 * scores);
}

/// The router: gate GEMM h -> experts, then softmax / top-k over the logits (memory-bound in practice).
constexpr leaf router_leaf(const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const std::int64_t h = c.m().hidden_size, X = c.m().expert_num;
  const double E = c.element_bytes();
  leaf r;
  r.id = leaf_id::router;
  r.kind = leaf_kind::linear_column;
  const double in = tok.local * static_cast<double>(h) * E, logits = tok.local * static_cast<double>(X) * E,
               w = static_cast<double>(h * X) * E;
  const auto rows = static_cast<std::int64_t>(tok.local);
  const dtype_kind wgrad_out = c.main_grad_bytes() == 4.0 ? dtype_kind::fp32 : dtype_kind::bf16;
  const std::int64_t b = s.micro_batch_size;
  // Megatron's TopKRouter runs its gate as a plain torch linear, outside TE's FP8 autocast: bf16 GEMMs.
  c.emit(r, gemm_op(pass_kind::forward, {b, rows / b, h, X, gemm_layout::tn, false, dtype_kind::bf16},
                    in + w + 3 * logits));
  c.emit(r, gemm_op(pass_kind::backward_input, {b, rows / b, X, h, gemm_layout::nn, false, dtype_kind::bf16},
                    in + w + 4 * logits));
  c.emit(r, gemm_op(pass_kind::backward_weight, {1, X, rows, h, gemm_layout::nt, true, wgrad_out}, in + w + logits));
  emit_routing_kernels(r, c, logits);
  r.params = static_cast<double>(h * X);
  // Whole on every tp rank, fed its s/tp tokens under SP: Megatron marks it sequence_parallel
  // (router.py reset_parameters) and finalize_model_grads sums its gradient over tp.
  r.tp_duplicated = c.sequence_parallel();
  r.input = r.cache = in;
  r.fwd_peak = r.bwd_peak = in + w + logits;
  return r;
}

/// The dispatch's communication: all-to-all dispatch over ep (plus the routing probabilities with
/// `dispatch_probs`), then the ETP all-gather; backward mirrors it (Megatron MoEAlltoAllTokenDispatcher).
constexpr void all2all_dispatch_comm(leaf& p, const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  const double payload = tok.dispatched * h * E;
  for (const pass_kind pass : {pass_kind::forward, pass_kind::backward_input}) {
    c.collective(p, pass, comm_group::ep, collective_kind::all2all, payload);
    // The permuted probabilities travel beside the rows, one per routed copy (token_dispatcher.py
    // token_dispatch: all_to_all of permuted_probs, the router's dtype).
    if (s.dispatch_probs) c.collective(p, pass, comm_group::ep, collective_kind::all2all, tok.dispatched * E);
  }
  const double gathered = payload * static_cast<double>(s.etp_size);
  c.collective(p, pass_kind::forward, comm_group::etp, collective_kind::all_gather, gathered);
  c.collective(p, pass_kind::backward_input, comm_group::etp, collective_kind::reduce_scatter, gathered);
  if (!s.dispatch_probs) return;
  // The probabilities are gathered over expert TP beside the rows (token_dispatcher.py
  // dispatch_postprocess gathers global_probs too).
  const double probs_gathered = tok.dispatched * E * static_cast<double>(s.etp_size);
  c.collective(p, pass_kind::forward, comm_group::etp, collective_kind::all_gather, probs_gathered);
  c.collective(p, pass_kind::backward_input, comm_group::etp, collective_kind::reduce_scatter, probs_gathered);
}

/// Megatron MoEAllGatherTokenDispatcher: the tokens, their probabilities and routing map are
/// gathered over the ep x etp group (here over ep, then etp: the same bytes reach each rank), each
/// rank permutes out the copies for its own experts; backward reduce-scatters the gradients.
constexpr void allgather_dispatch_comm(leaf& p, const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  const double map = tok.local * static_cast<double>(c.m().expert_num);  // probs (E bytes) + bool map
  const auto ep = static_cast<double>(s.ep_size), etp = static_cast<double>(s.etp_size);
  const double per_rank = tok.local * h * E + map * (E + 1);
  c.collective(p, pass_kind::forward, comm_group::ep, collective_kind::all_gather, per_rank * ep);
  c.collective(p, pass_kind::forward, comm_group::etp, collective_kind::all_gather, per_rank * ep * etp);
  c.collective(p, pass_kind::backward_input, comm_group::etp, collective_kind::reduce_scatter,
               tok.local * h * E * ep * etp);
  c.collective(p, pass_kind::backward_input, comm_group::ep, collective_kind::reduce_scatter, tok.local * h * E * ep);
}

/// DeepEP's fused dispatch (Megatron MoEFlexTokenDispatcher, `_DeepepManager.dispatch`): each token
/// goes once to every rank holding one of its experts, with its top-k expert indices (int64) and
/// weights (fp32); backward is the combine of the gradients, the same bytes.
constexpr void flex_dispatch_comm(leaf& p, const build_context& c, const moe_tokens& tok) {
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  const double topk = static_cast<double>(c.m().topk.value_or(1));
  const double payload = tok.sent_rows * (h * E + topk * (8 + 4));
  for (const pass_kind pass : {pass_kind::forward, pass_kind::backward_input})
    c.collective(p, pass, comm_group::ep, collective_kind::all2all, payload);
}

/// The combine's communication in `pass` for the all-to-all dispatcher, the mirror of its
/// dispatch: the experts' output (`tok.expert` rows: every ETP rank's tokens, the dispatch's
/// gathered buffer) reduce-scattered over etp (all-gathered backward), then this rank's own
/// tokens (1/etp of it, the dispatch's payload) back over ep (Megatron MoEAlltoAllTokenDispatcher
/// combine_preprocess: reduce_scatter_to_sequence_parallel_region over the ETP group; then
/// token_combine's all-to-all).
constexpr void all2all_combine_comm(leaf& u, const build_context& c, const moe_tokens& tok, pass_kind pass) {
  const double A = tok.expert * static_cast<double>(routed_width(c.m())) * c.element_bytes();
  const bool fwd = pass == pass_kind::forward;
  c.collective(u, pass, comm_group::etp, fwd ? collective_kind::reduce_scatter : collective_kind::all_gather, A);
  c.collective(u, pass, comm_group::ep, collective_kind::all2all, A / static_cast<double>(c.s().etp_size));
}

/// The combine of Megatron's MoEAllGatherTokenDispatcher: the unpermuted full buffer
/// reduce-scattered over etp then ep (backward: all-gathered over ep then etp).
constexpr void allgather_combine_comm(leaf& u, const build_context& c, const moe_tokens& tok, pass_kind pass) {
  const auto& s = c.s();
  const auto ep = static_cast<double>(s.ep_size), etp = static_cast<double>(s.etp_size);
  const double full = tok.local * static_cast<double>(routed_width(c.m())) * c.element_bytes() * ep * etp;
  if (pass == pass_kind::forward) {
    c.collective(u, pass, comm_group::etp, collective_kind::reduce_scatter, full);
    c.collective(u, pass, comm_group::ep, collective_kind::reduce_scatter, full / etp);
  } else {
    c.collective(u, pass, comm_group::ep, collective_kind::all_gather, full / etp);
    c.collective(u, pass, comm_group::etp, collective_kind::all_gather, full);
  }
}

/// Serving inside the tp group (`serving_tp_moe`): the tokens are already on every rank.
constexpr void no_dispatch_comm(leaf&, const build_context&, const moe_tokens&) {}
/// ... and one all-reduce over tp of the tokens' summed expert outputs (backward: none, serving).
constexpr void tp_moe_combine_comm(leaf& u, const build_context& c, const moe_tokens& tok, pass_kind pass) {
  if (pass != pass_kind::forward) return;
  c.collective(u, pass, comm_group::tp, collective_kind::all_reduce,
               tok.local * static_cast<double>(routed_width(c.m())) * c.element_bytes());
}

/// DeepEP's combine (flex): each token's locally reduced output goes back once per rank.
constexpr void flex_combine_comm(leaf& u, const build_context& c, const moe_tokens& tok, pass_kind pass) {
  c.collective(u, pass, comm_group::ep, collective_kind::all2all,
               tok.sent_rows * static_cast<double>(routed_width(c.m())) * c.element_bytes());
}

/// What the strategy's token dispatcher does around the experts, decided once per MoE layer: the
/// permute kernels before/after the dispatch and the combine, and their collectives. All-to-all:
/// permute (two memory-bound kernels) before the dispatch; all-gather: one permute of the gathered
/// tokens after it; flex: DeepEP permutes while sending, then one permute of the received rows into
/// expert order. The unpermute writes the tokens this rank routed (all2all), the whole gathered
/// buffer (allgather), the rows DeepEP sends back (flex).
struct dispatch_plan {
  double permute[2] = {0, 0};    ///< bytes of the permute kernels (0: no such kernel)
  double permute_peak = 0;       ///< the permutation's forward transient
  double unpermute[2] = {0, 0};  ///< bytes of the unpermute kernels
  void (*dispatch)(leaf&, const build_context&, const moe_tokens&) = nullptr;
  void (*combine)(leaf&, const build_context&, const moe_tokens&, pass_kind) = nullptr;
};

/// The dispatch plan of the strategy's `moe_dispatcher_policy` (Megatron token_dispatcher.py).
constexpr dispatch_plan dispatch_plan_of(const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  const double A = tok.expert * h * E, out = tok.local * h * E;
  dispatch_plan d;
  if (serving_tp_moe(c)) {
    // vLLM's fused_moe gathers each expert's rows inside its GEMM (sorted token ids from
    // moe_align_block_size): no permute copy; moe_sum reads the top-k outputs, writes the tokens.
    d.unpermute[0] = A + out;
    d.dispatch = no_dispatch_comm;
    d.combine = tp_moe_combine_comm;
  } else if (s.moe_dispatcher_policy == dispatcher_kind::allgather) {
    const double gathered = tok.local * static_cast<double>(s.ep_size * s.etp_size);
    d.permute[0] = 2 * tok.expert * h * E;  // reads the selected gathered rows, writes expert order
    d.permute_peak = gathered * h * E + tok.expert * h * E;
    d.unpermute[0] = A + out * static_cast<double>(s.ep_size * s.etp_size);
    d.dispatch = allgather_dispatch_comm;
    d.combine = allgather_combine_comm;
  } else if (s.moe_dispatcher_policy == dispatcher_kind::flex) {
    d.permute[0] = (tok.sent_rows + tok.expert) * h * E;
    d.permute_peak = (tok.sent_rows + tok.expert) * h * E;
    d.unpermute[0] = A + tok.sent_rows * h * E;
    d.dispatch = flex_dispatch_comm;
    d.combine = flex_combine_comm;
  } else {
    d.permute[0] = (tok.local + tok.dispatched) * h * E;
    d.permute[1] = 2 * tok.dispatched * h * E;
    d.unpermute[0] = 2 * A;
    d.unpermute[1] = A + out;
    d.dispatch = all2all_dispatch_comm;
    d.combine = all2all_combine_comm;
  }
  return d;
}

/// Permutation and the dispatch, as `plan` lays them out.
constexpr leaf permutation_leaf(const build_context& c, const moe_tokens& tok, const dispatch_plan& plan) {
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  const double probs = tok.local * static_cast<double>(c.m().expert_num);  // routing probabilities
  leaf p;
  p.id = leaf_id::permutation;
  p.kind = leaf_kind::activation;
  p.fwd_peak = plan.permute_peak;
  // Forward: permute around the dispatch; backward: the gradients come back before they are unpermuted.
  for (const double bytes : plan.permute)
    if (bytes > 0) c.memory(p, pass_kind::forward, bytes, memory_kind::permute_fwd);
  plan.dispatch(p, c, tok);
  for (const double bytes : plan.permute)
    if (bytes > 0) c.memory(p, pass_kind::backward_input, bytes, memory_kind::permute_bwd);
  p.communicates_in_replay = true;
  p.input = tok.local * h * E + probs * 4;
  p.cache = probs * 8;  // fp32 probabilities and the routing map
  return p;
}
/// Permutation and the dispatch of the strategy's dispatcher.
constexpr leaf permutation_leaf(const build_context& c, const moe_tokens& tok) {
  return permutation_leaf(c, tok, dispatch_plan_of(c, tok));
}

/// Unpermutation and the combine, as `plan` lays them out.
constexpr leaf unpermutation_leaf(const build_context& c, const moe_tokens& tok, const dispatch_plan& plan) {
  const double h = static_cast<double>(routed_width(c.m())), E = c.element_bytes();
  leaf u;
  u.id = leaf_id::unpermutation;
  u.kind = leaf_kind::activation;
  const double A = tok.expert * h * E, out = tok.local * h * E;
  // Forward: the combine brings the expert outputs home, then they are unpermuted; backward mirrors it.
  plan.combine(u, c, tok, pass_kind::forward);
  for (const double bytes : plan.unpermute)
    if (bytes > 0) c.memory(u, pass_kind::forward, bytes, memory_kind::permute_fwd);
  for (const double bytes : plan.unpermute)
    if (bytes > 0) c.memory(u, pass_kind::backward_input, bytes, memory_kind::permute_bwd);
  plan.combine(u, c, tok, pass_kind::backward_input);
  u.communicates_in_replay = true;
  u.input = A;
  if (c.s().dispatch_probs) {  // probabilities already applied: nothing kept for backward
    u.fwd_peak = (A > out ? A : out);
  } else {  // combine weights the expert outputs by the probabilities: keeps them
    u.cache = A;
    u.fwd_peak = u.bwd_peak = A + out;
  }
  return u;
}
/// Unpermutation and the combine of the strategy's dispatcher.
constexpr leaf unpermutation_leaf(const build_context& c, const moe_tokens& tok) {
  return unpermutation_leaf(c, tok, dispatch_plan_of(c, tok));
}

/// A LatentMoE projection (moe_layer.py `fc1_latent_proj` h -> latent before the dispatch,
/// `fc2_latent_proj` latent -> h after the combine): TELinear with parallel_mode="duplicated", the
/// whole weight on every tp rank applied to the rank's own tokens, no collective — at tp = 1 a plain
/// linear, else `duplicated_linear_leaf` (with SP its gradient is summed over tp, as MLA's down
/// projections'). Neither is expert-parallel: the weights are dense parameters of the layer.
constexpr leaf latent_proj_leaf(const build_context& c, leaf_id id, std::int64_t in_features,
                                std::int64_t out_features) {
  if (c.s().tp_size == 1) return linear_leaf(c, id, true, in_features, out_features);
  return duplicated_linear_leaf(c, id, in_features, out_features);
}

/// The experts' fc2 bias (model.add_linear_bias), one per expert and output feature. Megatron builds
/// fc2 with skip_bias_add and, outside TE's fused grouped MLP, adds each local expert's bias scaled by
/// its tokens' routing probabilities in an eager loop (experts.py `_apply_bias`, the default
/// List[Tensor] path: `t + b * p` per expert, then one cat). Of the output X (rows x width): forward,
/// per expert b*p writes X_e and the add reads two and writes one, then the cat reads and writes X;
/// backward, per expert the gradients of b (g*p, summed over rows) and of p (g*b, summed over the
/// width), each a product (2 X_e) and a sum (X_e), then the cat of the rows' gradients (2 X).
constexpr void add_expert_fc2_bias(leaf& l, const build_context& c, const moe_tokens& tok, std::int64_t width) {
  const auto experts = static_cast<double>(tok.local_experts);
  l.params += experts * static_cast<double>(width);
  // TE's fused grouped MLP adds it in its kernel (the configurations Megatron declines are refused,
  // validate_op_fuser), as serving's fused MoE kernels do (vLLM fused_moe's bias inputs): no loop.
  if (c.s().use_transformer_engine_op_fuser || c.inference != nullptr) return;
  const double X = tok.expert * static_cast<double>(width) * c.element_bytes(), per = X / experts;
  for (std::int64_t e = 0; e < tok.local_experts; ++e) {
    c.memory(l, pass_kind::forward, per);      // b * p
    c.memory(l, pass_kind::forward, 3 * per);  // t + b * p
  }
  c.memory(l, pass_kind::forward, 2 * X);  // cat
  for (std::int64_t e = 0; e < tok.local_experts; ++e)
    for (int gradient = 0; gradient < 2; ++gradient) {  // of b, then of p
      c.memory(l, pass_kind::backward_input, 2 * per);  // product
      c.memory(l, pass_kind::backward_input, per);      // sum
    }
  c.memory(l, pass_kind::backward_input, 2 * X);  // cat of the rows' gradients
  l.fwd_peak += 2 * X;                            // the per-expert sums and their cat
  l.bwd_peak += 2 * X;
}

/// Megatron's clamped quick-GEGLU (model.use_quick_geglu with model.activation_func_clamp_value;
/// fused_bias_geglu.py `weighted_bias_quick_geglu_impl`): before the fused kernel, PyTorch clamps the
/// gate half from above and the linear half to [-v, v] (two eager kernels) and joins the halves
/// again (a cat), which the fused kernel reads and saves; unfused (strategy.use_fused_swiglu false,
/// experts.py's `glu`) the clamped halves go on as they are, no cat. Of the fc1 output X (both
/// halves, E bytes an element): forward, each clamp reads and writes X/2, the cat reads and writes X.
/// Backward (autograd; FunctionsManual.cpp `clamp_backward`): the cat's gradient is two views; the
/// gate's clamp gives where(self <= v, grad, 0): its zero (a one-element fill), a compare writing a
/// one-byte mask, the where; the linear half's where((self >= -v) & (self <= v), grad, 0): its zero,
/// two compares and an and, the where; the chunk's gradient joins the halves (a cat). The clamps
/// keep the fc1 output (their `self`) beside what the activation saves. TE's fused grouped MLP
/// (use_transformer_engine_op_fuser) clamps inside its kernel, as serving's fused MoE kernels do:
/// nothing extra there.
constexpr void add_eager_glu_clamps(leaf& l, const build_context& c, double X) {
  const auto& m = c.m();
  if (!m.use_quick_geglu || !m.activation_func_clamp_value || c.s().use_transformer_engine_op_fuser ||
      c.inference != nullptr)
    return;
  const double E = c.element_bytes(), half = X / 2, mask = half / E;  // a half's elements, one byte each
  const bool fused = c.s().use_fused_swiglu;
  c.memory(l, pass_kind::forward, 2 * half);                // gate half clamped
  c.memory(l, pass_kind::forward, 2 * half);                // linear half clamped
  if (fused) c.memory(l, pass_kind::forward, 2 * X);        // cat
  c.memory(l, pass_kind::backward_input, E);                // gate: its zero
  c.memory(l, pass_kind::backward_input, half + mask);      // gate: self <= v
  c.memory(l, pass_kind::backward_input, mask + 2 * half);  // gate: where
  c.memory(l, pass_kind::backward_input, E);                // linear: its zero
  c.memory(l, pass_kind::backward_input, half + mask);      // linear: self >= -v
  c.memory(l, pass_kind::backward_input, half + mask);      // linear: self <= v
  c.memory(l, pass_kind::backward_input, 3 * mask);         // linear: and
  c.memory(l, pass_kind::backward_input, mask + 2 * half);  // linear: where
  c.memory(l, pass_kind::backward_input, 2 * X);            // chunk's gradient: cat of the halves
  l.cache += X;                                             // the fc1 output, kept by the clamps
  l.fwd_peak += fused ? 2 * X : X;                          // the clamped halves (and their cat)
  l.bwd_peak += X + 3 * mask;
}

/// The MLP half of a MoE layer: pre-MLP norm, shared experts, router, dispatch, the experts'
/// grouped GEMMs around their activation (with dispatch_probs the routing weights are applied
/// inside it: weighted SiLU), combine, the shared + routed sum, residual add.
constexpr void push_moe_mlp(leaf_block& b, const build_context& c) {
  const auto& m = c.m();
  const auto& s = c.s();
  const std::int64_t h = m.hidden_size, t = s.tp_size;
  const double E = c.element_bytes();
  const moe_tokens tok = moe_token_counts(c);
  const bool shared = m.moe_shared_expert_intermediate_size && *m.moe_shared_expert_intermediate_size > 0;
  b.push(norm_leaf(c, leaf_id::pre_mlp_layernorm));
  if (shared) {
    const std::int64_t fs = *m.moe_shared_expert_intermediate_size;
    b.push(linear_leaf(c, leaf_id::shared_experts_linear_fc1, true, h, mlp_fc1_width(m, fs) / t));
    b.push(activation_leaf(c, m.use_swiglu ? leaf_id::shared_experts_swiglu : leaf_id::shared_experts_gelu, c.tokens(),
                           fs / t, m.use_swiglu));
    b.push(linear_leaf(c, leaf_id::shared_experts_linear_fc2, false, fs / t, h));
  }
  const dispatch_plan plan = dispatch_plan_of(c, tok);  // the dispatcher, decided once for the layer
  b.push(router_leaf(c, tok));
  // LatentMoE: the routed tokens leave at the latent width and come back to h (see latent_proj_leaf).
  const std::int64_t w = routed_width(m);
  if (m.moe_latent_size) b.push(latent_proj_leaf(c, leaf_id::moe_fc1_latent_proj, h, w));
  b.push(permutation_leaf(c, tok, plan));
  // With dispatch_probs the activation weights each row by its own probability (permuted with it).
  const double probs = tok.expert;
  const std::int64_t fe = expert_ffn_size(m) / s.etp_size;
  leaf fc1 =
      grouped_linear_leaf(c, leaf_id::experts_linear_fc1, tok.local_experts, tok.expert, w, mlp_fc1_width(m, fe));
  // add_linear_bias: fc1's bias rides in the GEMM's epilogue and its gradient in the wgrad GEMM
  // (TE grouped_linear.py): parameters only.
  if (m.add_linear_bias) fc1.params += static_cast<double>(tok.local_experts * mlp_fc1_width(m, fe));
  b.push(fc1);
  leaf act = activation_leaf(c, m.use_swiglu ? leaf_id::experts_swiglu : leaf_id::experts_gelu, tok.expert, fe,
                             m.use_swiglu, s.dispatch_probs ? probs * E : 0, s.dispatch_probs ? probs * 8 : 0);
  add_eager_glu_clamps(act, c, tok.expert * static_cast<double>(mlp_fc1_width(m, fe)) * E);
  b.push(act);
  leaf fc2 = grouped_linear_leaf(c, leaf_id::experts_linear_fc2, tok.local_experts, tok.expert, fe, w);
  if (m.add_linear_bias) add_expert_fc2_bias(fc2, c, tok, w);
  b.push(fc2);
  b.push(unpermutation_leaf(c, tok, plan));
  if (m.moe_latent_size) b.push(latent_proj_leaf(c, leaf_id::moe_fc2_latent_proj, w, h));
  if (shared) b.push(residual_leaf(c, leaf_id::shared_plus_routed, false));
  b.push(residual_leaf(c, leaf_id::mlp_residual_add));
}

LLMSIM_END_NAMESPACE
