/// \file llmsim/typed/layers.hpp
/// Layer kinds of the typed API. Kinds are types, sizes are data: `gqa_attention{.heads = 64,
/// .kv_heads = 8, .head_dim = 128}`, never `gqa_attention<64, 8, 128>`, so every size can as well
/// come from a file. Each kind knows only which `model_spec` fields it sets (`lower_into`); the
/// formulas live in the estimate and see nothing of the kinds.
///
/// ```cpp
/// using namespace llmsim::typed;
/// constexpr auto block = decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
///                                      swiglu_mlp{.ffn = 14336}, rms_norm{}};
/// constexpr auto stack = repeated{block, 32};
/// ```
#pragma once

#include <llmsim/spec/model.hpp>
#include <llmsim/typed/concepts.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE
namespace typed {

// ---- embedding and head ------------------------------------------------------------------------

/// Token embedding of `vocab` rows of width `hidden` (the model's hidden size), with the position
/// encoding the model uses (rotary by default; GPT-2/3 learn absolute positions).
struct embedding {
  static constexpr kind_role role = kind_role::embedding;
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  position_kind position = position_kind::rope;
  std::int64_t max_positions = 0;  ///< rows of a learned_absolute position table (0: none given)
};

/// Final norm, output projection and loss. `tied`: reuses the embedding weight (GPT-3).
struct lm_head {
  static constexpr kind_role role = kind_role::lm_head;
  bool tied = false;
};

// ---- attention ---------------------------------------------------------------------------------

/// Grouped-query attention: `kv_heads` key/value heads shared by groups of the `heads` query heads.
/// `head_dim` 0: hidden / heads. `bias`: the projections carry biases.
struct gqa_attention {
  static constexpr kind_role role = kind_role::attention;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  bool bias = false;
};

/// Multi-head attention: one key/value head per query head (grouped-query with kv_heads == heads).
struct mha_attention {
  static constexpr kind_role role = kind_role::attention;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  ///< 0: hidden / heads
  bool bias = false;
};

/// DeepSeek multi-head latent attention (DeepSeek-V2 §2.1): queries through a `q_lora_rank`
/// bottleneck (0: none), keys and values through `kv_lora_rank`, a `qk_pos_emb_head_dim` rotary part.
struct mla_attention {
  static constexpr kind_role role = kind_role::attention;
  std::int64_t heads = 0;
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 0;
  std::int64_t qk_pos_emb_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool bias = false;
};

// ---- MLP ---------------------------------------------------------------------------------------

/// Gated MLP with SiLU (Llama, Qwen): three GEMMs of width `ffn`.
struct swiglu_mlp {
  static constexpr kind_role role = kind_role::mlp;
  static constexpr bool moe = false;
  std::int64_t ffn = 0;
  bool bias = false;
};

/// Two-GEMM MLP with GeLU (GPT-2/3) of width `ffn`.
struct gelu_mlp {
  static constexpr kind_role role = kind_role::mlp;
  static constexpr bool moe = false;
  std::int64_t ffn = 0;
  bool bias = false;
};

/// Mixture of experts: `experts` SwiGLU experts of width `expert_ffn`, `topk` per token, and a
/// shared expert of width `shared_ffn` (0: none).
struct moe_mlp {
  static constexpr kind_role role = kind_role::mlp;
  static constexpr bool moe = true;
  std::int64_t experts = 0;
  std::int64_t topk = 0;
  std::int64_t expert_ffn = 0;
  std::int64_t shared_ffn = 0;
  bool bias = false;
  /// Routing (model_spec's moe_router_* fields): scores, group-limited top-k over `groups` groups
  /// (0: plain top-k) picking `group_topk`, the aux-loss-free expert bias.
  router_score_kind score = router_score_kind::softmax;
  std::int64_t groups = 0;
  std::int64_t group_topk = 0;
  bool expert_bias = false;
  /// LatentMoE (model_spec's moe_latent_size): routed experts at this width, 0: at the hidden size.
  std::int64_t latent = 0;
};

// ---- norms -------------------------------------------------------------------------------------

/// RMSNorm (Zhang & Sennrich 2019): a scale per channel.
struct rms_norm {
  static constexpr kind_role role = kind_role::norm;
};
/// LayerNorm (Ba et al. 2016): a scale and a bias per channel.
struct layer_norm {
  static constexpr kind_role role = kind_role::norm;
};

// ---- decoder layers ----------------------------------------------------------------------------

/// One pre-norm decoder layer: norm, attention, norm, MLP.
/// `decoder_layer{gqa_attention{...}, swiglu_mlp{...}, rms_norm{}}` (the norm defaults to RMSNorm).
template <AttentionKind Attention, MlpKind Mlp, NormKind Norm = rms_norm>
struct decoder_layer {
  static constexpr kind_role role = kind_role::decoder;
  using attention_type = Attention;
  using mlp_type = Mlp;
  using norm_type = Norm;
  Attention attention{};
  Mlp mlp{};
  Norm norm{};
};
template <AttentionKind Attention, MlpKind Mlp>
decoder_layer(Attention, Mlp) -> decoder_layer<Attention, Mlp>;
template <AttentionKind Attention, MlpKind Mlp, NormKind Norm>
decoder_layer(Attention, Mlp, Norm) -> decoder_layer<Attention, Mlp, Norm>;

namespace detail {
template <class T>
inline constexpr bool is_decoder_layer = false;
template <class A, class M, class N>
inline constexpr bool is_decoder_layer<decoder_layer<A, M, N>> = true;
}  // namespace detail

/// `count` identical decoder layers: `repeated{decoder_layer{...}, 80}`. The count is data.
template <class Decoder>
struct repeated {
  static_assert(detail::is_decoder_layer<Decoder>, "llmsim::typed::repeated: only a decoder_layer can be repeated");
  static constexpr kind_role role = kind_role::decoder;
  using attention_type = typename Decoder::attention_type;
  using mlp_type = typename Decoder::mlp_type;
  using norm_type = typename Decoder::norm_type;
  Decoder layer{};
  std::int64_t count = 1;
};
template <class Decoder>
repeated(Decoder, std::int64_t) -> repeated<Decoder>;

// ---- lowering: which model_spec fields each kind sets ------------------------------------------

constexpr void lower_into(model_spec& m, const embedding& e) {
  m.vocab_size = e.vocab;
  m.hidden_size = e.hidden;
  m.position_embedding_type = e.position;
  if (e.max_positions > 0) m.max_position_embeddings = e.max_positions;
}
constexpr void lower_into(model_spec& m, const lm_head& h) { m.tie_word_embeddings = h.tied; }
constexpr void lower_into(model_spec& m, const gqa_attention& a) {
  m.attention_type = attention_kind::mha;
  m.head_num = a.heads;
  m.kv_head_num = a.kv_heads;
  m.head_size = a.head_dim != 0 ? std::optional<std::int64_t>(a.head_dim) : std::nullopt;
}
constexpr void lower_into(model_spec& m, const mha_attention& a) {
  lower_into(m, gqa_attention{.heads = a.heads, .kv_heads = a.heads, .head_dim = a.head_dim, .bias = a.bias});
}
/// MLA keeps one key/value head per query head after the up-projection (SimuMax's DeepSeek configs:
/// kv_head_num = head_num, head_size = qk_head_dim).
constexpr void lower_into(model_spec& m, const mla_attention& a) {
  m.attention_type = attention_kind::mla;
  m.head_num = a.heads;
  m.kv_head_num = a.heads;
  m.head_size = a.qk_head_dim;
  m.q_lora_rank = a.q_lora_rank != 0 ? std::optional<std::int64_t>(a.q_lora_rank) : std::nullopt;
  m.kv_lora_rank = a.kv_lora_rank;
  m.qk_head_dim = a.qk_head_dim;
  m.qk_pos_emb_head_dim = a.qk_pos_emb_head_dim;
  m.v_head_dim = a.v_head_dim;
}
constexpr void lower_into(model_spec& m, const swiglu_mlp& p) {
  m.use_swiglu = true;
  m.intermediate_size = p.ffn;
}
constexpr void lower_into(model_spec& m, const gelu_mlp& p) {
  m.use_swiglu = false;
  m.intermediate_size = p.ffn;
}
constexpr void lower_into(model_spec& m, const moe_mlp& p) {
  m.use_swiglu = true;
  m.expert_num = p.experts;
  m.topk = p.topk;
  m.moe_ffn_hidden_size = p.expert_ffn;
  m.moe_shared_expert_intermediate_size = p.shared_ffn != 0 ? std::optional<std::int64_t>(p.shared_ffn) : std::nullopt;
  m.moe_router_score_function = p.score;
  if (p.groups != 0) {
    m.moe_router_num_groups = p.groups;
    m.moe_router_group_topk = p.group_topk;
  }
  m.moe_router_enable_expert_bias = p.expert_bias;
  if (p.latent != 0) m.moe_latent_size = p.latent;
}
constexpr void lower_into(model_spec& m, const rms_norm&) { m.norm_type = norm_kind::rmsnorm; }
constexpr void lower_into(model_spec& m, const layer_norm&) { m.norm_type = norm_kind::layernorm; }

}  // namespace typed
LLMSIM_END_NAMESPACE
