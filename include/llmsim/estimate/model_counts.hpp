/// \file llmsim/estimate/model_counts.hpp
/// Model-level counts that need no strategy or system: parameters (all, and those one token
/// passes through) and training FLOPs per token.
///
/// ```cpp
/// static_assert(llmsim::parameter_count(llmsim::catalogue::llama3_8b, 128256) == 8030261248.0);
/// ```
#pragma once

#include <llmsim/spec/model.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE

namespace detail {
/// GEMM parameters of one layer's attention (QKV + output projection, or MLA's five projections).
constexpr double attention_linear_params(const model_spec& m) {
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  if (m.attention_type == attention_kind::mla) {
    const double qd = static_cast<double>(*m.qk_head_dim + *m.qk_pos_emb_head_dim),
                 vd = static_cast<double>(*m.v_head_dim);
    const double kl = static_cast<double>(*m.kv_lora_rank), pe = static_cast<double>(*m.qk_pos_emb_head_dim),
                 qk = static_cast<double>(*m.qk_head_dim);
    const double q = m.q_lora_rank
                         ? h * static_cast<double>(*m.q_lora_rank) + static_cast<double>(*m.q_lora_rank) * H * qd
                         : h * H * qd;
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
/// Dense MLP parameters of one layer.
constexpr double dense_mlp_params(const model_spec& m) { return mlp_weight_params(m, m.intermediate_size.value_or(0)); }
/// MoE MLP parameters of one layer with `experts` routed experts counted: router, shared and routed experts.
/// LatentMoE adds fc1_latent_proj (h x latent) and fc2_latent_proj (latent x h) and its routed
/// experts read and write the latent width (moe_layer.py, experts.py).
constexpr double moe_mlp_params(const model_spec& m, double experts) {
  // The router's weight, and its bias with add_linear_bias (Megatron TopKRouter, router.py).
  const double router =
      static_cast<double>(m.hidden_size + (m.add_linear_bias ? 1 : 0)) * static_cast<double>(m.expert_num);
  const double shared = router + mlp_weight_params(m, m.moe_shared_expert_intermediate_size.value_or(0));
  const double w = static_cast<double>(routed_width(m)), f = static_cast<double>(expert_ffn_size(m));
  const double fc1 = static_cast<double>(mlp_fc1_width(m, expert_ffn_size(m)));
  // add_linear_bias: each expert's fc1 and fc2 carry a bias per output feature (Megatron
  // TEGroupedMLP builds both GroupedLinears with bias=config.add_bias_linear).
  const double biases = m.add_linear_bias ? fc1 + w : 0.0;
  if (!m.moe_latent_size) return shared + experts * (mlp_weight_params(m, expert_ffn_size(m)) + biases);
  const double expert = w * (fc1 + f) + biases;
  return shared + 2 * static_cast<double>(m.hidden_size) * w + experts * expert;
}
/// Biases of one layer's non-expert linears with `add_linear_bias` (one per output feature, as the
/// stage programs hold them): QKV and output projection (or MLA's five projections), the dense MLP
/// or the shared experts' fc1 and fc2 (the routed experts' are `moe_mlp_params`'). With
/// `add_qkv_bias` alone, the QKV projection's.
constexpr double linear_bias_params(const model_spec& m, bool moe_layer) {
  const double qkv = static_cast<double>((m.head_num + 2 * m.kv_head_num) * head_dim(m));
  if (!m.add_linear_bias) return m.add_qkv_bias ? qkv : 0.0;  // add_qkv_bias: QKV's outputs only
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  double attention = 0;
  if (m.attention_type == attention_kind::mla) {
    const double qd = static_cast<double>(*m.qk_head_dim + *m.qk_pos_emb_head_dim);
    const double q = m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) + H * qd : H * qd;
    attention = q + static_cast<double>(*m.kv_lora_rank + *m.qk_pos_emb_head_dim) +
                H * static_cast<double>(*m.qk_head_dim + *m.v_head_dim) + h;
  } else {
    attention = qkv + h;
  }
  const std::int64_t ffn =
      moe_layer ? m.moe_shared_expert_intermediate_size.value_or(0) : m.intermediate_size.value_or(0);
  const double mlp = ffn > 0 ? static_cast<double>(mlp_fc1_width(m, ffn)) + h : 0.0;
  return attention + mlp;
}
constexpr std::int64_t dense_layer_count(const model_spec& m) {
  return is_moe(m) ? (m.dense_layers < m.layer_num ? m.dense_layers : m.layer_num) : m.layer_num;
}
}  // namespace detail

/// Learned absolute position table: max_position_embeddings x hidden (Megatron LanguageModelEmbedding
/// `position_embeddings`); rotary and no positions have none.
constexpr double position_table_params(const model_spec& m) {
  if (m.position_embedding_type != position_kind::learned_absolute) return 0;
  return static_cast<double>(m.max_position_embeddings.value_or(0)) * static_cast<double>(m.hidden_size);
}

namespace detail {
/// GEMM parameters of one Mamba-2 mixer: in_proj h x (2·d_inner + 2·G·N + H) and out_proj d_inner x h
/// (megatron/core/ssm/mamba_mixer.py), the widths of `mamba_local_sizes` at tp 1.
constexpr double mamba_linear_params(const model_spec& m) {
  const mamba_local_sizes l = mamba_local(m, 1);
  const double h = static_cast<double>(m.hidden_size);
  return h * static_cast<double>(l.in_proj_width()) + static_cast<double>(l.inner) * h;
}
/// The other parameters of one Mamba-2 mixer: conv1d, dt_bias, A_log and D (`mamba_conv_scan_params`)
/// and the gated norm's d_inner weights (mamba_mixer.py).
constexpr double mamba_other_params(const model_spec& m) {
  return mamba_conv_scan_params(mamba_local(m, 1)) + static_cast<double>(mamba_inner(m));
}
/// Decoder-layer parameters of a hybrid model with `routed` experts counted per MoE layer: each
/// symbol of the pattern one layer with its own norm (hybrid_layer_allocation.py): 'M' a Mamba-2
/// mixer, '*' attention, '-' a dense MLP, 'E' an MoE.
constexpr double hybrid_layer_params(const model_spec& m, double routed) {
  const double norm = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0) * static_cast<double>(m.hidden_size);
  const auto n = [&](char symbol) { return static_cast<double>(hybrid_layer_count(m, symbol)); };
  return static_cast<double>(m.layer_num) * norm + n('M') * (mamba_linear_params(m) + mamba_other_params(m)) +
         n('*') * attention_linear_params(m) + n('-') * dense_mlp_params(m) +
         (n('E') > 0 ? n('E') * moe_mlp_params(m, routed) : 0.0);
}
/// One MTP layer of a hybrid model (multi_token_prediction.py MultiTokenPredictionLayer with a
/// HybridStack inside): enorm, hnorm, eh_proj (2h x h), one layer per symbol of
/// mtp_hybrid_override_pattern (each with its norm), the depth's final norm. Embedding and output
/// layer are the model's.
constexpr double hybrid_mtp_layer_params(const model_spec& m, double routed) {
  const double norm = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0) * static_cast<double>(m.hidden_size);
  const double h = static_cast<double>(m.hidden_size);
  const auto n = [&](char symbol) { return static_cast<double>(mtp_hybrid_layer_count(m, symbol)); };
  const double layers = static_cast<double>(m.mtp_hybrid_override_pattern.view().size()) * norm +
                        n('M') * (mamba_linear_params(m) + mamba_other_params(m)) +
                        n('*') * attention_linear_params(m) + n('-') * dense_mlp_params(m) +
                        (n('E') > 0 ? n('E') * moe_mlp_params(m, routed) : 0.0);
  return 3 * norm + 2 * h * h + layers;
}
/// MTP layers holding parameters: one with mtp_use_repeated_layer, else one per depth.
constexpr std::int64_t mtp_parameter_layers(const model_spec& m) {
  return m.mtp_use_repeated_layer && m.mtp_num_layers > 0 ? 1 : m.mtp_num_layers;
}

/// One DeepSeek-V4 attention (experimental_attention_variant "dsv4_hybrid") of compression ratio
/// `ratio`, weights and norms, as DeepSeek-V4's reference model (deepseek-ai/DeepSeek-V4-Flash
/// inference/model.py; Megatron-Bridge maps the same tensors in models/deepseek/deepseek_v4_bridge.py):
/// wq_a (h x q_lora), q_norm, wq_b (q_lora x heads (qk + rope)); one wkv (h x v, the single
/// shared key/value) and kv_norm; the grouped output projection wo_a (heads v x o_lora in total
/// over its o_groups) and wo_b (o_groups o_lora x h); one attention sink per head. A compressed
/// layer adds a Compressor: wkv and wgate (h x c v each, c = 2 for the overlapping ratio-4 windows,
/// else 1), ape (ratio x c v), norm (v); a ratio-4 layer the lightning Indexer: wq_b
/// (q_lora x n_idx d_idx), weights_proj (h x n_idx) and its own Compressor at width d_idx.
constexpr double dsv4_attention_params(const model_spec& m, std::int64_t ratio) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  const double h = d(m.hidden_size), n = d(m.head_num), q_lora = d(*m.q_lora_rank), v = d(*m.v_head_dim);
  const double qd = d(*m.qk_head_dim + *m.qk_pos_emb_head_dim);
  const double o = n * v * d(*m.o_lora_rank) + d(*m.o_groups * *m.o_lora_rank) * h;
  double p = h * q_lora + q_lora + q_lora * n * qd + h * v + v + o + n;
  const auto compressor = [&](double width) {
    const double c = ratio == 4 ? 2.0 : 1.0;
    return 2 * h * c * width + d(ratio) * c * width + width;
  };
  if (ratio > 0) p += compressor(v);
  if (ratio == 4) {
    const double n_idx = d(*m.dsa_indexer_n_heads), d_idx = d(*m.dsa_indexer_head_dim);
    p += q_lora * n_idx * d_idx + h * n_idx + compressor(d_idx);
  }
  return p;
}
/// Manifold-constrained hyper-connections of one sublayer with k = num_residual_streams streams
/// (reference model.py `hc_attn_*` / `hc_ffn_*`): fn ((2 + k) k x k h), base ((2 + k) k), scale (3).
constexpr double hyper_connection_params(const model_spec& m) {
  if (!m.num_residual_streams) return 0;
  const double k = static_cast<double>(*m.num_residual_streams), h = static_cast<double>(m.hidden_size);
  return (2 + k) * k * k * h + (2 + k) * k + 3;
}
/// The learned contraction of the k streams before a final norm (`hc_head_*`): fn (k x k h), base (k), scale (1).
constexpr double hyper_connection_head_params(const model_spec& m) {
  if (!m.num_residual_streams) return 0;
  const double k = static_cast<double>(*m.num_residual_streams), h = static_cast<double>(m.hidden_size);
  return k * k * h + k + 1;
}
/// DeepSeek-V4's parameters with `routed` experts per MoE layer: each layer's attention by its
/// compression ratio, two RMSNorms and two hyper-connections; each MTP depth its enorm, hnorm,
/// e_proj and h_proj (h x h each), a layer of its own ratio, a final norm and a stream contraction.
constexpr double dsv4_parameters(const model_spec& m, std::int64_t vocab, double routed) {
  const double h = static_cast<double>(m.hidden_size);
  const std::int64_t dense = dense_layer_count(m);
  const auto layer = [&](std::int64_t i) {
    const double mlp = i < dense ? dense_mlp_params(m) : moe_mlp_params(m, routed);
    return dsv4_attention_params(m, m.csa_compress_ratios[static_cast<std::size_t>(i)]) + 2 * h + mlp +
           2 * hyper_connection_params(m);
  };
  double total =
      static_cast<double>(vocab) * h * (m.tie_word_embeddings ? 1.0 : 2.0) + h + hyper_connection_head_params(m);
  for (std::int64_t i = 0; i < m.layer_num; ++i) total += layer(i);
  for (std::int64_t k = 0; k < m.mtp_num_layers; ++k)
    total += 3 * h + 2 * h * h + layer(m.layer_num + k) + hyper_connection_head_params(m);
  return total;
}

/// Parameters with `routed` experts counted per MoE layer (all of them, or the top-k a token visits).
constexpr double parameters_with_experts(const model_spec& m, std::int64_t vocab, double routed) {
  if (m.experimental_attention_variant) return dsv4_parameters(m, vocab, routed);
  const double h = static_cast<double>(m.hidden_size);
  const double attn = attention_linear_params(m) + layer_norm_params(m);
  const auto dense = static_cast<double>(dense_layer_count(m));
  const double moe = static_cast<double>(m.layer_num) - dense;
  const double embeddings =
      static_cast<double>(vocab) * h * (m.tie_word_embeddings ? 1.0 : 2.0) + position_table_params(m);
  const double final_norm = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0) * h;
  if (is_hybrid(m))
    return hybrid_layer_params(m, routed) + embeddings + final_norm +
           static_cast<double>(mtp_parameter_layers(m)) * hybrid_mtp_layer_params(m, routed);
  const double body = dense * (attn + dense_mlp_params(m) + linear_bias_params(m, false)) +
                      moe * (attn + moe_mlp_params(m, routed) + linear_bias_params(m, true)) + embeddings + final_norm;
  if (m.mtp_num_layers == 0) return body;
  // MTP depths (multi_token_prediction.py): enorm, hnorm, eh_proj (2h x h), one decoder layer of the
  // last layer's kind, its own final norm; embedding and output layer are the model's.
  const double norm = (m.norm_type == norm_kind::layernorm ? 2.0 : 1.0) * h;
  const double layer = attn + (moe > 0 ? moe_mlp_params(m, routed) + linear_bias_params(m, true)
                                       : dense_mlp_params(m) + linear_bias_params(m, false));
  return body + static_cast<double>(m.mtp_num_layers) * (3 * norm + 2 * h * h + layer);
}
}  // namespace detail

/// Parameters of the whole model (embedding and LM head counted separately unless tied; linear
/// biases and a learned position table included).
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
/// DeepSeek-V4 (experimental_attention_variant) by `dsv4_flops_per_token`; megatron_bridge::
/// model_flops_per_token counts it as Megatron-Bridge does.
constexpr double dsv4_flops_per_token(const model_spec& m, std::int64_t vocab, std::int64_t seq_len);
constexpr double flops_per_token(const model_spec& m, std::int64_t vocab, std::int64_t seq_len) {
  if (m.experimental_attention_variant) return dsv4_flops_per_token(m, vocab, seq_len);
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  const auto dense = static_cast<double>(detail::dense_layer_count(m));
  const double moe = static_cast<double>(m.layer_num) - dense;
  const double attn = detail::attention_linear_params(m);
  const double gemm = dense * (attn + detail::dense_mlp_params(m)) +
                      moe * (attn + detail::moe_mlp_params(m, static_cast<double>(m.topk.value_or(1))));
  const double qk = m.attention_type == attention_kind::mla
                        ? static_cast<double>(*m.qk_head_dim + *m.qk_pos_emb_head_dim)
                        : static_cast<double>(head_dim(m));
  const double v =
      m.attention_type == attention_kind::mla ? static_cast<double>(*m.v_head_dim) : static_cast<double>(head_dim(m));
  const double L = static_cast<double>(m.layer_num);
  if (is_hybrid(m)) {
    // Hybrid: 6 per GEMM parameter of each layer, attention scores in the '*' layers only, and the
    // Mamba layers' SSD scan (forward FLOPs of program/mamba.hpp's count at tp 1, times 3).
    const double mamba_gemm = detail::mamba_linear_params(m), topk = static_cast<double>(m.topk.value_or(1));
    const auto n = [&](char symbol) { return static_cast<double>(hybrid_layer_count(m, symbol)); };
    const double layer_gemm = n('M') * mamba_gemm + n('*') * attn + n('-') * detail::dense_mlp_params(m) +
                              (n('E') > 0 ? n('E') * detail::moe_mlp_params(m, topk) : 0.0);
    const double scan =
        mamba_scan_flops_per_token(m.mamba_num_heads, m.mamba_num_groups, m.mamba_state_dim, m.mamba_head_dim);
    const double flops = 6.0 * layer_gemm + 6.0 * n('*') * static_cast<double>(seq_len) * H * (qk + v) +
                         3.0 * n('M') * scan + 6.0 * h * static_cast<double>(vocab);
    if (m.mtp_num_layers == 0) return flops;
    // Each MTP depth runs its eh_proj, the layers of mtp_hybrid_override_pattern and one more
    // logits GEMM (a repeated layer is computed at every depth all the same).
    const auto t = [&](char symbol) { return static_cast<double>(mtp_hybrid_layer_count(m, symbol)); };
    const double depth_gemm = 2 * h * h + t('M') * mamba_gemm + t('*') * attn + t('-') * detail::dense_mlp_params(m) +
                              (t('E') > 0 ? t('E') * detail::moe_mlp_params(m, topk) : 0.0);
    const double k = static_cast<double>(m.mtp_num_layers);
    return flops + k * (6.0 * depth_gemm + 6.0 * t('*') * static_cast<double>(seq_len) * H * (qk + v) +
                        3.0 * t('M') * scan + 6.0 * h * static_cast<double>(vocab));
  }
  // A sliding window computes that share of the score pairs (window_kept_share, layer average).
  const double scored = L * static_cast<double>(seq_len) * window_kept_share(m, seq_len, seq_len);
  const double flops = 6.0 * gemm + 6.0 * scored * H * (qk + v) + 6.0 * h * static_cast<double>(vocab);
  if (m.mtp_num_layers == 0) return flops;
  // Megatron training.py (num_floating_point_operations) counts each MTP depth as one more decoder
  // layer of the last layer's kind, its eh_proj (2h x h) and one more logits GEMM; it also counts
  // 3h for the depth's norms, which this GEMM-only count leaves out.
  const double k = static_cast<double>(m.mtp_num_layers);
  const double layer = attn + (moe > 0 ? detail::moe_mlp_params(m, static_cast<double>(m.topk.value_or(1)))
                                       : detail::dense_mlp_params(m));
  return flops + 6.0 * k * (layer + 2 * h * h) + 6.0 * k * static_cast<double>(seq_len) * H * (qk + v) +
         6.0 * k * h * static_cast<double>(vocab);
}

/// DeepSeek-V4's model FLOPs per token in training (3x forward): 6 per weight of each decoder and
/// MTP layer (its attention by compression ratio, norms included, and its MLP with the top-k
/// experts), the sparse attention's QKᵀ and PV over the keys each query's kernel runs
/// (`dsv4_attended_keys`: 2 x 2 v H per key forward), a ratio-4 layer's dense indexer scoring over
/// the s/4 compressed keys, each MTP depth's 2h x h projection, and the LM head per depth; the
/// indexer's KL loss and the hyper-connections are left out, as in flop_utils.py.
constexpr double dsv4_flops_per_token(const model_spec& m, std::int64_t vocab, std::int64_t seq_len) {
  const double h = static_cast<double>(m.hidden_size), H = static_cast<double>(m.head_num);
  const double v = static_cast<double>(m.v_head_dim.value_or(0));
  const double topk = static_cast<double>(m.topk.value_or(1));
  double flops = 0;
  for (std::int64_t i = 0; i < m.layer_num + m.mtp_num_layers; ++i) {
    const std::int64_t ratio = m.csa_compress_ratios[static_cast<std::size_t>(i)];
    const bool dense = !is_moe(m) || i < m.dense_layers;
    const double mlp = dense ? detail::dense_mlp_params(m) : detail::moe_mlp_params(m, topk);
    flops += 6.0 * (detail::dsv4_attention_params(m, ratio) + mlp);
    flops += 6.0 * 2.0 * H * v * static_cast<double>(dsv4_attended_keys(m, ratio, seq_len));
    if (ratio == 4)
      flops += 6.0 * static_cast<double>(m.dsa_indexer_n_heads.value_or(0) * m.dsa_indexer_head_dim.value_or(0)) *
               static_cast<double>(dsv4_compressed_keys(4, seq_len));
  }
  const double depths = static_cast<double>(m.mtp_num_layers);
  return flops + 6.0 * depths * 2 * h * h + 6.0 * (depths + 1) * h * static_cast<double>(vocab);
}

LLMSIM_END_NAMESPACE
