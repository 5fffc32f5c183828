/// \file llmsim/program/leaf.hpp
/// A leaf is one module of a pipeline stage as Megatron-LM with TransformerEngine runs it (a
/// norm, a linear, core attention, an activation, the embedding, the loss), with everything the
/// estimate needs from it: the time of its kernels per pass, the tensor-parallel collectives it
/// issues, the bytes it keeps for backward, its transient peaks, its parameters.
/// Identical layers share one list of leaves and a repeat count (`leaf_block`).
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/units.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

enum class leaf_kind : std::uint8_t {
  embedding,
  norm,
  linear_column,
  linear_row,
  attention,
  activation,
  cross_entropy
};

/// The modules the programs build, one value per name: Megatron-LM's submodule attribute names
/// (megatron/core/transformer/transformer_layer.py, attention.py, multi_latent_attention.py,
/// moe/moe_layer.py, models/gpt/gpt_model.py), and for what Megatron runs as a function (RoPE, the
/// activation, the residual adds, the loss) the name of that operation. Recompute plans select
/// leaves by id; `leaf_name` is the only place the names are spelled.
enum class leaf_id : std::uint8_t {
  embedding,
  input_layernorm,
  linear_qkv,
  linear_q_down_proj,
  q_layernorm,
  linear_q_up_proj,
  linear_q_proj,
  linear_kv_down_proj,
  kv_layernorm,
  linear_kv_up_proj,
  rotary_pos_emb,
  mla_rope_and_concat,
  core_attention,
  linear_proj,
  attention_residual_add,
  pre_mlp_layernorm,
  linear_fc1,
  swiglu,
  gelu,
  linear_fc2,
  shared_experts_linear_fc1,
  shared_experts_swiglu,
  shared_experts_gelu,
  shared_experts_linear_fc2,
  router,
  permutation,
  experts_linear_fc1,
  experts_swiglu,
  experts_gelu,
  experts_linear_fc2,
  unpermutation,
  shared_plus_routed,
  mlp_residual_add,
  final_layernorm,
  output_layer,
  cross_entropy,
  mtp_enorm,    ///< MTP: norm of the shifted tokens' embedding (multi_token_prediction.py `enorm`)
  mtp_hnorm,    ///< MTP: norm of the previous depth's hidden states (`hnorm`)
  mtp_eh_proj,  ///< MTP: the 2h -> h projection of their concatenation (`eh_proj`)
  /// The exposed part of a layer's host copies (fine-grained activation offloading).
  activation_offload,
  // Mamba-2 mixer (megatron/core/ssm/mamba_mixer.py MambaMixer; mamba_layer.py MambaLayer).
  mamba_in_proj,       ///< `in_proj`: h -> [z, x, B, C, dt], column-parallel
  mamba_conv_scan,     ///< `mamba_split_conv1d_scan_combined`: depthwise conv1d over xBC + the SSD chunked scan
  mamba_norm,          ///< `norm`: the gated group RMSNorm over d_inner
  mamba_out_proj,      ///< `out_proj`: d_inner -> h, row-parallel
  mamba_residual_add,  ///< the layer's residual add
  // LatentMoE (megatron/core/transformer/moe/moe_layer.py).
  moe_fc1_latent_proj,  ///< `fc1_latent_proj`: h -> moe_latent_size before the dispatch, duplicated over tp
  moe_fc2_latent_proj,  ///< `fc2_latent_proj`: moe_latent_size -> h after the combine, duplicated over tp
  // DeepSeek-V4 hybrid attention (Megatron-Core experimental_attention_variant/
  // deepseek_v4_hybrid_attention.py, csa.py) and its hyper-connections (transformer/hyper_connection.py).
  linear_kv_proj,        ///< `linear_kv_proj`: h -> v_head_dim, the one shared key/value
  compressor,            ///< `core_attention.compressor`: wkv + wgate, gated pooling, norm, RoPE
  indexer_linear_wq_b,   ///< `core_attention.indexer.linear_wq_b`: q_lora -> indexer heads
  indexer_weights_proj,  ///< `core_attention.indexer.linear_weights_proj`: h -> indexer heads
  indexer_compressor,    ///< `core_attention.indexer.compressor`: the indexer's own compressor
  indexer_topk,          ///< the indexer's scores over the compressed keys, top-k, sparse KL loss
  linear_o_group_proj,   ///< `linear_o_group_proj`: the grouped output projection (einsum)
  hc_attn_pre,           ///< mHC before attention: mapping projection, Sinkhorn, stream aggregation
  hc_attn_post,          ///< mHC after attention: residual mix + expanded output (h_post_bda)
  hc_mlp_pre,            ///< ... before the MLP
  hc_mlp_post,           ///< ... after the MLP
  hc_expand,             ///< the embedding copied to the residual streams
  hc_head                ///< the learned contraction of the streams before the final norm
};
/// Number of `leaf_id` values (they run from 0 without gaps; hc_head is the last).
inline constexpr std::size_t leaf_id_count = static_cast<std::size_t>(leaf_id::hc_head) + 1;

/// The Megatron module name of `id`, as reports, `peak_path` and JSON print it (empty for a
/// value outside the enumeration).
constexpr std::string_view leaf_name(leaf_id id) {
  // One line per module.
  // clang-format off
  switch (id) {
    case leaf_id::embedding: return "embedding";
    case leaf_id::input_layernorm: return "input_layernorm";
    case leaf_id::linear_qkv: return "linear_qkv";
    case leaf_id::linear_q_down_proj: return "linear_q_down_proj";
    case leaf_id::q_layernorm: return "q_layernorm";
    case leaf_id::linear_q_up_proj: return "linear_q_up_proj";
    case leaf_id::linear_q_proj: return "linear_q_proj";
    case leaf_id::linear_kv_down_proj: return "linear_kv_down_proj";
    case leaf_id::kv_layernorm: return "kv_layernorm";
    case leaf_id::linear_kv_up_proj: return "linear_kv_up_proj";
    case leaf_id::rotary_pos_emb: return "rotary_pos_emb";
    case leaf_id::mla_rope_and_concat: return "mla_rope_and_concat";
    case leaf_id::core_attention: return "core_attention";
    case leaf_id::linear_proj: return "linear_proj";
    case leaf_id::attention_residual_add: return "attention_residual_add";
    case leaf_id::pre_mlp_layernorm: return "pre_mlp_layernorm";
    case leaf_id::linear_fc1: return "linear_fc1";
    case leaf_id::swiglu: return "swiglu";
    case leaf_id::gelu: return "gelu";
    case leaf_id::linear_fc2: return "linear_fc2";
    case leaf_id::shared_experts_linear_fc1: return "shared_experts.linear_fc1";
    case leaf_id::shared_experts_swiglu: return "shared_experts.swiglu";
    case leaf_id::shared_experts_gelu: return "shared_experts.gelu";
    case leaf_id::shared_experts_linear_fc2: return "shared_experts.linear_fc2";
    case leaf_id::router: return "router";
    case leaf_id::permutation: return "permutation";
    case leaf_id::experts_linear_fc1: return "experts.linear_fc1";
    case leaf_id::experts_swiglu: return "experts.swiglu";
    case leaf_id::experts_gelu: return "experts.gelu";
    case leaf_id::experts_linear_fc2: return "experts.linear_fc2";
    case leaf_id::unpermutation: return "unpermutation";
    case leaf_id::shared_plus_routed: return "shared_plus_routed";
    case leaf_id::mlp_residual_add: return "mlp_residual_add";
    case leaf_id::final_layernorm: return "final_layernorm";
    case leaf_id::output_layer: return "output_layer";
    case leaf_id::cross_entropy: return "cross_entropy";
    case leaf_id::mtp_enorm: return "mtp.enorm";
    case leaf_id::mtp_hnorm: return "mtp.hnorm";
    case leaf_id::mtp_eh_proj: return "mtp.eh_proj";
    case leaf_id::activation_offload: return "activation_offload";
    case leaf_id::mamba_in_proj: return "mixer.in_proj";
    case leaf_id::mamba_conv_scan: return "mixer.conv1d_ssd_scan";
    case leaf_id::mamba_norm: return "mixer.norm";
    case leaf_id::mamba_out_proj: return "mixer.out_proj";
    case leaf_id::mamba_residual_add: return "mamba_residual_add";
    case leaf_id::moe_fc1_latent_proj: return "fc1_latent_proj";
    case leaf_id::moe_fc2_latent_proj: return "fc2_latent_proj";
    case leaf_id::linear_kv_proj: return "linear_kv_proj";
    case leaf_id::compressor: return "core_attention.compressor";
    case leaf_id::indexer_linear_wq_b: return "core_attention.indexer.linear_wq_b";
    case leaf_id::indexer_weights_proj: return "core_attention.indexer.linear_weights_proj";
    case leaf_id::indexer_compressor: return "core_attention.indexer.compressor";
    case leaf_id::indexer_topk: return "core_attention.indexer.qk_topk";
    case leaf_id::linear_o_group_proj: return "linear_o_group_proj";
    case leaf_id::hc_attn_pre: return "hc_attn.aggregate";
    case leaf_id::hc_attn_post: return "hc_attn.post_bda";
    case leaf_id::hc_mlp_pre: return "hc_mlp.aggregate";
    case leaf_id::hc_mlp_post: return "hc_mlp.post_bda";
    case leaf_id::hc_expand: return "hc.expand";
    case leaf_id::hc_head: return "hc_head.contract";
  }
  // clang-format on
  return {};  // no enumerator: -Wswitch above flags a value without a name
}

/// How a leaf sits in a recompute segment: the first leaf of a segment keeps its input for the
/// replay; later leaves keep nothing until the replay re-creates their tensors.
enum class recompute_role : std::uint8_t { none, first, inner };

struct leaf {
  leaf_id id = leaf_id::embedding;  ///< which Megatron module: linear_qkv, core_attention, linear_fc1, ...
  leaf_kind kind = leaf_kind::norm;
  std::int32_t record_id = -1;  ///< its ops in an op_record (set only when a build context records; fills padding)
  seconds fwd{};                ///< forward kernels
  seconds bwd{};                ///< backward kernels (input gradient + weight gradient)
  seconds bwd_weight{};         ///< of which the weight-gradient kernels (what zero-bubble schedules defer)
  seconds
      fwd_comm{};  ///< tensor-parallel collectives in forward (not overlapped: Megatron runs them on the compute stream)
  seconds bwd_comm{};            ///< ... in backward
  seconds bwd_weight_comm{};     ///< of bwd_comm, the weight-gradient pass's collectives (zero-bubble W)
  seconds fwd_a2a{}, bwd_a2a{};  ///< of fwd_comm / bwd_comm, the expert-parallel token exchange (DualPipe overlaps it)
  double params = 0;             ///< parameters held by this rank
  double cache = 0;              ///< bytes saved for backward when not recomputed
  double input = 0;              ///< bytes of its input (what a recompute segment starting here keeps)
  double fwd_peak = 0;           ///< transient bytes while its forward runs, on top of what is held
  double bwd_peak = 0;           ///< transient bytes while its backward runs
  double quantized_params = 0;   ///< of `params`, the weight elements of a quantized (FP8/FP4) linear
  double quantized_weight_bytes = 0;  ///< its quantized weight copies kept across micro-batches (TE workspace)
  std::int64_t weight_rows = 0,
               weight_cols = 0;  ///< local weight shape of a linear (TE's dummy wgrad buffer per shape)
  bool recompute = false;        ///< forward replayed in backward
  bool replay_free = false;  ///< recomputed but costs no replay time (its output is re-derived by a neighbour's replay)
  bool segment_start =
      false;  ///< forced start of a recompute segment (the layer's first leaf; a Megatron checkpoint boundary)
  bool expert_params = false;  ///< its parameters are routed-expert weights (sharded over ep·etp, synced over edp)
  bool grouped = false;        ///< a grouped GEMM (TE GroupedLinear)
  bool tp_duplicated =
      false;  ///< weight replicated over tp and fed s/tp tokens under SP: its gradient is all-reduced over tp
  bool communicates_in_replay = false;  ///< its collectives repeat when its forward is replayed (MoE dispatch)
  recompute_role role = recompute_role::none;
  /// Of held(), the bytes sent to the host between its forward and backward (activation offload).
  double offloaded = 0;
  std::int32_t efficiency_lookups = 0;       ///< compute kernels priced (each looked up in the shape table)
  std::int32_t efficiency_misses = 0;        ///< ... of which the table lacked
  std::int32_t efficiency_interpolated = 0;  ///< ... of those, priced between the table's shapes around it
  std::int32_t efficiency_modelled = 0;      ///< ... else by the kernel model (else efficient_factor)
  seconds last_compute{};  ///< the time of its last priced kernel (what a `beside_previous` collective hides behind)

  /// Megatron module name: linear_qkv, core_attention, linear_fc1, ...
  [[nodiscard]] constexpr std::string_view name() const { return leaf_name(id); }
  /// Bytes this leaf holds between its forward and its backward under the recompute plan.
  [[nodiscard]] constexpr double held() const {
    if (!recompute) return cache;
    return role == recompute_role::first ? input : 0;
  }
  /// Replay time added to backward.
  [[nodiscard]] constexpr seconds replay() const { return recompute && !replay_free ? fwd : seconds{}; }
  [[nodiscard]] constexpr seconds replay_comm() const {
    return recompute && !replay_free &&
                   (kind == leaf_kind::linear_column || kind == leaf_kind::linear_row || communicates_in_replay)
               ? fwd_comm
               : seconds{};
  }
};

/// Leaves that run `repeat` times in a row (identical layers are built once and counted).
struct leaf_block {
  static constexpr std::size_t capacity = 32;  // an MLA + MoE layer has 23 leaves
  std::array<leaf, capacity> leaves{};
  std::size_t count = 0;
  std::int64_t repeat = 1;
  std::int64_t first_layer = -1;  ///< index of the first decoder layer of the block in its stage (-1: not layers)

  constexpr void push(const leaf& l) {
    if (count == capacity)
      detail::report_error("llmsim::estimate", "", "a leaf block holds at most {} leaves", capacity);
    leaves[count++] = l;
  }
  [[nodiscard]] constexpr const leaf* begin() const { return leaves.data(); }
  [[nodiscard]] constexpr const leaf* end() const { return leaves.data() + count; }

  /// Marks recompute roles: a recomputed leaf after a kept one (or a forced start) opens a segment.
  constexpr void assign_roles() {
    bool previous_recomputed = false;
    for (std::size_t i = 0; i < count; ++i) {
      auto& l = leaves[i];
      if (!l.recompute) {
        l.role = recompute_role::none;
        previous_recomputed = false;
        continue;
      }
      l.role = (!previous_recomputed || l.segment_start) ? recompute_role::first : recompute_role::inner;
      previous_recomputed = true;
    }
  }
};

/// Where in the program a memory peak happens.
struct peak_site {
  std::int64_t block = -1;
  std::int64_t layer = -1;  ///< decoder layer index in the stage, -1 for embedding / head
  std::string_view leaf = {};
  std::string_view pass = {};  ///< forward, backward, recompute_forward, recompute_backward
};

/// Result of walking one block's leaves for memory.
struct block_memory {
  double held = 0;      ///< bytes held after the forward of one repetition
  double fwd_peak = 0;  ///< max over its forward of (held so far + transient), one repetition, from 0
  double bwd_peak = 0;  ///< max over its backward, one repetition, relative to the bytes held at its end
  std::size_t fwd_leaf = 0, bwd_leaf = 0;
  std::string_view bwd_pass = "backward";
  /// Of `held`, the bytes one repetition sends to the host (leaf::offloaded).
  double offloaded = 0;
};

/// Forward: each leaf's transient on top of what earlier leaves hold. Backward in reverse, each
/// recompute segment first replays its forward (re-creating the tensors it dropped) and then runs
/// its backward, freeing as it goes.
constexpr block_memory walk_memory(const leaf_block& b) {
  block_memory m;
  double held = 0;
  m.fwd_peak = -1;
  for (std::size_t i = 0; i < b.count; ++i) {
    const auto& l = b.leaves[i];
    if (held + l.fwd_peak >= m.fwd_peak) {
      m.fwd_peak = held + l.fwd_peak;
      m.fwd_leaf = i;
    }
    held += l.held();
    m.offloaded += l.offloaded;
  }
  m.held = held;
  // Backward, relative to `held` at the end of the block's forward.
  double g = held;
  double peak = -1;
  auto note = [&](double v, std::size_t leaf_index, std::string_view pass) {
    if (v > peak) {
      peak = v;
      m.bwd_leaf = leaf_index;
      m.bwd_pass = pass;
    }
  };
  std::size_t i = b.count;
  while (i > 0) {
    const auto& l = b.leaves[i - 1];
    if (!l.recompute) {
      note(g + l.bwd_peak, i - 1, "backward");
      g -= l.held();
      --i;
      continue;
    }
    // Segment: leaves [start, i) — back to the nearest leaf with role first.
    std::size_t start = i - 1;
    while (start > 0 && b.leaves[start].role != recompute_role::first && b.leaves[start - 1].recompute) --start;
    double replay_held[leaf_block::capacity]{};
    for (std::size_t j = start; j < i; ++j) {
      const auto& r = b.leaves[j];
      note(g + r.fwd_peak, j, "recompute_forward");
      if (r.role != recompute_role::first) {
        replay_held[j] = r.cache;
        g += r.cache;
      } else
        replay_held[j] = r.input;
    }
    for (std::size_t j = i; j > start; --j) {
      note(g + b.leaves[j - 1].bwd_peak, j - 1, "recompute_backward");
      g -= replay_held[j - 1];
    }
    i = start;
  }
  m.bwd_peak = peak - held;
  return m;
}

LLMSIM_END_NAMESPACE
