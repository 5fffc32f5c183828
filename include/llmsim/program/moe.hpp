/// \file llmsim/program/moe.hpp
/// Leaves of multi-head latent attention (DeepSeek-V2 §2.1) and of a mixture-of-experts MLP with
/// Megatron-LM's all-to-all token dispatcher and grouped GEMMs (TransformerEngine GroupedLinear).
///
/// MLA (tp = 1): q_down (h→q_lora_rank) + RMSNorm + q_up (→ heads·(qk+rope)), or one q projection
/// without q compression; kv_down (h→kv_lora_rank+rope) + RMSNorm + kv_up (→ heads·(qk+v)); the
/// rotary part and the q/k concatenations run as copies (Megatron's unfused MLA path makes q, k, v
/// contiguous for TE); flash attention with qk head dim qk+rope and v head dim v; output projection.
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
  double dispatched = 0;  ///< token copies this rank sends to experts: topk·T0, padded to capacity
  double expert = 0;      ///< token copies entering this rank's grouped GEMMs (×etp: ETP ranks gather)
  std::int64_t local_experts = 1;
};

/// Megatron capacity with padding: ceil(topk·T0 / E) tokens per expert per source rank, × capacity.
constexpr moe_tokens moe_token_counts(const build_context& c) {
  const auto& m = c.m();
  const auto& s = c.s();
  moe_tokens t;
  t.local = c.local_tokens();
  t.local_experts = m.expert_num / s.ep_size;
  const double topk = static_cast<double>(m.topk.value_or(1));
  const double experts = static_cast<double>(m.expert_num);
  auto padded = [&](double copies) {
    if (!m.moe_pad_expert_input_to_capacity) return copies;
    const double per_expert = static_cast<double>(static_cast<std::int64_t>((copies + experts - 1) / experts));  // ceil
    return per_expert * experts * m.capacity;
  };
  t.dispatched = padded(topk * t.local);
  t.expert = padded(topk * t.local * static_cast<double>(s.etp_size));
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
  const double T = c.local_tokens();
  const double H = static_cast<double>(m.head_num);
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
  const double sparse = c.s().attention_sparse_ratio;
  c.emit(l, attention_op(pass_kind::forward, shape, (q + k + v + o + lse) * E, sparse));
  c.emit(l, attention_op(pass_kind::backward_input, shape, (2 * q + 2 * k + 2 * v + o + lse) * E, sparse));
  l.input = (q + k + v) * E;
  l.cache = (q + k + v + lse) * E;
  l.fwd_peak = (q + k + v + lse + o) * E;
  l.bwd_peak = (2 * q + 2 * k + 2 * v + lse + o) * E;
  return l;
}

/// The attention half of an MLA layer (input norm … output projection, residual add).
constexpr void push_mla_attention(leaf_block& b, const build_context& c) {
  const auto& m = c.m();
  const std::int64_t h = m.hidden_size, H = m.head_num;
  const std::int64_t qd = *m.qk_head_dim + *m.qk_pos_emb_head_dim;
  b.push(norm_leaf(c, leaf_id::input_layernorm));
  if (m.q_lora_rank) {
    b.push(linear_leaf(c, leaf_id::linear_q_down_proj, true, h, *m.q_lora_rank));
    b.push(norm_leaf(c, leaf_id::q_layernorm, *m.q_lora_rank, norm_kind::rmsnorm));
    b.push(linear_leaf(c, leaf_id::linear_q_up_proj, true, *m.q_lora_rank, H * qd));
  } else {
    b.push(linear_leaf(c, leaf_id::linear_q_proj, true, h, H * qd));
  }
  leaf kv_down = linear_leaf(c, leaf_id::linear_kv_down_proj, true, h, *m.kv_lora_rank + *m.qk_pos_emb_head_dim);
  kv_down.cache = 0;  // reads the same normed input the q projection keeps
  b.push(kv_down);
  b.push(norm_leaf(c, leaf_id::kv_layernorm, *m.kv_lora_rank, norm_kind::rmsnorm));
  b.push(linear_leaf(c, leaf_id::linear_kv_up_proj, true, *m.kv_lora_rank, H * (*m.qk_head_dim + *m.v_head_dim)));
  b.push(mla_glue_leaf(c));
  if (c.s().cp_size > 1)
    b.push(context_parallel_attention_leaf(c));
  else
    b.push(mla_attention_leaf(c, self_attention(c)));
  b.push(linear_leaf(c, leaf_id::linear_proj, false, H * *m.v_head_dim, h));
  b.push(residual_leaf(c, leaf_id::attention_residual_add));
}

/// A grouped GEMM over this rank's experts: `tokens` rows in total, weights in × out per expert.
constexpr leaf grouped_linear_leaf(const build_context& c, leaf_id id, std::int64_t experts, double tokens,
                                   std::int64_t in_features, std::int64_t out_features) {
  leaf l;
  l.id = id;
  l.kind = leaf_kind::linear_column;
  const double E = c.element_bytes();
  const double x = tokens * static_cast<double>(in_features), y = tokens * static_cast<double>(out_features);
  const double w = static_cast<double>(experts) * static_cast<double>(in_features) * static_cast<double>(out_features);
  const double flop_count = 2.0 * tokens * static_cast<double>(in_features) * static_cast<double>(out_features);
  const auto tokens_per_expert = static_cast<std::int64_t>(tokens) / experts;
  auto shape = [&](grouped_stage stage) {
    return grouped_gemm_shape{experts,   tokens_per_expert,          out_features, in_features,
                              c.s().fp8, c.main_grad_bytes() == 4.0, stage};
  };
  // TE GroupedLinear stages as the grouped-GEMM table keys them (M, N, K of the forward GEMM).
  c.emit(l, grouped_gemm_op(pass_kind::forward, shape(grouped_stage::forward), flop_count, (x + y + w) * E));
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
  c.emit(r, detail::job_gemm(c, pass_kind::forward, {b, rows / b, h, X, gemm_layout::tn, false, dtype_kind::bf16},
                             in + w + 3 * logits));
  c.emit(r, detail::job_gemm(c, pass_kind::backward_input,
                             {b, rows / b, X, h, gemm_layout::nn, false, dtype_kind::bf16}, in + w + 4 * logits));
  c.emit(r, detail::job_gemm(c, pass_kind::backward_weight, {1, X, rows, h, gemm_layout::nt, true, wgrad_out},
                             in + w + logits));
  r.params = static_cast<double>(h * X);
  r.input = r.cache = in;
  r.fwd_peak = r.bwd_peak = in + w + logits;
  return r;
}

/// Permutation (two memory-bound kernels each way) and the all-to-all dispatch over ep (plus the
/// routing probabilities with `dispatch_probs`), then the ETP all-gather.
constexpr leaf permutation_leaf(const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const double h = static_cast<double>(c.m().hidden_size), E = c.element_bytes();
  const double probs = tok.local * static_cast<double>(c.m().expert_num);  // routing probabilities
  leaf p;
  p.id = leaf_id::permutation;
  p.kind = leaf_kind::activation;
  const double k1 = (tok.local + tok.dispatched) * h * E, k2 = 2 * tok.dispatched * h * E;
  // Forward: permute, then dispatch; backward: the gradients come back before they are unpermuted.
  c.memory(p, pass_kind::forward, k1, memory_kind::permute_fwd);
  c.memory(p, pass_kind::forward, k2, memory_kind::permute_fwd);
  const double payload = tok.dispatched * h * E;
  for (const pass_kind pass : {pass_kind::forward, pass_kind::backward_input}) {
    c.collective(p, pass, comm_group::ep, collective_kind::all2all, payload);
    if (s.dispatch_probs) c.collective(p, pass, comm_group::ep, collective_kind::all2all, probs * E);
  }
  const double gathered = payload * static_cast<double>(s.etp_size);
  c.collective(p, pass_kind::forward, comm_group::etp, collective_kind::all_gather, gathered);
  c.collective(p, pass_kind::backward_input, comm_group::etp, collective_kind::reduce_scatter, gathered);
  c.memory(p, pass_kind::backward_input, k1, memory_kind::permute_bwd);
  c.memory(p, pass_kind::backward_input, k2, memory_kind::permute_bwd);
  p.communicates_in_replay = true;
  p.input = tok.local * h * E + probs * 4;
  p.cache = probs * 8;  // fp32 probabilities and the routing map
  return p;
}

/// Unpermutation and the all-to-all combine over ep, with the ETP reduce-scatter first.
constexpr leaf unpermutation_leaf(const build_context& c, const moe_tokens& tok) {
  const auto& s = c.s();
  const double h = static_cast<double>(c.m().hidden_size), E = c.element_bytes();
  leaf u;
  u.id = leaf_id::unpermutation;
  u.kind = leaf_kind::activation;
  const double A = tok.expert * h * E, out = tok.local * h * E;
  // Forward: the combine (ETP reduce-scatter, all-to-all) brings the expert outputs home, then they are unpermuted.
  const double gathered = A * static_cast<double>(s.etp_size);
  c.collective(u, pass_kind::forward, comm_group::etp, collective_kind::reduce_scatter, gathered);
  c.collective(u, pass_kind::forward, comm_group::ep, collective_kind::all2all, A);
  c.memory(u, pass_kind::forward, 2 * A, memory_kind::permute_fwd);
  c.memory(u, pass_kind::forward, A + out, memory_kind::permute_fwd);
  c.memory(u, pass_kind::backward_input, 2 * A, memory_kind::permute_bwd);
  c.memory(u, pass_kind::backward_input, A + out, memory_kind::permute_bwd);
  c.collective(u, pass_kind::backward_input, comm_group::etp, collective_kind::all_gather, gathered);
  c.collective(u, pass_kind::backward_input, comm_group::ep, collective_kind::all2all, A);
  u.communicates_in_replay = true;
  u.input = A;
  if (s.dispatch_probs) {  // probabilities already applied: nothing kept for backward
    u.fwd_peak = (A > out ? A : out);
  } else {  // combine weights the expert outputs by the probabilities: keeps them
    u.cache = A;
    u.fwd_peak = u.bwd_peak = A + out;
  }
  return u;
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
  b.push(router_leaf(c, tok));
  b.push(permutation_leaf(c, tok));
  const double probs = tok.local * static_cast<double>(m.expert_num);
  const std::int64_t fe = expert_ffn_size(m) / s.etp_size;
  b.push(grouped_linear_leaf(c, leaf_id::experts_linear_fc1, tok.local_experts, tok.expert, h, mlp_fc1_width(m, fe)));
  b.push(activation_leaf(c, m.use_swiglu ? leaf_id::experts_swiglu : leaf_id::experts_gelu, tok.expert, fe,
                         m.use_swiglu, s.dispatch_probs ? probs * E : 0, s.dispatch_probs ? probs * 8 : 0));
  b.push(grouped_linear_leaf(c, leaf_id::experts_linear_fc2, tok.local_experts, tok.expert, fe, h));
  b.push(unpermutation_leaf(c, tok));
  if (shared) b.push(residual_leaf(c, leaf_id::shared_plus_routed, false));
  b.push(residual_leaf(c, leaf_id::mlp_residual_add));
}

LLMSIM_END_NAMESPACE
