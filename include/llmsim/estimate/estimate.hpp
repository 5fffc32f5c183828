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

#include <llmsim/core/checked.hpp>
#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/muon_cost.hpp>
#include <llmsim/cost/network_cost.hpp>
#include <llmsim/cost/op_cost.hpp>
#include <llmsim/cost/step_cost.hpp>
#include <llmsim/estimate/model_counts.hpp>
#include <llmsim/estimate/offload.hpp>
#include <llmsim/program/dense.hpp>
#include <llmsim/program/dsv4.hpp>
#include <llmsim/program/layer.hpp>
#include <llmsim/program/leaf.hpp>
#include <llmsim/program/mamba.hpp>
#include <llmsim/schedule/engine.hpp>
#include <llmsim/schedule/interleaved.hpp>
#include <llmsim/schedule/one_f_one_b.hpp>
#include <llmsim/schedule/pass.hpp>
#include <llmsim/schedule/sharded_dp.hpp>
#include <llmsim/spec/pipeline_layout.hpp>
#include <llmsim/spec/validate.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// Named model parameters of the estimate that are not in any config file.
namespace parameters {
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

/// Where a pipeline stage sits: the first rank (embedding), a middle rank, the last (LM head and
/// loss); with one stage, `first` holds both ends.
enum class stage_kind : std::uint8_t { first, middle, last };
inline constexpr std::array<std::string_view, 3> stage_kind_names{"first_stage", "middle_stage", "last_stage"};

/// What one model chunk of a rank holds when the chunks are described one by one (a
/// pipeline_model_parallel_layout, or MTP layers, which sit in the last chunk of their rank).
struct chunk_layout {
  std::int64_t layers = 0, dense_layers = 0, mtp_layers = 0;
  std::int64_t first_layer = 0;  ///< index of its first decoder layer in the model (names only)
  bool embedding = false, head = false;
  /// Equal programs: the same layers of the same kinds, wherever they sit in the model.
  friend constexpr bool operator==(const chunk_layout& a, const chunk_layout& b) {
    return a.layers == b.layers && a.dense_layers == b.dense_layers && a.mtp_layers == b.mtp_layers &&
           a.embedding == b.embedding && a.head == b.head;
  }
};
/// Most model chunks per rank a described layout may have.
inline constexpr std::size_t max_rank_chunks = 16;

/// What one pipeline rank runs. Ranks with equal layouts run the same program, so they are
/// priced once; their memory differs only by the micro-batches they hold in flight.
struct rank_layout {
  std::int64_t layers = 0;              ///< decoder layers over all its model chunks
  std::int64_t dense_layers = 0;        ///< of which dense (Megatron --first-k-dense-replace); the rest MoE
  std::int64_t chunk_layers = 0;        ///< layers of one model chunk (interleaved: layers / v)
  std::int64_t chunk_dense_layers = 0;  ///< dense layers of its first model chunk
  bool embedding = false, head = false;
  /// FP8 jobs with fp8_first_last_layers_bf16: its first / last layers that are among the model's
  /// bf16 first / last layers (Megatron --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16).
  std::int64_t bf16_head_layers = 0, bf16_tail_layers = 0;
  std::int64_t mtp_layers = 0;   ///< multi-token-prediction layers (model.mtp_num_layers, in its last chunk)
  std::int64_t chunk_count = 0;  ///< model chunks described in `chunks` (0: the even split above)
  std::array<chunk_layout, max_rank_chunks> chunks{};
  friend constexpr bool operator==(const rank_layout&, const rank_layout&) = default;
};

/// One block of a stage: a shared leaf list run `repeat` times.
struct stage_block {
  const leaf_block* block = nullptr;
  std::int64_t repeat = 0;
  std::int64_t first_layer = -1;  ///< index of its first decoder layer in the stage (-1: not layers)
};

/// Most blocks of a stage program: embedding, up to five runs of decoder layers (dense / MoE,
/// recomputed or not, FP8 or bf16 first/last), the three MTP blocks, the head; a hybrid model's
/// stage: embedding, four layer kinds in up to four runs each (bf16 first layers, recomputed,
/// the rest, bf16 last layers), its MTP prefix, up to four kinds and suffix, each of these twice
/// with a repeated MTP layer (the parameter-holding depth and the others), the head: 30.
inline constexpr std::size_t max_stage_blocks = 32;

/// Leaves of one pipeline stage: [embedding] [recomputed layers] [other layers] [MTP] [final norm, LM head, loss].
struct stage_program {
  std::array<stage_block, max_stage_blocks> blocks{};
  std::size_t count = 0;
  std::int64_t layers = 0;
  /// Activation offload: the layers below the one in backward whose offloaded bytes are back on the
  /// device: 1 for Megatron's fine-grained offloading (the next layer's, prefetched), L - 1 - N for
  /// TE's layer-level offloading (estimate/offload.hpp `reload_ahead`).
  std::int64_t reload_ahead = 1;

  constexpr void add(const leaf_block& b, std::int64_t repeat, std::int64_t first_layer) {
    if (b.count == 0 || repeat == 0) return;
    if (count == blocks.size())
      detail::report_error("llmsim::estimate", "", "a stage program holds at most {} blocks", blocks.size());
    blocks[count++] = {&b, repeat, first_layer};
  }
};

/// The time of one iteration by cause, as one stage sees it (SimuMax `breakdown_result`): its busy
/// time per cause over all micro-batches, plus `bubble_time`, the rest of the iteration it waits.
/// The parts add up to `duration_time_per_iter`.
struct time_breakdown {
  seconds fwd_compute_time{}, bwd_compute_time{}, recompute_time{};
  seconds intra_exposed_time{};  ///< tensor-, expert- and context-parallel collectives (what the ring does not hide)
  seconds inter_exposed_time{};  ///< pipeline sends and receives
  seconds bubble_time{};         ///< waiting: pipeline fill and drain, and for faster stages their slack
  seconds dp_exposed_time{};
  seconds optim_time{};
  seconds straggler_time{};  ///< the slowdown of synchronised multi-node steps (see parameters::straggler_coefficient)
};

/// Cost and memory of one distinct pipeline stage: the ranks `rank`..`last_rank` (`rank_count` of
/// them) that run the same program. Time is per rank; memory is that of `rank`, the one holding
/// the most micro-batches in flight.
struct stage_result {
  stage_kind kind = stage_kind::first;
  std::int64_t rank = 0;        ///< lowest rank of the stage: its memory is the one reported
  std::int64_t last_rank = 0;   ///< highest rank with the same program
  std::int64_t rank_count = 1;  ///< ranks with the same program
  rank_layout layout{};
  std::int64_t layers = 0;
  // Time of one micro-batch.
  seconds fwd_compute_time{}, bwd_compute_time{}, recompute_time{};
  seconds bwd_weight_time{};               ///< of bwd_compute_time, the weight-gradient kernels (zero-bubble W)
  seconds fwd_a2a_time{}, bwd_a2a_time{};  ///< of the tp comm times, the expert-parallel token exchange
  seconds hidden_comm_time{};              ///< DualPipeV, combined 1F1B: exchange its overlapped pairs hide (at `rank`)
  /// overlap_moe_expert_parallel_comm: its decoder layers in forward order (`layer_steps_of`)
  std::array<layer_run, max_layer_runs> layer_runs{};
  std::size_t layer_run_count = 0;
  std::array<chunk_durations, 2> v_chunks{};  ///< DualPipeV: each chunk's pass times (chunk 0, chunk 1)
  std::array<chunk_durations, max_rank_chunks> layout_chunks{};  ///< described chunks (interleaved): each one's times
  /// Each model chunk's activation bytes per micro-batch and its own transient peaks, for the
  /// first `held_chunk_count` chunks (interleaved 1F1B's described or even-split chunks,
  /// DualPipeV's two; 0: the rank's stage is one chunk, or v > max_rank_chunks even shares).
  std::array<double, max_rank_chunks> chunk_held{}, chunk_fwd_peak{}, chunk_bwd_peak{};
  std::int64_t held_chunk_count = 0;
  seconds bwd_weight_comm_time{};  ///< of bwd_tp_comm_time, the weight-gradient pass's collectives (SP input gather)
  seconds fwd_tp_comm_time{}, bwd_tp_comm_time{}, recompute_tp_comm_time{};
  seconds p2p_time{};    ///< sends and receives to neighbours of one micro-batch (fwd + bwd)
  seconds chunk_time{};  ///< forward + backward + p2p of one micro-batch
  // Time of the iteration tail.
  seconds dp_time{};            ///< gradient reduce-scatter (all-reduce) and parameter all-gather, unoverlapped
  seconds dp_exposed_time{};    ///< what of it the iteration waits for (all of it unless overlapped)
  seconds grad_reduce_tail{};   ///< overlap_grad_reduce: the reductions running past the last backward
  seconds param_gather_wait{};  ///< overlap_param_gather: the forward's wait for gathered parameters
  seconds grad_reduce_time{}, param_gather_time{};  ///< unoverlapped parts of dp_time
  seconds tp_grad_allreduce_time{};  ///< of dp_time, the tp all-reduce of duplicated weights' gradients (SP; MLA)
  /// of dp_time, the all-reduce of the word embedding's gradients between the first and last
  /// pipeline stage when both hold it (tied LM head, MTP)
  seconds embedding_grad_allreduce_time{};
  seconds optim_time{};  ///< optimizer step
  std::int64_t dp_buckets = 0;
  // ZeRO-2/3 and FSDP (zero_state >= 2): the per-unit collectives of one micro-batch on the
  // data-parallel stream (schedule/sharded_dp.hpp), and what of them each pass waits for.
  seconds fwd_shard_comm_time{}, bwd_shard_comm_time{};        ///< all-gathers; all-gathers + reduce-scatters
  seconds fwd_shard_exposed_time{}, bwd_shard_exposed_time{};  ///< of them, added to the pass
  seconds host_optimizer_time{};  ///< optimizer_cpu_offload: of optim_time, D2H grads + host Adam + H2D weights
  seconds muon_ns_time{};         ///< optimizer "muon": of optim_time, this rank's Newton-Schulz GEMMs (and tp gathers)
  double muon_params = 0, muon_expert_params = 0;  ///< optimizer "muon": of params, the Muon-managed matrices
  double dp_comm_bytes = 0;    ///< data-parallel collective payload (whole tensors) over the iteration
  time_breakdown breakdown{};  ///< the whole iteration as this stage sees it
  // Memory.
  double params = 0;
  double expert_params = 0;  ///< of which routed-expert parameters
  double tp_duplicated_params =
      0;  ///< of which weights replicated over tp whose gradients tp sums (SP: norms, router, MLA down projections)
  bytes weight_mem{}, grad_mem{}, optimizer_state_mem{}, te_dummy_wgrad_mem{}, workspace_mem{}, model_mem{};
  double quantized_params = 0;         ///< of `params`, weights of FP8/FP4 linears
  double quantized_expert_params = 0;  ///< of which routed-expert weights
  bytes quantized_weight_mem{};        ///< their quantized copies (TE weight workspaces, or the fp8 parameters)
  bytes gathered_param_mem{};  ///< ZeRO-3: the gathered 16-bit weights of the unit running and the one prefetched
  bytes unsharded_grad_mem{};  ///< ZeRO-2/3: one unit's whole gradients waiting for their reduce-scatter
  bytes fwd_activation_cache_per_micro_batch{};
  bytes peak_activation_mem_in_1F1B{};
  bytes fwd_transient_mem{}, bwd_transient_mem{};  ///< one micro-batch's (chunk's) own peak in its forward / backward
  std::int64_t micro_batches_in_flight = 1;
  bytes fwd_peak_allocated_mem{}, bwd_peak_allocated_mem{};
  bytes peak_mem{}, peak_mem_with_reserved{};
  peak_site peak_path{};
  std::int32_t efficiency_lookups = 0, efficiency_misses = 0, efficiency_interpolated = 0, efficiency_modelled = 0;
};

/// Network tiers chosen for the groups.
struct comm_summary {
  std::string_view tp_net{}, pp_net{}, dp_net{}, ep_net{};
  seconds
      tp_time_per_iter{};  ///< tensor-, expert- and context-parallel collectives of the bounding stage over the iteration
  seconds p2p_time_per_transfer{};
  seconds dp_time{};
  /// Context parallelism (cp_size > 1): the tiers of its all-to-all level and of its KV exchange
  /// (the ring, or the all-gather over the whole cp group); "none" for a level of one rank.
  std::string_view cp_a2a_net{}, cp_ring_net{};
};

/// Where the iteration's critical path ends on its critical rank (`cost_result::critical_stream`),
/// i.e. what that rank's optimizer step (every rank's last span) waited for:
/// - `compute`: its own last backward ends the pipeline (every rank's tail starts there);
/// - `data_parallel`: its exposed gradient reduction / parameter gather (overlap off, or the
///   reductions still running after the last backward);
/// - `optimizer`: its pipeline work ended earlier and nothing of its own was exposed after it: it
///   is last only because its optimizer step is the longest (e.g. the stage with the most parameters).
enum class critical_stream_kind : std::uint8_t { compute, data_parallel, optimizer };
inline constexpr std::array<std::string_view, 3> critical_stream_names{"compute", "data_parallel", "optimizer"};

/// Why `cost_result::mfu` can pass 1: SimuMax's model FLOPs count attention over every query-key
/// pair, and causal kernels do half that work (the reports say so beside such a value).
inline constexpr std::string_view mfu_above_one_reason =
    "attention is counted over every query-key pair, as SimuMax counts it; the causal kernels do half that work";

/// Time, throughput and MFU of one iteration.
struct cost_result {
  seconds duration_time_per_iter{};
  seconds pipeline_time{};                ///< the 1F1B part, before gradient sync and optimizer
  double mfu = 0;                         ///< model FLOPs (6ND + attention) / (time * peak), as SimuMax reports it
  double mfu_6nd_with_attn = 0;           ///< the same quantity under SimuMax's explicit name
  double throughput_per_accelerator = 0;  ///< tokens per second per GPU
  double all_tokens_per_iter = 0;
  flops model_flops_per_iter{};     ///< per GPU
  std::int64_t bounding_stage = 0;  ///< index into `stages` of the busiest stage, whose pace the pipeline runs at
  std::int64_t critical_rank = 0;   ///< the pipeline rank whose finish sets the iteration time
  critical_stream_kind critical_stream = critical_stream_kind::compute;  ///< what ends its critical path
  time_breakdown breakdown_result{};                                     ///< the bounding stage's breakdown
  comm_summary comm_result{};
  /// compute_details: compute kernels priced, of which the table lacked the shape, of which its
  /// shapes around priced (interpolated), else the kernel model (the rest: the op kind's
  /// efficient_factor)
  std::int32_t efficiency_lookups = 0, efficiency_misses = 0, efficiency_interpolated = 0, efficiency_modelled = 0;
};

/// Memory of the stages; `peak_mem` is the largest, and the verdict against the device.
struct mem_result {
  bytes peak_mem{};
  bytes peak_mem_with_reserved{};
  double memory_reserved_ratio = 0;  ///< mem_factor: allocated / reserved
  std::int64_t peak_stage = 0;       ///< index into `stages`
  bytes device_mem{};                ///< accelerator.mem_gbs GiB (`device_memory`)
  bool fits = true;                  ///< peak_mem <= device_mem on every stage
  bytes over_by{};                   ///< peak_mem - device_mem when it does not fit, else 0
};

/// Things the estimate assumed or could not model, for the user to see (bits of `estimate_result::notes`).
enum class estimate_note : std::uint8_t {
  compute_capability_from_name,  ///< system.accelerator.compute_capability missing: inferred from sys_name
  compute_capability_assumed,    ///< ... and not inferable: assumed a current GPU (>= 9.0)
  processor_usage_not_modelled,  ///< a network tier's processor_usage (SimuMax: "reserved") is not 0
  math_sdp_shadowed_by_flash,    ///< use_math_sdp=true with use_flash_sdp=true: flash attention runs
  low_precision_rate_derived,    ///< fp8/fp4 GEMMs without usable system figures: bf16 twin at the data-sheet ratio
};
inline constexpr std::size_t estimate_note_count = 5;

/// Most distinct pipeline-stage programs a job can have: first, last, and middle ranks that are
/// all dense, mixed, or all MoE (interleaving adds ranks whose first chunk is partly dense).
inline constexpr std::size_t max_distinct_stages = 8;

/// A whole estimate.
struct estimate_result {
  cost_result cost{};
  mem_result mem{};
  std::array<stage_result, max_distinct_stages> stages{};  ///< distinct programs, by lowest rank
  std::size_t stage_count = 0;
  std::int64_t padded_vocab = 0;
  double param_count = 0;         ///< whole model
  double active_param_count = 0;  ///< parameters one token passes through (MoE: top-k experts)
  double compute_capability = 0;  ///< the one used (the system's, or inferred; see notes)
  std::uint32_t notes = 0;        ///< bits of estimate_note

  /// The first stage of kind `k` (the lowest-ranked middle stage for `middle`), or nullptr.
  [[nodiscard]] constexpr const stage_result* stage(stage_kind k) const {
    for (std::size_t i = 0; i < stage_count; ++i)
      if (stages[i].kind == k) return &stages[i];
    return nullptr;
  }
  [[nodiscard]] constexpr bool has(estimate_note n) const { return (notes >> static_cast<unsigned>(n)) & 1U; }
};

// ---- stage programs ------------------------------------------------------------------------------

/// The distinct blocks of a job, built once and shared by all stages (identical layers are
/// priced once, then counted).
struct job_blocks {
  leaf_block embedding{}, head{};
  leaf_block tied_head{};  ///< the head on the embedding's stage when it shares the embedding weight
  leaf_block dense_layer{}, dense_layer_recomputed{}, moe_layer{}, moe_layer_recomputed{};
  /// FP8 jobs with fp8_first_last_layers_bf16: the same layers unquantized.
  leaf_block dense_layer_bf16{}, dense_layer_bf16_recomputed{}, moe_layer_bf16{}, moe_layer_bf16_recomputed{};
  /// strategy.cpu_offloading: the layers TE offloads whole (never recomputed: validate.hpp).
  leaf_block dense_layer_offloaded{}, moe_layer_offloaded{}, dense_layer_bf16_offloaded{}, moe_layer_bf16_offloaded{};

  /// The block of a dense / MoE layer, recomputed or not, quantized or bf16, offloaded whole or not.
  [[nodiscard]] constexpr const leaf_block& layer(bool dense, bool recomputed, bool bf16,
                                                  bool offloaded = false) const {
    if (offloaded) {
      if (bf16) return dense ? dense_layer_bf16_offloaded : moe_layer_bf16_offloaded;
      return dense ? dense_layer_offloaded : moe_layer_offloaded;
    }
    if (bf16) {
      if (dense) return recomputed ? dense_layer_bf16_recomputed : dense_layer_bf16;
      return recomputed ? moe_layer_bf16_recomputed : moe_layer_bf16;
    }
    if (dense) return recomputed ? dense_layer_recomputed : dense_layer;
    return recomputed ? moe_layer_recomputed : moe_layer;
  }
  /// MTP (model.mtp_num_layers > 0): embedding of the shifted tokens, enorm, hnorm, eh_proj — with
  /// the embedding's own weight, or `_shared` with none where the stage holds the embedding — and
  /// the depth's final norm, output layer and loss: the output weight is the model's (`mtp_suffix`)
  /// or, on a stage without the LM head, a copy of it (`mtp_suffix_own`).
  leaf_block mtp_prefix{}, mtp_prefix_shared{}, mtp_suffix{}, mtp_suffix_own{};
  /// Hybrid models: one layer of each kind of `hybrid_symbols` ('M', '*', '-', 'E') in the pattern.
  std::array<leaf_block, hybrid_symbols.size()> hybrid_layer{};
  /// A hybrid model's repeated MTP layer (mtp_use_repeated_layer) at its later depths: the same
  /// leaves without parameters (the first depth holds them): per layer kind, prefix and suffix.
  std::array<leaf_block, hybrid_symbols.size()> mtp_hybrid_repeat{};
  leaf_block mtp_prefix_repeat{}, mtp_suffix_repeat{};
  /// DeepSeek-V4 (model.experimental_attention_variant): one layer of each ratio of `dsv4_ratios`
  /// that the model uses, recomputed or not, and the streams' contraction before a final norm.
  std::array<leaf_block, dsv4_ratios.size()> dsv4_layer{}, dsv4_layer_recomputed{};
  leaf_block hc_head{};
  /// Hybrid models under recompute: the same kinds with the recompute plan applied.
  std::array<leaf_block, hybrid_symbols.size()> hybrid_layer_recomputed{};
  /// Hybrid FP8 jobs with fp8_first_last_layers_bf16: the kinds unquantized, recomputed or not.
  std::array<leaf_block, hybrid_symbols.size()> hybrid_layer_bf16{}, hybrid_layer_bf16_recomputed{};

  /// The block of hybrid layer kind `k`, recomputed or not, quantized or bf16.
  [[nodiscard]] constexpr const leaf_block& hybrid(std::size_t k, bool recomputed, bool bf16) const {
    if (bf16) return recomputed ? hybrid_layer_bf16_recomputed[k] : hybrid_layer_bf16[k];
    return recomputed ? hybrid_layer_recomputed[k] : hybrid_layer[k];
  }
};

/// `b` without its parameters: a layer that runs again on weights another block holds.
constexpr leaf_block without_parameters(leaf_block b) {
  for (std::size_t i = 0; i < b.count; ++i) {
    b.leaves[i].params = 0;
    b.leaves[i].quantized_params = 0;
    b.leaves[i].quantized_weight_bytes = 0;
  }
  return b;
}

/// The eh_proj of an MTP depth (multi_token_prediction.py `_concat_embeddings`): a column-parallel
/// 2h -> h/t linear, its output gathered over tp (gather_from_tensor_model_parallel_region: an
/// all-gather forward, a split backward), then with SP scattered back to s/t tokens
/// (scatter_to_sequence_parallel_region: a split forward, an all-gather backward).
constexpr leaf mtp_eh_proj_leaf(const build_context& c) {
  const std::int64_t h = c.m().hidden_size;
  leaf l = linear_leaf(c, leaf_id::mtp_eh_proj, true, 2 * h, h / c.s().tp_size);
  const double out = c.tokens() * static_cast<double>(h) * c.element_bytes();
  c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_gather, out);
  if (c.sequence_parallel())
    c.collective(l, pass_kind::backward_input, comm_group::tp, collective_kind::all_gather, out);
  if (c.s().tp_size > 1) l.fwd_peak += out;
  return l;
}

/// The MTP blocks of `j` (Megatron MultiTokenPredictionLayer: each depth embeds the tokens shifted
/// by one more, norms them and the previous hidden states, projects their concatenation, runs one
/// decoder layer and its own final norm, and computes a second loss through the shared output layer).
constexpr void build_mtp_blocks(job_blocks& j, const build_context& c) {
  j.mtp_prefix.push(embedding_leaf(c));
  j.mtp_prefix.push(norm_leaf(c, leaf_id::mtp_enorm));
  j.mtp_prefix.push(norm_leaf(c, leaf_id::mtp_hnorm));
  j.mtp_prefix.push(mtp_eh_proj_leaf(c));
  j.mtp_prefix_shared = j.mtp_prefix;
  j.mtp_prefix_shared.leaves[0].params = 0;
  j.mtp_suffix_own.push(norm_leaf(c, leaf_id::final_layernorm));
  j.mtp_suffix_own.push(linear_leaf(c, leaf_id::output_layer, true, c.m().hidden_size, c.vocab / c.s().tp_size));
  j.mtp_suffix_own.push(cross_entropy_leaf(c));
  j.mtp_suffix = j.mtp_suffix_own;
  j.mtp_suffix.leaves[1].params = 0;
}

/// DeepSeek-V4's blocks: a layer of each compression ratio its decoder and MTP layers use (all
/// recomputed alike: refuse_unmodelled_dsv4), the embedding copied to the mHC streams and their
/// contraction before each final norm.
constexpr void build_dsv4_blocks(job_blocks& j, const build_context& layer_context, bool recompute) {
  const model_spec& m = layer_context.m();
  for (std::size_t k = 0; k < dsv4_ratios.size(); ++k) {
    if (m.csa_compress_ratios.layers_with(dsv4_ratios[k]) == 0) continue;
    j.dsv4_layer[k] = dsv4_layer_leaves(layer_context, dsv4_ratios[k], is_moe(m), false);
    if (recompute) j.dsv4_layer_recomputed[k] = dsv4_layer_leaves(layer_context, dsv4_ratios[k], is_moe(m), true);
  }
  if (m.num_residual_streams) j.hc_head.push(hc_head_leaf(layer_context));
}

/// Decoder layers (FP8 jobs: quantized, and bf16 twins for the first/last layers), embedding and
/// head (always bf16: TE keeps the embedding, output layer and loss out of FP8).
constexpr job_blocks build_blocks(const build_context& c) {
  job_blocks j;
  j.embedding.push(embedding_leaf(c));
  const bool rc = recompute_active(c.s());
  build_context layer_context = c;
  layer_context.quantized = c.s().fp8;
  const bool bf16_twins = c.s().fp8 && c.s().fp8_first_last_layers_bf16;
  if (c.m().experimental_attention_variant) {
    build_dsv4_blocks(j, layer_context, rc);
  } else if (is_hybrid(c.m())) {
    const bool mtp = c.m().mtp_num_layers > 0;
    for (std::size_t k = 0; k < hybrid_symbols.size(); ++k)
      if (hybrid_layer_count(c.m(), hybrid_symbols[k]) > 0 ||
          (mtp && mtp_hybrid_layer_count(c.m(), hybrid_symbols[k]) > 0))
        j.hybrid_layer[k] = hybrid_layer_leaves(layer_context, hybrid_symbols[k], false);
    if (mtp && c.m().mtp_use_repeated_layer)
      for (std::size_t k = 0; k < hybrid_symbols.size(); ++k)
        j.mtp_hybrid_repeat[k] = without_parameters(j.hybrid_layer[k]);
    for (std::size_t k = 0; k < hybrid_symbols.size(); ++k) {
      if (hybrid_layer_count(c.m(), hybrid_symbols[k]) == 0) continue;
      if (rc) j.hybrid_layer_recomputed[k] = hybrid_layer_leaves(layer_context, hybrid_symbols[k], true);
      if (bf16_twins) j.hybrid_layer_bf16[k] = hybrid_layer_leaves(c, hybrid_symbols[k], false);
      if (bf16_twins && rc) j.hybrid_layer_bf16_recomputed[k] = hybrid_layer_leaves(c, hybrid_symbols[k], true);
    }
  } else if (detail::dense_layer_count(c.m()) > 0) {
    j.dense_layer = decoder_layer_leaves(layer_context, false, false);
    if (rc) j.dense_layer_recomputed = decoder_layer_leaves(layer_context, false, true);
    if (bf16_twins) j.dense_layer_bf16 = decoder_layer_leaves(c, false, false);
    if (bf16_twins && rc) j.dense_layer_bf16_recomputed = decoder_layer_leaves(c, false, true);
  }
  if (!is_hybrid(c.m()) && !c.m().experimental_attention_variant && is_moe(c.m()) &&
      detail::dense_layer_count(c.m()) < c.m().layer_num) {
    j.moe_layer = decoder_layer_leaves(layer_context, true, false);
    if (rc) j.moe_layer_recomputed = decoder_layer_leaves(layer_context, true, true);
    if (bf16_twins) j.moe_layer_bf16 = decoder_layer_leaves(c, true, false);
    if (bf16_twins && rc) j.moe_layer_bf16_recomputed = decoder_layer_leaves(c, true, true);
  }
  for (leaf_block* layer :
       {&j.dense_layer, &j.dense_layer_recomputed, &j.dense_layer_bf16, &j.dense_layer_bf16_recomputed, &j.moe_layer,
        &j.moe_layer_recomputed, &j.moe_layer_bf16, &j.moe_layer_bf16_recomputed})
    plan_activation_offload(*layer, c);
  if (c.s().cpu_offloading && c.s().cpu_offloading_num_layers > 0) {
    j.dense_layer_offloaded = j.dense_layer;
    j.moe_layer_offloaded = j.moe_layer;
    j.dense_layer_bf16_offloaded = j.dense_layer_bf16;
    j.moe_layer_bf16_offloaded = j.moe_layer_bf16;
    for (leaf_block* layer :
         {&j.dense_layer_offloaded, &j.moe_layer_offloaded, &j.dense_layer_bf16_offloaded, &j.moe_layer_bf16_offloaded})
      plan_layer_offload(*layer, c);
  }
  if (c.m().experimental_attention_variant && c.m().num_residual_streams) j.embedding.push(hc_expand_leaf(c));
  j.head.push(norm_leaf(c, leaf_id::final_layernorm));
  j.head.push(linear_leaf(c, leaf_id::output_layer, true, c.m().hidden_size, c.vocab / c.s().tp_size));
  j.head.push(cross_entropy_leaf(c));
  j.tied_head = j.head;
  j.tied_head.leaves[1].params = 0;
  if (c.m().mtp_num_layers > 0) build_mtp_blocks(j, c);
  if (c.m().mtp_num_layers > 0 && c.m().mtp_use_repeated_layer) {
    j.mtp_prefix_repeat = without_parameters(j.mtp_prefix);
    j.mtp_suffix_repeat = without_parameters(j.mtp_suffix);
  }
  return j;
}

/// The MTP depths of a hybrid model on the last stage (hybrid_model.py builds the
/// MultiTokenPredictionBlock there): each depth's prefix (embedding of the shifted tokens, enorm,
/// hnorm, eh_proj), the layers of mtp_hybrid_override_pattern, its final norm, output layer and
/// loss. A repeated layer (mtp_use_repeated_layer) holds its parameters at the first depth only.
constexpr void add_hybrid_mtp(stage_program& p, const job_blocks& j, const model_spec& m, bool has_embedding,
                              bool has_head) {
  const std::int64_t depths = m.mtp_num_layers, owning = m.mtp_use_repeated_layer ? 1 : depths;
  p.add(has_embedding ? j.mtp_prefix_shared : j.mtp_prefix, owning, -1);
  p.add(j.mtp_prefix_repeat, depths - owning, -1);
  for (std::size_t k = 0; k < hybrid_symbols.size(); ++k) {
    const std::int64_t n = mtp_hybrid_layer_count(m, hybrid_symbols[k]);
    p.add(j.hybrid_layer[k], n * owning, -1);
    p.add(j.mtp_hybrid_repeat[k], n * (depths - owning), -1);
  }
  p.add(has_head ? j.mtp_suffix : j.mtp_suffix_own, owning, -1);
  p.add(j.mtp_suffix_repeat, depths - owning, -1);
}

/// A DeepSeek-V4 stage (one stage holds every layer: refuse_unmodelled_dsv4): each ratio's
/// layers priced once and counted, placed at the ratio's first layer; each MTP depth's layer is of
/// its own ratio (csa_compress_ratios after the decoder layers) and recomputed as the others
/// (DSv4HybridAttention reads the recompute modules from the shared config).
constexpr stage_program build_dsv4_stage(stage_program& p, const job_blocks& j, const build_context& c,
                                         std::int64_t mtp, bool has_embedding, bool has_head) {
  const model_spec& m = c.m();
  const bool rc = recompute_active(c.s());
  const auto& layers = rc ? j.dsv4_layer_recomputed : j.dsv4_layer;
  for (std::size_t k = 0; k < dsv4_ratios.size(); ++k) {
    std::int64_t first = -1;
    for (std::int64_t i = m.layer_num - 1; i >= 0; --i)
      if (m.csa_compress_ratios[static_cast<std::size_t>(i)] == dsv4_ratios[k]) first = i;
    p.add(layers[k], dsv4_layer_count(m, dsv4_ratios[k]), first);
  }
  if (mtp > 0) {  // every depth of one ratio (refuse_unmodelled_dsv4)
    const std::int64_t ratio = m.csa_compress_ratios[static_cast<std::size_t>(m.layer_num)];
    std::size_t k = 0;
    while (dsv4_ratios[k] != ratio) ++k;
    p.add(has_embedding ? j.mtp_prefix_shared : j.mtp_prefix, mtp, -1);
    p.add(layers[k], mtp, -1);
    p.add(j.hc_head, mtp, -1);
    p.add(has_head ? j.mtp_suffix : j.mtp_suffix_own, mtp, -1);
  }
  if (has_head) {
    p.add(j.hc_head, 1, -1);
    p.add(has_embedding && m.tie_word_embeddings ? j.tied_head : j.head, 1, -1);
  }
  return p;
}

/// The end of a run of layers from `start`: the first of `cuts` past it, else `layers`.
template <std::size_t N>
constexpr std::int64_t run_end(std::int64_t start, std::int64_t layers, const std::array<std::int64_t, N>& cuts) {
  std::int64_t end = layers;
  for (const std::int64_t cut : cuts)
    if (cut > start && cut < end) end = cut;
  return end;
}

/// The hybrid layers of a stage (one stage holds the whole pattern, refuse_unmodelled_hybrid):
/// each kind's layers priced once per run and counted, placed at the run's first layer of the
/// kind. The first `recompute_layer_num` layers of the pattern follow the recompute plan
/// (Megatron's hybrid stack checkpoints its layers in order as the transformer block does:
/// models/hybrid/hybrid_block.py `checkpointed_forward`, recompute_method "block"; selective
/// recompute sets every layer); FP8 jobs run the first `bf16_head` and last `bf16_tail` layers of
/// the pattern in bf16 (hybrid_block.py takes each layer's quantization context by its number,
/// fp8_utils.py / fp4_utils.py: layer_no < num_layers_at_start_in_bf16 or >= num_layers -
/// num_layers_at_end_in_bf16). The pattern is cut into runs at those boundaries.
constexpr void add_hybrid_layers(stage_program& p, const job_blocks& j, const build_context& c, std::int64_t bf16_head,
                                 std::int64_t bf16_tail) {
  const std::string_view pattern = c.m().hybrid_override_pattern.view();
  const std::int64_t layers = static_cast<std::int64_t>(pattern.size());
  const std::int64_t rc = recompute_active(c.s()) ? c.s().recompute_layer_num : 0;
  const std::int64_t recomputed = rc < layers ? rc : layers;
  const std::array<std::int64_t, 3> cuts{recomputed, bf16_head, layers - bf16_tail};
  for (std::size_t k = 0; k < hybrid_symbols.size(); ++k) {
    std::int64_t start = 0;
    while (start < layers) {
      const std::int64_t end = run_end(start, layers, cuts);
      const std::string_view run =
          pattern.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(end - start));
      if (const std::size_t at = run.find(hybrid_symbols[k]); at != std::string_view::npos)
        p.add(j.hybrid(k, start < recomputed, start < bf16_head || start >= layers - bf16_tail),
              pattern_layer_count(run, hybrid_symbols[k]), start + static_cast<std::int64_t>(at));
      start = end;
    }
  }
}

/// The leaves of a stage holding `layers` decoder layers of which the first `dense` are dense
/// (Megatron --first-k-dense-replace puts the dense layers first) and the rest MoE; the first
/// `recompute_layer_num` layers of the stage follow the recompute plan (--recompute-method block);
/// its first `bf16_head` and last `bf16_tail` layers run in bf16 (FP8 jobs, see rank_layout). The
/// layers are cut into runs at those boundaries, in layer order, one block per run.
constexpr stage_program build_stage(const job_blocks& j, const build_context& c, std::int64_t layers,
                                    std::int64_t dense, bool has_embedding, bool has_head, std::int64_t mtp = 0,
                                    std::int64_t bf16_head = 0, std::int64_t bf16_tail = 0) {
  stage_program p;
  p.layers = layers;
  if (layer_offloaded_count(c.s(), layers) > 0) p.reload_ahead = reload_ahead(c.s(), c.m());
  if (has_embedding) p.add(j.embedding, 1, -1);
  if (c.m().experimental_attention_variant) return build_dsv4_stage(p, j, c, mtp, has_embedding, has_head);
  if (is_hybrid(c.m())) {
    add_hybrid_layers(p, j, c, bf16_head, bf16_tail);
    if (mtp > 0) add_hybrid_mtp(p, j, c.m(), has_embedding, has_head);
    if (has_head) p.add(has_embedding && c.m().tie_word_embeddings ? j.tied_head : j.head, 1, -1);
    return p;
  }
  const std::int64_t recomputed =
      recompute_active(c.s()) ? (c.s().recompute_layer_num < layers ? c.s().recompute_layer_num : layers) : 0;
  const std::int64_t offloaded = layer_offloaded_count(c.s(), layers);
  const std::array<std::int64_t, 5> cuts{dense, recomputed, bf16_head, layers - bf16_tail, offloaded};
  std::int64_t start = 0;
  while (start < layers) {
    const std::int64_t end = run_end(start, layers, cuts);
    const bool bf16 = start < bf16_head || start >= layers - bf16_tail;
    p.add(j.layer(start < dense, start < recomputed, bf16, start < offloaded), end - start, start);
    start = end;
  }
  if (mtp > 0) {
    // Each depth's decoder layer is of the model's last layer's kind (Megatron training.py counts
    // MTP layers as MoE when the last layer is), without recompute.
    const bool moe_last = is_moe(c.m()) && detail::dense_layer_count(c.m()) < c.m().layer_num;
    p.add(has_embedding ? j.mtp_prefix_shared : j.mtp_prefix, mtp, -1);
    p.add(moe_last ? j.moe_layer : j.dense_layer, mtp, -1);
    p.add(has_head ? j.mtp_suffix : j.mtp_suffix_own, mtp, -1);
  }
  if (has_head) p.add(has_embedding && c.m().tie_word_embeddings ? j.tied_head : j.head, 1, -1);
  return p;
}

/// Decoder layers of pipeline rank `r` (Megatron: first/last stage overrides, the others even).
constexpr std::int64_t stage_layer_count(const stage_layers& split, std::int64_t r, std::int64_t p) {
  if (p == 1 || r == 0) return split.first;
  return r == p - 1 ? split.last : split.middle;
}

/// Where pipeline rank `rank` of `p` sits (with one stage, `first` holds both ends).
constexpr stage_kind stage_kind_of(std::int64_t rank, std::int64_t p) {
  if (rank == 0) return stage_kind::first;
  return rank == p - 1 ? stage_kind::last : stage_kind::middle;
}

/// The index in `r.stages` of the stage of this kind and layout (`r.stage_count` when none).
constexpr std::size_t find_stage(const estimate_result& r, stage_kind kind, const rank_layout& lay) {
  std::size_t i = 0;
  while (i < r.stage_count && !(r.stages[i].kind == kind && r.stages[i].layout == lay)) ++i;
  return i;
}

/// Dense layers among `layers` decoder layers from model layer `first_layer`: the model's dense
/// layers come first in model order (Megatron --first-k-dense-replace).
constexpr std::int64_t dense_layers_from(const model_spec& m, std::int64_t first_layer, std::int64_t layers) {
  const std::int64_t dense = detail::dense_layer_count(m) - first_layer;
  return dense < 0 ? 0 : (dense > layers ? layers : dense);
}

/// What rank `r` holds given every virtual stage of the pipeline (`stages`, p·v of them): its model
/// chunk c is virtual stage c·p + r (Megatron's interleaved placement). The one derivation of a
/// rank's chunks; the even split, the embedding/loss slots and a pipeline_model_parallel_layout
/// (spec/pipeline_layout.hpp) only describe the stages differently.
constexpr rank_layout layout_rank(const model_spec& m, const strategy_spec& s, const std::vector<layout_stage>& stages,
                                  std::int64_t r) {
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  rank_layout out;
  out.chunk_count = v;
  for (std::int64_t c = 0; c < v; ++c) {
    const layout_stage& st = stages[static_cast<std::size_t>(c * p + r)];
    const std::int64_t dense = dense_layers_from(m, st.first_layer, st.layers);
    if (c < static_cast<std::int64_t>(max_rank_chunks))  // more chunks are refused where they are described
      out.chunks[static_cast<std::size_t>(c)] = {st.layers,         dense,        st.mtp, st.first_layer,
                                                 st.embeddings > 0, st.losses > 0};
    out.layers += st.layers;
    out.dense_layers += dense;
    out.mtp_layers += st.mtp;
    out.embedding = out.embedding || st.embeddings > 0;
    out.head = out.head || st.losses > 0;
    out.chunk_layers = st.layers > out.chunk_layers ? st.layers : out.chunk_layers;
  }
  out.chunk_dense_layers =
      dense_layers_from(m, stages[static_cast<std::size_t>(r)].first_layer, stages[static_cast<std::size_t>(r)].layers);
  return out;
}

/// The p·v virtual stages with the embedding / loss counted as layers (Megatron
/// get_num_layers_to_build): each gets (layers + slots) / (p·v) slots; the first virtual stage
/// builds one layer fewer for the embedding, the last one fewer for the loss (and holds the MTP layers).
constexpr std::vector<layout_stage> slot_stages(const model_spec& m, const strategy_spec& s) {
  const std::int64_t n = s.pp_size * s.interleaving_size;
  const std::int64_t emb = s.account_for_embedding_in_pipeline_split ? 1 : 0;
  const std::int64_t loss = s.account_for_loss_in_pipeline_split ? 1 : 0;
  const std::int64_t each = (m.layer_num + emb + loss) / n;
  std::vector<layout_stage> stages(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    const bool first = k == 0, last = k == n - 1;
    stages[static_cast<std::size_t>(k)] = {.layers = each - (first ? emb : 0) - (last ? loss : 0),
                                           .mtp = last ? m.mtp_num_layers : 0,
                                           .embeddings = first ? 1 : 0,
                                           .losses = last ? 1 : 0,
                                           .first_layer = k * each - (k > 0 ? emb : 0)};
  }
  return stages;
}

/// What rank `r` holds with the embedding / loss counted as layers and v > 1 model chunks.
constexpr rank_layout slot_layout_of_rank(const model_spec& m, const strategy_spec& s, std::int64_t r) {
  return layout_rank(m, s, slot_stages(m, s), r);
}

/// The p·v virtual stages of the even split. Plain 1F1B: a rank's layers follow the earlier
/// ranks' in model order. Interleaved: model chunk c·p + r holds layers/v of rank r's layers,
/// starting at c·L/v + Σ_{r'<r} layers(r')/v (Megatron `get_transformer_layer_offset`).
constexpr std::vector<layout_stage> even_stages(const model_spec& m, const strategy_spec& s,
                                                const stage_layers& split) {
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  std::vector<layout_stage> stages(static_cast<std::size_t>(p * v));
  for (std::int64_t r = 0; r < p; ++r) {
    const std::int64_t before = r == 0 ? 0 : split.first + (r - 1) * split.middle;  // layers of ranks below r
    for (std::int64_t c = 0; c < v; ++c) {
      const bool last = r == p - 1 && c == v - 1;
      stages[static_cast<std::size_t>(c * p + r)] = {.layers = stage_layer_count(split, r, p) / v,
                                                     .mtp = last ? m.mtp_num_layers : 0,
                                                     .embeddings = r == 0 && c == 0 ? 1 : 0,
                                                     .losses = last ? 1 : 0,
                                                     .first_layer = c * (m.layer_num / v) + before / v};
    }
  }
  return stages;
}

/// What rank `r` holds under the even split (or the slots of account_for_*_in_pipeline_split).
/// Its chunks are described (`chunk_count`) only with MTP layers, which sit in one chunk; FP8 jobs
/// note which of its layers are the model's bf16 first / last layers.
constexpr rank_layout layout_of_rank(const model_spec& m, const strategy_spec& s, const stage_layers& split,
                                     std::int64_t r) {
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  if (v > 1 && p > 1 && (s.account_for_embedding_in_pipeline_split || s.account_for_loss_in_pipeline_split))
    return slot_layout_of_rank(m, s, r);
  rank_layout out = layout_rank(m, s, even_stages(m, s, split), r);
  out.layers = stage_layer_count(split, r, p);
  if (m.mtp_num_layers == 0) {  // not described: the even split of `layers` says it all
    out.chunk_count = 0;
    out.chunks = {};
  }
  if (s.fp8 && s.fp8_first_last_layers_bf16 && v == 1) {  // interleaving is refused (refuse_unmodelled)
    const std::int64_t before = r == 0 ? 0 : split.first + (r - 1) * split.middle;
    auto clamp = [&](std::int64_t n) { return n < 0 ? 0 : (n > out.layers ? out.layers : n); };
    out.bf16_head_layers = clamp(s.fp8_layers_at_start_in_bf16 - before);
    out.bf16_tail_layers = clamp(before + out.layers - (m.layer_num - s.fp8_layers_at_end_in_bf16));
  }
  return out;
}

/// What rank `r` holds under DualPipeV's V-shaped placement (`chunk_placement::v_shape`): the
/// model cut into 2p equal virtual stages of layers/(2p) layers, rank r running stages r (chunk 0)
/// and 2p-1-r (chunk 1). Rank 0 thus holds the embedding (stage 0) and the final norm, output
/// layer and loss (stage 2p-1): a tied embedding is one weight there, not two copies. Two chunks
/// of one copy each, unlike DualPipe, which keeps two copies of the weights (README table:
/// parameters 2x per device for both, DualPipeV on half the devices). The dense layers
/// (--first-k-dense-replace) fall in the chunks they number into: `chunk_dense_layers` is chunk
/// 0's, chunk 1 holds `dense_layers - chunk_dense_layers`. The split is even and has no
/// first/last overrides (`validate_v_shape_split` refuses the rest). Same call shape as
/// `layout_of_rank` without the looped split.
constexpr rank_layout v_shape_layout_of_rank(const model_spec& m, const strategy_spec& s, std::int64_t r) {
  const std::int64_t p = s.pp_size, per_stage = m.layer_num / (2 * p);
  auto dense_of_stage = [&](std::int64_t stage) { return dense_layers_from(m, stage * per_stage, per_stage); };
  rank_layout out;
  out.layers = 2 * per_stage;
  out.chunk_layers = per_stage;
  out.chunk_dense_layers = dense_of_stage(virtual_stage(chunk_placement::v_shape, p, r, 0));
  out.dense_layers = out.chunk_dense_layers + dense_of_stage(virtual_stage(chunk_placement::v_shape, p, r, 1));
  out.embedding = r == 0;
  out.head = r == 0;
  return out;
}

/// Whether the strategy runs DualPipeV (V-shaped placement, two model chunks per rank).
constexpr bool v_shaped(const strategy_spec& s) { return pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev; }

/// Rank `r`'s model chunks of the even split, described (`layout_of_rank` prices them as even
/// 1/v shares of the rank's stage, SimuMax's convention): the embedding in chunk 0 of rank 0, the
/// output layer and loss (and MTP layers) in chunk v-1 of rank p-1, each chunk's own dense layers.
/// Their activations differ: the held warm-up chunks of the last rank do not hold the loss's
/// logits, which only its last chunk makes (Megatron builds the output layer on the last virtual
/// stage only, get_model's post_process).
constexpr rank_layout described_even_layout(const model_spec& m, const strategy_spec& s, std::int64_t r) {
  return layout_rank(m, s, even_stages(m, s, split_layers(m, s)), r);
}

/// What rank `rank` holds under the strategy's placement (looped or V-shaped).
constexpr rank_layout placed_layout(const model_spec& m, const strategy_spec& s, const stage_layers& split,
                                    std::int64_t rank) {
  if (!s.pipeline_model_parallel_layout.empty())
    return layout_rank(m, s, parse_pipeline_layout(s.pipeline_model_parallel_layout.view()), rank);
  return v_shaped(s) ? v_shape_layout_of_rank(m, s, rank) : layout_of_rank(m, s, split, rank);
}

/// The program of described model chunk `c` of a rank (see rank_layout::chunks).
constexpr stage_program described_chunk_program(const job_blocks& j, const build_context& c, const rank_layout& lay,
                                                std::size_t chunk) {
  const chunk_layout& k = lay.chunks[chunk];
  return build_stage(j, c, k.layers, k.dense_layers, k.embedding, k.head, k.mtp_layers);
}

/// Pipeline boundaries rank `rank` of `p` exchanges with other ranks per micro-batch and direction:
/// looped 1F1B one with each existing neighbour; V-shaped two with each neighbour (one per chunk),
/// the last rank handing chunk 0's output to its own chunk 1.
constexpr std::int64_t v_shape_neighbours(std::int64_t rank, std::int64_t p) {
  return (rank > 0 ? 1 : 0) + (rank < p - 1 ? 1 : 0);
}

/// Bytes one micro-batch holds over a stage, and the largest forward and backward footprints.
struct stage_memory {
  double held = 0, fwd_peak = 0, bwd_peak = 0;
  peak_site fwd_site{}, bwd_site{};
};

/// The backward of a stage that offloads activations, layer by layer: in the backward of layer j
/// the device holds what layers up to j keep and the offloaded bytes of layers
/// j - `prog.reload_ahead` .. j, reloaded (estimate/offload.hpp).
template <std::size_t N>
constexpr void walk_backward_reloading(const stage_program& prog, const std::array<block_memory, N>& walks,
                                       stage_memory& out) {
  std::vector<double> offloaded;  // per unit (a repetition of a block), in stage order
  for (std::size_t bi = 0; bi < prog.count; ++bi)
    for (std::int64_t r = 0; r < prog.blocks[bi].repeat; ++r) offloaded.push_back(walks[bi].offloaded);
  std::vector<double> below(offloaded.size() + 1, 0.0);  // offloaded bytes of the units before each
  for (std::size_t u = 0; u < offloaded.size(); ++u) below[u + 1] = below[u] + offloaded[u];
  const auto ahead = static_cast<std::size_t>(prog.reload_ahead);
  double g = out.held;
  std::size_t u = offloaded.size();
  for (std::size_t bi = prog.count; bi > 0; --bi) {
    const stage_block& sb = prog.blocks[bi - 1];
    for (std::int64_t r = 0; r < sb.repeat; ++r) {
      --u;
      const double reloaded = below[u + 1] - below[u > ahead ? u - ahead : 0];
      const double v = g + reloaded + walks[bi - 1].bwd_peak;
      if (v > out.bwd_peak) {
        out.bwd_peak = v;
        out.bwd_site = {static_cast<std::int64_t>(bi - 1), sb.first_layer < 0 ? -1 : sb.first_layer + sb.repeat - 1 - r,
                        sb.block->leaves[walks[bi - 1].bwd_leaf].name(), walks[bi - 1].bwd_pass};
      }
      g -= walks[bi - 1].held - walks[bi - 1].offloaded;
    }
  }
}

/// Walks the stage's blocks: forward, the last repetition of a block sees the most held bytes;
/// backward in reverse, the first repetition processed does (with activation offload, layer by
/// layer: `walk_backward_reloading`).
constexpr stage_memory walk_stage(const stage_program& prog) {
  stage_memory out;
  std::array<block_memory, max_stage_blocks> walks{};
  bool offloads = false;
  for (std::size_t bi = 0; bi < prog.count; ++bi) {
    const stage_block& sb = prog.blocks[bi];
    const double n = static_cast<double>(sb.repeat);
    walks[bi] = walk_memory(*sb.block);
    offloads = offloads || walks[bi].offloaded > 0;
    // Activation offload: an earlier layer's offloaded bytes have left the device by now.
    const double f = out.held + (n - 1) * (walks[bi].held - walks[bi].offloaded) + walks[bi].fwd_peak;
    if (f >= out.fwd_peak) {
      out.fwd_peak = f;
      out.fwd_site = {static_cast<std::int64_t>(bi), sb.first_layer < 0 ? -1 : sb.first_layer + sb.repeat - 1,
                      sb.block->leaves[walks[bi].fwd_leaf].name(), "forward"};
    }
    out.held += n * (walks[bi].held - walks[bi].offloaded);
  }
  if (offloads) {
    walk_backward_reloading(prog, walks, out);
    return out;
  }
  double g = out.held;
  for (std::size_t bi = prog.count; bi > 0; --bi) {
    const stage_block& sb = prog.blocks[bi - 1];
    const double v = g + walks[bi - 1].bwd_peak;
    if (v > out.bwd_peak) {
      out.bwd_peak = v;
      out.bwd_site = {static_cast<std::int64_t>(bi - 1), sb.first_layer < 0 ? -1 : sb.first_layer + sb.repeat - 1,
                      sb.block->leaves[walks[bi - 1].bwd_leaf].name(), walks[bi - 1].bwd_pass};
    }
    g -= static_cast<double>(sb.repeat) * walks[bi - 1].held;
  }
  return out;
}

namespace detail {
/// ZeRO-2/3 combinations the estimate refuses.
constexpr void refuse_unmodelled_sharding(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::estimate";
  if (s.zero_state < 2) return;
  if (!megatron_fsdp(s) && s.pp_size > 1)
    report_error(api, "strategy.zero_state",
                 "strategy.zero_state={} (DeepSpeed ZeRO-{}) with strategy.pp_size={}: DeepSpeed's pipeline engine "
                 "refuses ZeRO-2/3 with pipeline parallelism (deepspeed/runtime/pipe/engine.py); for Megatron-FSDP set "
                 "strategy.data_parallel_sharding_strategy",
                 s.zero_state, s.zero_state, s.pp_size);
  if (s.interleaving_size > 1 || pipeline_schedule_of(s) == pipeline_schedule_kind::zb_h1 ||
      pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev)
    report_error(api, "strategy.zero_state",
                 "strategy.zero_state={} (ZeRO-2/3, FSDP) with the \"{}\" pipeline schedule is not modelled yet (only "
                 "1f1b)",
                 s.zero_state, enum_name(pipeline_schedule_of(s)));
}

/// Activation offload combinations the estimate refuses.
constexpr void refuse_unmodelled_offload(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::estimate";
  if (s.cpu_offloading && (is_hybrid(m) || m.experimental_attention_variant))
    report_error(api, "strategy.cpu_offloading",
                 "strategy.cpu_offloading=true (TransformerEngine's layer-level activation offloading) with {} is not "
                 "modelled yet",
                 is_hybrid(m) ? "model.hybrid_override_pattern" : "model.experimental_attention_variant");
  if (!activation_offload_active(s)) return;
  const std::string_view field = s.fine_grained_activation_offloading ? "strategy.fine_grained_activation_offloading"
                                                                      : "strategy.offload_groupgemm_col_inputs";
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::zb_h1 || v_shaped(s))
    report_error(api, field,
                 "{}=true with the \"{}\" pipeline schedule is not modelled (only 1f1b and interleaved_1f1b)", field,
                 enum_name(pipeline_schedule_of(s)));
  if (recompute_active(s) && s.recompute_granularity != recompute_kind::selective_recompute)
    report_error(api, field,
                 "{}=true with strategy.recompute_granularity \"{}\" is not modelled (only selective recompute)", field,
                 enum_name(s.recompute_granularity));
  if (s.offload_modules.contains(offload_module::qkv_linear) && m.attention_type == attention_kind::mla)
    report_error(api, "strategy.offload_modules",
                 "strategy.offload_modules \"qkv_linear\" with an MLA model is not modelled (MLA has no linear_qkv)");
}

/// Refuses what a hybrid model (model.hybrid_override_pattern) does not model yet.
constexpr void refuse_unmodelled_hybrid(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::estimate";
  if (!is_hybrid(m)) return;
  if (s.pp_size > 1 || s.interleaving_size > 1 || !s.pipeline_model_parallel_layout.empty())
    report_error(api, "strategy.pp_size",
                 "model.hybrid_override_pattern with strategy.pp_size={} (or interleaving / a pipeline layout) is not "
                 "modelled yet: hybrid layers are placed on one pipeline stage only",
                 s.pp_size);
  if (s.cp_size > 1)
    report_error(api, "strategy.cp_size",
                 "model.hybrid_override_pattern with strategy.cp_size={} is not modelled yet (Mamba's context-parallel "
                 "all-to-alls, mamba_context_parallel.py)",
                 s.cp_size);
  if (recompute_active(s) && s.recompute_granularity != recompute_kind::full_block &&
      !(s.recompute_granularity == recompute_kind::selective_recompute && s.megatron_recompute))
    report_error(
        api, "strategy.recompute_granularity",
        "model.hybrid_override_pattern with strategy.recompute_granularity \"{}\"{} is not modelled: "
        "Megatron's hybrid stack recomputes whole layers (full_block) or the modules of "
        "strategy.megatron_recompute_modules (selective_recompute with strategy.megatron_recompute=true)",
        enum_name(s.recompute_granularity),
        s.recompute_granularity == recompute_kind::selective_recompute ? " with SimuMax's selective flags" : "");
  if (activation_offload_active(s))
    report_error(api, "strategy.fine_grained_activation_offloading",
                 "activation offload with model.hybrid_override_pattern is not modelled yet (the offloaded modules of "
                 "Mamba layers)");
  if (m.add_linear_bias)
    report_error(api, "model.add_linear_bias",
                 "model.add_linear_bias=true with model.hybrid_override_pattern is not modelled (Mamba's in_proj and "
                 "out_proj have no bias: mamba_mixer.py asserts not bias)");
}

/// What the DeepSeek-V4 program does not model, refused by field (called by refuse_unmodelled).
constexpr void refuse_unmodelled_dsv4(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::estimate";
  if (!m.experimental_attention_variant) return;
  if (s.tp_size != 1)
    report_error(api, "strategy.tp_size",
                 "strategy.tp_size={} with model.experimental_attention_variant \"dsv4_hybrid\": Megatron's "
                 "DSv4HybridAttention supports tensor-parallel size 1 only (deepseek_v4_hybrid_attention.py)",
                 s.tp_size);
  if (s.cp_size > 1)
    report_error(api, "strategy.cp_size",
                 "strategy.cp_size={} with model.experimental_attention_variant \"dsv4_hybrid\" is not modelled yet "
                 "(its THD context parallelism exchanges boundary rows, csa_utils/cp_utils.py)",
                 s.cp_size);
  if (s.pp_size > 1 || s.interleaving_size > 1 || !s.pipeline_model_parallel_layout.empty())
    report_error(api, "strategy.pp_size",
                 "strategy.pp_size={} (or interleaving / a pipeline layout) with model.experimental_attention_variant "
                 "\"dsv4_hybrid\" is not modelled yet: its per-layer compression ratios are placed on one stage only",
                 s.pp_size);
  const bool modules_ok = s.megatron_recompute && s.recompute_granularity == recompute_kind::selective_recompute &&
                          !s.megatron_recompute_modules.contains(recompute_module::layernorm) &&
                          !s.megatron_recompute_modules.contains(recompute_module::core_attn) &&
                          !s.megatron_recompute_modules.contains(recompute_module::mlp);
  if (recompute_active(s) && (!modules_ok || s.recompute_layer_num < m.layer_num))
    report_error(api, "strategy.recompute_granularity",
                 "model.experimental_attention_variant \"dsv4_hybrid\" is modelled with Megatron's selective recompute "
                 "modules mla_up_proj, moe and moe_act on every layer only");
  if (s.fp8 && s.fp8_first_last_layers_bf16)
    report_error(api, "strategy.fp8_first_last_layers_bf16",
                 "strategy.fp8_first_last_layers_bf16=true with model.experimental_attention_variant \"dsv4_hybrid\" "
                 "is not modelled yet");
  if (activation_offload_active(s))
    report_error(api, "strategy.fine_grained_activation_offloading",
                 "activation offload with model.experimental_attention_variant \"dsv4_hybrid\" is not modelled yet");
  if (!s.use_flash_sdp)
    report_error(api, "strategy.use_flash_sdp",
                 "strategy.use_flash_sdp=false with model.experimental_attention_variant \"dsv4_hybrid\" is not "
                 "modelled (the unfused CSA reference path)");
  if (m.add_linear_bias)
    report_error(api, "model.add_linear_bias",
                 "model.add_linear_bias=true with model.experimental_attention_variant \"dsv4_hybrid\" is not "
                 "modelled (its projections have no bias)");
  if (is_hybrid(m))
    report_error(api, "model.hybrid_override_pattern",
                 "model.hybrid_override_pattern with model.experimental_attention_variant \"dsv4_hybrid\" is not "
                 "modelled");
  if (is_moe(m) && m.dense_layers > 0)
    report_error(api, "model.dense_layers",
                 "dense layers with model.experimental_attention_variant \"dsv4_hybrid\" are not modelled yet (every "
                 "DeepSeek-V4 layer is MoE)");
  for (std::int64_t d = 1; d < m.mtp_num_layers; ++d)
    if (m.csa_compress_ratios[static_cast<std::size_t>(m.layer_num + d)] !=
        m.csa_compress_ratios[static_cast<std::size_t>(m.layer_num)])
      report_error(api, "model.csa_compress_ratios",
                   "model.csa_compress_ratios: MTP layers of different compression ratios are not modelled yet");
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev)
    report_error(api, "strategy.pipeline_schedule",
                 "the DualPipeV schedule with model.experimental_attention_variant \"dsv4_hybrid\" is not modelled");
}

/// Refuses what the estimate does not model yet, naming the field that asks for it.
constexpr void refuse_unmodelled(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::estimate";
  refuse_unmodelled_sharding(s);
  refuse_unmodelled_hybrid(m, s);
  if (s.cp_size > 1 && !s.use_flash_sdp)
    report_error(api, "strategy.use_flash_sdp",
                 "strategy.cp_size={} with strategy.use_flash_sdp=false is not modelled (TransformerEngine's context "
                 "parallelism runs fused / flash attention only)",
                 s.cp_size);
  // Megatron's MLA without q_lora_rank leaves linear_q_proj keeping its quantized input under FP8
  // layernorm recompute (set_for_recompute_input_layernorm marks only the down projections).
  if (s.fp8 && s.megatron_recompute && s.megatron_recompute_modules.contains(recompute_module::layernorm) &&
      m.attention_type == attention_kind::mla && !m.q_lora_rank)
    report_error(api, "strategy.megatron_recompute_modules",
                 "strategy.megatron_recompute_modules \"layernorm\" with strategy.fp8=true and an MLA model without "
                 "model.q_lora_rank is not modelled (linear_q_proj keeps its quantized input)");
  if (s.fp8 && s.fp8_first_last_layers_bf16 &&
      (s.interleaving_size > 1 || v_shaped(s) || !s.pipeline_model_parallel_layout.empty()))
    report_error(api, "strategy.fp8_first_last_layers_bf16",
                 "strategy.fp8_first_last_layers_bf16=true with interleaving_size={}, pipeline_schedule "
                 "\"dualpipev\" or a pipeline_model_parallel_layout is not modelled yet (only plain pipeline stages "
                 "place the bf16 layers)",
                 s.interleaving_size);
  if (s.dtype == dtype_kind::fp32)
    report_error(api, "strategy.dtype",
                 "strategy.dtype=\"fp32\" is not modelled (GEMMs are priced at the 16-bit rate and the optimizer state "
                 "assumes mixed precision with an fp32 master copy)");
  if (!s.use_fused_norm)
    report_error(api, "strategy.use_fused_norm",
                 "strategy.use_fused_norm=false is not modelled: Megatron-LM with TransformerEngine always runs the "
                 "fused norm (TENorm)");
  if (!s.use_accm_weight)
    report_error(api, "strategy.use_accm_weight", "strategy.use_accm_weight=false is not modelled");
  refuse_unmodelled_offload(m, s);
  if (is_moe(m) && m.group_linear_mode == group_linear_kind::sequential)
    report_error(api, "model.group_linear_mode",
                 "model.group_linear_mode=\"sequential\" (one GEMM per expert, Megatron SequentialMLP) is not modelled "
                 "yet; use \"parallel\" (grouped GEMM)");
  if (is_moe(m) && s.moe_dispatcher_policy == dispatcher_kind::flex && s.etp_size > 1)
    report_error(api, "strategy.etp_size",
                 "strategy.etp_size={} with strategy.moe_dispatcher_policy=\"flex\" is not modelled yet (DeepEP's "
                 "group spans ep x etp; use etp_size=1)",
                 s.etp_size);
  if (m.mtp_num_layers > 0 && pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev)
    report_error(api, "model.mtp_num_layers",
                 "model.mtp_num_layers={} with the DualPipeV schedule is not modelled (its V split has no MTP chunk)",
                 m.mtp_num_layers);
  refuse_unmodelled_dsv4(m, s);
  // Described chunks (rank_layout::chunks): MTP layers, a layout, or the embedding/loss slots.
  const bool slots = s.account_for_embedding_in_pipeline_split || s.account_for_loss_in_pipeline_split;
  if ((m.mtp_num_layers > 0 || !s.pipeline_model_parallel_layout.empty() || slots) &&
      s.interleaving_size > static_cast<std::int64_t>(max_rank_chunks))
    report_error(api, "strategy.interleaving_size",
                 "strategy.interleaving_size={} with MTP layers, a pipeline layout or "
                 "account_for_embedding/loss_in_pipeline_split: at most {} model chunks per rank",
                 s.interleaving_size, max_rank_chunks);
}

constexpr void add_note(std::uint32_t& notes, estimate_note n) { notes |= 1U << static_cast<unsigned>(n); }

/// The compute capability used for TransformerEngine's workspace size: the system's, else the one
/// its name implies, else a current GPU (>= 9.0) — the last two leave a note in the result.
constexpr double effective_compute_capability(const system_spec& sys, std::uint32_t& notes) {
  if (sys.accelerator.compute_capability > 0) return sys.accelerator.compute_capability;
  if (const double cc = compute_capability_from_name(sys.sys_name.view()); cc > 0) {
    add_note(notes, estimate_note::compute_capability_from_name);
    return cc;
  }
  add_note(notes, estimate_note::compute_capability_assumed);
  return 9.0;
}

/// System figures SimuMax's format reserves but no cost model uses yet.
constexpr void note_unmodelled_system(const system_spec& sys, std::uint32_t& notes) {
  for (std::size_t i = 0; i < sys.network_count; ++i)
    if (sys.networks[i].processor_usage != 0) add_note(notes, estimate_note::processor_usage_not_modelled);
}

/// What every stage of one job shares while it is priced.
struct job_context {
  const build_context* c = nullptr;
  const job_blocks* blocks = nullptr;
  seconds p2p{};               ///< one activation transfer between neighbouring stages
  seconds p2p_gather{};        ///< scatter_gather_tensors_in_pipeline: the tp all-gather after each receive
  double grad_bytes = 0;       ///< bytes of one main-gradient element
  double workspace_bytes = 0;  ///< TE's cuBLAS workspace per GEMM stream
  bool te_dummy = false, te_grouped_dummy = false;
  bool current_gpu = false;  ///< compute capability >= 9 (the host link and memory of optimizer_cpu_offload)
};

/// Whether leaf `l` carries an expert-parallel token exchange (a dispatch or a combine).
constexpr bool exchanges_tokens(const leaf& l) { return l.fwd_a2a.value > 0 || l.bwd_a2a.value > 0; }

/// One decoder layer's steps (`layer_steps`) from its leaves in forward order: up to the leaf with
/// the first expert exchange (the dispatch; its permutation included) the computation before
/// the dispatch; up to the next exchange (the combine) the expert MLP; that leaf and what follows
/// (unpermutation, shared-expert add, residual) the combine node (fine_grained_callables.py): its
/// exchange and its computation. A dense layer is all computation before the
/// dispatch. `delay_wgrad`: the weight gradients apart (Megatron delay_wgrad_compute), else part
/// of their backward.
constexpr layer_steps layer_steps_of(const leaf_block& block, bool delay_wgrad) {
  layer_steps st;
  int exchanges = 0;
  for (const leaf& l : block) {
    const double fwd = (l.fwd + l.fwd_comm).value, a2a_fwd = l.fwd_a2a.value, a2a_bwd = l.bwd_a2a.value;
    const double wgrad = delay_wgrad ? (l.bwd_weight + l.bwd_weight_comm).value : 0.0;
    const double bwd = (l.bwd + l.bwd_comm + l.replay() + l.replay_comm()).value - wgrad;
    const bool exchange = exchanges_tokens(l);
    if (exchanges == 0) {  // before the dispatch; the dispatch leaf's own computation too
      st.attn_fwd += fwd - a2a_fwd, st.dispatch_fwd += a2a_fwd;
      st.attn_bwd += bwd - a2a_bwd, st.dispatch_bwd += a2a_bwd, st.attn_wgrad += wgrad;
    } else if (exchanges == 1 && !exchange) {
      st.mlp_fwd += fwd, st.mlp_bwd += bwd, st.mlp_wgrad += wgrad;
    } else {  // the combine node: its exchange, then its computation (backward: the reverse)
      st.combine_fwd += a2a_fwd, st.post_fwd += fwd - a2a_fwd;
      st.combine_bwd += a2a_bwd, st.post_bwd += bwd + wgrad - a2a_bwd;
    }
    exchanges += exchange ? 1 : 0;
  }
  return st;
}

/// Whether `block` exchanges tokens (a MoE layer, the MTP layer's included).
constexpr bool block_exchanges(const leaf_block& block) {
  for (const leaf& l : block)
    if (exchanges_tokens(l)) return true;
  return false;
}
/// Appends `n` layers of `block` to `r`'s layer runs (overlap_moe_expert_parallel_comm).
constexpr void add_layer_run(stage_result& r, const leaf_block& block, double n, bool delay_wgrad) {
  if (r.layer_run_count == max_layer_runs)
    report_error("llmsim::estimate", "", "a stage holds at most {} runs of decoder layers", max_layer_runs);
  r.layer_runs[r.layer_run_count++] = {layer_steps_of(block, delay_wgrad), n};
}

/// Per-micro-batch time, parameters and TE's dummy weight-gradient buffers (one per distinct
/// weight shape, TE >= 2.3 `get_dummy_wgrad`) of one stage program.
constexpr double price_program(stage_result& r, const stage_program& prog, const job_context& j) {
  std::array<std::pair<std::int64_t, std::int64_t>, 64> shapes{};
  std::size_t shape_count = 0;
  for (std::size_t bi = 0; bi < prog.count; ++bi) {
    const stage_block& sb = prog.blocks[bi];
    const double n = static_cast<double>(sb.repeat);
    if (j.c->s().overlap_moe_expert_parallel_comm && (sb.first_layer >= 0 || block_exchanges(*sb.block)))
      add_layer_run(r, *sb.block, n, j.c->s().delay_wgrad_compute);
    for (const leaf& l : *sb.block) {
      r.fwd_compute_time += l.fwd * n;
      r.bwd_compute_time += l.bwd * n;
      r.bwd_weight_time += l.bwd_weight * n;
      r.bwd_weight_comm_time += l.bwd_weight_comm * n;
      r.fwd_a2a_time += l.fwd_a2a * n;
      r.bwd_a2a_time += l.bwd_a2a * n;
      r.recompute_time += l.replay() * n;
      r.fwd_tp_comm_time += l.fwd_comm * n;
      r.bwd_tp_comm_time += l.bwd_comm * n;
      r.recompute_tp_comm_time += l.replay_comm() * n;
      r.params += l.params * n;
      if (l.expert_params) r.expert_params += l.params * n;
      r.quantized_params += l.quantized_params * n;
      if (l.expert_params) r.quantized_expert_params += l.quantized_params * n;
      r.quantized_weight_mem += bytes_from(l.quantized_weight_bytes * n);
      if (l.tp_duplicated) r.tp_duplicated_params += l.params * n;
      r.efficiency_lookups += l.efficiency_lookups * static_cast<std::int32_t>(sb.repeat);
      r.efficiency_misses += l.efficiency_misses * static_cast<std::int32_t>(sb.repeat);
      r.efficiency_interpolated += l.efficiency_interpolated * static_cast<std::int32_t>(sb.repeat);
      r.efficiency_modelled += l.efficiency_modelled * static_cast<std::int32_t>(sb.repeat);
      if (l.weight_rows > 0 && (!l.grouped || j.te_grouped_dummy)) {
        bool seen = false;
        for (std::size_t i = 0; i < shape_count; ++i)
          seen = seen || (shapes[i].first == l.weight_rows && shapes[i].second == l.weight_cols);
        if (!seen && shape_count < shapes.size()) shapes[shape_count++] = {l.weight_rows, l.weight_cols};
      }
    }
  }
  double dummy = 0;
  if (j.te_dummy)
    for (std::size_t i = 0; i < shape_count; ++i)
      dummy += static_cast<double>(shapes[i].first) * static_cast<double>(shapes[i].second) * j.c->element_bytes();
  return dummy;
}

/// Bytes of one gradient element a stage keeps and reduces: Megatron's main gradient (fp32 unless
/// grad_reduce_in_bf16), except under DeepSpeed ZeRO-2/3, which accumulates and reduces gradients
/// in the model's 16-bit type (deepspeed/runtime/engine.py `get_data_types`: grad_accum_dtype is
/// the model dtype under ZeRO; the ZeRO paper's 2 bytes of fp16 gradients per parameter, §3.1).
constexpr double stage_grad_bytes(const job_context& j) {
  const strategy_spec& s = j.c->s();
  return s.zero_state >= 2 && !megatron_fsdp(s) ? j.c->element_bytes() : j.grad_bytes;
}

/// Parameters this rank's optimizer updates: dense ones sharded over dp·cp, expert ones over edp
/// (ZeRO >= 1), else all.
constexpr double local_params(const stage_result& r, const strategy_spec& s) {
  if (s.zero_state < 1) return r.params;
  return (r.params - r.expert_params) / static_cast<double>(dp_size(s) * s.cp_size) +
         r.expert_params / static_cast<double>(edp_size(s));
}

/// A collective over the data-parallel group of dense (dp·cp) or expert (edp) parameters.
constexpr seconds data_parallel_collective(const job_context& j, comm_group which, collective_kind kind, double bytes) {
  const strategy_spec& s = j.c->s();
  const std::int64_t group = which == comm_group::edp ? edp_size(s) : dp_size(s) * s.cp_size;
  if (group <= 1 || bytes <= 0) return {};
  return collective_time(j.c->sys(), s, resolve_tier(j.c->sys(), s, which), {kind, bytes, group, which});
}

/// The units of a stage under ZeRO-2/3 (schedule/sharded_dp.hpp): each decoder layer, and the
/// embedding and the head blocks, with their compute of one micro-batch, the all-gather of their
/// 16-bit weights (ZeRO-3) and the reduce-scatter of their gradients; `params` per unit.
struct shard_plan {
  std::vector<shard_unit> units;
  std::vector<double> params;  ///< parameters of one unit of each entry
};
constexpr shard_plan plan_shard_units(const job_context& j, const stage_program& prog) {
  const strategy_spec& s = j.c->s();
  const double eb = j.c->element_bytes(), gb = stage_grad_bytes(j);
  shard_plan out;
  for (std::size_t bi = 0; bi < prog.count; ++bi) {
    const stage_block& sb = prog.blocks[bi];
    shard_unit u;
    u.repeat = sb.repeat;
    double dense = 0, expert = 0;
    for (const leaf& l : *sb.block) {
      u.forward += (l.fwd + l.fwd_comm).value;
      u.backward += (l.bwd + l.replay() + l.bwd_comm + l.replay_comm()).value;
      (l.expert_params ? expert : dense) += l.params;
    }
    if (s.zero_state >= 3)
      u.gather = (data_parallel_collective(j, comm_group::dp, collective_kind::all_gather, dense * eb) +
                  data_parallel_collective(j, comm_group::edp, collective_kind::all_gather, expert * eb))
                     .value;
    u.reduce = (data_parallel_collective(j, comm_group::dp, collective_kind::reduce_scatter, dense * gb) +
                data_parallel_collective(j, comm_group::edp, collective_kind::reduce_scatter, expert * gb))
                   .value;
    out.units.push_back(u);
    out.params.push_back(dense + expert);
  }
  return out;
}

/// ZeRO-2/3 (DeepSpeed stage_1_and_2.py with partition_grads, stage3.py; Megatron-FSDP optim_grads /
/// optim_grads_params: "RS on all microbatches", "RS & AG on all microbatches", mcore_fsdp_adapter.py):
/// every micro-batch's forward gathers each unit (ZeRO-3) and its backward gathers it again and
/// reduce-scatters its gradients; what the layer compute cannot hide is added to the passes. The
/// gathers are always prefetched (DeepSpeed's stage3_prefetch_bucket_size, FSDP's one-unit
/// prefetch); ZeRO-3's reduce-scatter runs on its own stream (DeepSpeed stage 3's overlap_comm
/// default), ZeRO-2's beside the compute only with overlap_grad_reduce (DeepSpeed overlap_comm).
/// Memory in flight: two units' gathered weights (the running one and the prefetched one, the
/// largest neighbouring pair) and one unit's whole gradients before their reduce-scatter.
constexpr void plan_sharded_passes(stage_result& r, const job_context& j, const stage_program& prog) {
  const strategy_spec& s = j.c->s();
  if (s.zero_state < 2) return;
  const shard_plan plan = plan_shard_units(j, prog);
  double gather = 0, reduce = 0, pair = 0, largest = 0, previous = 0;
  for (std::size_t i = 0; i < plan.units.size(); ++i) {
    const auto n = static_cast<double>(plan.units[i].repeat);
    gather += plan.units[i].gather * n;
    reduce += plan.units[i].reduce * n;
    const double p = plan.params[i];
    if (previous + p > pair) pair = previous + p;                // the last unit of the block before and this one
    if (plan.units[i].repeat > 1 && 2 * p > pair) pair = 2 * p;  // two units of this block
    if (p > largest) largest = p;
    previous = p;
  }
  r.fwd_shard_comm_time = seconds{gather};
  r.bwd_shard_comm_time = seconds{gather + reduce};
  r.fwd_shard_exposed_time = seconds{s.zero_state >= 3 ? sharded_forward_exposed(plan.units) : 0.0};
  r.bwd_shard_exposed_time = seconds{sharded_backward_exposed(plan.units, s.zero_state >= 3 || s.overlap_grad_reduce)};
  // Groups of one rank (dense dp·cp; edp when there are experts): every shard is the whole tensor.
  if (dp_size(s) * s.cp_size == 1 && (r.expert_params <= 0 || edp_size(s) == 1)) return;
  if (s.zero_state >= 3) r.gathered_param_mem = bytes_from(pair * j.c->element_bytes());
  r.unsharded_grad_mem = bytes_from(largest * stage_grad_bytes(j));
}

/// Model memory of a stage: bf16 weights, main grads, fp32 master + Adam m, v sharded by ZeRO-1
/// over dp·cp (dense parameters) and over the expert-data-parallel group (expert parameters),
/// TE's dummy wgrad buffers, and cuBLAS workspaces (one per GEMM stream; MoE adds the grouped
/// GEMM streams).
constexpr void size_model_memory(stage_result& r, const job_context& j, double dummy_wgrad_bytes) {
  const strategy_spec& s = j.c->s();
  const double shard = s.zero_state >= 1 ? static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
  const double expert_shard = s.zero_state >= 1 ? static_cast<double>(edp_size(s)) : 1.0;
  // ZeRO-2 shards the gradients, ZeRO-3 also the weights, as the optimizer state (ZeRO paper §5.1-5.3).
  const auto sharded = [&](double per_param) {
    return bytes_from((r.params - r.expert_params) * per_param / shard + r.expert_params * per_param / expert_shard);
  };
  r.weight_mem = bytes_from(r.params * j.c->element_bytes());
  // FP8 (TE): quantized weight copies beside the bf16 weights; with fp8_param_gather (Megatron
  // --fp8-param-gather) the quantized copies are the parameters and the bf16 copy is gone.
  if (s.fp8 && s.fp8_param_gather) r.weight_mem = bytes_from((r.params - r.quantized_params) * j.c->element_bytes());
  r.weight_mem += r.quantized_weight_mem;
  r.grad_mem = bytes_from(r.params * j.grad_bytes);
  if (s.zero_state >= 2) r.grad_mem = sharded(stage_grad_bytes(j));
  if (s.zero_state >= 3) r.weight_mem = sharded(j.c->element_bytes());
  const double state = detail::adam_state_bytes_per_param(s, known_compute_capability(j.c->sys()));
  r.optimizer_state_mem = bytes{
      static_cast<std::int64_t>((r.params - r.expert_params) * state / shard + r.expert_params * state / expert_shard)};
  if (s.optimizer_cpu_offload) r.optimizer_state_mem = bytes{};  // fp32 master, m and v live on the host
  if (s.optimizer == optimizer_kind::muon) {  // fp32 master + momentum for Muon's matrices, Adam's for the rest
    const double muon_dense = r.muon_params - r.muon_expert_params;
    r.optimizer_state_mem = bytes{
        static_cast<std::int64_t>((muon_dense * parameters::muon_state_bytes_per_param +
                                   (r.params - r.expert_params - muon_dense) * parameters::adam_state_bytes_per_param) /
                                      shard +
                                  (r.muon_expert_params * parameters::muon_state_bytes_per_param +
                                   (r.expert_params - r.muon_expert_params) * parameters::adam_state_bytes_per_param) /
                                      expert_shard)};
  }
  r.te_dummy_wgrad_mem = bytes_from(dummy_wgrad_bytes);
  r.workspace_mem =
      bytes_from(j.workspace_bytes * (1 + (r.expert_params > 0 ? parameters::te_grouped_gemm_streams : 0)));
  r.model_mem = r.weight_mem + r.grad_mem + r.optimizer_state_mem + r.te_dummy_wgrad_mem + r.workspace_mem;
  if (s.zero_state >= 2) r.model_mem += r.gathered_param_mem + r.unsharded_grad_mem;
}

/// overlap_moe_expert_parallel_comm: one layer's bytes per micro-batch of a stage or model chunk
/// of `layers` decoder and `mtp_layers` MTP layers (their mean, without the embedding and the
/// loss, which are not layers of a step), 0 without layers. A combined step's backward frees its
/// chunk layer by layer as its forward fills its own (TransformerLayerSchedulePlan releases each
/// backward layer's state), so at a step the rank holds its warm-up sets and the forward's first layer.
constexpr double combined_step_layer(const job_context& j, std::int64_t layers, std::int64_t dense_layers,
                                     std::int64_t mtp_layers) {
  if (layers + mtp_layers <= 0) return 0;
  const double held = walk_stage(build_stage(*j.blocks, *j.c, layers, dense_layers, false, false, mtp_layers)).held;
  return held / static_cast<double>(layers + mtp_layers);
}

/// Micro-batches (interleaved: model chunks) rank `rank` holds at its peak, and the bytes of all
/// but the one running. 1F1B: p - rank (warm-up forwards + one). Interleaved 1F1B (Megatron
/// forward_backward_pipelining_with_interleaving): (p - rank - 1)·2 + (v - 1)·g warm-up chunk
/// forwards (capped at m·v), g = microbatch_group_size_per_vp_stage (default p), plus
/// the one in flight, each chunk holding layers / v of the stage (used past max_rank_chunks
/// chunks only: `size_described_activations` walks each chunk's own bytes). overlap_moe_expert_parallel_comm:
/// its warm-up chunk-forwards (one more, capped at the total) and, when it runs a combined step,
/// one layer (`combined_step_layer`).
/// ZB-H1: the peak of micro-batches rank `rank` holds counted from its pass order (held from the
/// forward until the weight-gradient pass, schedule/engine.hpp).
constexpr double held_by_others(stage_result& r, const job_context& j, double held) {
  const strategy_spec& s = j.c->s();
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::zb_h1) {
    r.micro_batches_in_flight = peak_in_flight(zb_h1_rank_passes(p, s.micro_batch_num, r.rank));
    return static_cast<double>(r.micro_batches_in_flight - 1) * held;
  }
  const std::int64_t g = s.microbatch_group_size_per_vp_stage.value_or(p), total_chunks = s.micro_batch_num * v;
  if (s.overlap_moe_expert_parallel_comm) {
    const std::int64_t warmup = interleaved_warmup(p, v, s.micro_batch_num, g, r.rank, true);
    r.micro_batches_in_flight = (warmup + v - 1) / v;
    const double step = warmup < total_chunks
                            ? combined_step_layer(j, r.layout.layers, r.layout.dense_layers, r.layout.mtp_layers)
                            : 0.0;
    return static_cast<double>(warmup - 1) * held / static_cast<double>(v) + step;
  }
  if (v > 1) {
    const std::int64_t warmup = interleaved_warmup(p, v, s.micro_batch_num, g, r.rank);
    const std::int64_t in_flight = warmup + 1 < total_chunks ? warmup + 1 : total_chunks;
    r.micro_batches_in_flight = (in_flight + v - 1) / v;
    return static_cast<double>(in_flight - 1) * held / static_cast<double>(v);
  }
  r.micro_batches_in_flight = p - r.rank < s.micro_batch_num ? p - r.rank : s.micro_batch_num;
  return static_cast<double>(r.micro_batches_in_flight - 1) * held;
}

/// Activations and peaks of a stage at its lowest rank (the one holding the most in flight). The
/// forward / backward peak is walked over one model chunk (the whole stage without interleaving).
constexpr void size_activations(stage_result& r, const job_context& j, const stage_program& prog) {
  const strategy_spec& s = j.c->s();
  const stage_memory whole = walk_stage(prog);
  const rank_layout& lay = r.layout;
  const stage_memory chunk =
      s.interleaving_size > 1
          ? walk_stage(build_stage(*j.blocks, *j.c, lay.chunk_layers, lay.chunk_dense_layers, lay.embedding, lay.head))
          : whole;
  const double others = held_by_others(r, j, whole.held);
  r.fwd_activation_cache_per_micro_batch = bytes_from(whole.held);
  r.peak_activation_mem_in_1F1B = bytes_from(chunk.fwd_peak > chunk.bwd_peak ? chunk.fwd_peak : chunk.bwd_peak);
  r.fwd_transient_mem = bytes_from(chunk.fwd_peak);
  r.bwd_transient_mem = bytes_from(chunk.bwd_peak);
  r.fwd_peak_allocated_mem = r.model_mem + bytes_from(others + chunk.fwd_peak);
  r.bwd_peak_allocated_mem = r.model_mem + bytes_from(others + chunk.bwd_peak);
  r.peak_mem =
      r.fwd_peak_allocated_mem > r.bwd_peak_allocated_mem ? r.fwd_peak_allocated_mem : r.bwd_peak_allocated_mem;
  r.peak_path = chunk.fwd_peak > chunk.bwd_peak ? chunk.fwd_site : chunk.bwd_site;
  r.peak_mem_with_reserved = bytes_from(static_cast<double>(r.peak_mem.value) / s.mem_factor);
}

/// Megatron finalize_model_grads.py _allreduce_word_embedding_grads: after the data-parallel sync
/// the first pipeline stage (the embedding) and the last (a tied LM head's copy, or the embedding
/// MTP layers read) all-reduce that weight's whole main gradient, padded vocab / tp x hidden
/// (Megatron FSDP, sharding at any level: its local shard). One rank holding both (pp 1, DualPipeV's rank 0) has one weight.
constexpr seconds embedding_grad_allreduce_time(const stage_result& r, const job_context& j) {
  const strategy_spec& s = j.c->s();
  const model_spec& m = j.c->m();
  if (s.pp_size <= 1 || v_shaped(s)) return {};
  const bool shares = r.layout.embedding ? m.tie_word_embeddings || m.mtp_num_layers > 0
                                         : (r.layout.head && m.tie_word_embeddings) || r.layout.mtp_layers > 0;
  if (!shares) return {};
  double elements = static_cast<double>(padded_vocab(m, s.tp_size) / s.tp_size) * static_cast<double>(m.hidden_size);
  // Megatron FSDP's main gradient is this rank's shard whenever it shards (param_and_grad_buffer.py
  // update_main_grads; finalize_model_grads reduces `_local_tensor`).
  if (megatron_fsdp(s) && s.zero_state >= 1) elements /= static_cast<double>(dp_size(s) * s.cp_size);
  return collective_time(j.c->sys(), s, embedding_group_tier(j.c->sys(), s),
                         {collective_kind::all_reduce, elements * stage_grad_bytes(j), 2, comm_group::pp});
}

/// The stage's data-parallel sync from its DDP buckets: the unoverlapped reductions and gathers
/// (`dp_time`), and the parts the overlap settings can hide.
constexpr void plan_data_parallel(stage_result& r, const job_context& j) {
  const strategy_spec& s = j.c->s();
  // fp8_param_gather: Megatron buffers the quantized parameters apart from the bf16 ones (one buffer
  // per dtype, param_and_grad_buffer.py) and all-gathers them quantized: the gathered bytes per
  // parameter are the buffers' mix, each bucket gathering that mean (a simplification of two buffers).
  double dense_gather = 0, expert_gather = 0;
  if (s.fp8 && s.fp8_param_gather) {
    const double E = j.c->element_bytes(), q = j.c->format().weight;
    const double dense_params = r.params - r.expert_params, dense_q = r.quantized_params - r.quantized_expert_params;
    if (dense_params > 0) dense_gather = ((dense_params - dense_q) * E + dense_q * q) / dense_params;
    if (r.expert_params > 0)
      expert_gather =
          ((r.expert_params - r.quantized_expert_params) * E + r.quantized_expert_params * q) / r.expert_params;
  }
  const bucket_plan dense =
      plan_buckets(j.c->sys(), s, r.params - r.expert_params, j.grad_bytes, comm_group::dp, dense_gather);
  const bucket_plan expert = plan_buckets(j.c->sys(), s, r.expert_params, j.grad_bytes, comm_group::edp, expert_gather);
  for (const bucket_plan* b : {&dense, &expert}) {
    r.grad_reduce_time += b->reduce_full * static_cast<double>(b->full) + b->reduce_rest;
    r.param_gather_time += b->gather_full * static_cast<double>(b->full) + b->gather_rest;
    r.dp_buckets += b->count();
  }
  // ZeRO-2/3 reduce-scatter every micro-batch in its backward (plan_sharded_passes); ZeRO-3 keeps
  // its weights sharded, so nothing is gathered after the step.
  const double m = static_cast<double>(s.micro_batch_num), p = r.params, eb = j.c->element_bytes();
  r.dp_comm_bytes = p * j.grad_bytes + (s.zero_state >= 1 ? p * eb : 0.0);
  if (s.zero_state >= 2) {
    r.grad_reduce_time = seconds{};
    r.dp_comm_bytes = m * p * stage_grad_bytes(j) + p * eb;
  }
  if (s.zero_state >= 3) {
    r.param_gather_time = seconds{};
    r.dp_comm_bytes += (2 * m - 1) * p * eb;  // two gathers per micro-batch, none after the step
  }
  // Megatron finalize_model_grads.py: after the data-parallel sync, one coalesced all-reduce over tp
  // of the gradients of `sequence_parallel`-marked weights (norms, the router, MLA's duplicated down
  // projections; _allreduce_non_tensor_model_parallel_grads).
  if (r.tp_duplicated_params > 0)
    r.tp_grad_allreduce_time =
        group_collective_time(*j.c, comm_group::tp, collective_kind::all_reduce, r.tp_duplicated_params * j.grad_bytes);
  r.embedding_grad_allreduce_time = embedding_grad_allreduce_time(r, j);
  r.dp_time = r.grad_reduce_time + r.param_gather_time + r.tp_grad_allreduce_time + r.embedding_grad_allreduce_time;
  const seconds backward = r.bwd_compute_time + r.recompute_time + r.bwd_tp_comm_time + r.recompute_tp_comm_time;
  r.grad_reduce_tail = grad_reduce_tail(dense, expert, backward);
  r.param_gather_wait = param_gather_wait(dense, r.fwd_compute_time + r.fwd_tp_comm_time) +
                        param_gather_wait(expert, r.fwd_compute_time + r.fwd_tp_comm_time);
  if (s.zero_state >= 2) r.grad_reduce_tail = seconds{};
  if (s.zero_state >= 3) r.param_gather_wait = seconds{};
}

/// The data-parallel time stage `st` adds to the iteration: all of `dp_time` without overlap;
/// with overlap_grad_reduce only the reductions still running when the whole pipeline ends (its
/// ranks finish at `finish`), with overlap_param_gather only the forward's wait for parameters.
constexpr seconds exposed_data_parallel(const stage_result& st, const strategy_spec& s, const pipeline_result& pipe,
                                        const std::vector<std::uint8_t>& rank_stage, std::size_t index) {
  seconds grad = st.grad_reduce_time;
  if (s.overlap_grad_reduce) {
    grad = seconds{};
    for (std::size_t r = 0; r < rank_stage.size(); ++r) {
      if (rank_stage[r] != index) continue;
      const seconds late = pipe.finish[r] + st.grad_reduce_tail - pipe.total;
      grad = late > grad ? late : grad;
    }
  }
  return grad + (s.overlap_param_gather ? st.param_gather_wait : st.param_gather_time) + st.tp_grad_allreduce_time +
         st.embedding_grad_allreduce_time;
}

/// The pass times of a stage (or chunk) program `r` with its backward split as zero-bubble
/// schedules run it: B = the input-gradient pass with recompute and its collectives, W = the
/// weight-gradient GEMMs and their collectives (the sequence-parallel input re-gather); the
/// expert exchange of forward and backward kept apart for DualPipe's overlap.
constexpr chunk_durations split_pass_times(const stage_result& r) {
  const seconds input = r.bwd_compute_time - r.bwd_weight_time + r.recompute_time + r.bwd_tp_comm_time -
                        r.bwd_weight_comm_time + r.recompute_tp_comm_time;
  return {(r.fwd_compute_time + r.fwd_tp_comm_time).value, input.value,
          (r.bwd_weight_time + r.bwd_weight_comm_time).value, r.fwd_a2a_time.value, r.bwd_a2a_time.value};
}

/// DualPipeV: the program of chunk `c` of a V-shaped rank (chunk 0 with the embedding, chunk 1
/// with the output layer and loss, on rank 0).
constexpr stage_program v_chunk_program(const job_context& j, const rank_layout& lay, std::int64_t c) {
  const std::int64_t dense = c == 0 ? lay.chunk_dense_layers : lay.dense_layers - lay.chunk_dense_layers;
  return build_stage(*j.blocks, *j.c, lay.chunk_layers, dense, c == 0 && lay.embedding, c == 1 && lay.head);
}

/// DualPipeV: each chunk's pass times. Chunk 0 receives its input from rank - 1 and its gradient
/// from rank + 1 (the last rank from its own chunk 1); chunk 1 the other way round; a receive from
/// another rank adds the pipeline's tp gather (scatter_gather_tensors_in_pipeline) to the pass.
constexpr void price_v_chunks(stage_result& r, const job_context& j) {
  const std::int64_t p = j.c->s().pp_size, rank = r.rank;
  for (std::size_t c = 0; c < 2; ++c) {
    stage_result part;
    price_program(part, v_chunk_program(j, r.layout, static_cast<std::int64_t>(c)), j);
    const bool fwd_recv = c == 0 ? rank > 0 : rank < p - 1, bwd_recv = c == 0 ? rank < p - 1 : rank > 0;
    if (fwd_recv) part.fwd_tp_comm_time += j.p2p_gather;
    if (bwd_recv) part.bwd_tp_comm_time += j.p2p_gather;
    r.v_chunks[c] = split_pass_times(part);
  }
}

/// DualPipeV: the expert exchange rank `r.rank` hides over the iteration: each overlapped pair of
/// its order takes max(compute, exchange) instead of the sum (schedule/engine.hpp).
constexpr seconds v_hidden_comm(const stage_result& r, std::int64_t p, std::int64_t m) {
  const std::vector<scheduled_pass> order = dualpipev_order(p, m, r.rank);
  double hidden = 0;
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    if (!order[i].overlapped_with_next) continue;
    const chunk_durations& f = r.v_chunks[static_cast<std::size_t>(order[i].chunk)];
    const chunk_durations& b = r.v_chunks[static_cast<std::size_t>(order[i + 1].chunk)];
    hidden += detail::pass_time(f, order[i].type) + detail::pass_time(b, order[i + 1].type) -
              detail::overlapped_pair_time(f, order[i].type, b, order[i + 1].type);
    ++i;
  }
  return seconds{hidden};
}

/// One micro-batch's forward and whole backward of stage `st` (with recompute and the exposed
/// collectives of each) and one transfer `p2p`.
constexpr stage_timing stage_timing_of(const stage_result& st, seconds p2p) {
  return {st.fwd_compute_time + st.fwd_tp_comm_time + st.fwd_shard_exposed_time,
          st.bwd_compute_time + st.recompute_time + st.bwd_tp_comm_time + st.recompute_tp_comm_time +
              st.bwd_shard_exposed_time,
          p2p};
}

/// One of the `v` chunks of stage `st` under overlap_moe_expert_parallel_comm: a described chunk's
/// own times, else 1/v of the stage's pass times (as `stage_timings` sums them), each with the
/// expert exchange a combined step overlaps.
constexpr chunk_durations combined_chunk(const stage_result& st, std::int64_t c, std::int64_t v) {
  if (st.layout.chunk_count > 1) return st.layout_chunks[static_cast<std::size_t>(c)];
  const double n = static_cast<double>(v);
  const stage_timing t = stage_timing_of(st, seconds{});
  chunk_durations d{t.forward.value / n, t.backward.value / n, 0.0, st.fwd_a2a_time.value / n,
                    st.bwd_a2a_time.value / n};
  for (std::size_t i = 0; i < st.layer_run_count; ++i)
    d.layers[i] = {st.layer_runs[i].steps, st.layer_runs[i].count / n};
  d.layer_run_count = st.layer_run_count;
  return d;
}

/// overlap_moe_expert_parallel_comm: the expert exchange rank `r.rank` hides over the iteration,
/// each combined step of its order (`interleaved_pass`) taking max(compute, exchange) instead of the sum.
constexpr seconds combined_hidden_comm(const stage_result& r, const strategy_spec& s) {
  const std::int64_t p = s.pp_size, v = s.interleaving_size, m = s.micro_batch_num;
  const std::int64_t g = s.microbatch_group_size_per_vp_stage.value_or(p);
  const std::int64_t warmup = interleaved_warmup(p, v, m, g, r.rank, true), steady = m * v - warmup;
  const auto hidden = [&](const chunk_pass& f, const chunk_pass& b) {
    const chunk_durations df = combined_chunk(r, f.chunk, v), db = combined_chunk(r, b.chunk, v);
    return detail::pass_time(df, pass_type::forward) + detail::pass_time(db, pass_type::backward) -
           detail::overlapped_pair_time(df, pass_type::forward, db, pass_type::backward);
  };
  if (r.layout.chunk_count <= 1)  // equal chunks: every step hides the same
    return seconds{steady > 0 ? static_cast<double>(steady) * hidden({}, {}) : 0.0};
  double total = 0;
  for (std::int64_t i = warmup; i < 2 * m * v; ++i)
    if (starts_combined_step(i, warmup, m * v))
      total += hidden(interleaved_pass(i, p, v, m, g, r.rank, true), interleaved_pass(i + 1, p, v, m, g, r.rank, true));
  return seconds{total};
}

/// DualPipeV: the transfers rank `rank` waits for over the iteration. The engine (sender waits,
/// as dualpipev.py waits on the sends it posted before its next pass) charges one transfer after
/// every pass that sends to another rank, one for an overlapped pair whichever of its two sends.
constexpr std::int64_t v_transfer_waits(std::int64_t rank, std::int64_t p, std::int64_t m) {
  schedule_setup v;
  v.ranks = p;
  v.chunks = 2;
  v.placement = chunk_placement::v_shape;
  const auto sends = [&](const scheduled_pass& c) { return detail::sends_to_other_rank(v, rank, c); };
  const std::vector<scheduled_pass> order = dualpipev_order(p, m, rank);
  std::int64_t waits = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const bool pair = order[i].overlapped_with_next && i + 1 < order.size();
    waits += (sends(order[i]) || (pair && sends(order[i + 1]))) ? 1 : 0;
    i += pair ? 1 : 0;
  }
  return waits;
}

/// Records each of the first `count` model chunks' activation bytes and transient peaks (the
/// trace's memory counters walk the passes with them).
constexpr void record_chunk_memory(stage_result& r, const stage_memory* chunk, std::int64_t count) {
  r.held_chunk_count = count;
  for (std::size_t c = 0; c < static_cast<std::size_t>(count); ++c) {
    r.chunk_held[c] = chunk[c].held;
    r.chunk_fwd_peak[c] = chunk[c].fwd_peak;
    r.chunk_bwd_peak[c] = chunk[c].bwd_peak;
  }
}

/// DualPipeV activations, walked over the rank's pass order (`dualpipev_order`): a forward of
/// chunk c adds c's activations on top of what is held (its own transient peak on top), a whole
/// or weight-gradient backward frees them, an input-gradient backward keeps them for its W
/// (schedule/engine.hpp); each backward's transient peak counts from what is held without its own set.
constexpr void size_v_activations(stage_result& r, const job_context& j, const stage_program& prog) {
  const strategy_spec& s = j.c->s();
  const std::array<stage_memory, 2> chunk{walk_stage(v_chunk_program(j, r.layout, 0)),
                                          walk_stage(v_chunk_program(j, r.layout, 1))};
  double held = 0, fwd_top = 0, bwd_top = 0;
  std::int64_t sets = 0, peak_sets = 0;
  peak_site fwd_site{}, bwd_site{};
  for (const scheduled_pass& c : dualpipev_order(s.pp_size, s.micro_batch_num, r.rank)) {
    const stage_memory& k = chunk[static_cast<std::size_t>(c.chunk)];
    if (c.type == pass_type::forward) {
      if (held + k.fwd_peak > fwd_top) {
        fwd_top = held + k.fwd_peak;
        fwd_site = k.fwd_site;
      }
      held += k.held;
      peak_sets = ++sets > peak_sets ? sets : peak_sets;
      continue;
    }
    if (c.type != pass_type::backward_weight && held - k.held + k.bwd_peak > bwd_top) {
      bwd_top = held - k.held + k.bwd_peak;
      bwd_site = k.bwd_site;
    }
    if (c.type != pass_type::backward_input) {
      held -= k.held;
      --sets;
    }
  }
  r.peak_path = fwd_top > bwd_top ? fwd_site : bwd_site;
  r.micro_batches_in_flight = (peak_sets + 1) / 2;  // activation sets of half a micro-batch's layers each
  r.fwd_activation_cache_per_micro_batch = bytes_from(walk_stage(prog).held);
  record_chunk_memory(r, chunk.data(), 2);
  const double fwd = chunk[0].fwd_peak > chunk[1].fwd_peak ? chunk[0].fwd_peak : chunk[1].fwd_peak;
  const double bwd = chunk[0].bwd_peak > chunk[1].bwd_peak ? chunk[0].bwd_peak : chunk[1].bwd_peak;
  r.peak_activation_mem_in_1F1B = bytes_from(fwd > bwd ? fwd : bwd);
  r.fwd_transient_mem = bytes_from(fwd);
  r.bwd_transient_mem = bytes_from(bwd);
  r.fwd_peak_allocated_mem = r.model_mem + bytes_from(fwd_top);
  r.bwd_peak_allocated_mem = r.model_mem + bytes_from(bwd_top);
  r.peak_mem =
      r.fwd_peak_allocated_mem > r.bwd_peak_allocated_mem ? r.fwd_peak_allocated_mem : r.bwd_peak_allocated_mem;
  r.peak_mem_with_reserved = bytes_from(static_cast<double>(r.peak_mem.value) / s.mem_factor);
}

/// Interleaved 1F1B over described chunks: each chunk's own forward and backward time (what the
/// engine runs for it; Megatron runs each chunk's layers, not 1/v of the rank's), the pipeline's tp
/// gather after a receive shared evenly by the chunks as in the even split.
constexpr void price_described_chunks(stage_result& r, const job_context& j) {
  const strategy_spec& s = j.c->s();
  const auto v = static_cast<double>(r.layout.chunk_count);
  for (std::size_t c = 0; c < static_cast<std::size_t>(r.layout.chunk_count); ++c) {
    stage_result part;
    price_program(part, described_chunk_program(*j.blocks, *j.c, r.layout, c), j);
    if (r.rank != 0) part.fwd_tp_comm_time += j.p2p_gather / v;
    if (r.rank != s.pp_size - 1) part.bwd_tp_comm_time += j.p2p_gather / v;
    r.layout_chunks[c] = {
        (part.fwd_compute_time + part.fwd_tp_comm_time).value,
        (part.bwd_compute_time + part.recompute_time + part.bwd_tp_comm_time + part.recompute_tp_comm_time).value,
        0.0,
        part.fwd_a2a_time.value,
        part.bwd_a2a_time.value,
        part.layer_runs,
        part.layer_run_count};
  }
}

/// Activations of a rank under interleaved 1F1B with its model chunks described in `chunks` (the
/// rank's own layout, or the even split's chunks, `described_even_layout`), walked over its pass
/// order (`interleaved_pass`, Megatron's): a chunk-forward adds that chunk's kept bytes (its
/// transient peak on top), a chunk-backward frees them (its peak counted without its own set); the
/// peak is the largest point of the walk. A combined step (overlap_moe_expert_parallel_comm) holds
/// one layer of its forward's chunk on top of what was held, with either pass's transient peak.
constexpr void size_described_activations(stage_result& r, const job_context& j, const stage_program& prog,
                                          const rank_layout& chunks) {
  const strategy_spec& s = j.c->s();
  const std::int64_t p = s.pp_size, v = chunks.chunk_count, m = s.micro_batch_num;
  const std::int64_t g = s.microbatch_group_size_per_vp_stage.value_or(p);
  std::array<stage_memory, max_rank_chunks> chunk{};
  std::array<double, max_rank_chunks> step_layer{};  // combined steps: one layer of each chunk
  const bool combined = s.overlap_moe_expert_parallel_comm;
  for (std::size_t c = 0; c < static_cast<std::size_t>(v); ++c) {
    const chunk_layout& k = chunks.chunks[c];
    chunk[c] = walk_stage(described_chunk_program(*j.blocks, *j.c, chunks, c));
    if (combined) step_layer[c] = combined_step_layer(j, k.layers, k.dense_layers, k.mtp_layers);
  }
  double held = 0, fwd_top = 0, bwd_top = 0, fwd = 0, bwd = 0;
  std::int64_t sets = 0, peak_sets = 0;
  peak_site fwd_site{}, bwd_site{};
  const std::int64_t warmup = interleaved_warmup(p, v, m, g, r.rank, combined);
  for (std::int64_t i = 0; i < 2 * m * v; ++i) {
    const chunk_pass c = interleaved_pass(i, p, v, m, g, r.rank, combined);
    const stage_memory& k = chunk[static_cast<std::size_t>(c.chunk)];
    fwd = k.fwd_peak > fwd ? k.fwd_peak : fwd;
    bwd = k.bwd_peak > bwd ? k.bwd_peak : bwd;
    if (combined && starts_combined_step(i, warmup, m * v)) {  // a combined step: forward i, backward i + 1
      const stage_memory& b = chunk[static_cast<std::size_t>(interleaved_pass(i + 1, p, v, m, g, r.rank, true).chunk)];
      const double layer = step_layer[static_cast<std::size_t>(c.chunk)];
      const double transient = k.fwd_peak - k.held > 0 ? k.fwd_peak - k.held : 0.0;
      if (held + layer + transient > fwd_top) {
        fwd_top = held + layer + transient;
        fwd_site = k.fwd_site;
      }
      if (held + layer - b.held + b.bwd_peak > bwd_top) {
        bwd_top = held + layer - b.held + b.bwd_peak;
        bwd_site = b.bwd_site;
      }
      bwd = b.bwd_peak > bwd ? b.bwd_peak : bwd;
      held += k.held - b.held;
      ++i;
      continue;
    }
    if (c.forward) {
      if (held + k.fwd_peak > fwd_top) {
        fwd_top = held + k.fwd_peak;
        fwd_site = k.fwd_site;
      }
      held += k.held;
      peak_sets = ++sets > peak_sets ? sets : peak_sets;
      continue;
    }
    if (held - k.held + k.bwd_peak > bwd_top) {
      bwd_top = held - k.held + k.bwd_peak;
      bwd_site = k.bwd_site;
    }
    held -= k.held;
    --sets;
  }
  r.micro_batches_in_flight = (peak_sets + v - 1) / v;
  record_chunk_memory(r, chunk.data(), v);
  r.fwd_activation_cache_per_micro_batch = bytes_from(walk_stage(prog).held);
  r.peak_activation_mem_in_1F1B = bytes_from(fwd > bwd ? fwd : bwd);
  r.fwd_transient_mem = bytes_from(fwd);
  r.bwd_transient_mem = bytes_from(bwd);
  r.fwd_peak_allocated_mem = r.model_mem + bytes_from(fwd_top);
  r.bwd_peak_allocated_mem = r.model_mem + bytes_from(bwd_top);
  r.peak_mem =
      r.fwd_peak_allocated_mem > r.bwd_peak_allocated_mem ? r.fwd_peak_allocated_mem : r.bwd_peak_allocated_mem;
  r.peak_path = fwd_top > bwd_top ? fwd_site : bwd_site;
  r.peak_mem_with_reserved = bytes_from(static_cast<double>(r.peak_mem.value) / s.mem_factor);
}

/// The matrices one leaf hands to Muon (Megatron layer_wise_optimizer.py
/// is_managed_by_layer_wise_optimizer: every 2-D weight but the embedding and the output layer; the
/// router's gate too; each routed expert's weight apart, TE GroupedLinear keeping one weight per
/// expert) and the time this rank spends orthogonalising them when it owns all of them.
struct muon_leaf_plan {
  double params = 0;  ///< Muon-managed parameters of the leaf (its matrices, not its bias)
  seconds ns{};       ///< Newton-Schulz of all of them, with the tp all-gathers of "duplicated"
};
constexpr muon_leaf_plan plan_muon_leaf(const leaf& l, const job_context& j) {
  const model_spec& m = j.c->m();
  const strategy_spec& s = j.c->s();
  muon_leaf_plan out;
  if (l.id == leaf_id::embedding || l.id == leaf_id::output_layer) return out;
  std::int64_t rows = l.weight_rows, cols = l.weight_cols;
  if (l.id == leaf_id::router) {  // the gate: experts x hidden (no weight shape recorded for TE)
    rows = static_cast<std::int64_t>(l.params) / m.hidden_size;
    cols = m.hidden_size;
  }
  if (rows <= 0 || cols <= 0) return out;
  const double matrix = static_cast<double>(rows) * static_cast<double>(cols);
  const double count = l.grouped ? static_cast<double>(static_cast<std::int64_t>(l.params / matrix + 0.5)) : 1.0;
  out.params = matrix * count;
  // "duplicated": a tp-sharded weight is gathered over its tp group and orthogonalised whole on
  // every rank (emerging_optimizers.py newton_schulz_tp); "blockwise": each rank its own shard.
  const std::int64_t t = l.expert_params ? s.etp_size : s.tp_size;
  const bool whole = s.muon_tp_mode == muon_tp_mode_kind::duplicated && t > 1 && !l.tp_duplicated &&
                     (l.kind == leaf_kind::linear_column || l.kind == leaf_kind::linear_row);
  if (whole) (l.kind == leaf_kind::linear_column ? rows : cols) *= t;
  seconds one{};
  // --muon-split-qkv (emerging_optimizers.py orthogonalize): Q, K and V of linear_qkv apart.
  const std::int64_t hd = head_dim(m), share = whole ? 1 : s.tp_size;
  const std::int64_t q = m.head_num * hd / share, kv = m.kv_head_num * hd / share;
  if (l.id == leaf_id::linear_qkv && s.muon_split_qkv && q + 2 * kv == rows)
    one = muon_ns_time(j.c->sys(), q, cols, s.muon_num_ns_steps) +
          muon_ns_time(j.c->sys(), kv, cols, s.muon_num_ns_steps) * 2.0;
  else
    one = muon_ns_time(j.c->sys(), rows, cols, s.muon_num_ns_steps);
  if (whole)
    one += group_collective_time(*j.c, l.expert_params ? comm_group::etp : comm_group::tp, collective_kind::all_gather,
                                 static_cast<double>(rows) * static_cast<double>(cols) * 4.0);
  out.ns = one * count;
  return out;
}

/// Optimizer "muon": the stage's Muon-managed parameters and this rank's Newton-Schulz time. The
/// layer-wise distributed optimizer (zero_state 1) assigns whole parameters to the ranks of the
/// dense (dp·cp) and expert (edp) data-parallel groups, balanced by Newton-Schulz cost
/// (layer_wise_optimizer.py _compute_per_buffer_param_layout): each rank does its group's share.
constexpr void plan_muon(stage_result& r, const stage_program& prog, const job_context& j) {
  const strategy_spec& s = j.c->s();
  if (s.optimizer != optimizer_kind::muon) return;
  double dense_ns = 0, expert_ns = 0;
  for (std::size_t bi = 0; bi < prog.count; ++bi) {
    const stage_block& sb = prog.blocks[bi];
    const double n = static_cast<double>(sb.repeat);
    for (const leaf& l : *sb.block) {
      const muon_leaf_plan p = plan_muon_leaf(l, j);
      r.muon_params += p.params * n;
      if (l.expert_params) r.muon_expert_params += p.params * n;
      (l.expert_params ? expert_ns : dense_ns) += p.ns.value * n;
    }
  }
  if (s.zero_state >= 1) {
    dense_ns /= static_cast<double>(dp_size(s) * s.cp_size);
    expert_ns /= static_cast<double>(edp_size(s));
  }
  r.muon_ns_time = seconds{dense_ns + expert_ns};
}

/// The optimizer step of a Muon stage: memory passes (muon_step_time) and the Newton-Schulz time.
constexpr seconds muon_optimizer_time(const stage_result& r, const job_context& j) {
  const strategy_spec& s = j.c->s();
  const double dense_shard = s.zero_state >= 1 ? static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
  const double expert_shard = s.zero_state >= 1 ? static_cast<double>(edp_size(s)) : 1.0;
  const double muon_dense = r.muon_params - r.muon_expert_params;
  const double muon_local = muon_dense / dense_shard + r.muon_expert_params / expert_shard;
  const double adam_local =
      (r.params - r.expert_params - muon_dense) / dense_shard + (r.expert_params - r.muon_expert_params) / expert_shard;
  return muon_step_time(j.c->sys(), s, r.params, muon_local, adam_local, stage_grad_bytes(j)) + r.muon_ns_time;
}

/// Everything of one distinct stage but its share of the iteration (`breakdown`).
constexpr stage_result price_stage(const job_context& j, const rank_layout& lay, std::int64_t rank) {
  const strategy_spec& s = j.c->s();
  const std::int64_t p = s.pp_size;
  stage_result r;
  r.kind = stage_kind_of(rank, p);
  r.rank = r.last_rank = rank;
  r.layout = lay;
  r.layers = lay.layers;
  const stage_program prog = build_stage(*j.blocks, *j.c, lay.layers, lay.dense_layers, lay.embedding, lay.head,
                                         lay.mtp_layers, lay.bf16_head_layers, lay.bf16_tail_layers);
  const double dummy = price_program(r, prog, j);
  if (lay.chunk_count > 1) price_described_chunks(r, j);
  // Interleaved: every chunk boundary is a transfer, including the wrap from the last rank to the
  // first; only the model's first virtual stage (rank 0's chunk 0) receives no activation and sends
  // no gradient, and its last (rank p-1's last chunk) the reverse: 4v per micro-batch, 4v - 2 on the
  // end ranks (Megatron forward_backward_pipelining_with_interleaving).
  const bool receives = rank != 0, sends = rank != p - 1;
  double transfers = s.interleaving_size > 1
                         ? 4.0 * static_cast<double>(s.interleaving_size) - (receives ? 0.0 : 2.0) - (sends ? 0.0 : 2.0)
                         : (receives ? 2.0 : 0.0) + (sends ? 2.0 : 0.0);
  if (v_shaped(s)) {  // the sender's waits the engine charges, per micro-batch (receives overlap compute)
    const auto boundaries = static_cast<double>(v_shape_neighbours(rank, p));
    transfers =
        static_cast<double>(v_transfer_waits(rank, p, s.micro_batch_num)) / static_cast<double>(s.micro_batch_num);
    r.fwd_tp_comm_time += j.p2p_gather * boundaries;
    r.bwd_tp_comm_time += j.p2p_gather * boundaries;
    price_v_chunks(r, j);
    r.hidden_comm_time = v_hidden_comm(r, p, s.micro_batch_num);
  } else {
    if (receives) r.fwd_tp_comm_time += j.p2p_gather;  // the activation from the previous stage
    if (sends) r.bwd_tp_comm_time += j.p2p_gather;     // the gradient from the next stage
  }
  r.p2p_time = j.p2p * transfers;
  plan_sharded_passes(r, j, prog);
  if (s.overlap_moe_expert_parallel_comm) r.hidden_comm_time = combined_hidden_comm(r, s);
  r.chunk_time = r.fwd_compute_time + r.bwd_compute_time + r.recompute_time + r.fwd_tp_comm_time + r.bwd_tp_comm_time +
                 r.recompute_tp_comm_time + r.p2p_time + r.fwd_shard_exposed_time + r.bwd_shard_exposed_time;
  r.optim_time = optimizer_time(j.c->sys(), s, r.params, stage_grad_bytes(j), r.expert_params);
  r.host_optimizer_time = host_optimizer_time(j.c->sys(), s, local_params(r, s), stage_grad_bytes(j), j.current_gpu);
  r.optim_time += r.host_optimizer_time;
  plan_muon(r, prog, j);
  if (s.optimizer == optimizer_kind::muon) r.optim_time = muon_optimizer_time(r, j);
  plan_data_parallel(r, j);
  size_model_memory(r, j, dummy);
  if (v_shaped(s))
    size_v_activations(r, j, prog);
  else if (lay.chunk_count > 1)
    size_described_activations(r, j, prog, lay);
  else if (s.interleaving_size > 1 && s.interleaving_size <= static_cast<std::int64_t>(max_rank_chunks))
    size_described_activations(r, j, prog, described_even_layout(j.c->m(), s, rank));
  else
    size_activations(r, j, prog);
  return r;
}

/// Prices every distinct rank program once; `rank_stage[r]` is the index of rank r's stage.
constexpr void price_stages(estimate_result& out, const job_context& j, std::vector<std::uint8_t>& rank_stage) {
  const model_spec& m = j.c->m();
  const strategy_spec& s = j.c->s();
  const stage_layers split = split_layers(m, s);
  rank_stage.assign(static_cast<std::size_t>(s.pp_size), 0);
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank) {
    const rank_layout lay = placed_layout(m, s, split, rank);
    const std::size_t i = find_stage(out, stage_kind_of(rank, s.pp_size), lay);
    if (i == out.stage_count) {
      if (i == max_distinct_stages)
        report_error("llmsim::estimate", "strategy.pp_size", "the pipeline has more than {} distinct stage programs",
                     max_distinct_stages);
      out.stages[out.stage_count++] = price_stage(j, lay, rank);
    } else {
      out.stages[i].last_rank = rank;
      ++out.stages[i].rank_count;
    }
    rank_stage[static_cast<std::size_t>(rank)] = static_cast<std::uint8_t>(i);
  }
}

/// Which simulator a pipeline plan runs.
enum class pipeline_path : std::uint8_t { one_f_one_b, interleaved, zb_h1, dualpipev };

/// Everything a pipeline simulation reads, taken from the priced stages: jobs with equal plans
/// have equal pipelines (the search's ZeRO-0/1 and optimizer-offload variants of a layout do).
struct pipeline_plan {
  pipeline_path path = pipeline_path::one_f_one_b;
  std::int64_t micro_batches = 0;
  std::int64_t group = 1;             ///< interleaved: micro-batches per group of the schedule table
  bool combined = false;              ///< interleaved: overlap_moe_expert_parallel_comm's combined steps
  std::vector<stage_timing> timings;  ///< one_f_one_b: per rank
  schedule_setup setup;               ///< the pass-list engine's schedules
  constexpr bool operator==(const pipeline_plan&) const = default;
};

/// Per rank: one micro-batch's forward and whole backward (with recompute and the exposed
/// collectives of each) and one transfer.
constexpr std::vector<stage_timing> stage_timings(const estimate_result& out,
                                                  const std::vector<std::uint8_t>& rank_stage, seconds p2p) {
  std::vector<stage_timing> timings;
  timings.reserve(rank_stage.size());
  for (const std::uint8_t i : rank_stage) timings.push_back(stage_timing_of(out.stages[i], p2p));
  return timings;
}

/// The engine's setup with per-rank chunk times `chunks_of(stage)` (`per_rank` of them).
template <class Chunks>
constexpr schedule_setup chunked_setup(const estimate_result& out, const std::vector<std::uint8_t>& rank_stage,
                                       seconds p2p, std::int64_t per_rank, Chunks&& chunks_of) {
  schedule_setup in;
  in.ranks = static_cast<std::int64_t>(rank_stage.size());
  in.chunks = per_rank;
  for (const std::uint8_t i : rank_stage) {
    for (std::int64_t c = 0; c < per_rank; ++c) in.durations.push_back(chunks_of(out.stages[i], c));
    in.p2p.push_back(p2p.value);
  }
  return in;
}

/// The plan of the job's schedule:
/// - ZB-H1: B is the backward without its weight-gradient pass (plus recompute and the
///   input-gradient collectives), W the weight-gradient kernels and their collectives (the
///   sequence-parallel re-gather of a linear's input that the weight gradient needs).
/// - DualPipeV: V-shaped placement, each chunk's own pass times (`v_chunks`), the overlapped
///   forward-backward pairs of `dualpipev_order`. dualpipev.py waits for the sends and receives
///   it posts after a pass before it starts the next one (`_commit_and_wait_comm`), so the sender
///   waits for its send.
/// - Interleaved 1F1B in Megatron's order over described chunks (each chunk's own times) or the
///   stage split evenly over its virtual stages; plain 1F1B otherwise (pp_comm_async: transfers
///   beside compute).
/// - overlap_moe_expert_parallel_comm: the interleaved engine (p = 1 and v = 1 included) with its
///   combined steps, each chunk carrying its expert exchange (`combined_chunk`).
constexpr pipeline_plan plan_pipeline(const estimate_result& out, const strategy_spec& s,
                                      const std::vector<std::uint8_t>& rank_stage, seconds p2p) {
  pipeline_plan plan;
  plan.micro_batches = s.micro_batch_num;
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::zb_h1) {
    plan.path = pipeline_path::zb_h1;
    plan.setup = chunked_setup(out, rank_stage, p2p, 1,
                               [](const stage_result& st, std::int64_t) { return split_pass_times(st); });
    plan.setup.async_p2p = s.pp_comm_async;
  } else if (v_shaped(s)) {
    plan.path = pipeline_path::dualpipev;
    plan.setup = chunked_setup(out, rank_stage, p2p, 2, [](const stage_result& st, std::int64_t c) {
      return st.v_chunks[static_cast<std::size_t>(c)];
    });
    plan.setup.placement = chunk_placement::v_shape;
    plan.setup.async_p2p = false;
  } else if (s.overlap_moe_expert_parallel_comm) {
    plan.path = pipeline_path::interleaved;
    plan.combined = true;
    plan.group = s.microbatch_group_size_per_vp_stage.value_or(s.pp_size);
    plan.setup = chunked_setup(out, rank_stage, p2p, s.interleaving_size, [&](const stage_result& st, std::int64_t c) {
      return combined_chunk(st, c, s.interleaving_size);
    });
    plan.setup.async_p2p = s.pp_comm_async;
  } else if (s.interleaving_size > 1) {
    plan.path = pipeline_path::interleaved;
    plan.group = s.microbatch_group_size_per_vp_stage.value_or(s.pp_size);
    if (out.stages[rank_stage[0]].layout.chunk_count > 1) {
      plan.setup = chunked_setup(out, rank_stage, p2p, s.interleaving_size, [](const stage_result& st, std::int64_t c) {
        return st.layout_chunks[static_cast<std::size_t>(c)];
      });
      plan.setup.async_p2p = s.pp_comm_async;
    } else {
      plan.setup = interleaved_setup(stage_timings(out, rank_stage, p2p), s.interleaving_size, s.pp_comm_async);
    }
  } else {
    plan.timings = stage_timings(out, rank_stage, p2p);
  }
  return plan;
}

/// Simulates the plan over every rank. With `events`, every micro-batch is simulated (no
/// steady-state extension) and every span recorded.
constexpr pipeline_result simulate_plan(const pipeline_plan& plan, std::vector<pipeline_event>* events = nullptr) {
  const std::int64_t m = plan.micro_batches;
  switch (plan.path) {
    case pipeline_path::zb_h1:
      return simulate_zb_h1(plan.setup, m, events).pipe;
    case pipeline_path::dualpipev:
      return simulate_dualpipev(plan.setup, m, events).pipe;
    case pipeline_path::interleaved:
      return simulate_interleaved_setup(plan.setup, m, plan.group, events, plan.combined);
    default:
      break;
  }
  if (events != nullptr) return simulate_1f1b_exhaustive(plan.timings, m, events);
  return simulate_1f1b(plan.timings, m);
}

/// The pipeline schedule simulated over every rank (`plan_pipeline`, `simulate_plan`).
constexpr pipeline_result run_pipeline(const estimate_result& out, const strategy_spec& s,
                                       const std::vector<std::uint8_t>& rank_stage, seconds p2p,
                                       std::vector<pipeline_event>* events = nullptr) {
  return simulate_plan(plan_pipeline(out, s, rank_stage, p2p), events);
}

/// One activation (or gradient) transfer between neighbouring stages.
struct pipeline_transfer {
  seconds time{};    ///< the send / receive
  seconds gather{};  ///< scatter_gather_tensors_in_pipeline: the tp all-gather after each receive
  double gather_bytes = 0;
};

/// Activation sent between stages: the (sequence-parallel local) hidden states of one micro-batch;
/// with scatter_gather_tensors_in_pipeline and no SP, 1/tp of it, all-gathered by the receiver
/// (Megatron-LM p2p_communication.py, split_tensor_into_1d_equal_chunks / gather_split_1d_tensor).
constexpr pipeline_transfer pipeline_transfer_of(const build_context& c) {
  const strategy_spec& s = c.s();
  pipeline_transfer out;
  double p2p_bytes = c.local_tokens() * static_cast<double>(c.m().hidden_size) * c.element_bytes();
  if (s.pp_size > 1 && s.scatter_gather_tensors_in_pipeline && s.tp_size > 1 && !c.sequence_parallel()) {
    out.gather = group_collective_time(c, comm_group::tp, collective_kind::all_gather, p2p_bytes);
    out.gather_bytes = p2p_bytes;
    p2p_bytes /= static_cast<double>(s.tp_size);
  }
  out.time = pipeline_transfer_time(c.sys(), s, p2p_bytes);
  return out;
}

/// SimuMax v1.2's straggler slowdown of synchronised steps over n nodes in the slowest group.
constexpr double straggler_factor(const strategy_spec& s, const system_spec& sys) {
  if (!s.enable_straggler_model) return 1.0;
  const std::int64_t nodes = (s.world_size + sys.num_per_node - 1) / sys.num_per_node;
  std::int64_t n = nodes < dp_size(s) ? nodes : dp_size(s);
  n = n < edp_size(s) ? n : edp_size(s);
  if (n <= 1) return 1.0;
  const double l2 = log2_of(static_cast<double>(n));
  return 1.0 + l2 / (l2 + 1.0) * parameters::straggler_coefficient * sqrt_of(l2);
}

/// One stage's view of the iteration: its busy time by cause, the straggler delay, and the rest
/// of `duration` as waiting. Gradient sync and the optimizer follow the whole pipeline.
constexpr time_breakdown stage_breakdown(const stage_result& st, const strategy_spec& s, seconds duration,
                                         seconds straggler) {
  const double mb = static_cast<double>(s.micro_batch_num);
  time_breakdown br;
  br.fwd_compute_time = st.fwd_compute_time * mb;
  br.bwd_compute_time = st.bwd_compute_time * mb;
  br.recompute_time = st.recompute_time * mb;
  br.intra_exposed_time = (st.fwd_tp_comm_time + st.bwd_tp_comm_time + st.recompute_tp_comm_time) * mb -
                          st.hidden_comm_time;  // DualPipeV, combined 1F1B: the exchange their pairs hide
  br.inter_exposed_time = st.p2p_time * mb;
  br.dp_exposed_time = st.dp_exposed_time + (st.fwd_shard_exposed_time + st.bwd_shard_exposed_time) * mb;
  br.optim_time = st.optim_time;
  br.straggler_time = straggler;
  br.bubble_time = duration - st.chunk_time * mb + st.hidden_comm_time - st.dp_exposed_time - st.optim_time - straggler;
  if (br.bubble_time.value < 1e-9 * duration.value) br.bubble_time = seconds{};  // rounding of m equal chunks
  return br;
}

/// The critical path's end: the rank finishing last (its pipeline end is everyone's, so the one
/// with the longest exposed sync + optimizer step; among equals the one whose own work ends the
/// pipeline, then the lowest) and what its optimizer step waited for (see critical_stream_kind).
constexpr void find_critical_path(cost_result& cost, const estimate_result& out, const pipeline_result& pipe,
                                  const std::vector<std::uint8_t>& rank_stage) {
  std::size_t best = 0;
  const auto tail = [&](std::size_t r) {
    const stage_result& st = out.stages[rank_stage[r]];
    return st.dp_exposed_time + st.optim_time;
  };
  for (std::size_t r = 1; r < rank_stage.size(); ++r)
    if (tail(r) > tail(best) || (tail(r) == tail(best) && pipe.finish[r] > pipe.finish[best])) best = r;
  cost.critical_rank = static_cast<std::int64_t>(best);
  if (out.stages[rank_stage[best]].dp_exposed_time.value > 0)
    cost.critical_stream = critical_stream_kind::data_parallel;
  else if (pipe.finish[best] == pipe.total)
    cost.critical_stream = critical_stream_kind::compute;
  else
    cost.critical_stream = critical_stream_kind::optimizer;
}

/// Iteration time, per-stage breakdowns, the bounding (busiest) stage, the critical path,
/// throughput and MFU.
constexpr void fill_cost(estimate_result& out, const build_context& c, const pipeline_result& pipe,
                         const std::vector<std::uint8_t>& rank_stage, seconds p2p) {
  const model_spec& m = c.m();
  const strategy_spec& s = c.s();
  const system_spec& sys = c.sys();
  const seconds pipeline = pipe.total * straggler_factor(s, sys);
  cost_result& cost = out.cost;
  for (std::size_t i = 0; i < out.stage_count; ++i) {
    out.stages[i].dp_exposed_time = exposed_data_parallel(out.stages[i], s, pipe, rank_stage, i);
    const seconds t = pipeline + out.stages[i].dp_exposed_time + out.stages[i].optim_time;
    if (t > cost.duration_time_per_iter) cost.duration_time_per_iter = t;
  }
  const seconds duration = cost.duration_time_per_iter;
  for (std::size_t i = 0; i < out.stage_count; ++i) {
    stage_result& st = out.stages[i];
    st.breakdown = stage_breakdown(st, s, duration, pipeline - pipe.total);
    if (st.breakdown.bubble_time < out.stages[static_cast<std::size_t>(cost.bounding_stage)].breakdown.bubble_time)
      cost.bounding_stage = static_cast<std::int64_t>(i);
    cost.efficiency_lookups += st.efficiency_lookups;
    cost.efficiency_misses += st.efficiency_misses;
    cost.efficiency_interpolated += st.efficiency_interpolated;
    cost.efficiency_modelled += st.efficiency_modelled;
  }
  find_critical_path(cost, out, pipe, rank_stage);
  const stage_result& bound = out.stages[static_cast<std::size_t>(cost.bounding_stage)];
  cost.pipeline_time = pipeline;
  cost.breakdown_result = bound.breakdown;
  cost.all_tokens_per_iter = static_cast<double>(s.seq_len * global_batch_size(s));
  cost.throughput_per_accelerator = cost.all_tokens_per_iter / duration.value / static_cast<double>(s.world_size);
  cost.model_flops_per_iter = flops{flops_per_token(m, out.padded_vocab, s.seq_len) * cost.all_tokens_per_iter /
                                    static_cast<double>(s.world_size)};
  cost.mfu =
      cost.model_flops_per_iter.value / duration.value / (compute_entry(sys, compute_kind::default_kind).tflops * 1e12);
  cost.mfu_6nd_with_attn = cost.mfu;
  cost.comm_result.tp_net = s.tp_size > 1 ? c.tp_tier->name.view() : std::string_view("none");
  cost.comm_result.pp_net = s.pp_size > 1 ? resolve_tier(sys, s, comm_group::pp).name.view() : std::string_view("none");
  cost.comm_result.ep_net = c.ep_tier != nullptr ? c.ep_tier->name.view() : std::string_view("none");
  cost.comm_result.dp_net =
      dp_size(s) * s.cp_size > 1 ? resolve_tier(sys, s, comm_group::dp).name.view() : std::string_view("none");
  if (s.cp_size > 1) {
    const auto net_of = [&](comm_group g) {
      return layout_of(s, g).size > 1 ? resolve_tier(sys, s, g).name.view() : std::string_view("none");
    };
    cost.comm_result.cp_a2a_net = net_of(comm_group::cp_a2a);
    cost.comm_result.cp_ring_net =
        s.cp_comm_type == cp_comm_kind::all_gather ? net_of(comm_group::cp) : net_of(comm_group::cp_ring);
  }
  cost.comm_result.tp_time_per_iter = bound.breakdown.intra_exposed_time;
  cost.comm_result.p2p_time_per_transfer = p2p;
  cost.comm_result.dp_time = bound.dp_time;
}

/// The largest stage peak and the verdict against the device. The verdict compares allocated
/// bytes with the device, as `fits_on` does; the reserved figure (mem_factor) is reported beside it.
constexpr void fill_memory(estimate_result& out, const strategy_spec& s, const system_spec& sys) {
  mem_result& mem = out.mem;
  mem.memory_reserved_ratio = s.mem_factor;
  for (std::size_t i = 0; i < out.stage_count; ++i) {
    if (out.stages[i].peak_mem > mem.peak_mem) {
      mem.peak_mem = out.stages[i].peak_mem;
      mem.peak_stage = static_cast<std::int64_t>(i);
    }
  }
  mem.peak_mem_with_reserved = bytes_from(static_cast<double>(mem.peak_mem.value) / s.mem_factor);
  mem.device_mem = device_memory(sys);
  mem.fits = mem.peak_mem <= mem.device_mem;
  mem.over_by = mem.fits ? bytes{} : mem.peak_mem - mem.device_mem;
}
}  // namespace detail

/// The layer blocks (`build_blocks`) of recent estimates, for a caller that estimates many
/// strategies of one model and one system — the search prices up to a stage's layer count of
/// full-recompute variants per layout, and each layout under every ZeRO stage and optimizer
/// offload. Strategies that differ only in fields build_blocks does not read share their blocks:
/// `recompute_layer_num` (read only through `recompute_active`), and `zero_state`,
/// `data_parallel_sharding_strategy` and `optimizer_cpu_offload`, which only the stage pricing
/// after the blocks reads (sharded passes, model memory, the optimizer step). A leaf that comes to
/// depend on one of them must take it out of `key_of_strategy`. The model and system are told
/// apart by address: do not change them while a cache holds their blocks.
class block_cache {
 public:
  /// Blocks of the job `c` describes: built once, then the stored ones.
  constexpr const job_blocks& blocks_of(const build_context& c) {
    if (c.model != model_ || c.system != system_) {
      entries_.clear();
      model_ = c.model;
      system_ = c.system;
    }
    const strategy_spec key = key_of_strategy(c.s());
    for (const entry& e : entries_)
      if (e.key == key) return e.blocks;
    ++builds_;
    if (entries_.size() < capacity) {
      entries_.push_back({key, build_blocks(c)});
      return entries_.back().blocks;
    }
    entry& oldest = entries_[next_];  // round robin: entries are too large to shift
    next_ = (next_ + 1) % capacity;
    oldest.key = key;
    oldest.blocks = build_blocks(c);
    return oldest.blocks;
  }
  /// Blocks built so far (the rest were reused).
  [[nodiscard]] constexpr std::int64_t builds() const { return builds_; }

  /// The pipeline of `plan`: simulated once, then the stored result (equal plans, equal results).
  constexpr pipeline_result pipeline_of(const detail::pipeline_plan& plan) {
    const std::uint64_t h = hash_of(plan);
    for (const pipeline_entry& e : pipelines_)
      if (e.hash == h && e.plan == plan) return e.result;
    ++simulations_;
    pipeline_entry fresh{h, plan, detail::simulate_plan(plan)};
    if (pipelines_.size() < pipeline_capacity) {
      pipelines_.push_back(std::move(fresh));
      return pipelines_.back().result;
    }
    pipeline_entry& oldest = pipelines_[next_pipeline_];
    next_pipeline_ = (next_pipeline_ + 1) % pipeline_capacity;
    oldest = std::move(fresh);
    return oldest.result;
  }
  /// Pipelines simulated so far (the rest were reused).
  [[nodiscard]] constexpr std::int64_t simulations() const { return simulations_; }

 private:
  /// The search walks, per layout and micro-batch size, ZeRO stages x FP8 recipes x offload, and
  /// in each group full recompute, none and selective: 4 recipes x 3 recompute kinds.
  static constexpr std::size_t capacity = 12;
  struct entry {
    strategy_spec key;
    job_blocks blocks;
  };
  static constexpr strategy_spec key_of_strategy(const strategy_spec& s) {
    strategy_spec k = s;
    k.recompute_layer_num = recompute_active(s) ? 1 : 0;
    k.zero_state = 0;
    k.data_parallel_sharding_strategy = {};
    k.optimizer_cpu_offload = false;
    k.use_precision_aware_optimizer = false;  // the optimizer's states and step only, like the two above
    k.exp_avg_dtype = k.exp_avg_sq_dtype = k.main_params_dtype = dtype_kind::fp32;
    k.store_param_remainders = true;
    k.optimizer_fp8_recipe = {};
    return k;
  }
  /// A layout's groups (ZeRO stage x FP8 recipe x offload) each price their recompute variants
  /// (none, selective, full over up to a stage's layers); the pipeline-equal ones are a few groups apart.
  static constexpr std::size_t pipeline_capacity = 256;
  struct pipeline_entry {
    std::uint64_t hash = 0;
    detail::pipeline_plan plan;
    pipeline_result result;
  };
  /// FNV-1a over the plan's numbers: most lookups are decided by the hash alone.
  static constexpr std::uint64_t hash_of(const detail::pipeline_plan& p) {
    std::uint64_t h = 14695981039346656037ULL;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    mix(static_cast<std::uint64_t>(p.path));
    mix(static_cast<std::uint64_t>(p.micro_batches));
    mix(static_cast<std::uint64_t>(p.group));
    for (const stage_timing& t : p.timings)
      for (const double d : {t.forward.value, t.backward.value, t.p2p.value}) mix(std::bit_cast<std::uint64_t>(d));
    for (const chunk_durations& d : p.setup.durations)
      for (const double x : {d.forward, d.backward_input, d.backward_weight, d.forward_comm, d.backward_comm})
        mix(std::bit_cast<std::uint64_t>(x));
    for (const double d : p.setup.p2p) mix(std::bit_cast<std::uint64_t>(d));
    return h;
  }
  const model_spec* model_ = nullptr;
  const system_spec* system_ = nullptr;
  std::vector<entry> entries_;
  std::size_t next_ = 0;
  std::int64_t builds_ = 0;
  std::vector<pipeline_entry> pipelines_;
  std::size_t next_pipeline_ = 0;
  std::int64_t simulations_ = 0;
};

namespace detail {
/// The estimate once the job's layer blocks exist: every distinct rank program priced, the
/// schedule over all ranks, cost and memory.
constexpr void estimate_from_blocks(estimate_result& out, const build_context& c, const job_blocks& blocks,
                                    block_cache* cache) {
  const strategy_spec& s = c.s();
  detail::job_context j{&c, &blocks};
  const detail::pipeline_transfer transfer = detail::pipeline_transfer_of(c);
  j.p2p = transfer.time;
  j.p2p_gather = transfer.gather;
  j.grad_bytes = c.main_grad_bytes();
  j.workspace_bytes =
      out.compute_capability >= 9 ? parameters::te_workspace_bytes_sm90 : parameters::te_workspace_bytes_older;
  j.te_dummy = te_at_least(s, s.te_dummy_wgrad_min_version) && s.use_fused_grad_accumulation;
  j.te_grouped_dummy = te_at_least(s, s.te_grouped_linear_dummy_wgrad_min_version) && s.use_fused_grad_accumulation;
  j.current_gpu = out.compute_capability >= 9;

  std::vector<std::uint8_t> rank_stage;
  detail::price_stages(out, j, rank_stage);
  const pipeline_plan plan = plan_pipeline(out, s, rank_stage, j.p2p);
  if (cache != nullptr)
    detail::fill_cost(out, c, cache->pipeline_of(plan), rank_stage, j.p2p);
  else
    detail::fill_cost(out, c, simulate_plan(plan), rank_stage, j.p2p);
  detail::fill_memory(out, s, c.sys());
}

constexpr estimate_result estimate_with(const model_spec& m, const strategy_spec& s, const system_spec& sys,
                                        block_cache* cache) {
  detail::refuse_unmodelled(m, s);
  // The host Adam step shares an x86 node's DRAM among its GPUs (step_cost.hpp); a node of more
  // than 8 GPUs is an NVLink domain of many hosts (GB200 / GB300 NVL72: a Grace per two GPUs).
  if (s.optimizer_cpu_offload && sys.num_per_node > parameters::host_optimizer_max_gpus_per_host)
    detail::report_error("llmsim::estimate", "strategy.optimizer_cpu_offload",
                         "strategy.optimizer_cpu_offload=true on a node of {} GPUs (system.num_per_node) is not "
                         "modelled: the host step's memory bandwidth is that of an 8-GPU x86 node (DGX A100 / H100)",
                         sys.num_per_node);
  estimate_result out;
  out.padded_vocab = padded_vocab(m, s.tp_size);
  out.param_count = parameter_count(m, out.padded_vocab);
  out.active_param_count = active_parameter_count(m, out.padded_vocab);
  out.compute_capability = detail::effective_compute_capability(sys, out.notes);
  detail::note_unmodelled_system(sys, out.notes);
  if (s.use_math_sdp && s.use_flash_sdp) detail::add_note(out.notes, estimate_note::math_sdp_shadowed_by_flash);
  if (s.fp8) {
    const compute_kind gemm = quantized_format_of(s, sys).gemm;
    if (!sys.op(gemm).present || sys.op(gemm).efficient_factor <= 0)
      detail::add_note(out.notes, estimate_note::low_precision_rate_derived);
  }
  const build_context c = make_build_context(m, s, sys, out.padded_vocab);
  if (cache != nullptr) {
    estimate_from_blocks(out, c, cache->blocks_of(c), cache);
  } else {
    const job_blocks blocks = build_blocks(c);  // 200 KB of fixed-capacity leaf blocks
    estimate_from_blocks(out, c, blocks, nullptr);
  }
  return out;
}
}  // namespace detail

/// The estimate of specs that already passed `validate(m, s, sys)` (perf_llm validates once at
/// configure): every distinct pipeline-rank program priced once, the schedule over all ranks,
/// then cost and memory over all stages.
constexpr estimate_result estimate_validated(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  return detail::estimate_with(m, s, sys, nullptr);
}
/// The same, reusing the layer blocks `cache` holds for strategies that differ only in their
/// count of recomputed layers (the result is the same as without the cache).
constexpr estimate_result estimate_validated(const model_spec& m, const strategy_spec& s, const system_spec& sys,
                                             block_cache& cache) {
  return detail::estimate_with(m, s, sys, &cache);
}

/// Runs the whole estimate. Validates the three specs first (one error path).
constexpr estimate_result estimate(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  validate(m, s, sys);
  return estimate_validated(m, s, sys);
}

LLMSIM_END_NAMESPACE
