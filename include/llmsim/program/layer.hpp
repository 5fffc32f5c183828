/// \file llmsim/program/layer.hpp
/// A whole decoder layer — MHA/GQA or MLA attention, dense or MoE MLP — and which of its leaves
/// replay their forward in backward under the strategy's recompute plan.
#pragma once

#include <llmsim/program/dense.hpp>
#include <llmsim/program/moe.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace detail {
constexpr leaf* find_leaf(leaf_block& b, leaf_id id) {
  for (std::size_t i = 0; i < b.count; ++i)
    if (b.leaves[i].id == id) return &b.leaves[i];
  return nullptr;
}
constexpr void mark(leaf_block& b, std::initializer_list<leaf_id> ids) {
  for (auto id : ids)
    if (leaf* l = find_leaf(b, id)) l->recompute = true;
}
/// Leaves of the attention half, the MLP half, and the whole layer.
constexpr bool in_attention(const leaf_block& b, std::size_t i) {
  for (std::size_t j = 0; j <= i && j < b.count; ++j)
    if (b.leaves[j].id == leaf_id::attention_residual_add) return j == i;
  return true;
}
}  // namespace detail

namespace detail {
/// Megatron 0.14 `--recompute-modules` on one layer (see plan_recompute).
constexpr void plan_megatron_modules(leaf_block& b, const strategy_spec& s, bool mla, bool moe) {
  using enum leaf_id;
  const auto& mods = s.megatron_recompute_modules;
  if (mods.contains(recompute_module::layernorm)) {
    mark(b, {input_layernorm, pre_mlp_layernorm});
    for (auto consumer : {linear_qkv, linear_q_down_proj, linear_q_proj, linear_kv_down_proj, linear_fc1,
                          shared_experts_linear_fc1, router}) {
      if (leaf* l = find_leaf(b, consumer)) {
        l->recompute = true;
        l->replay_free = true;
        l->cache = 0;
      }
    }
  }
  if (mods.contains(recompute_module::mla_up_proj) && mla) {
    mark(b, {q_layernorm, linear_q_up_proj, kv_layernorm, linear_kv_up_proj, mla_rope_and_concat, core_attention});
    leaf* core = find_leaf(b, core_attention);
    core->replay_free = true;
    core->cache -= core->input;  // keeps only the log-sum-exp; q, k, v come back from the replayed projections
  }
  if (mods.contains(recompute_module::core_attn)) {
    // Megatron attention.py `_checkpointed_attention_forward` (checkpoint_core_attention): the core
    // attention alone is a checkpoint, its inputs q, k, v kept and its kernel replayed in backward.
    if (leaf* core = find_leaf(b, core_attention)) {
      core->recompute = true;
      core->segment_start = true;
    }
  }
  if (moe && mods.contains(recompute_module::moe)) {
    mark(b, {shared_experts_linear_fc1, shared_experts_swiglu, shared_experts_gelu, shared_experts_linear_fc2, router,
             permutation, experts_linear_fc1, experts_swiglu, experts_gelu, experts_linear_fc2, unpermutation});
  } else if (moe && mods.contains(recompute_module::moe_act)) {
    mark(b, {experts_swiglu, experts_gelu});
    leaf* fc2 = find_leaf(b, experts_linear_fc2);
    fc2->recompute = true;
    fc2->replay_free = true;
    fc2->cache = 0;  // its input is the replayed activation
  }
  if (!moe && mods.contains(recompute_module::mlp)) mark(b, {linear_fc1, swiglu, gelu, linear_fc2});
  if (leaf* fc1 = find_leaf(b, linear_fc1);
      fc1 && mods.contains(recompute_module::layernorm) && mods.contains(recompute_module::mlp))
    for (auto activation : {swiglu, gelu})
      if (leaf* act = find_leaf(b, activation)) act->segment_start = true;  // fc1 ends the norm checkpoint
}

/// SimuMax's selective flags on one layer (see plan_recompute).
constexpr void plan_selective_flags(leaf_block& b, const strategy_spec& s) {
  using enum leaf_id;
  if (s.attn_recompute) {
    mark(b, {linear_qkv, rotary_pos_emb, core_attention, q_layernorm, linear_q_up_proj, linear_q_proj, kv_layernorm,
             linear_kv_up_proj, mla_rope_and_concat});
    if (s.recompute_variance) find_leaf(b, core_attention)->replay_free = true;
  }
  if (s.mla_rms_recompute) {
    mark(b, {input_layernorm, linear_q_down_proj, linear_kv_down_proj});
    if (leaf* q = find_leaf(b, q_layernorm))
      q->segment_start = true;  // Megatron checkpoints the down projections separately
    if (leaf* kv = find_leaf(b, kv_layernorm)) kv->segment_start = true;
  }
  if (s.mlp_recompute) {
    mark(b,
         {linear_fc1, swiglu, gelu, linear_fc2, experts_linear_fc1, experts_swiglu, experts_gelu, experts_linear_fc2});
    if (s.recompute_variance)
      for (auto n : {linear_fc2, experts_linear_fc2})
        if (leaf* l = find_leaf(b, n)) l->replay_free = true;
  }
  if (s.mlp_rms_recompute)
    mark(b, {pre_mlp_layernorm, shared_experts_linear_fc1, shared_experts_swiglu, shared_experts_gelu,
             shared_experts_linear_fc2, router});
}
}  // namespace detail

/// Applies the recompute plan to one layer (see the table in the strategy docs):
/// - `full_block`: every leaf; `attn_only` / `sdp_only` / `mlp_only`: the named half.
/// - `selective_recompute`: attn_recompute → the attention core (QKV or the MLA up-projections,
///   their norms, RoPE, flash attention); mla_rms_recompute → also the input norm and the down
///   projections; mlp_recompute → the MLP GEMMs and activation (the experts for MoE);
///   mlp_rms_recompute → also the pre-MLP norm, shared experts and router; recompute_variance →
///   the attention / fc2 replay is free (re-derived from neighbours).
/// - Megatron `--recompute-modules`: layernorm → both norms (their consumers keep no input);
///   mla_up_proj → the MLA up-projections and attention (flash attention keeps only its
///   log-sum-exp); moe_act → the expert activation (fc2 keeps no input); moe → the whole MoE MLP;
///   mlp → a dense MLP; core_attn → the core attention, a checkpoint of its own (keeps q, k, v).
constexpr void plan_recompute(leaf_block& b, const strategy_spec& s) {
  using detail::find_leaf;
  using detail::mark;
  using enum leaf_id;
  const bool mla = find_leaf(b, linear_kv_up_proj) != nullptr;
  const bool moe = find_leaf(b, router) != nullptr;
  switch (s.recompute_granularity) {
    case recompute_kind::full_block:
      for (std::size_t i = 0; i < b.count; ++i) b.leaves[i].recompute = true;
      break;
    case recompute_kind::attn_only:
      for (std::size_t i = 1; i < b.count; ++i)
        if (detail::in_attention(b, i) && b.leaves[i].id != attention_residual_add) b.leaves[i].recompute = true;
      break;
    case recompute_kind::sdp_only:
      mark(b, {core_attention});
      break;
    case recompute_kind::mlp_only:
      for (std::size_t i = 0; i < b.count; ++i)
        if (!detail::in_attention(b, i) && b.leaves[i].id != mlp_residual_add) b.leaves[i].recompute = true;
      break;
    case recompute_kind::selective_recompute:
      if (s.megatron_recompute)
        detail::plan_megatron_modules(b, s, mla, moe);
      else
        detail::plan_selective_flags(b, s);
      break;
    default:
      break;
  }
  // RoPE sits between QKV and attention: it replays whenever both do in one segment (not when the
  // attention is a checkpoint of its own, Megatron's core_attn, whose q and k come roped).
  if (leaf* rope = find_leaf(b, rotary_pos_emb)) {
    const leaf* qkv = find_leaf(b, linear_qkv);
    const leaf* core = find_leaf(b, core_attention);
    rope->recompute = rope->recompute || (qkv->recompute && core->recompute && !core->segment_start);
  }
  b.leaves[0].segment_start = true;  // checkpoints never span two layers
  b.assign_roles();
}

/// The core attention of a decoder layer: MLA's (`mla_core_attention_leaf`), else MHA/GQA over the
/// context-parallel ring or one fused kernel (flash or unfused, `attention_leaf`).
constexpr leaf core_attention_leaf(const build_context& c) {
  if (c.m().attention_type == attention_kind::mla) return mla_core_attention_leaf(c);
  return c.s().cp_size > 1 ? context_parallel_attention_leaf(c) : attention_leaf(c);
}

/// The attention half of a decoder layer: MHA/GQA (input norm, QKV, RoPE, attention, output
/// projection, residual) or MLA.
constexpr void push_attention(leaf_block& b, const build_context& c) {
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const std::int64_t h = m.hidden_size, d = head_dim(m);
  if (m.attention_type == attention_kind::mla) {
    push_mla_attention(b, c);
    return;
  }
  b.push(norm_leaf(c, leaf_id::input_layernorm));
  b.push(linear_leaf(c, leaf_id::linear_qkv, true, h, (m.head_num / t + 2 * kv_heads_per_rank(m, t)) * d));
  if (m.position_embedding_type == position_kind::rope) b.push(rotary_leaf(c));
  b.push(core_attention_leaf(c));
  b.push(linear_leaf(c, leaf_id::linear_proj, false, m.head_num * d / t, h));
  b.push(residual_leaf(c, leaf_id::attention_residual_add));
}

/// The dense MLP half of a decoder layer: pre-MLP norm, fc1, activation, fc2, residual.
constexpr void push_dense_mlp(leaf_block& b, const build_context& c) {
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const std::int64_t h = m.hidden_size, ffn = *m.intermediate_size;
  b.push(norm_leaf(c, leaf_id::pre_mlp_layernorm));
  b.push(linear_leaf(c, leaf_id::linear_fc1, true, h, mlp_fc1_width(m, ffn) / t));
  b.push(activation_leaf(c));
  b.push(linear_leaf(c, leaf_id::linear_fc2, false, ffn / t, h));
  b.push(residual_leaf(c, leaf_id::mlp_residual_add));
}

/// One decoder layer: MHA/GQA or MLA attention, then a dense or MoE MLP.
constexpr leaf_block decoder_layer_leaves(const build_context& job, bool moe_mlp, bool recomputed) {
  build_context c = job;
  c.recomputed_layer = recomputed;  // which linears keep their bf16 input (detail::saves_original_input)
  const auto& m = c.m();
  const std::int64_t h = m.hidden_size;
  leaf_block b;
  push_attention(b, c);
  if (moe_mlp)
    push_moe_mlp(b, c);
  else
    push_dense_mlp(b, c);
  if (m.add_linear_bias) {
    // Biases: column-parallel shards, row-parallel full (added after the reduction).
    for (std::size_t i = 0; i < b.count; ++i) {
      leaf& l = b.leaves[i];
      if (l.grouped) continue;
      if (l.kind == leaf_kind::linear_column && l.id != leaf_id::router) l.params += static_cast<double>(l.weight_rows);
      if (l.id == leaf_id::router) l.params += static_cast<double>(m.expert_num);  // TopKRouter's bias
      if (l.kind == leaf_kind::linear_row) l.params += static_cast<double>(h);
    }
  } else if (m.add_qkv_bias) {  // the QKV projection's bias only, sharded as its columns
    for (std::size_t i = 0; i < b.count; ++i)
      if (b.leaves[i].id == leaf_id::linear_qkv) b.leaves[i].params += static_cast<double>(b.leaves[i].weight_rows);
  }
  if (recomputed)
    plan_recompute(b, c.s());
  else
    b.assign_roles();
  return b;
}

LLMSIM_END_NAMESPACE
