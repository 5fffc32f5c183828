/// \file llmsim/validation/megatron_bridge_flops.hpp
/// Megatron-Bridge's *model* FLOP count per token, the convention of the "Model TFLOP/sec/GPU"
/// column of its performance tables (NVIDIA-NeMo/Megatron-Bridge
/// src/megatron/bridge/training/utils/flop_utils.py, `num_floating_point_operations` /
/// `transformer_flops`), for dense GQA, MoE (leading dense layers, shared experts), MLA and
/// multi-token-prediction models, in the two revisions the published tables used, hybrid
/// Mamba / attention / MLP / MoE models (`hybrid_flops`) and DeepSeek-V4's hybrid attention
/// (`dsv4_hybrid`). Gated-delta-net is not implemented.
///
/// ```cpp
/// constexpr llmsim::megatron_bridge::flop_inputs in{.model = llmsim::catalogue::llama3_70b, .seq_len = 8192};
/// static_assert(llmsim::megatron_bridge::model_flops_per_token(in, llmsim::megatron_bridge::flop_formula::current) > 449e9);
/// ```
#pragma once

#include <llmsim/spec/model.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE
namespace megatron_bridge {

/// The revision of flop_utils.py's transformer formula.
enum class flop_formula : std::uint8_t {
  /// Up to commit 71768cde2 (2026-03-02; NeMo 26.02 and 26.02.01): a gated MLP counts three GEMMs
  /// only when its activation is SiLU (`gated_linear_unit and activation_func == F.silu`), any
  /// other gated MLP two; sliding windows are ignored (every layer full causal attention).
  silu_gated_only,
  /// From commit baa0259bd (2026-05-28, "fix flops computation"; NeMo 26.06 on): every gated MLP
  /// counts three GEMMs; sliding-window layers count their exact average causal context.
  current,
};

/// What the formula reads of a model and a run.
struct flop_inputs {
  model_spec model = {};
  std::int64_t seq_len = 0;
  std::int64_t tp_size = 1;           ///< the vocabulary is padded per tensor-parallel rank, as Megatron does
  std::int64_t mtp_num_layers = 0;    ///< Megatron --mtp-num-layers
  bool silu_gated = true;             ///< the gated MLP's activation is SiLU (false: gpt-oss's clamped GLU)
  std::int64_t window = 0;            ///< sliding-window size W in tokens (Megatron window_size[0] + [1] + 1); 0: none
  std::int64_t window_skip_freq = 0;  ///< every k-th layer keeps full attention (window_attn_skip_freq); 0: none does
};

namespace detail {
constexpr double d(std::int64_t v) { return static_cast<double>(v); }

/// Layers (decoder + MTP) that attend through the sliding window: layer i (0-based) is full when
/// (i + 1) % k == 0 (flop_utils.py's swa_pattern for an int window_attn_skip_freq).
constexpr std::int64_t window_layers(std::int64_t layers, std::int64_t skip_freq) {
  if (skip_freq <= 0) return layers;
  return layers - layers / skip_freq;
}

/// Average keys a query sees through a causal window of W over a sequence of s:
/// (W(W+1)/2 + (s - W)W) / s = W - W(W-1)/(2s) for W < s, else the full causal (s + 1)/2 — the
/// formula of flop_utils.py's `swa_context` uses s/2 for the latter, as its full-attention term.
constexpr double window_context(std::int64_t w, std::int64_t s) {
  if (w < s) return d(w) - d(w) * d(w - 1) / (2 * d(s));
  return d(s) / 2;
}

/// Per token and layer, forward, as multiply-accumulates x 1 (the caller multiplies by 3 * 2).
constexpr double mla_layer_terms(const model_spec& m, std::int64_t s) {
  const double h = d(m.hidden_size), n = d(m.head_num);
  const double qk = d(m.qk_head_dim.value_or(64)), rope = d(m.qk_pos_emb_head_dim.value_or(0));
  const double v = d(m.v_head_dim.value_or(64)), kv_lora = d(m.kv_lora_rank.value_or(0));
  const double q_term = m.q_lora_rank ? d(*m.q_lora_rank) * (h + n * (qk + rope) + 1) : h * n * (qk + rope);
  return q_term + kv_lora * (h + n * (qk + v) + 1) + h * rope + n * v * h + d(s) * n * (qk + rope) / 2 +
         d(s) * n * v / 2;
}

/// flop_utils.py `hybrid_flops` per token (its total over batch x seq_len): per layer kind of the
/// pattern, forward, times 3. Its Mamba term takes d_in = 2·hidden (Mamba's default expand=2),
/// not mamba_num_heads·mamba_head_dim, and 7·d_in·N for the scan; its attention term counts the
/// projections as 4·h·p·(h + h·g/n) with p = kv_channels·n/h and the scores as 2·h·p·s.
/// MTP depths count their mtp_hybrid_override_pattern's layers once per depth, as
/// Megatron-LM's get_hybrid_layer_counts (hybrid_layer_allocation.py) does for a unified pattern;
/// LatentMoE's routed experts run at moe_latent_size and its two projections add 4·h·latent
/// (`moe_layer_flops`).
constexpr double hybrid_flops_per_token(const flop_inputs& in) {
  const model_spec& m = in.model;
  const auto n = [&](char symbol) {
    return d(hybrid_layer_count(m, symbol) + in.mtp_num_layers * mtp_hybrid_layer_count(m, symbol));
  };
  const double h = d(m.hidden_size), s = d(in.seq_len);
  const double gated = m.use_swiglu ? 1.5 : 1.0;  // flop_utils.py scale_factor of a gated_linear_unit MLP
  const double heads = d(m.head_num), p = d(m.head_size.value_or(m.hidden_size / m.head_num)) * heads / h;
  const double attention = 4 * h * p * (h + h * d(m.kv_head_num) / heads) + 2 * h * p * s;
  const double mlp = 4 * d(m.intermediate_size.value_or(0)) * gated * h;
  const double d_in = 2 * h;
  const double mamba = 2 * h * (2 * d_in + 2 * d(m.mamba_num_groups * m.mamba_state_dim) + d(m.mamba_num_heads)) +
                       7 * d_in * d(m.mamba_state_dim) + 2 * d_in * h;
  const double routed = m.moe_latent_size ? d(*m.moe_latent_size) : h;
  const double latent_proj = m.moe_latent_size ? 4 * h * d(*m.moe_latent_size) : 0.0;
  const double moe =
      4 * routed * d(m.moe_ffn_hidden_size.value_or(m.intermediate_size.value_or(0))) * d(m.topk.value_or(1)) * gated +
      latent_proj + 4 * h * d(m.moe_shared_expert_intermediate_size.value_or(0)) * gated;
  const double logits = 2 * h * d(padded_vocab(m, in.tp_size)) * d(in.mtp_num_layers + 1);
  return 3 * (n('*') * attention + n('-') * mlp + n('M') * mamba + n('E') * moe + logits);
}

/// DeepSeek-V4's attention per token, forward + backward (x 3 x 2 applied), as flop_utils.py's
/// `dsv4_hybrid` branch counts it for a fixed-length batch of sequence length s. Every layer
/// (decoder + MTP): the query (q_lora down, its norm, up to heads x (qk + rope)), the one v-wide KV
/// projection and its norm, the grouped output projection (heads x v -> o_groups x o_lora_rank ->
/// hidden). Ratio-0 and ratio-128 layers: every head over the W-token window (n W v x 2); ratio-128
/// also over the s/128 compressed keys (n v s/128, the formula's s^2 term). Ratio-4 layers: the
/// window and k' = min(top-k, s/4) selected keys, k'(1 - 4k'/(2s)) on average (n (W + that) v x 2),
/// the indexer's compressor (h -> 2d, twice), query (q_lora -> n_idx d) and weights (h -> n_idx),
/// and its dense scoring over the compressed keys (n_idx d s/4, an s^2 term). Compressors: h -> 2v
/// twice per ratio-4 layer, h -> v twice per ratio-128 layer (kv and gate).
constexpr double dsv4_attention(const model_spec& m, std::int64_t layers, std::int64_t seq_len) {
  const double h = d(m.hidden_size), n = d(m.head_num), s = d(seq_len);
  const double q_lora = d(m.q_lora_rank.value_or(0)), qk = d(m.qk_head_dim.value_or(64));
  const double rope = d(m.qk_pos_emb_head_dim.value_or(0)), v = d(m.v_head_dim.value_or(64));
  const double o_lora = d(m.o_lora_rank.value_or(0)), o_groups = d(m.o_groups.value_or(1));
  const double w = d(m.csa_window_size.value_or(128));
  const double r0 = d(m.csa_compress_ratios.layers_with(0)), r4 = d(m.csa_compress_ratios.layers_with(4)),
               r128 = d(m.csa_compress_ratios.layers_with(128));
  const double projections =
      q_lora * (h + n * (qk + rope) + 1) + (h * v + v) + (n * v * o_lora + o_groups * o_lora * h);
  double linear = d(layers) * projections;
  linear += (r0 + r128) * n * w * v * 2;              // window attention of ratio-0 and ratio-128 layers
  linear += r4 * h * (2 * v) * 2 + r128 * h * v * 2;  // the main compressors
  double quadratic = r128 * n * v / 128;              // ratio-128 compressed keys: x s (the s^2 term)
  if (r4 > 0) {
    const double n_idx = d(m.dsa_indexer_n_heads.value_or(0)), d_idx = d(m.dsa_indexer_head_dim.value_or(0));
    const std::int64_t topk_cap = seq_len / 4;
    const double k = d(m.dsa_indexer_topk.value_or(0) < topk_cap ? m.dsa_indexer_topk.value_or(0) : topk_cap);
    const double selected = k * (1 - k * 4 / (2 * s));  // average selected keys of a causal query
    linear += r4 * n * (w + selected) * v * 2;
    linear += r4 * h * (2 * d_idx) * 2 + r4 * q_lora * n_idx * d_idx + r4 * h * n_idx;
    quadratic += r4 * n_idx * d_idx / 4;  // dense indexer scoring over the compressed keys
  }
  return 6 * linear + 6 * quadratic * s;
}
}  // namespace detail

/// Model FLOPs per token of one training step (forward + backward = 3x forward GEMMs), as
/// Megatron-Bridge counts them for a fixed-length batch: its total divided by batch x seq_len.
constexpr double model_flops_per_token(const flop_inputs& in, flop_formula f) {
  using detail::d;
  const model_spec& m = in.model;
  if (is_hybrid(m)) return detail::hybrid_flops_per_token(in);  // one formula in both revisions
  const std::int64_t mtp = in.mtp_num_layers;
  const std::int64_t layers = m.layer_num + mtp;  // MTP layers repeat the last decoder layer's kind
  const bool moe = m.expert_num > 1;
  const std::int64_t moe_layers = moe ? m.layer_num - m.dense_layers + mtp : 0;
  const std::int64_t dense_layers = layers - moe_layers;
  const double gemms = m.use_swiglu && (f == flop_formula::current || in.silu_gated) ? 3 : 2;
  const double h = d(m.hidden_size);
  const double ffn = d(m.intermediate_size.value_or(0));
  const double moe_ffn = d(m.moe_ffn_hidden_size.value_or(m.intermediate_size.value_or(0)));
  const double shared = d(m.moe_shared_expert_intermediate_size.value_or(0));
  const double topk = moe ? d(m.topk.value_or(1)) : 0;
  const double mlp = 6 * h * (ffn * gemms * d(dense_layers) + (moe_ffn * topk + shared) * gemms * d(moe_layers));

  double attention = 0;
  if (m.experimental_attention_variant == experimental_attention_kind::dsv4_hybrid) {
    attention = detail::dsv4_attention(m, layers, in.seq_len);
  } else if (m.attention_type == attention_kind::mla) {
    attention = 6 * d(layers) * detail::mla_layer_terms(m, in.seq_len);
  } else {
    const double head = d(m.head_size.value_or(m.hidden_size / m.head_num));
    const double q = head * d(m.head_num), kv = head * d(m.kv_head_num);
    const double proj = h * (q + 2 * kv) + q * h;
    const double full = q * d(in.seq_len);  // QK^T and PV over half the s x s scores: 2 x q x s/2
    const bool windowed = f == flop_formula::current && in.window > 0;
    const std::int64_t swa = windowed ? detail::window_layers(layers, in.window_skip_freq) : 0;
    const double swa_core = 2 * q * detail::window_context(in.window, in.seq_len);
    attention = 6 * (d(layers - swa) * (proj + full) + d(swa) * (proj + swa_core));
  }
  const double mtp_extra = 6 * d(mtp) * (3 * h + 2 * h * h);  // MTP's norms and its 2h -> h projection
  const double logits = 6 * h * d(padded_vocab(m, in.tp_size)) * d(mtp + 1);
  return mlp + attention + mtp_extra + logits;
}

/// The fraction of causal attention score pairs a sliding window of W removes, averaged over
/// `layers` of which every `skip_freq`-th keeps full attention (`window_pair_share`, the pricing's
/// formula; equal to 1 - window_context(W, s) / ((s + 1) / 2) per windowed layer).
constexpr double sliding_window_sparse_ratio(std::int64_t layers, std::int64_t seq_len, std::int64_t window,
                                             std::int64_t skip_freq) {
  if (window <= 0 || layers <= 0) return 0;
  return detail::d(detail::window_layers(layers, skip_freq)) / detail::d(layers) *
         (1 - window_pair_share(window, seq_len, seq_len));
}

}  // namespace megatron_bridge
LLMSIM_END_NAMESPACE
