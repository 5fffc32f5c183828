/// \file llmsim/spec/model.hpp
/// `model_spec`: the architecture of a decoder-only transformer, field for field the SimuMax
/// model format (docs/model.md of MooreThreads/SimuMax), with SimuMax's defaults, plus three
/// llmsim fields for GPT-style models (`norm_type`, `tie_word_embeddings`, `add_linear_bias`).
///
/// ```cpp
/// constexpr llmsim::model_spec llama3_8b{.model_name = "llama3_8b", .hidden_size = 4096,
///     .head_num = 32, .kv_head_num = 8, .head_size = 128, .intermediate_size = 14336,
///     .layer_num = 32, .vocab_size = 128256, .use_swiglu = true};
/// static_assert((llmsim::validate(llama3_8b), true));
/// ```
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/spec/fields.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

LLMSIM_BEGIN_NAMESPACE

/// Dense or mixture-of-experts.
enum class model_kind : std::uint8_t { invalid, dense, moe };
template <>
struct enum_names<model_kind> {
  static constexpr std::array<std::pair<model_kind, std::string_view>, 3> value{
      {{model_kind::invalid, ""}, {model_kind::dense, "dense"}, {model_kind::moe, "moe"}}};
};

/// `mha` covers multi-head and grouped-query attention; `mla` is DeepSeek's multi-head latent attention.
enum class attention_kind : std::uint8_t { invalid, mha, mla };
template <>
struct enum_names<attention_kind> {
  static constexpr std::array<std::pair<attention_kind, std::string_view>, 3> value{
      {{attention_kind::invalid, ""}, {attention_kind::mha, "mha"}, {attention_kind::mla, "mla"}}};
};

/// Normalisation layer kind (llmsim extension; SimuMax models are RMSNorm).
enum class norm_kind : std::uint8_t { invalid, rmsnorm, layernorm };
template <>
struct enum_names<norm_kind> {
  static constexpr std::array<std::pair<norm_kind, std::string_view>, 3> value{
      {{norm_kind::invalid, ""}, {norm_kind::rmsnorm, "rmsnorm"}, {norm_kind::layernorm, "layernorm"}}};
};

/// Position encoding (llmsim extension): rotary (Llama, Qwen, DeepSeek), learned absolute (GPT-2/3), none.
enum class position_kind : std::uint8_t { invalid, rope, learned_absolute, none };
template <>
struct enum_names<position_kind> {
  static constexpr std::array<std::pair<position_kind, std::string_view>, 4> value{
      {{position_kind::invalid, ""},
       {position_kind::rope, "rope"},
       {position_kind::learned_absolute, "learned_absolute"},
       {position_kind::none, "none"}}};
};

/// How the experts' GEMMs are issued (SimuMax `group_linear_mode`).
enum class group_linear_kind : std::uint8_t { invalid, parallel, sequential };
template <>
struct enum_names<group_linear_kind> {
  static constexpr std::array<std::pair<group_linear_kind, std::string_view>, 4> value{
      {{group_linear_kind::invalid, ""},
       {group_linear_kind::parallel, "parallel"},
       {group_linear_kind::sequential, "sequential"},
       {group_linear_kind::sequential, "serial"}}};  // "serial": SimuMax's spelling
};

/// How the router turns logits into scores (Megatron --moe-router-score-function): softmax over
/// the experts, or an independent sigmoid per expert (DeepSeek-V3, Kimi K2).
enum class router_score_kind : std::uint8_t { invalid, softmax, sigmoid };
template <>
struct enum_names<router_score_kind> {
  static constexpr std::array<std::pair<router_score_kind, std::string_view>, 3> value{
      {{router_score_kind::invalid, ""},
       {router_score_kind::softmax, "softmax"},
       {router_score_kind::sigmoid, "sigmoid"}}};
};

/// Megatron's --experimental-attention-variant as far as llmsim knows it: `dsv4_hybrid` is
/// DeepSeek-V4's per-layer mix of sliding-window, compressed sparse (CSA, ratio 4, lightning
/// indexer top-k) and heavily compressed (HCA, ratio 128) attention (Megatron-Bridge
/// models/deepseek/deepseek_v4_bridge.py sets it with multi_latent_attention).
enum class experimental_attention_kind : std::uint8_t { invalid, dsv4_hybrid };
template <>
struct enum_names<experimental_attention_kind> {
  static constexpr std::array<std::pair<experimental_attention_kind, std::string_view>, 2> value{
      {{experimental_attention_kind::invalid, ""}, {experimental_attention_kind::dsv4_hybrid, "dsv4_hybrid"}}};
};

/// Megatron's csa_compress_ratios: one KV compression ratio per decoder layer, then one per MTP
/// layer (0: sliding window only, 4: CSA, 128: HCA). A fixed-capacity list so that models stay
/// literal types.
struct compress_ratio_list {
  static constexpr std::size_t capacity = 256;
  std::array<std::int16_t, capacity> values{};
  std::size_t count = 0;

  [[nodiscard]] constexpr bool empty() const { return count == 0; }
  [[nodiscard]] constexpr std::size_t size() const { return count; }
  [[nodiscard]] constexpr std::int64_t operator[](std::size_t i) const { return values[i]; }
  /// Layers (decoder + MTP) with compression ratio `r`.
  [[nodiscard]] constexpr std::int64_t layers_with(std::int64_t r) const {
    std::int64_t n = 0;
    for (std::size_t i = 0; i < count; ++i) n += values[i] == r ? 1 : 0;
    return n;
  }
  constexpr void push_back(std::int64_t r) { values[count++] = static_cast<std::int16_t>(r); }
  friend constexpr bool operator==(const compress_ratio_list& a, const compress_ratio_list& b) {
    if (a.count != b.count) return false;
    for (std::size_t i = 0; i < a.count; ++i)
      if (a.values[i] != b.values[i]) return false;
    return true;
  }
};

/// Largest size llmsim accepts for any one dimension or count: 2^31 - 1, the range of the int32
/// dimensions cuBLAS and the attention kernels take. Products of a few stay inside int64.
inline constexpr std::int64_t max_dimension = 2147483647;

/// The architecture of a decoder-only transformer. Absent optionals mean "not set" (JSON null).
struct model_spec {
  std::optional<model_kind> model_type = {};  ///< absent: `moe` when expert_num > 1, else `dense`
  fixed_string<64> model_name = {};
  std::int64_t hidden_size = 0;
  std::int64_t head_num = 0;
  std::int64_t kv_head_num = 0;                        ///< smaller than head_num: grouped-query attention
  std::optional<std::int64_t> head_size = {};          ///< absent: hidden_size / head_num
  std::optional<std::int64_t> intermediate_size = {};  ///< dense MLP width
  std::int64_t layer_num = 0;
  std::int64_t vocab_size = 0;
  std::optional<std::int64_t> orig_vocab_size = {};  ///< vocabulary before padding (SimuMax bookkeeping)
  bool use_swiglu = false;                           ///< false: GeLU MLP with two GEMMs
  std::int64_t expert_num = 1;
  std::optional<std::int64_t> topk = {};
  attention_kind attention_type = attention_kind::mha;
  std::optional<std::int64_t> moe_ffn_hidden_size = {};  ///< absent: intermediate_size
  std::optional<std::int64_t> moe_shared_expert_intermediate_size = {};
  std::optional<std::int64_t> v_head_dim = {};
  std::optional<std::int64_t> qk_head_dim = {};
  std::optional<std::int64_t> qk_pos_emb_head_dim = {};
  std::optional<std::int64_t> q_lora_rank = {};  ///< absent (null): queries are not compressed
  std::optional<std::int64_t> kv_lora_rank = {};
  std::int64_t dense_layers = 0;  ///< leading dense layers of an MoE model
  bool moe_pad_expert_input_to_capacity = true;
  // Routing (Megatron --moe-router-*; megatron/core/transformer/moe/router.py, moe_utils.py).
  router_score_kind moe_router_score_function = router_score_kind::softmax;
  /// Group-limited routing (DeepSeek-V2/V3): the experts form this many groups and each token
  /// picks experts from its `moe_router_group_topk` best groups only. Absent: plain top-k.
  std::optional<std::int64_t> moe_router_num_groups = {};
  std::optional<std::int64_t> moe_router_group_topk = {};
  /// Aux-loss-free load balancing (DeepSeek-V3): a per-expert bias added to the scores that pick
  /// the experts (not to the probabilities), updated from each step's token counts.
  bool moe_router_enable_expert_bias = false;
  /// TransformerEngine's fused router kernel (Megatron --moe-router-fusion): scores, group
  /// selection, bias and top-k in one kernel, so routing adds no passes of its own.
  bool moe_router_fusion = false;
  double capacity = 1;  ///< expert capacity factor
  group_linear_kind group_linear_mode = group_linear_kind::parallel;
  std::int64_t make_vocab_size_divisible_by = 128;  ///< Megatron default
  bool padded_vocab_size = true;  ///< pad vocab to a multiple of make_vocab_size_divisible_by * tp, as Megatron does
  // llmsim extensions for GPT-style models.
  norm_kind norm_type = norm_kind::rmsnorm;
  bool tie_word_embeddings = false;  ///< the LM head reuses the embedding weight
  bool add_linear_bias = false;      ///< linear layers carry biases (GPT-2/3 style)
  /// Biases on the QKV projection only (Megatron --add-qkv-bias, TransformerConfig.add_qkv_bias:
  /// Qwen2 / Qwen2.5); implied by add_linear_bias.
  bool add_qkv_bias = false;
  position_kind position_embedding_type = position_kind::rope;  ///< Megatron --position-embedding-type
  /// Rows of the learned position table (Megatron --max-position-embeddings); needed by learned_absolute.
  std::optional<std::int64_t> max_position_embeddings = {};
  /// Sliding-window attention (Mistral, Gemma 2 / 3, gpt-oss; HF `sliding_window`): a windowed
  /// layer's query attends to the last `sliding_window` tokens, itself included (FlashAttention
  /// window_size (W - 1, 0), as Megatron-Bridge's models/gpt_oss/gpt_oss_bridge.py sets it; vLLM
  /// and TensorRT-LLM keep only those tokens' KV cache). Absent: every layer attends causally.
  std::optional<std::int64_t> sliding_window = {};
  /// Which layers keep full attention: every `sliding_window_pattern`-th (1-based layers N, 2N,
  /// ...: Megatron --window-attn-skip-freq; HF Gemma 3's `sliding_window_pattern` 6, Gemma 2 and
  /// gpt-oss alternate: 2). 0: every layer is windowed (Mistral).
  std::int64_t sliding_window_pattern = 0;
  /// YaRN RoPE scaling's factor (Megatron --position-embedding-type yarn, TransformerConfig
  /// yarn_rotary_scaling_factor; Hugging Face `rope_scaling` {rope_type "yarn", factor}). Absent:
  /// plain RoPE. Positions aside, YaRN changes one kernel in training: Megatron turns TE's fused RoPE
  /// off for any position_embedding_type but "rope" (training/arguments.py; Megatron-Bridge
  /// utils/fusions.py `validate_rope_fusion_compatibility`), so queries and keys take rope_utils.py's
  /// unfused PyTorch path (`add_unfused_rope`). MLA's own RoPE kernels do not change.
  std::optional<double> yarn_rotary_scaling_factor = {};
  /// The gated activation is quick-GELU, x·σ(1.702 x) times (linear half + 1) (gpt-oss; Megatron
  /// activation_func quick_gelu with glu_linear_offset 1, as models/gpt_oss/gpt_oss_bridge.py sets
  /// it): SwiGLU's GEMM shapes and fused kernel bytes. Needs use_swiglu (the gated layout).
  bool use_quick_geglu = false;
  /// Megatron activation_func_clamp_value (HF gpt-oss `swiglu_limit`, 7): the gate half clamped
  /// from above and the linear half to [-v, v] before the activation. SwiGLU's fused kernel clamps
  /// inside (fused_bias_swiglu.py); quick-GEGLU's clamps run eagerly before its fused kernel (see
  /// `add_eager_glu_clamps`). Absent: no clamp.
  std::optional<double> activation_func_clamp_value = {};
  /// Megatron --mtp-num-layers: multi-token prediction depths after the decoder (DeepSeek-V3 §2.2
  /// uses 1), each an extra decoder layer of the last layer's kind with its own loss (estimate.hpp).
  std::int64_t mtp_num_layers = 0;
  /// Hybrid models (Megatron --hybrid-override-pattern, megatron/core/models/hybrid/
  /// hybrid_layer_allocation.py): one symbol per decoder layer, each layer one norm, one mixer and
  /// a residual: 'M' Mamba-2, '*' self-attention, '-' dense MLP, 'E' MoE. Empty: every layer is
  /// attention + MLP (or MoE) as usual.
  fixed_string<256> hybrid_override_pattern = {};
  std::int64_t mamba_state_dim = 0;   ///< Megatron --mamba-state-dim (SSM state size N per group)
  std::int64_t mamba_head_dim = 0;    ///< Megatron --mamba-head-dim (P)
  std::int64_t mamba_num_heads = 0;   ///< Megatron --mamba-num-heads (d_inner = heads x head_dim)
  std::int64_t mamba_num_groups = 0;  ///< Megatron --mamba-num-groups (groups sharing B and C)
  // DeepSeek-V4 hybrid attention (Megatron-Core DSv4HybridSelfAttention; field names as the
  // Megatron-Bridge provider sets them in models/deepseek/deepseek_v4_bridge.py).
  std::optional<experimental_attention_kind> experimental_attention_variant = {};  ///< absent: none
  compress_ratio_list csa_compress_ratios = {};           ///< per decoder layer, then per MTP layer
  std::optional<std::int64_t> csa_window_size = {};       ///< sliding window of raw keys (HF sliding_window)
  std::optional<std::int64_t> dsa_indexer_n_heads = {};   ///< lightning indexer heads (HF index_n_heads)
  std::optional<std::int64_t> dsa_indexer_head_dim = {};  ///< lightning indexer head width (HF index_head_dim)
  std::optional<std::int64_t> dsa_indexer_topk = {};      ///< compressed keys each query selects (HF index_topk)
  std::optional<std::int64_t> o_groups = {};              ///< grouped low-rank output projection: groups of heads
  std::optional<std::int64_t> o_lora_rank = {};           ///< its rank per group
  /// Manifold-constrained hyper-connections: residual streams per token (HF hc_mult); absent: none.
  std::optional<std::int64_t> num_residual_streams = {};
  /// LatentMoE (Megatron --moe-latent-size; megatron/core/transformer/moe/moe_layer.py): the MoE
  /// layer projects the hidden state down to this width (`fc1_latent_proj`) after routing, the
  /// dispatcher and the routed experts work at it, `fc2_latent_proj` projects the combined output
  /// back up; router and shared experts stay at hidden_size. Absent: experts at hidden_size.
  std::optional<std::int64_t> moe_latent_size = {};
  /// Hybrid models with MTP (Megatron-Bridge's provider field, the HF config's key): the layers of
  /// each MTP depth, symbols as in hybrid_override_pattern (Nemotron 3 Super: "*E", attention then
  /// MoE), built as a HybridStack inside MultiTokenPredictionLayer (multi_token_prediction.py).
  fixed_string<16> mtp_hybrid_override_pattern = {};
  /// Megatron --mtp-use-repeated-layer: one MTP layer's parameters applied at every depth
  /// (MultiTokenPredictionBlock builds a single layer): compute per depth, parameters once.
  bool mtp_use_repeated_layer = false;

  friend constexpr bool operator==(const model_spec&, const model_spec&) = default;
};

/// Whether the model has routed experts.
constexpr bool is_moe(const model_spec& m) {
  return m.model_type ? *m.model_type == model_kind::moe : m.expert_num > 1;
}
/// Decoder layers that attend through the sliding window (MTP layers are not counted).
constexpr std::int64_t windowed_layer_count(const model_spec& m) {
  if (!m.sliding_window) return 0;
  return m.sliding_window_pattern >= 2 ? m.layer_num - m.layer_num / m.sliding_window_pattern : m.layer_num;
}

namespace detail {
/// Keys the queries at positions 1..n see through a causal window of w, summed: sum_j min(j, w).
constexpr double windowed_pairs(double n, double w) { return n <= w ? n * (n + 1) / 2 : w * (w + 1) / 2 + (n - w) * w; }
/// A share averaged over the decoder layers: `windowed_share` on each windowed layer, 1 on the rest.
constexpr double average_over_layers(const model_spec& m, double windowed_share) {
  return 1 - static_cast<double>(windowed_layer_count(m)) / static_cast<double>(m.layer_num) * (1 - windowed_share);
}
}  // namespace detail

/// The share of causal score pairs one layer with a window of `w` computes for `q` new queries
/// after `kv - q` cached tokens: sum min(j, w) / sum j over positions j = kv - q + 1 .. kv.
constexpr double window_pair_share(std::int64_t w, std::int64_t q, std::int64_t kv) {
  if (q <= 0 || kv < q) return 1.0;
  const double n = static_cast<double>(kv), before = static_cast<double>(kv - q), wd = static_cast<double>(w);
  const double all = n * (n + 1) / 2 - before * (before + 1) / 2;
  return (detail::windowed_pairs(n, wd) - detail::windowed_pairs(before, wd)) / all;
}

/// The share of causal score pairs the layers compute, averaged over the decoder layers, for `q`
/// new queries after `kv - q` cached tokens: 1 without a window; a windowed layer keeps
/// sum min(j, W) / sum j over positions j = kv - q + 1 .. kv. Pipeline stages are priced at the
/// average (alternating patterns give every stage of several layers nearly the same mix).
constexpr double window_kept_share(const model_spec& m, std::int64_t q, std::int64_t kv) {
  if (windowed_layer_count(m) == 0) return 1.0;
  return detail::average_over_layers(m, window_pair_share(*m.sliding_window, q, kv));
}

/// The share of the `kv` keys and values that `q` new queries at the end read, averaged over the
/// decoder layers: a windowed layer reads the last min(kv, q + W - 1) (decode: W; a whole prefill:
/// all of them).
constexpr double window_read_share(const model_spec& m, std::int64_t q, std::int64_t kv) {
  if (windowed_layer_count(m) == 0 || kv <= 0) return 1.0;
  const double span = static_cast<double>(q + *m.sliding_window - 1), n = static_cast<double>(kv);
  return span >= n ? 1.0 : detail::average_over_layers(m, span / n);
}

/// The share of a `context`-token sequence's KV cache the layers hold, averaged over the decoder
/// layers: a windowed layer keeps the last W tokens only.
constexpr double window_cached_share(const model_spec& m, double context) {
  const double w = m.sliding_window ? static_cast<double>(*m.sliding_window) : 0;
  if (windowed_layer_count(m) == 0 || context <= w) return 1.0;
  return detail::average_over_layers(m, w / context);
}

/// Per-head width of queries and keys (MHA/GQA): `head_size`, else hidden / heads.
constexpr std::int64_t head_dim(const model_spec& m) { return m.head_size ? *m.head_size : m.hidden_size / m.head_num; }
/// Key/value heads each of `tp` tensor-parallel ranks holds: kv_head_num / tp, or one replicated
/// head when tp is a multiple of kv_head_num (vLLM QKVParallelLinear: num_kv_head_replicas =
/// tp / num_kv_heads; serving only: training refuses tp > kv_head_num, as Megatron does).
constexpr std::int64_t kv_heads_per_rank(const model_spec& m, std::int64_t tp) {
  return m.kv_head_num >= tp ? m.kv_head_num / tp : 1;
}
/// Width of one routed expert's MLP (SimuMax: defaults to intermediate_size).
constexpr std::int64_t expert_ffn_size(const model_spec& m) {
  return m.moe_ffn_hidden_size ? *m.moe_ffn_hidden_size : m.intermediate_size.value_or(0);
}
/// Width the dispatcher and the routed experts work at: moe_latent_size, else hidden_size
/// (experts.py builds fc1 latent -> ffn and fc2 ffn -> latent; token_dispatcher.py sizes its
/// buffers to the latent width).
constexpr std::int64_t routed_width(const model_spec& m) { return m.moe_latent_size.value_or(m.hidden_size); }
/// Output width of an MLP's first GEMM for intermediate size `ffn`: SwiGLU's gate and up
/// projections are one fused fc1 of 2·ffn (Megatron `gated_linear_unit`), GeLU's fc1 is ffn wide.
/// The one source of the MLP shape for dense, shared-expert and routed-expert MLPs and for the
/// parameter count.
constexpr std::int64_t mlp_fc1_width(const model_spec& m, std::int64_t ffn) { return m.use_swiglu ? 2 * ffn : ffn; }
/// Weights of one MLP of intermediate size `ffn`: fc1 (hidden x fc1 width) and fc2 (ffn x hidden).
constexpr double mlp_weight_params(const model_spec& m, std::int64_t ffn) {
  return static_cast<double>(m.hidden_size) * static_cast<double>(mlp_fc1_width(m, ffn) + ffn);
}
/// Vocabulary rows of the embedding and LM head under tensor parallelism `tp`:
/// Megatron pads to a multiple of make_vocab_size_divisible_by * tp (megatron/training/tokenizer).
constexpr std::int64_t padded_vocab(const model_spec& m, std::int64_t tp) {
  const std::int64_t orig = m.orig_vocab_size ? *m.orig_vocab_size : m.vocab_size;
  if (!m.padded_vocab_size) return orig;
  const std::int64_t multiple = m.make_vocab_size_divisible_by * tp;
  return (orig + multiple - 1) / multiple * multiple;
}

/// Whether the model is a hybrid (has a `hybrid_override_pattern`).
constexpr bool is_hybrid(const model_spec& m) { return !m.hybrid_override_pattern.empty(); }
/// Layers with symbol `symbol` ('M', '*', '-', 'E') in a hybrid pattern or a part of one.
constexpr std::int64_t pattern_layer_count(std::string_view pattern, char symbol) {
  std::int64_t n = 0;
  for (const char ch : pattern) n += ch == symbol ? 1 : 0;
  return n;
}
/// Layers of the pattern with symbol `symbol`.
constexpr std::int64_t hybrid_layer_count(const model_spec& m, char symbol) {
  return pattern_layer_count(m.hybrid_override_pattern.view(), symbol);
}
/// Layers with symbol `symbol` in one MTP depth of a hybrid model (mtp_hybrid_override_pattern).
constexpr std::int64_t mtp_hybrid_layer_count(const model_spec& m, char symbol) {
  return pattern_layer_count(m.mtp_hybrid_override_pattern.view(), symbol);
}
/// Width of Mamba-2's causal convolution (megatron/core/ssm/mamba_mixer.py `MambaMixer.__init__`
/// default d_conv=4; Megatron builds the mixer with the default).
inline constexpr std::int64_t mamba_conv_width = 4;
/// Tokens per SSD chunk (mamba_mixer.py default chunk_size=128, passed to the scan as `chunk_size`).
inline constexpr std::int64_t mamba_chunk_size = 128;
/// Forward FLOPs per token of the SSD chunked scan over `heads` heads of `head_dim` and `groups`
/// groups of state size `state` (Dao & Gu 2024, "Transformers are SSMs" §6; mamba_ssm
/// ssd_combined.py `_mamba_chunk_scan_combined_fwd`): per group C·Bᵀ within each chunk (2·Q·N),
/// per head the chunk states Bᵀ·x (2·N·P), the intra-chunk output (C·Bᵀ ∘ decay)·x (2·Q·P, all Q
/// pairs counted, as the kernel computes whole blocks) and the state output C·state (2·N·P).
/// Backward is twice this (each product has two operand gradients).
constexpr double mamba_scan_flops_per_token(std::int64_t heads, std::int64_t groups, std::int64_t state,
                                            std::int64_t head_dim) {
  const auto Q = static_cast<double>(mamba_chunk_size), N = static_cast<double>(state),
             P = static_cast<double>(head_dim);
  return 2 * (static_cast<double>(groups) * Q * N + static_cast<double>(heads) * P * (Q + 2 * N));
}
/// Mamba-2 inner width d_inner = heads x head_dim (mamba_mixer.py with mamba_num_heads set).
constexpr std::int64_t mamba_inner(const model_spec& m) { return m.mamba_num_heads * m.mamba_head_dim; }

/// Sizes of one tensor-parallel rank's share of a Mamba-2 mixer.
struct mamba_local_sizes {
  std::int64_t heads = 0, groups = 0, inner = 0, state = 0, head_dim = 0;
  /// in_proj outputs: z, x (inner each), B, C (groups·state each), dt (heads).
  [[nodiscard]] constexpr std::int64_t in_proj_width() const { return 2 * inner + 2 * groups * state + heads; }
  /// Channels of the convolution: x, B, C.
  [[nodiscard]] constexpr std::int64_t conv_channels() const { return inner + 2 * groups * state; }
};
constexpr mamba_local_sizes mamba_local(const model_spec& m, std::int64_t tp) {
  return {m.mamba_num_heads / tp, m.mamba_num_groups / tp, mamba_inner(m) / tp, m.mamba_state_dim, m.mamba_head_dim};
}

/// Parameters of one rank's conv1d (weight and bias), dt_bias, A_log and D (mamba_mixer.py; D per
/// head: D_has_hdim=False).
constexpr double mamba_conv_scan_params(const mamba_local_sizes& l) {
  return static_cast<double>(l.conv_channels() * (mamba_conv_width + 1) + 3 * l.heads);
}

namespace detail {
constexpr void require_size(std::string_view api, std::string_view name, std::int64_t v, std::int64_t minimum) {
  if (v < minimum) report_error(api, name, "{}={} must be at least {}", name, v, minimum);
  if (v > max_dimension) report_error(api, name, "{}={} exceeds the largest supported size {}", name, v, max_dimension);
}
constexpr void require_size(std::string_view api, std::string_view name, const std::optional<std::int64_t>& v,
                            std::int64_t minimum) {
  if (v) require_size(api, name, *v, minimum);
}
constexpr bool is_finite(double v) { return v == v && v - v == 0; }
/// A positive finite number (a factor or a bound), where given.
constexpr void require_positive(std::string_view api, std::string_view name, const std::optional<double>& v) {
  if (v && (!is_finite(*v) || *v <= 0)) report_error(api, name, "{}={} must be a positive finite number", name, *v);
}
}  // namespace detail

/// Compressed keys of one sequence at ratio `ratio` (Compressor.forward: floor(s / ratio) groups).
constexpr std::int64_t dsv4_compressed_keys(std::int64_t ratio, std::int64_t seq_len) {
  return ratio > 0 ? seq_len / ratio : 0;
}

/// Keys one query's sparse attention runs over, as the kernel is handed them: the
/// csa_window_size window indices, plus for ratio 4 the indexer's min(top-k, s/4) selected
/// compressed keys, for ratio 128 every one of the s/128 compressed keys (csa.py builds fixed-length
/// index lists, causally invalid entries masked, not skipped).
constexpr std::int64_t dsv4_attended_keys(const model_spec& m, std::int64_t ratio, std::int64_t seq_len) {
  const std::int64_t window = m.csa_window_size.value_or(0);
  const std::int64_t compressed = dsv4_compressed_keys(ratio, seq_len);
  if (ratio == 4) {
    const std::int64_t topk = m.dsa_indexer_topk.value_or(0);
    return window + (topk < compressed ? topk : compressed);
  }
  return window + compressed;
}

/// The same count averaged over the causal queries of a sequence (what Megatron-Bridge's
/// flop_utils.py `dsv4_hybrid` branch counts: the whole window, k'(1 - 4k'/(2s)) selected keys for
/// ratio 4, s/256 compressed keys on average for ratio 128).
constexpr double dsv4_causal_keys(const model_spec& m, std::int64_t ratio, std::int64_t seq_len) {
  const double window = static_cast<double>(m.csa_window_size.value_or(0)), s = static_cast<double>(seq_len);
  if (ratio == 4) {
    const double k = static_cast<double>(dsv4_attended_keys(m, 4, seq_len)) - window;
    return window + k * (1 - k * 4 / (2 * s));
  }
  if (ratio == 128) return window + s / 256;
  return window;
}

namespace detail {
/// The hybrid pattern and the Mamba sizes (hybrid_layer_allocation.py `validate_segment_layers`,
/// mamba_mixer.py asserts).
constexpr void validate_hybrid(const model_spec& m) {
  constexpr std::string_view api = "llmsim::model";
  const std::string_view p = m.hybrid_override_pattern.view();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != 'M' && p[i] != '*' && p[i] != '-' && p[i] != 'E')
      report_error(api, "model.hybrid_override_pattern",
                   "model.hybrid_override_pattern: symbol '{}' at position {} is not one of 'M' (Mamba), '*' "
                   "(attention), '-' (MLP), 'E' (MoE)",
                   std::string_view(&p[i], 1), i);
  if (static_cast<std::int64_t>(p.size()) != m.layer_num)
    report_error(api, "model.hybrid_override_pattern",
                 "model.hybrid_override_pattern has {} symbols but model.layer_num={} (one symbol per layer)", p.size(),
                 m.layer_num);
  if (hybrid_layer_count(m, 'M') > 0) {
    require_size(api, "model.mamba_state_dim", m.mamba_state_dim, 1);
    require_size(api, "model.mamba_head_dim", m.mamba_head_dim, 1);
    require_size(api, "model.mamba_num_heads", m.mamba_num_heads, 1);
    require_size(api, "model.mamba_num_groups", m.mamba_num_groups, 1);
    if (m.mamba_num_heads % m.mamba_num_groups != 0)
      report_error(api, "model.mamba_num_groups",
                   "model.mamba_num_groups={} must divide model.mamba_num_heads={} (each group serves whole heads)",
                   m.mamba_num_groups, m.mamba_num_heads);
  }
  if (hybrid_layer_count(m, 'E') > 0 && !is_moe(m))
    report_error(api, "model.hybrid_override_pattern",
                 "model.hybrid_override_pattern has 'E' (MoE) layers but the model has no experts (model.expert_num)");
  if (hybrid_layer_count(m, 'E') == 0 && is_moe(m))
    report_error(api, "model.expert_num", "model.expert_num={} but model.hybrid_override_pattern has no 'E' layer",
                 m.expert_num);
  if (hybrid_layer_count(m, '-') > 0 && !m.intermediate_size)
    report_error(api, "model.intermediate_size",
                 "model.intermediate_size is required for the '-' (MLP) layers of model.hybrid_override_pattern");
  if (m.dense_layers != 0)
    report_error(api, "model.dense_layers",
                 "model.dense_layers={} with model.hybrid_override_pattern: the pattern places the MLP layers ('-')",
                 m.dense_layers);
}

/// The MTP pattern of a hybrid model (hybrid_layer_allocation.py symbols; multi_token_prediction.py
/// builds each depth's layers from it): valid symbols, present when there are MTP depths, and only
/// kinds the model has the sizes for.
constexpr void validate_mtp_hybrid(const model_spec& m) {
  constexpr std::string_view api = "llmsim::model";
  const std::string_view p = m.mtp_hybrid_override_pattern.view();
  if (!p.empty() && !is_hybrid(m))
    report_error(api, "model.mtp_hybrid_override_pattern",
                 "model.mtp_hybrid_override_pattern needs model.hybrid_override_pattern (it describes the MTP depths "
                 "of a hybrid model)");
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != 'M' && p[i] != '*' && p[i] != '-' && p[i] != 'E')
      report_error(api, "model.mtp_hybrid_override_pattern",
                   "model.mtp_hybrid_override_pattern: symbol '{}' at position {} is not one of 'M' (Mamba), '*' "
                   "(attention), '-' (MLP), 'E' (MoE)",
                   std::string_view(&p[i], 1), i);
  if (is_hybrid(m) && m.mtp_num_layers > 0 && p.empty())
    report_error(api, "model.mtp_hybrid_override_pattern",
                 "model.mtp_num_layers={} in a hybrid model needs model.mtp_hybrid_override_pattern (the layers of "
                 "each MTP depth)",
                 m.mtp_num_layers);
  if (mtp_hybrid_layer_count(m, 'E') > 0 && !is_moe(m))
    report_error(api, "model.mtp_hybrid_override_pattern",
                 "model.mtp_hybrid_override_pattern has 'E' (MoE) layers but the model has no experts");
  if (mtp_hybrid_layer_count(m, 'M') > 0 && hybrid_layer_count(m, 'M') == 0)
    report_error(api, "model.mtp_hybrid_override_pattern",
                 "model.mtp_hybrid_override_pattern has 'M' (Mamba) layers but model.hybrid_override_pattern has "
                 "none (the Mamba sizes are checked with the decoder's)");
  if (mtp_hybrid_layer_count(m, '-') > 0 && !m.intermediate_size)
    report_error(api, "model.intermediate_size",
                 "model.intermediate_size is required for the '-' (MLP) layers of model.mtp_hybrid_override_pattern");
  if (m.mtp_use_repeated_layer && m.mtp_num_layers == 0)
    report_error(api, "model.mtp_use_repeated_layer",
                 "model.mtp_use_repeated_layer=true needs model.mtp_num_layers > 0 (it shares one MTP layer over the "
                 "depths)");
}

/// Routing rules (Megatron transformer_config.py and moe_utils.py group_limited_topk): groups split
/// the experts evenly, a token's `topk` experts come from its `group_topk` groups (each group
/// scored by the sum of its best topk / group_topk experts), the expert bias needs sigmoid scores.
constexpr void validate_routing(const model_spec& m) {
  constexpr std::string_view api = "llmsim::model";
  if (!is_moe(m)) {
    if (m.moe_router_num_groups || m.moe_router_group_topk || m.moe_router_enable_expert_bias || m.moe_router_fusion ||
        m.moe_router_score_function != router_score_kind::softmax)
      report_error(api, "model.moe_router_score_function",
                   "model.moe_router_* fields describe an MoE router: they require model.model_type \"moe\"");
    return;
  }
  if (m.moe_router_score_function == router_score_kind::invalid)
    report_error(api, "model.moe_router_score_function", "model.moe_router_score_function must be softmax or sigmoid");
  if (m.moe_router_enable_expert_bias && m.moe_router_score_function != router_score_kind::sigmoid)
    report_error(api, "model.moe_router_enable_expert_bias",
                 "model.moe_router_enable_expert_bias=true requires model.moe_router_score_function \"sigmoid\" "
                 "(Megatron: expert bias for aux-loss-free routing only supports sigmoid)");
  if (m.moe_router_num_groups.has_value() != m.moe_router_group_topk.has_value())
    report_error(api, m.moe_router_num_groups ? "model.moe_router_group_topk" : "model.moe_router_num_groups",
                 "model.moe_router_num_groups and model.moe_router_group_topk are given together (group-limited "
                 "routing) or not at all");
  if (!m.moe_router_num_groups) return;
  require_size(api, "model.moe_router_num_groups", m.moe_router_num_groups, 1);
  require_size(api, "model.moe_router_group_topk", m.moe_router_group_topk, 1);
  const std::int64_t groups = *m.moe_router_num_groups, picked = *m.moe_router_group_topk, k = *m.topk;
  if (m.expert_num % groups != 0)
    report_error(api, "model.moe_router_num_groups",
                 "model.moe_router_num_groups={} must divide model.expert_num={} (equal expert groups)", groups,
                 m.expert_num);
  if (picked > groups || picked > k)
    report_error(api, "model.moe_router_group_topk",
                 "model.moe_router_group_topk={} must not exceed model.moe_router_num_groups={} nor model.topk={}",
                 picked, groups, k);
  if (picked * (m.expert_num / groups) < k)
    report_error(api, "model.moe_router_group_topk",
                 "model.moe_router_group_topk={} groups of {} experts cannot hold model.topk={} experts", picked,
                 m.expert_num / groups, k);
}

/// The DeepSeek-V4 fields: all of them with experimental_attention_variant "dsv4_hybrid", none without.
constexpr void validate_dsv4(const model_spec& m) {
  constexpr std::string_view api = "llmsim::model";
  const bool dsv4 = m.experimental_attention_variant.has_value();
  if (dsv4 && *m.experimental_attention_variant == experimental_attention_kind::invalid)
    report_error(api, "model.experimental_attention_variant",
                 "model.experimental_attention_variant must be \"dsv4_hybrid\" or null");
  for (const auto& [name, v] : {std::pair{"model.csa_window_size", m.csa_window_size},
                                std::pair{"model.dsa_indexer_n_heads", m.dsa_indexer_n_heads},
                                std::pair{"model.dsa_indexer_head_dim", m.dsa_indexer_head_dim},
                                std::pair{"model.dsa_indexer_topk", m.dsa_indexer_topk},
                                std::pair{"model.o_groups", m.o_groups}, std::pair{"model.o_lora_rank", m.o_lora_rank},
                                std::pair{"model.num_residual_streams", m.num_residual_streams}}) {
    require_size(api, name, v, 1);
    if (v && !dsv4)
      report_error(api, name,
                   "{} is a DeepSeek-V4 field: it needs model.experimental_attention_variant "
                   "\"dsv4_hybrid\"",
                   name);
  }
  if (!m.csa_compress_ratios.empty() && !dsv4)
    report_error(api, "model.csa_compress_ratios",
                 "model.csa_compress_ratios is a DeepSeek-V4 field: it needs model.experimental_attention_variant "
                 "\"dsv4_hybrid\"");
  if (!dsv4) return;
  if (m.attention_type != attention_kind::mla || !m.q_lora_rank)
    report_error(api, "model.experimental_attention_variant",
                 "model.experimental_attention_variant \"dsv4_hybrid\" needs model.attention_type \"mla\" and "
                 "model.q_lora_rank (DeepSeek-V4 compresses its queries)");
  if (!m.csa_window_size || !m.o_groups || !m.o_lora_rank)
    report_error(api, "model.experimental_attention_variant",
                 "model.experimental_attention_variant \"dsv4_hybrid\" needs model.csa_window_size, model.o_groups "
                 "and model.o_lora_rank");
  if (m.head_num % *m.o_groups != 0)
    report_error(api, "model.o_groups", "model.o_groups={} must divide model.head_num={}", *m.o_groups, m.head_num);
  const std::int64_t layers = m.layer_num + m.mtp_num_layers;
  if (static_cast<std::int64_t>(m.csa_compress_ratios.size()) != layers)
    report_error(api, "model.csa_compress_ratios",
                 "model.csa_compress_ratios has {} entries; it needs one per decoder and MTP layer: model.layer_num + "
                 "model.mtp_num_layers = {}",
                 m.csa_compress_ratios.size(), layers);
  for (std::size_t i = 0; i < m.csa_compress_ratios.size(); ++i) {
    const std::int64_t r = m.csa_compress_ratios[i];
    if (r != 0 && r != 4 && r != 128)
      report_error(api, "model.csa_compress_ratios",
                   "model.csa_compress_ratios[{}]={} must be 0 (sliding window), 4 (CSA) or 128 (HCA), the ratios "
                   "Megatron-Core's DeepSeek-V4 attention implements",
                   i, r);
  }
  if (m.csa_compress_ratios.layers_with(4) > 0 &&
      (!m.dsa_indexer_n_heads || !m.dsa_indexer_head_dim || !m.dsa_indexer_topk))
    report_error(api, "model.dsa_indexer_topk",
                 "model.csa_compress_ratios has ratio-4 (CSA) layers: they need model.dsa_indexer_n_heads, "
                 "model.dsa_indexer_head_dim and model.dsa_indexer_topk (the lightning indexer)");
}
}  // namespace detail

/// Checks one model on its own; throws `config_error` at run time, fails to compile in a constant expression.
constexpr void validate(const model_spec& m) {
  constexpr std::string_view api = "llmsim::model";
  using detail::report_error;
  using detail::require_size;
  if (m.model_type && *m.model_type == model_kind::invalid)
    report_error(api, "model.model_type", "model.model_type must be \"dense\" or \"moe\"");
  if (m.attention_type == attention_kind::invalid)
    report_error(api, "model.attention_type", "model.attention_type must be \"mha\" or \"mla\"");
  if (m.norm_type == norm_kind::invalid)
    report_error(api, "model.norm_type", "model.norm_type must be \"rmsnorm\" or \"layernorm\"");
  if (m.position_embedding_type == position_kind::invalid)
    report_error(api, "model.position_embedding_type",
                 "model.position_embedding_type must be \"rope\", \"learned_absolute\" or \"none\"");
  if (m.group_linear_mode == group_linear_kind::invalid)
    report_error(api, "model.group_linear_mode",
                 "model.group_linear_mode must be \"parallel\", \"sequential\" or \"serial\"");
  require_size(api, "model.hidden_size", m.hidden_size, 1);
  require_size(api, "model.head_num", m.head_num, 1);
  require_size(api, "model.kv_head_num", m.kv_head_num, 1);
  require_size(api, "model.head_size", m.head_size, 1);
  require_size(api, "model.intermediate_size", m.intermediate_size, 1);
  require_size(api, "model.layer_num", m.layer_num, 1);
  require_size(api, "model.vocab_size", m.vocab_size, 1);
  require_size(api, "model.orig_vocab_size", m.orig_vocab_size, 1);
  require_size(api, "model.expert_num", m.expert_num, 1);
  require_size(api, "model.topk", m.topk, 1);
  require_size(api, "model.moe_ffn_hidden_size", m.moe_ffn_hidden_size, 1);
  require_size(api, "model.moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size, 0);
  require_size(api, "model.v_head_dim", m.v_head_dim, 1);
  require_size(api, "model.qk_head_dim", m.qk_head_dim, 1);
  require_size(api, "model.qk_pos_emb_head_dim", m.qk_pos_emb_head_dim, 0);
  require_size(api, "model.q_lora_rank", m.q_lora_rank, 1);
  require_size(api, "model.kv_lora_rank", m.kv_lora_rank, 1);
  require_size(api, "model.dense_layers", m.dense_layers, 0);
  require_size(api, "model.mtp_num_layers", m.mtp_num_layers, 0);
  require_size(api, "model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1);
  require_size(api, "model.max_position_embeddings", m.max_position_embeddings, 1);
  if (m.position_embedding_type == position_kind::learned_absolute && !m.max_position_embeddings)
    report_error(api, "model.max_position_embeddings",
                 "model.position_embedding_type=\"learned_absolute\" needs model.max_position_embeddings (the rows "
                 "of the position table, Megatron --max-position-embeddings)");
  if (m.add_qkv_bias && m.attention_type == attention_kind::mla)
    report_error(api, "model.add_qkv_bias",
                 "model.add_qkv_bias with model.attention_type=\"mla\" is not modelled (MLA has no single QKV "
                 "projection)");
  require_size(api, "model.sliding_window", m.sliding_window, 1);
  if (m.sliding_window_pattern < 0 || m.sliding_window_pattern == 1)
    report_error(api, "model.sliding_window_pattern",
                 "model.sliding_window_pattern={} must be 0 (every layer windowed) or at least 2 (every N-th layer "
                 "keeps full attention)",
                 m.sliding_window_pattern);
  if (m.sliding_window_pattern > 0 && !m.sliding_window)
    report_error(api, "model.sliding_window_pattern",
                 "model.sliding_window_pattern={} needs model.sliding_window (the window's tokens)",
                 m.sliding_window_pattern);
  if (m.sliding_window && m.attention_type == attention_kind::mla)
    report_error(api, "model.sliding_window",
                 "model.sliding_window with model.attention_type=\"mla\" is not modelled (its absorbed decode reads "
                 "the latent cache whole)");
  if (m.sliding_window && (!m.hybrid_override_pattern.empty() || m.experimental_attention_variant))
    report_error(api, "model.sliding_window",
                 "model.sliding_window is not modelled with model.hybrid_override_pattern or "
                 "model.experimental_attention_variant (they place their attention layers themselves)");
  detail::require_positive(api, "model.capacity", m.capacity);
  detail::require_positive(api, "model.yarn_rotary_scaling_factor", m.yarn_rotary_scaling_factor);
  if (m.yarn_rotary_scaling_factor && m.position_embedding_type != position_kind::rope)
    report_error(api, "model.yarn_rotary_scaling_factor",
                 "model.yarn_rotary_scaling_factor scales rotary positions: it needs "
                 "model.position_embedding_type=\"rope\"");
  detail::require_positive(api, "model.activation_func_clamp_value", m.activation_func_clamp_value);
  if (m.activation_func_clamp_value && !m.use_swiglu)
    report_error(api, "model.activation_func_clamp_value",
                 "model.activation_func_clamp_value clamps the two halves of a gated activation: it needs "
                 "model.use_swiglu=true (Megatron clamps only gated linear units)");
  if (m.use_quick_geglu && (!is_moe(m) || m.dense_layers > 0 || m.moe_shared_expert_intermediate_size.value_or(0) > 0 ||
                            !m.hybrid_override_pattern.empty()))
    report_error(api, "model.use_quick_geglu",
                 "model.use_quick_geglu=true is modelled in routed experts only (gpt-oss): Megatron's dense MLP and "
                 "shared expert have no fused quick-GEGLU without per-token weights (mlp.py), and their eager path "
                 "is not modelled");
  if (m.use_quick_geglu && !m.use_swiglu)
    report_error(api, "model.use_quick_geglu",
                 "model.use_quick_geglu=true is a gated activation: it needs model.use_swiglu=true (the gated layout)");
  if (m.head_num % m.kv_head_num != 0)
    report_error(
        api, "model.kv_head_num",
        "model.kv_head_num={} must divide model.head_num={} (each key/value head serves a whole group of query heads)",
        m.kv_head_num, m.head_num);
  if (m.attention_type == attention_kind::mha && !m.head_size && m.hidden_size % m.head_num != 0)
    report_error(api, "model.head_size",
                 "model.head_size is absent and model.head_num={} does not divide model.hidden_size={}", m.head_num,
                 m.hidden_size);
  if (m.attention_type == attention_kind::mla) {
    if (!m.kv_lora_rank)
      report_error(api, "model.kv_lora_rank", "model.kv_lora_rank is required when model.attention_type is \"mla\"");
    if (!m.qk_head_dim)
      report_error(api, "model.qk_head_dim", "model.qk_head_dim is required when model.attention_type is \"mla\"");
    if (!m.qk_pos_emb_head_dim)
      report_error(api, "model.qk_pos_emb_head_dim",
                   "model.qk_pos_emb_head_dim is required when model.attention_type is \"mla\"");
    if (!m.v_head_dim)
      report_error(api, "model.v_head_dim", "model.v_head_dim is required when model.attention_type is \"mla\"");
  }
  if (is_hybrid(m)) detail::validate_hybrid(m);
  detail::validate_mtp_hybrid(m);
  require_size(api, "model.moe_latent_size", m.moe_latent_size, 1);
  if (m.moe_latent_size && !is_moe(m))
    report_error(api, "model.moe_latent_size",
                 "model.moe_latent_size projects the tokens of routed experts: it requires model.model_type \"moe\"");
  detail::validate_dsv4(m);
  if (is_moe(m)) {
    if (m.expert_num < 2)
      report_error(api, "model.expert_num", "model.expert_num={} must be at least 2 for a \"moe\" model", m.expert_num);
    if (!m.topk) report_error(api, "model.topk", "model.topk is required for a \"moe\" model");
    if (*m.topk > m.expert_num)
      report_error(api, "model.topk", "model.topk={} must not exceed model.expert_num={}", *m.topk, m.expert_num);
    detail::validate_routing(m);
    if (expert_ffn_size(m) < 1)
      report_error(api, "model.moe_ffn_hidden_size",
                   "model.moe_ffn_hidden_size (or model.intermediate_size) is required for a \"moe\" model");
    if (m.dense_layers > m.layer_num)
      report_error(api, "model.dense_layers", "model.dense_layers={} must not exceed model.layer_num={}",
                   m.dense_layers, m.layer_num);
    if (m.dense_layers > 0 && !m.intermediate_size)
      report_error(api, "model.intermediate_size",
                   "model.intermediate_size is required for the model.dense_layers={} dense layers", m.dense_layers);
  } else {
    if (m.expert_num != 1)
      report_error(api, "model.expert_num", "model.expert_num={} requires model.model_type \"moe\"", m.expert_num);
    detail::validate_routing(m);
    if (!m.intermediate_size)
      report_error(api, "model.intermediate_size", "model.intermediate_size is required for a dense model");
  }
}

LLMSIM_END_NAMESPACE
