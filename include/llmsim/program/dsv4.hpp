/// \file llmsim/program/dsv4.hpp
/// A DeepSeek-V4 decoder layer as Megatron-Core runs it (experimental_attention_variant
/// "dsv4_hybrid"): the hybrid attention of one compression ratio (0: sliding window only, 4: CSA
/// with the lightning indexer, 128: HCA), the MoE MLP, and around each half the manifold-constrained
/// hyper-connections (mHC) of model.num_residual_streams streams.
///
/// Sources (read, not copied): Megatron-LM megatron/core/transformer/experimental_attention_variant/
/// deepseek_v4_hybrid_attention.py (DSv4HybridSelfAttention: q down / norm / up, one shared
/// key-value `linear_kv_proj` + `kv_layernorm`, a weightless RMS norm of q, RoPE, the grouped
/// output projection `linear_o_group_proj` as an einsum, then `linear_proj`; tensor-parallel size
/// 1 only; mla_up_proj recompute checkpoints q up .. RoPE and discards q, k, v after attention),
/// csa.py (Compressor: `linear_wkv` and `linear_wgate` of h -> c x width outside FP8, c = 2 for the
/// overlapping ratio-4 windows, gated pooling, norm, RoPE; CSAIndexer: `linear_wq_b`,
/// `linear_weights_proj` (bf16), its own compressor with a Hadamard rotation, all on detached
/// inputs; CompressedSparseAttention: window indices + compressed indices, the indexer's top-k and
/// its KL loss against the main attention) and transformer/hyper_connection.py (HyperConnectionModule:
/// `mapping_proj` k h -> k^2 + 2k, Sinkhorn, aggregation, h_post_bda).
/// Conventions as program/dense.hpp: b micro-batch, s sequence, T = b s tokens, E = 2 bytes.
#pragma once

#include <llmsim/program/dense.hpp>
#include <llmsim/program/layer.hpp>
#include <llmsim/program/moe.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace detail {
constexpr double dsv4_d(std::int64_t v) { return static_cast<double>(v); }
}  // namespace detail

namespace detail {
/// A linear of the DeepSeek-V4 attention through the linear emitter of program/dense.hpp:
/// `copies` identical weights on the same input (the compressor's wkv and wgate), `quantized`
/// (TE under the recipe) or bf16 (built in get_fp8_disabled_context), `input_grad`: false for a
/// linear on a detached input (the indexer's), which runs no input-gradient GEMM.
constexpr leaf dsv4_linear_leaf(const build_context& c, leaf_id id, std::int64_t in, std::int64_t out, bool quantized,
                                bool input_grad, int copies = 1) {
  build_context q = c;
  q.quantized = quantized && c.quantized;
  const linear_geometry g = linear_geometry_of(q, true, true, q.quantized, in, out, q.sequence(), q.tokens());
  leaf l;
  l.id = id;
  l.kind = leaf_kind::linear_column;
  for (int i = 0; i < copies; ++i) {
    if (input_grad) {
      emit_linear_data_passes(q, l, g);
    } else {
      if (g.quantized) {
        quantize(q, l, pass_kind::forward, g.x, g.qa, g.x_copies);
        quantize_weight(q, l, g.w);
      }
      const double fwd = g.quantized ? g.x * g.qa + g.w * g.qw + g.y * g.E : (g.x + g.y + g.w) * g.E;
      q.emit(l,
             job_gemm(q, pass_kind::forward, {g.b, g.s, g.in, g.out, gemm_layout::tn, false, dtype_kind::bf16}, fwd));
      if (g.quantized) quantize(q, l, pass_kind::backward_weight, g.y, g.qa, 1);  // dy: the wgrad copy only
    }
    emit_linear_weight_pass(q, l, g);
  }
  const double k = static_cast<double>(copies);
  l.params = k * g.w;
  if (g.quantized) {
    l.quantized_params = k * g.w;
    l.quantized_weight_bytes = k * g.w * g.qw * g.f.copies;
  }
  l.input = g.x * g.E;
  l.cache = g.quantized ? g.x * g.qa : g.x * g.E;
  l.fwd_peak = (g.x + k * g.y) * g.E;
  l.bwd_peak = (g.x + k * g.y) * g.E;
  l.weight_rows = out;
  l.weight_cols = in;
  return l;
}

/// The compressor of a ratio-`ratio` layer at `width` (v_head_dim, or the indexer head width):
/// wkv and wgate (h -> c width each, bf16), then the gated pooling (softmax of score + ape over the
/// c x ratio rows of a group, weighted sum), the RMSNorm and the RoPE of the s/ratio compressed rows
/// (the indexer's also its Hadamard rotation). Backward reads the kept kv and score to write their
/// gradients. Its input is the layer's normed hidden state, which linear_q_down_proj keeps.
constexpr leaf compressor_leaf(const build_context& c, leaf_id id, std::int64_t ratio, std::int64_t width,
                               bool input_grad, bool rotate) {
  const std::int64_t coff = ratio == 4 ? 2 : 1;
  leaf l = dsv4_linear_leaf(c, id, c.m().hidden_size, coff * width, false, input_grad, 2);
  const double E = c.element_bytes(), T = c.tokens();
  const double projected = T * dsv4_d(coff * width) * E;  // kv, and score as large
  const double rows = T / dsv4_d(ratio) * dsv4_d(width) * E;
  const double rope = T / dsv4_d(ratio) * dsv4_d(*c.m().qk_pos_emb_head_dim) * E;
  c.memory(l, pass_kind::forward, 2 * projected + rows);  // pooling: read kv and score, write the compressed rows
  c.memory(l, pass_kind::forward, 2 * rows);              // norm
  c.memory(l, pass_kind::forward, 2 * rope);              // RoPE of the positional part
  if (rotate) c.memory(l, pass_kind::forward, 2 * rows);  // Hadamard rotation
  c.memory(l, pass_kind::backward_input, 2 * projected + 2 * projected + rows);  // read kv, score; write both gradients
  c.memory(l, pass_kind::backward_input, 3 * rows);                              // norm backward
  l.params += dsv4_d(ratio * coff * width) + dsv4_d(width);                      // ape and the norm weight
  l.cache = 2 * projected + rows;  // the pooling's kv and score, the norm's input
  l.fwd_peak += rows;
  return l;
}
}  // namespace detail

/// The lightning indexer's scoring of a ratio-4 layer (csa.py CompressedSparseAttention.forward,
/// fused_qk_topk with apply_dsa_kernel_fusion): every query's n_idx heads of width d_idx against
/// all s/4 compressed indexer keys (2 T (s/4) n_idx d_idx FLOPs), ReLU, the per-head weights summed,
/// the top-k kept. Training adds FusedDSAIndexerLoss: the main attention's logits over the k'
/// selected keys (detached q and compressed keys: 2 T n v k' FLOPs, no PV) as the KL target; with
/// dsa_indexer_use_sparse_loss its gradient reaches the indexer's q and k over the selected keys
/// only (2 x 2 T n_idx d_idx k'). Kept: the int32 top-k indices (the sparse attention's backward
/// reads them), the fp32 KL target, the indexer's q, k and weights.
constexpr leaf indexer_topk_leaf(const build_context& c) {
  using detail::dsv4_d;
  leaf l;
  l.id = leaf_id::indexer_topk;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const double E = c.element_bytes(), T = c.tokens(), b = dsv4_d(c.s().micro_batch_size);
  const double ni = dsv4_d(*m.dsa_indexer_n_heads), di = dsv4_d(*m.dsa_indexer_head_dim);
  const double n = dsv4_d(m.head_num), v = dsv4_d(*m.v_head_dim);
  const double keys = b * dsv4_d(dsv4_compressed_keys(4, c.sequence()));  // compressed keys of the micro-batch
  const double per_sequence = dsv4_d(dsv4_compressed_keys(4, c.sequence()));
  const double k = dsv4_d(dsv4_attended_keys(m, 4, c.sequence()) - *m.csa_window_size);
  const double q_idx = T * ni * di * E, k_idx = keys * di * E, w = T * ni * 4;
  const double selected = T * k * 4;  // int32 indices, and the fp32 KL target as large
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, 2 * T * per_sequence * ni * di, q_idx + k_idx + w + selected));
  const double q = T * n * v * E, kv = keys * v * E;
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, 2 * T * n * v * k + 2 * T * ni * di * k, q + kv + 2 * selected));
  c.emit(l,
         unkeyed_gemm_op(pass_kind::backward_input, 2 * 2 * T * ni * di * k, 2 * (q_idx + k_idx) + w + 2 * selected));
  l.input = q_idx + k_idx + w;
  l.cache = q_idx + k_idx + w + 2 * selected;
  l.fwd_peak = 2 * selected;
  l.bwd_peak = q_idx + k_idx;
  return l;
}

/// The sparse attention of a ratio-`ratio` layer (csa.py: one query width v_head_dim per head, the
/// single key = value of width v_head_dim, the attention sink): every query against
/// `dsv4_attended_keys` keys, priced on the attention path with that key count (forward QKᵀ and PV,
/// backward 2.5 x). Kept: q, the raw and compressed kv, the fp32 log-sum-exp; its output is kept by
/// linear_o_group_proj, which reads it.
constexpr leaf dsv4_core_attention_leaf(const build_context& c, std::int64_t ratio) {
  using detail::dsv4_d;
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const double E = c.element_bytes(), T = c.tokens(), b = dsv4_d(c.s().micro_batch_size);
  const double n = dsv4_d(m.head_num), v = dsv4_d(*m.v_head_dim);
  const double q = T * n * v * E, o = q, lse = T * n * 4;
  const double raw_kv = T * v * E, compressed_kv = b * dsv4_d(dsv4_compressed_keys(ratio, c.sequence())) * v * E;
  const attention_shape shape{.batch = c.s().micro_batch_size,
                              .q_len = c.sequence(),
                              .kv_len = dsv4_attended_keys(m, ratio, c.sequence()),
                              .head_num = m.head_num,
                              .kv_head_num = 1,
                              .qk_head_dim = *m.v_head_dim,
                              .v_head_dim = *m.v_head_dim,
                              .qkv_contiguous = false};
  c.emit(l, attention_op(pass_kind::forward, shape, q + raw_kv + compressed_kv + o + lse));
  c.emit(l, attention_op(pass_kind::backward_input, shape, 2 * q + 2 * (raw_kv + compressed_kv) + o + lse));
  l.params = n;  // one attention sink per head
  l.input = q + raw_kv;
  l.cache = q + raw_kv + compressed_kv + lse;
  l.fwd_peak = o + lse;
  l.bwd_peak = 2 * q + 2 * (raw_kv + compressed_kv);
  return l;
}

/// The grouped output projection (deepseek_v4_hybrid_attention.py: a plain bf16 parameter applied
/// by torch.einsum, o_groups batched GEMMs of (heads v / o_groups) -> o_lora_rank): forward,
/// input gradient and weight gradient of 2 T n v o_lora FLOPs each, unkeyed (no table holds them);
/// the bf16 weight gradient is added into the main gradient by Megatron's grad hook. It keeps its
/// input, the attention output.
constexpr leaf o_group_proj_leaf(const build_context& c) {
  using detail::dsv4_d;
  leaf l;
  l.id = leaf_id::linear_o_group_proj;
  l.kind = leaf_kind::linear_column;
  const auto& m = c.m();
  const double E = c.element_bytes(), T = c.tokens();
  const double in = dsv4_d(m.head_num * *m.v_head_dim), out = dsv4_d(*m.o_groups * *m.o_lora_rank);
  const double w = in * dsv4_d(*m.o_lora_rank), x = T * in, y = T * out;
  const double flops = 2 * T * w;
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, flops, (x + y + w) * E));
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, flops, (x + y + w) * E));
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_weight, flops, (x + y + w) * E));
  c.memory(l, pass_kind::backward_weight, w * E + 2 * w * c.main_grad_bytes());
  l.params = w;
  l.input = x * E;
  l.cache = x * E;
  l.fwd_peak = (x + y) * E;
  l.bwd_peak = (x + y + w) * E;
  return l;
}

/// The copies between the projections and the attention (deepseek_v4_hybrid_attention.py
/// qkv_up_proj_and_rope_apply): the weightless RMS norm of q over each head (torch.compile: read,
/// write; backward reads q and its gradient), then the fused in-place RoPE of q's and kv's
/// positional parts (fused_mla_rope_inplace), forward and backward.
constexpr leaf dsv4_glue_leaf(const build_context& c) {
  using detail::dsv4_d;
  leaf l;
  l.id = leaf_id::mla_rope_and_concat;
  l.kind = leaf_kind::activation;
  const auto& m = c.m();
  const double E = c.element_bytes(), T = c.tokens();
  const double q = T * dsv4_d(m.head_num * *m.v_head_dim) * E;
  const double rope = T * dsv4_d((m.head_num + 1) * *m.qk_pos_emb_head_dim) * E;
  c.memory(l, pass_kind::forward, 2 * q);
  c.memory(l, pass_kind::forward, 2 * rope);
  c.memory(l, pass_kind::backward_input, 2 * rope);
  c.memory(l, pass_kind::backward_input, 3 * q);
  l.input = q;
  l.cache = q;  // the norm's input
  l.fwd_peak = q;
  l.bwd_peak = 2 * q;
  return l;
}

/// The mHC step before a sublayer (hyper_connection.py, fused kernels): the fp32 mapping
/// projection of the k h streams to k^2 + 2k mixes with the streams' RMS (2 T k h (k^2 + 2k) FLOPs
/// each pass, unkeyed), the Sinkhorn projection of the k x k residual mix (negligible), and the
/// aggregation of the k streams into the sublayer's input (read k h, write h). Backward: the
/// aggregation's gradient (read the output gradient and the streams, write the streams' gradient),
/// the projection's input and weight gradients. It keeps the streams (the post step's residual too).
constexpr leaf hc_pre_leaf(const build_context& c, leaf_id id) {
  using detail::dsv4_d;
  leaf l;
  l.id = id;
  l.kind = leaf_kind::activation;
  const double k = dsv4_d(*c.m().num_residual_streams), h = dsv4_d(c.m().hidden_size);
  const double E = c.element_bytes(), T = c.tokens();
  const double streams = T * k * h * E, out = T * h * E, mixes = T * (k * k + 2 * k) * 4;
  const double flops = 2 * T * k * h * (k * k + 2 * k);
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, flops, streams + mixes));
  c.memory(l, pass_kind::forward, streams + out + mixes);
  c.memory(l, pass_kind::backward_input, out + streams + streams);
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, flops, 3 * streams + mixes));
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_weight, flops, streams + mixes));
  l.params = k * h * (k * k + 2 * k) + (k * k + 2 * k) + 3;
  l.input = streams;
  l.cache = streams + mixes;
  l.fwd_peak = out + mixes;
  l.bwd_peak = 2 * streams;
  return l;
}

/// The mHC step after a sublayer (h_post_bda): new streams = H_resᵀ streams + H_post x, reading the
/// k h streams and the h output, writing k h; backward reads the streams' gradient, the streams
/// and x, writes the gradients of both. It keeps the sublayer's output x.
constexpr leaf hc_post_leaf(const build_context& c, leaf_id id) {
  using detail::dsv4_d;
  leaf l;
  l.id = id;
  l.kind = leaf_kind::activation;
  const double k = dsv4_d(*c.m().num_residual_streams), h = dsv4_d(c.m().hidden_size);
  const double E = c.element_bytes(), T = c.tokens();
  const double streams = T * k * h * E, x = T * h * E;
  c.memory(l, pass_kind::forward, 2 * streams + x);
  c.memory(l, pass_kind::backward_input, 3 * streams + 2 * x);
  l.input = streams + x;
  l.cache = x;
  l.fwd_peak = streams;
  l.bwd_peak = streams + x;
  return l;
}

/// The embedding copied to the k residual streams at the stack's entry (read h, write k h;
/// backward sums the streams' gradients).
constexpr leaf hc_expand_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::hc_expand;
  l.kind = leaf_kind::activation;
  const double k = detail::dsv4_d(*c.m().num_residual_streams), h = detail::dsv4_d(c.m().hidden_size);
  const double x = c.tokens() * h * c.element_bytes();
  c.memory(l, pass_kind::forward, x + k * x);
  c.memory(l, pass_kind::backward_input, k * x + x);
  l.fwd_peak = k * x;
  l.bwd_peak = k * x;
  return l;
}

/// The learned contraction of the streams before a final norm (hyper_connection.py
/// learned_output_contract, fp32: the k h -> k mixing GEMM, sigmoid gates, weighted sum): reads the
/// streams, writes h; backward reads them again with the gradient and writes the streams' gradient.
constexpr leaf hc_head_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::hc_head;
  l.kind = leaf_kind::activation;
  const double k = detail::dsv4_d(*c.m().num_residual_streams), h = detail::dsv4_d(c.m().hidden_size);
  const double E = c.element_bytes(), T = c.tokens();
  const double streams = T * k * h * E, out = T * h * E;
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, 2 * T * k * h * k, streams));
  c.memory(l, pass_kind::forward, streams + out);
  c.memory(l, pass_kind::backward_input, 2 * streams + out);
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, 2 * T * k * h * k, 2 * streams));
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_weight, 2 * T * k * h * k, streams));
  l.params = k * k * h + k + 1;
  l.input = streams;
  l.cache = streams;
  l.fwd_peak = out;
  l.bwd_peak = 2 * streams;
  return l;
}

/// The attention half of a DeepSeek-V4 layer of compression ratio `ratio`. Leaf order: what
/// runs outside the mla_up_proj checkpoint first (q down and its norm, the compressors and the
/// indexer, which read the normed hidden state and q's latent), then the checkpointed q up, kv
/// projection, kv norm, q norm and RoPE, and the attention, so that a recompute segment is contiguous.
constexpr void push_dsv4_attention(leaf_block& b, const build_context& c, std::int64_t ratio) {
  const auto& m = c.m();
  const std::int64_t h = m.hidden_size, v = *m.v_head_dim, q_lora = *m.q_lora_rank;
  const bool hc = m.num_residual_streams.has_value();
  if (hc) b.push(hc_pre_leaf(c, leaf_id::hc_attn_pre));
  b.push(norm_leaf(c, leaf_id::input_layernorm));
  b.push(linear_leaf(c, leaf_id::linear_q_down_proj, true, h, q_lora));
  b.push(norm_leaf(c, leaf_id::q_layernorm, q_lora, norm_kind::rmsnorm));
  if (ratio > 0) { b.push(detail::compressor_leaf(c, leaf_id::compressor, ratio, v, true, false)); }
  if (ratio == 4) {
    const std::int64_t ni = *m.dsa_indexer_n_heads, di = *m.dsa_indexer_head_dim;
    leaf wq = detail::dsv4_linear_leaf(c, leaf_id::indexer_linear_wq_b, q_lora, ni * di, true, false);
    b.push(wq);
    leaf weights = detail::dsv4_linear_leaf(c, leaf_id::indexer_weights_proj, h, ni, false, false);
    weights.cache = 0;  // the normed hidden state again
    b.push(weights);
    b.push(detail::compressor_leaf(c, leaf_id::indexer_compressor, ratio, di, false, true));
    b.push(indexer_topk_leaf(c));
  }
  b.push(linear_leaf(c, leaf_id::linear_q_up_proj, true, q_lora, m.head_num * v));
  leaf kv = linear_leaf(c, leaf_id::linear_kv_proj, true, h, v);
  kv.cache = 0;  // reads the same normed input linear_q_down_proj keeps
  b.push(kv);
  b.push(norm_leaf(c, leaf_id::kv_layernorm, v, norm_kind::rmsnorm));
  b.push(dsv4_glue_leaf(c));
  b.push(dsv4_core_attention_leaf(c, ratio));
  b.push(o_group_proj_leaf(c));
  // linear_proj: TE keeps its bf16 input under FP8/FP4 recipes other than delayed scaling
  // (deepseek_v4_hybrid_attention.py set_save_original_input).
  auto g = detail::linear_geometry_of(c, false, true, c.quantized, *m.o_groups * *m.o_lora_rank, h, c.sequence(),
                                      c.tokens());
  g.original_input = c.quantized && c.s().fp8_recipe != fp8_recipe_kind::delayed;
  b.push(detail::linear_gemms(c, leaf_id::linear_proj, g));
  if (hc)
    b.push(hc_post_leaf(c, leaf_id::hc_attn_post));
  else
    b.push(residual_leaf(c, leaf_id::attention_residual_add));
}

/// Megatron's mla_up_proj recompute in a DeepSeek-V4 layer (deepseek_v4_hybrid_attention.py
/// `qkv_up_checkpoint`): q up, the kv projection and norm, q's norm and RoPE replay in backward;
/// the attention keeps only what is not q or the raw kv (the checkpoint discards them after it).
constexpr void plan_dsv4_recompute(leaf_block& b, const strategy_spec& s) {
  using enum leaf_id;
  if (s.recompute_granularity == recompute_kind::selective_recompute && s.megatron_recompute) {
    detail::plan_megatron_modules(b, s, false, detail::find_leaf(b, router) != nullptr);
    if (s.megatron_recompute_modules.contains(recompute_module::mla_up_proj)) {
      detail::mark(b, {linear_q_up_proj, linear_kv_proj, kv_layernorm, mla_rope_and_concat, core_attention});
      leaf* core = detail::find_leaf(b, core_attention);
      core->replay_free = true;
      core->cache -= core->input;
    }
  }
  b.leaves[0].segment_start = true;
  b.assign_roles();
}

/// One DeepSeek-V4 decoder layer of compression ratio `ratio`: the hybrid attention, then the MoE
/// MLP (or a dense one), each between its mHC steps when model.num_residual_streams is set.
constexpr leaf_block dsv4_layer_leaves(const build_context& job, std::int64_t ratio, bool moe_mlp, bool recomputed) {
  build_context c = job;
  c.recomputed_layer = recomputed;
  leaf_block b;
  push_dsv4_attention(b, c, ratio);
  const bool hc = c.m().num_residual_streams.has_value();
  if (hc) b.push(hc_pre_leaf(c, leaf_id::hc_mlp_pre));
  if (moe_mlp)
    push_moe_mlp(b, c);
  else
    push_dense_mlp(b, c);
  if (hc) {
    --b.count;  // mHC's post step replaces the plain residual add
    b.push(hc_post_leaf(c, leaf_id::hc_mlp_post));
  }
  if (recomputed)
    plan_dsv4_recompute(b, c.s());
  else
    b.assign_roles();
  return b;
}

/// The per-layer ratios a DeepSeek-V4 model uses, in the order blocks are built (0, 4, 128).
inline constexpr std::array<std::int64_t, 3> dsv4_ratios{0, 4, 128};

/// Decoder layers (the first `layers` entries of model.csa_compress_ratios) of ratio `ratio`.
constexpr std::int64_t dsv4_layer_count(const model_spec& m, std::int64_t ratio) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < m.layer_num; ++i)
    if (m.csa_compress_ratios[static_cast<std::size_t>(i)] == ratio) ++n;
  return n;
}

LLMSIM_END_NAMESPACE
