/// \file llmsim/spec/strategy.hpp
/// `strategy_spec`: how a training job is batched, parallelised, recomputed and which kernels it
/// uses — field for field the SimuMax strategy format (docs/strategy.md of MooreThreads/SimuMax),
/// with SimuMax's defaults.
///
/// ```cpp
/// constexpr llmsim::strategy_spec tp2{.seq_len = 4096, .micro_batch_size = 1,
///     .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
/// static_assert(llmsim::dp_size(tp2) == 4);
/// ```
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/spec/fields.hpp>
#include <llmsim/spec/model.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

LLMSIM_BEGIN_NAMESPACE

/// Element types of tensors.
enum class dtype_kind : std::uint8_t { invalid, fp32, bf16, fp16, fp8 };
template <>
struct enum_names<dtype_kind> {
  static constexpr std::array<std::pair<dtype_kind, std::string_view>, 5> value{{{dtype_kind::invalid, ""},
                                                                                 {dtype_kind::fp32, "fp32"},
                                                                                 {dtype_kind::bf16, "bf16"},
                                                                                 {dtype_kind::fp16, "fp16"},
                                                                                 {dtype_kind::fp8, "fp8"}}};
};
/// Bytes of one element.
constexpr std::int64_t dtype_bytes(dtype_kind d) {
  switch (d) {
    case dtype_kind::fp32:
      return 4;
    case dtype_kind::bf16:
    case dtype_kind::fp16:
      return 2;
    case dtype_kind::fp8:
      return 1;
    default:
      return 0;
  }
}

/// What recompute re-runs in backward (Megatron `--recompute-granularity` and SimuMax's finer modes).
enum class recompute_kind : std::uint8_t {
  invalid,
  none,
  full_block,
  attn_only,
  mlp_only,
  sdp_only,
  selective_recompute
};
template <>
struct enum_names<recompute_kind> {
  static constexpr std::array<std::pair<recompute_kind, std::string_view>, 7> value{
      {{recompute_kind::invalid, ""},
       {recompute_kind::none, "null"},
       {recompute_kind::full_block, "full_block"},
       {recompute_kind::attn_only, "attn_only"},
       {recompute_kind::mlp_only, "mlp_only"},
       {recompute_kind::sdp_only, "sdp_only"},
       {recompute_kind::selective_recompute, "selective_recompute"}}};
};

/// Pipeline schedule: Megatron-LM's 1F1B and interleaved 1F1B, zero-bubble ZB-H1 (Qi et al.,
/// ICLR 2024, §2.1), DeepSeek's DualPipeV (deepseek-ai/DualPipe).
enum class pipeline_schedule_kind : std::uint8_t { invalid, one_f_one_b, interleaved_1f1b, zb_h1, dualpipev };
template <>
struct enum_names<pipeline_schedule_kind> {
  static constexpr std::array<std::pair<pipeline_schedule_kind, std::string_view>, 5> value{
      {{pipeline_schedule_kind::invalid, ""},
       {pipeline_schedule_kind::one_f_one_b, "1f1b"},
       {pipeline_schedule_kind::interleaved_1f1b, "interleaved_1f1b"},
       {pipeline_schedule_kind::zb_h1, "zb_h1"},
       {pipeline_schedule_kind::dualpipev, "dualpipev"}}};
};

/// Modules of Megatron-LM 0.14's `--recompute-modules`.
enum class recompute_module : std::uint8_t { invalid, core_attn, layernorm, mla_up_proj, moe_act, mlp, moe };
template <>
struct enum_names<recompute_module> {
  static constexpr std::array<std::pair<recompute_module, std::string_view>, 7> value{
      {{recompute_module::invalid, ""},
       {recompute_module::core_attn, "core_attn"},
       {recompute_module::layernorm, "layernorm"},
       {recompute_module::mla_up_proj, "mla_up_proj"},
       {recompute_module::moe_act, "moe_act"},
       {recompute_module::mlp, "mlp"},
       {recompute_module::moe, "moe"}}};
};
/// A set of `recompute_module`s (JSON: an array of names, or null for the empty set).
struct recompute_module_set {
  std::uint32_t bits = 0;
  [[nodiscard]] constexpr bool contains(recompute_module m) const { return (bits >> static_cast<unsigned>(m)) & 1U; }
  constexpr void insert(recompute_module m) { bits |= 1U << static_cast<unsigned>(m); }
  constexpr void erase(recompute_module m) { bits &= ~(1U << static_cast<unsigned>(m)); }
  [[nodiscard]] constexpr bool empty() const { return bits == 0; }
  friend constexpr bool operator==(recompute_module_set, recompute_module_set) = default;
};

/// A module whose saved input Megatron's fine-grained activation offloading sends to the host
/// (`--offload-modules`, transformer_config.py `offload_modules`): the input of the attention norm,
/// the QKV linear, core attention, the attention output projection, the MLP norm, the experts' fc1
/// and the experts' activation.
enum class offload_module : std::uint8_t {
  invalid,
  attn_norm,
  qkv_linear,
  core_attn,
  attn_proj,
  mlp_norm,
  expert_fc1,
  moe_act
};
template <>
struct enum_names<offload_module> {
  static constexpr std::array<std::pair<offload_module, std::string_view>, 8> value{
      {{offload_module::invalid, ""},
       {offload_module::attn_norm, "attn_norm"},
       {offload_module::qkv_linear, "qkv_linear"},
       {offload_module::core_attn, "core_attn"},
       {offload_module::attn_proj, "attn_proj"},
       {offload_module::mlp_norm, "mlp_norm"},
       {offload_module::expert_fc1, "expert_fc1"},
       {offload_module::moe_act, "moe_act"}}};
};
/// A set of `offload_module`s (JSON: an array of names, or null for the empty set).
struct offload_module_set {
  std::uint32_t bits = 0;
  [[nodiscard]] constexpr bool contains(offload_module m) const { return (bits >> static_cast<unsigned>(m)) & 1U; }
  constexpr void insert(offload_module m) { bits |= 1U << static_cast<unsigned>(m); }
  [[nodiscard]] constexpr bool empty() const { return bits == 0; }
  friend constexpr bool operator==(offload_module_set, offload_module_set) = default;
};

/// MoE token dispatcher, Megatron-LM's `--moe-token-dispatcher-type` (megatron/core/transformer/moe/
/// token_dispatcher.py): `all2all` (MoEAlltoAllTokenDispatcher; `all2all-seq` is SimuMax's legacy
/// alias), `allgather` (MoEAllGatherTokenDispatcher: every rank gathers the tokens of its ep x etp
/// group and keeps those of its own experts) and `flex` (MoEFlexTokenDispatcher with the DeepEP
/// backend: fused permute + all-to-all that sends a token once to each rank holding one of its experts).
enum class dispatcher_kind : std::uint8_t { invalid, all2all, all2all_seq, allgather, flex };
template <>
struct enum_names<dispatcher_kind> {
  static constexpr std::array<std::pair<dispatcher_kind, std::string_view>, 5> value{
      {{dispatcher_kind::invalid, ""},
       {dispatcher_kind::all2all, "all2all"},
       {dispatcher_kind::all2all_seq, "all2all-seq"},
       {dispatcher_kind::allgather, "allgather"},
       {dispatcher_kind::flex, "flex"}}};
};

/// Context-parallel communication (TransformerEngine `cp_comm_type`).
enum class cp_comm_kind : std::uint8_t { invalid, a2a, p2p, all_gather, a2a_p2p };
template <>
struct enum_names<cp_comm_kind> {
  static constexpr std::array<std::pair<cp_comm_kind, std::string_view>, 5> value{
      {{cp_comm_kind::invalid, ""},
       {cp_comm_kind::a2a, "a2a"},
       {cp_comm_kind::p2p, "p2p"},
       {cp_comm_kind::all_gather, "all_gather"},
       {cp_comm_kind::a2a_p2p, "a2a+p2p"}}};
};
enum class cp_a2a_kind : std::uint8_t { invalid, async_cp, sync_cp };
template <>
struct enum_names<cp_a2a_kind> {
  static constexpr std::array<std::pair<cp_a2a_kind, std::string_view>, 3> value{
      {{cp_a2a_kind::invalid, ""}, {cp_a2a_kind::async_cp, "async_cp"}, {cp_a2a_kind::sync_cp, "sync_cp"}}};
};

/// How TransformerEngine's userbuffers overlap a tensor-parallel collective with a GEMM
/// (strategy.tp_comm_overlap; transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp):
/// `ring_exchange` splits the GEMM into tp chunks, each computed while the next chunk travels to the
/// neighbour by copy engine (no SMs taken); `pipeline` splits it into num_splits chunks, each
/// chunk's reduce-scatter running on its own SMs beside the next chunk; `bulk` runs the whole
/// collective on its own SMs beside an independent GEMM of the backward.
enum class userbuffers_method : std::uint8_t { invalid, none, ring_exchange, pipeline, bulk };
template <>
struct enum_names<userbuffers_method> {
  static constexpr std::array<std::pair<userbuffers_method, std::string_view>, 5> value{
      {{userbuffers_method::invalid, ""},
       {userbuffers_method::none, "none"},
       {userbuffers_method::ring_exchange, "ring_exchange"},
       {userbuffers_method::pipeline, "pipeline"},
       {userbuffers_method::bulk, "bulk"}}};
};

/// Low-precision training recipe of TransformerEngine (Megatron-LM --fp8-recipe / --fp4-recipe):
/// `delayed` DelayedScaling (one scale per tensor from an amax history), `tensorwise`
/// Float8CurrentScaling (one scale per tensor from the tensor's own amax), `blockwise`
/// Float8BlockScaling (1x128 activation and 128x128 weight blocks, fp32 scales; DeepSeek-V3 §3.3),
/// `mxfp8` MXFP8BlockScaling (32-element blocks, E8M0 scales; Blackwell), `nvfp4`
/// NVFP4BlockScaling (16-element blocks of E2M1, E4M3 scales + an fp32 tensor scale; Blackwell).
enum class fp8_recipe_kind : std::uint8_t { invalid, delayed, tensorwise, blockwise, mxfp8, nvfp4 };
template <>
struct enum_names<fp8_recipe_kind> {
  static constexpr std::array<std::pair<fp8_recipe_kind, std::string_view>, 6> value{
      {{fp8_recipe_kind::invalid, ""},
       {fp8_recipe_kind::delayed, "delayed"},
       {fp8_recipe_kind::tensorwise, "tensorwise"},
       {fp8_recipe_kind::blockwise, "blockwise"},
       {fp8_recipe_kind::mxfp8, "mxfp8"},
       {fp8_recipe_kind::nvfp4, "nvfp4"}}};
};
/// The lowest compute capability whose tensor cores and TransformerEngine run recipe `r`: FP8 from
/// Ada/Hopper (8.9); block scaling from Hopper (9.0, TE quantization.py
/// _compute_fp8_block_scaling_support); MXFP8 and NVFP4 on Blackwell (10.0, TE's MXFP8 and NVFP4
/// recipes).
constexpr double fp8_recipe_min_compute_capability(fp8_recipe_kind r) {
  switch (r) {
    case fp8_recipe_kind::blockwise:
      return 9.0;
    case fp8_recipe_kind::mxfp8:
    case fp8_recipe_kind::nvfp4:
      return 10.0;
    default:
      return 8.9;
  }
}
/// Megatron-FSDP's `--data-parallel-sharding-strategy` (megatron/core/distributed/fsdp/
/// mcore_fsdp_adapter.py): what the data-parallel ranks shard — nothing, the optimizer state
/// (ZeRO-1), also the gradients (ZeRO-2), also the parameters (ZeRO-3).
enum class dp_sharding_kind : std::uint8_t { invalid, no_shard, optim, optim_grads, optim_grads_params };
template <>
struct enum_names<dp_sharding_kind> {
  static constexpr std::array<std::pair<dp_sharding_kind, std::string_view>, 5> value{
      {{dp_sharding_kind::invalid, ""},
       {dp_sharding_kind::no_shard, "no_shard"},
       {dp_sharding_kind::optim, "optim"},
       {dp_sharding_kind::optim_grads, "optim_grads"},
       {dp_sharding_kind::optim_grads_params, "optim_grads_params"}}};
};
/// Megatron-LM --optimizer (megatron/core/optimizer/__init__.py): Adam, or Muon
/// (emerging_optimizers.py TensorParallelMuon: momentum SGD whose update is orthogonalised by
/// Newton-Schulz iterations, for the 2-D weight matrices; the rest fall back to Adam).
enum class optimizer_kind : std::uint8_t { invalid, adam, muon };
template <>
struct enum_names<optimizer_kind> {
  static constexpr std::array<std::pair<optimizer_kind, std::string_view>, 3> value{
      {{optimizer_kind::invalid, ""}, {optimizer_kind::adam, "adam"}, {optimizer_kind::muon, "muon"}}};
};
/// Megatron-LM --muon-tp-mode (optimizer_config.py muon_tp_mode): how a tensor-parallel weight is
/// orthogonalised: each rank its own shard (blockwise), or the whole matrix gathered over tp on
/// every rank (duplicated). "distributed" (a Gram-matrix all-reduce per iteration) is not modelled.
enum class muon_tp_mode_kind : std::uint8_t { invalid, blockwise, duplicated, distributed };
template <>
struct enum_names<muon_tp_mode_kind> {
  static constexpr std::array<std::pair<muon_tp_mode_kind, std::string_view>, 4> value{
      {{muon_tp_mode_kind::invalid, ""},
       {muon_tp_mode_kind::blockwise, "blockwise"},
       {muon_tp_mode_kind::duplicated, "duplicated"},
       {muon_tp_mode_kind::distributed, "distributed"}}};
};
/// The ZeRO stage a Megatron-FSDP sharding strategy is: no_shard 0, optim 1, optim_grads 2,
/// optim_grads_params 3 (-1: invalid).
constexpr std::int64_t sharding_level_of(dp_sharding_kind k) { return static_cast<std::int64_t>(k) - 1; }
/// The Megatron-FSDP sharding strategy of ZeRO stage `zero` (0..3), `sharding_level_of`'s inverse.
constexpr dp_sharding_kind megatron_fsdp_sharding(std::int64_t zero) { return static_cast<dp_sharding_kind>(zero + 1); }

/// Name of a network tier of the system file, or "auto" (chosen from where the group's ranks sit).
using net_name = fixed_string<32>;
/// A TransformerEngine version such as "2.11.0" (empty: unknown).
using version_text = fixed_string<16>;

/// A training job's batching, parallel layout, recompute and kernel choices.
struct strategy_spec {
  // Batch.
  std::int64_t seq_len = 0;
  std::int64_t micro_batch_size = 0;
  std::int64_t micro_batch_num = 0;  ///< gradient-accumulation steps per iteration
  dtype_kind dtype = dtype_kind::bf16;
  bool fp8 = false;
  /// The low-precision recipe of the decoder layers' linears when `fp8` (see fp8_recipe_kind).
  fp8_recipe_kind fp8_recipe = fp8_recipe_kind::delayed;
  /// Megatron --fp8-param-gather: the parameters of FP8 linears are kept quantized (no bf16 copy)
  /// and the distributed optimizer all-gathers them in that format.
  bool fp8_param_gather = false;
  /// Megatron --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16:
  /// that many decoder layers at each end of the model run in bf16.
  bool fp8_first_last_layers_bf16 = false;
  std::int64_t fp8_layers_at_start_in_bf16 = 1;
  std::int64_t fp8_layers_at_end_in_bf16 = 1;
  // Parallel sizes; dp = world_size / (tp * pp * cp).
  std::int64_t world_size = 8;
  std::int64_t tp_size = 1;
  std::int64_t cp_size = 1;
  std::int64_t pp_size = 1;
  std::int64_t ep_size = 1;
  std::int64_t etp_size = 1;
  cp_comm_kind cp_comm_type = cp_comm_kind::a2a;
  cp_a2a_kind cp_a2a_mode = cp_a2a_kind::async_cp;
  fixed_string<32> order_of_paralielism = "tp-cp-ep-dp-pp";  ///< SimuMax's spelling; only this order exists
  dispatcher_kind moe_dispatcher_policy = dispatcher_kind::all2all;
  /// Megatron's TEGroupedMLP as TE's fused operations (TransformerConfig
  /// use_transformer_engine_op_fuser with NVTE_CUTEDSL_FUSED_GROUPED_MLP; experts.py
  /// `_is_fused_impl_supported`: expert TP 1 only): the experts' fc2 bias is added inside the fused
  /// kernel, not in the eager per-expert loop (`_apply_bias`).
  bool use_transformer_engine_op_fuser = false;
  std::optional<std::int64_t> num_layers_in_first_pipeline_stage = {};
  std::optional<std::int64_t> num_layers_in_last_pipeline_stage = {};
  /// Megatron's --account-for-embedding/loss-in-pipeline-split: the embedding (loss) counts as one
  /// layer of the even split, so the first (last) stage builds one decoder layer fewer.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  /// Megatron-LM's older --scatter-gather-tensors-in-pipeline (off in Megatron-Core): without
  /// sequence parallelism, each stage sends 1/tp of the activation and the receiver all-gathers it
  /// over tp. With sequence parallelism the activation is already split, so it changes nothing.
  bool scatter_gather_tensors_in_pipeline = false;
  // Memory optimisations.
  bool grad_reduce_in_bf16 = false;
  bool cache_groupgemm_col_fp8_inputs = false;
  bool offload_groupgemm_col_inputs = false;
  bool attn_recompute = false;
  bool mla_rms_recompute = false;
  bool mlp_recompute = false;
  bool mlp_rms_recompute = false;
  bool enable_sequence_parallel = true;
  std::int64_t interleaving_size = 1;  ///< virtual pipeline chunks per stage; 1 is plain 1F1B
  std::optional<std::int64_t> microbatch_group_size_per_vp_stage = {};
  bool pp_comm_async = true;
  /// "1f1b", "interleaved_1f1b", "zb_h1" or "dualpipev"; absent: interleaved_1f1b when
  /// interleaving_size > 1, else 1f1b (see `pipeline_schedule_of`).
  std::optional<pipeline_schedule_kind> pipeline_schedule = {};
  /// Megatron-LM's --overlap-moe-expert-parallel-comm (core/model_parallel_config.py): in the 1F1B
  /// steady state the forward of one micro-batch and the backward of another run as one combined
  /// step, layer by layer, each one's expert all-to-all on a communication stream under the other's
  /// computation (core/models/common/model_chunk_schedule_plan.py); one more warm-up forward
  /// (pipeline_parallel/schedules.py get_pp_rank_microbatches).
  bool overlap_moe_expert_parallel_comm = false;
  /// Megatron-LM's --delay-wgrad-compute (core/model_parallel_config.py): in a combined step the
  /// expert MLP's weight gradients run after its input gradients, so the dispatch backward need
  /// not wait for them. Only the combined step is priced differently.
  bool delay_wgrad_compute = false;
  /// Megatron-LM's --tp-comm-overlap (core/model_parallel_config.py `tp_comm_overlap`): TE's
  /// userbuffers overlap the sequence-parallel all-gathers and reduce-scatters of the attention and
  /// MLP linears (TE names qkv, proj, fc1, fc2) with their GEMMs: the input gathers by ring
  /// exchange, the output reduce-scatters by `tp_comm_overlap_rs_method`, the backward's input
  /// gather and gradient reduce-scatter in bulk (TE module/base.py `initialize_ub` defaults).
  bool tp_comm_overlap = false;
  /// The method of the row-parallel forward reduce-scatters (TE proj_fprop, fc2_fprop): TE's
  /// default "pipeline"; Megatron-Bridge's FP8 userbuffers configs use "ring_exchange".
  userbuffers_method tp_comm_overlap_rs_method = userbuffers_method::pipeline;
  /// SMs each SM-driven userbuffers collective (pipeline, bulk) takes from its GEMM: TE
  /// initialize_ub's default num_sm 16 (module/base.py).
  std::int64_t tp_comm_overlap_num_sm = 16;
  /// TE's set_sm_margin for the bulk collectives: the GEMM beside one runs on the other SMs
  /// throughout (TE's default); false: it shares them only while the collective runs
  /// (Megatron-Bridge's configs, comm_overlap.py BulkOverlapCfg). Pipeline GEMMs always keep the
  /// margin (TE's default and Megatron-Bridge's configs alike).
  bool tp_comm_overlap_bulk_sm_margin = true;
  /// Chunks of a pipeline-overlapped GEMM: TE initialize_ub's default num_splits 4.
  std::int64_t tp_comm_overlap_num_splits = 4;
  bool enable_straggler_model = true;
  std::int64_t zero_state = 1;  ///< 0: plain DP; 1: Megatron distributed optimizer (ZeRO-1); 2, 3: ZeRO-2/3 (see below)
  double attention_sparse_ratio = 0.0;
  bool enable_dropout = false;
  bool use_fp32_accum_grad = true;
  bool use_accm_weight = true;
  // Recompute.
  bool enable_recompute = true;
  recompute_kind recompute_granularity = recompute_kind::none;
  std::int64_t recompute_layer_num = 0;  ///< layers of each stage that recompute
  bool recompute_variance = false;
  bool megatron_recompute = false;
  recompute_module_set megatron_recompute_modules = {};
  // Kernels.
  bool use_flash_sdp = true;
  bool use_math_sdp = false;
  bool use_fused_norm = true;
  bool use_fused_swiglu = true;
  bool use_fused_grad_accumulation = true;
  bool cross_entropy_loss_fusion = false;
  /// Megatron's --overlap-grad-reduce / --overlap-param-gather, off by default as in Megatron-LM
  /// (`arguments.py`: store_true) and in the runs this estimate is checked against: bucket
  /// reductions during the last backward, parameter gathers during the next forward.
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  version_text te_version = {};
  version_text te_dummy_wgrad_min_version = "2.3.0";
  version_text te_cp_a2a_save_pre_posta2a_min_version = "2.8.0";
  version_text te_grouped_linear_dummy_wgrad_min_version = "2.10.0";
  // Network tier per group.
  net_name tp_net = "auto";
  net_name cp_net = "auto";
  net_name pp_net = "auto";
  net_name dp_net = "auto";
  net_name ep_net = "auto";
  net_name etp_net = "auto";
  net_name edp_net = "auto";
  bool dispatch_probs = false;  ///< newer Megatron multiplies routing probs in the expert activation
  double mem_factor = 0.94;     ///< reserved memory = peak allocated / mem_factor
  /// Megatron-FSDP's sharding strategy; when given, the job runs Megatron-FSDP (else zero_state >= 2
  /// is DeepSpeed ZeRO-2/3) and zero_state must equal its level (JSON: an absent zero_state takes it).
  std::optional<dp_sharding_kind> data_parallel_sharding_strategy = {};
  /// Megatron --optimizer-cpu-offload (with --optimizer-offload-fraction 1.0): the Adam step on the
  /// host, fp32 master weights and Adam moments in host memory (core/optimizer/cpu_offloading).
  bool optimizer_cpu_offload = false;
  /// Megatron --use-precision-aware-optimizer (optimizer_config.py): TransformerEngine's FusedAdam
  /// keeps the Adam moments in `exp_avg_dtype` / `exp_avg_sq_dtype` and, unless the job's FP8
  /// recipe needs Megatron to (current scaling, blockwise, MXFP8 with fp32 main params), the master
  /// weights in `main_params_dtype` — with `store_param_remainders` and bf16 parameters only the 16
  /// bits bf16 lacks (see cost/step_cost.hpp `adam_state_bytes_per_param`).
  bool use_precision_aware_optimizer = false;
  dtype_kind main_params_dtype = dtype_kind::fp32;  ///< --main-params-dtype: fp32 or fp16
  dtype_kind exp_avg_dtype = dtype_kind::fp32;      ///< --exp-avg-dtype: fp32, fp16, bf16 or fp8
  dtype_kind exp_avg_sq_dtype = dtype_kind::fp32;   ///< --exp-avg-sq-dtype: fp32, fp16, bf16 or fp8
  bool store_param_remainders = true;               ///< optimizer_config.py default (TE >= 2.1)
  /// Megatron's OptimizerConfig.fp8_recipe, which decides who keeps the master weights whether or
  /// not FP8 is on; absent: the job's `fp8_recipe` with FP8, else Megatron-LM's default "delayed"
  /// (Megatron-Bridge's BF16 and NVFP4 configs leave "tensorwise": set it so).
  std::optional<fp8_recipe_kind> optimizer_fp8_recipe = {};
  /// Megatron --fine-grained-activation-offloading with --offload-modules (megatron/core/pipeline_
  /// parallel/fine_grained_activation_offload.py): what the named modules save for backward is
  /// copied to pinned host memory on a D2H stream after the module's forward and copied back on an
  /// H2D stream one layer ahead of its backward (see estimate/offload.hpp).
  bool fine_grained_activation_offloading = false;
  offload_module_set offload_modules = {};
  /// Megatron's cpu_offloading / cpu_offloading_num_layers (TransformerEngine cpu_offload.py,
  /// layer-level offloading of the model's first N layers, see estimate/offload.hpp). As in
  /// Megatron's TransformerConfig, the count alone offloads nothing (its command line's
  /// --cpu-offloading-num-layers sets both).
  bool cpu_offloading = false;
  std::int64_t cpu_offloading_num_layers = 0;
  /// Megatron-LM --pipeline-model-parallel-layout (pipeline_parallel_layer_layout.py): which
  /// embedding (E), decoder (t), MTP (m) and loss (L) layers each of the pp·vp stages holds, e.g.
  /// "Et*3|(tt|)*29,m|L"; empty: the split of num_layers_in_first/last_pipeline_stage (spec/pipeline_layout.hpp).
  fixed_string<256> pipeline_model_parallel_layout = {};
  /// Megatron-LM --hierarchical-context-parallel-sizes for cp_comm_type "a2a+p2p": {a2a size, p2p
  /// size}, product cp_size; the first level groups neighbouring cp ranks (parallel_state.py
  /// create_hierarchical_groups), TE runs Ulysses all-to-all there and the KV ring over the second.
  std::optional<std::array<std::int64_t, 2>> hierarchical_context_parallel_sizes = {};
  /// Megatron-LM --optimizer: "adam" or "muon". With zero_state 1, Muon runs as Megatron's
  /// layer-wise distributed optimizer (--optimizer dist_muon, layer_wise_optimizer.py): whole
  /// parameters assigned to data-parallel ranks, gradients all-reduced, parameters all-gathered.
  optimizer_kind optimizer = optimizer_kind::adam;
  /// Megatron-LM --muon-num-ns-steps (optimizer_config.py default 5): Newton-Schulz iterations per step.
  std::int64_t muon_num_ns_steps = 5;
  /// Megatron-LM --muon-tp-mode (optimizer_config.py default "duplicated").
  muon_tp_mode_kind muon_tp_mode = muon_tp_mode_kind::duplicated;
  /// Megatron-LM --muon-split-qkv (optimizer_config.py default true): linear_qkv's Q, K and V
  /// blocks are orthogonalised as three matrices.
  bool muon_split_qkv = true;

  friend constexpr bool operator==(const strategy_spec&, const strategy_spec&) = default;
};

/// The ZeRO stage the job runs (0..3): `zero_state`, which validation keeps equal to the level of
/// `data_parallel_sharding_strategy` when that is given.
constexpr std::int64_t sharding_level(const strategy_spec& s) { return s.zero_state; }
/// Sets the recompute fields: `kind` (none; selective: SimuMax's attn_recompute, each layer's QKV
/// projection, rotary embedding and core attention, `plan_selective_flags`; full_block: whole
/// layers) for the first `layers` layers of each stage (max_dimension: every layer), as Megatron's
/// --recompute-granularity / --recompute-num-layers, strategy names and the search set them.
constexpr void set_recompute(strategy_spec& s, recompute_kind kind, std::int64_t layers) {
  s.enable_recompute = kind != recompute_kind::none;
  s.recompute_granularity = kind;
  s.attn_recompute = kind == recompute_kind::selective_recompute;
  s.recompute_layer_num = kind == recompute_kind::none ? 0 : layers;
}
/// Whether ZeRO-2/3 run as Megatron-FSDP (`data_parallel_sharding_strategy` given) rather than DeepSpeed.
constexpr bool megatron_fsdp(const strategy_spec& s) { return s.data_parallel_sharding_strategy.has_value(); }
/// Megatron's optimizer CPU offload (its distributed optimizer or Megatron-FSDP), which runs on
/// the precision-aware optimizer (arguments.py); with DeepSpeed ZeRO-2/3 it is ZeRO-Offload.
constexpr bool megatron_optimizer_offload(const strategy_spec& s) {
  return s.optimizer_cpu_offload && (s.zero_state == 1 || megatron_fsdp(s));
}

/// Ranks that hold one full copy of the dense model: tp * pp * cp.
constexpr std::int64_t shard_size(const strategy_spec& s) { return s.tp_size * s.pp_size * s.cp_size; }
/// Data-parallel size of the dense parts: world_size / (tp * pp * cp).
constexpr std::int64_t dp_size(const strategy_spec& s) { return s.world_size / shard_size(s); }
/// Expert-data-parallel size: world_size / (ep * etp * pp) (Megatron's expert DP group).
constexpr std::int64_t edp_size(const strategy_spec& s) { return s.world_size / (s.ep_size * s.etp_size * s.pp_size); }
/// Context parallelism's Ulysses (all-to-all) level: the whole cp group for "a2a", the first
/// hierarchical level for "a2a+p2p", none (1) for the ring ("p2p") and the KV all-gather.
constexpr std::int64_t cp_a2a_size(const strategy_spec& s) {
  if (s.cp_comm_type == cp_comm_kind::a2a) return s.cp_size;
  if (s.cp_comm_type == cp_comm_kind::a2a_p2p && s.hierarchical_context_parallel_sizes)
    return (*s.hierarchical_context_parallel_sizes)[0];
  return 1;
}
/// Ranks of context parallelism's KV ring ("p2p", the second level of "a2a+p2p"); 1 without a ring.
constexpr std::int64_t cp_ring_size(const strategy_spec& s) {
  if (s.cp_comm_type == cp_comm_kind::all_gather) return 1;
  return s.cp_size / cp_a2a_size(s);
}
/// Sequences per iteration over all data-parallel ranks.
constexpr std::int64_t global_batch_size(const strategy_spec& s) {
  return s.micro_batch_size * s.micro_batch_num * dp_size(s);
}

/// Whether sequence parallelism is on: it needs tensor parallelism to split the residual stream
/// (Megatron's --sequence-parallel with tp 1 does nothing).
constexpr bool sequence_parallel_active(const strategy_spec& s) { return s.enable_sequence_parallel && s.tp_size > 1; }

/// Whether any recompute is active (SimuMax `is_recompute`).
constexpr bool recompute_active(const strategy_spec& s) {
  if (!s.enable_recompute || s.recompute_layer_num <= 0) return false;
  switch (s.recompute_granularity) {
    case recompute_kind::full_block:
    case recompute_kind::attn_only:
    case recompute_kind::mlp_only:
    case recompute_kind::sdp_only:
      return true;
    case recompute_kind::selective_recompute:
      return s.attn_recompute || s.mla_rms_recompute || s.mlp_recompute || s.mlp_rms_recompute ||
             (s.megatron_recompute && !s.megatron_recompute_modules.empty());
    default:
      return false;
  }
}

namespace detail {
/// Splits "2.11.0" into {2, 11, 0}; missing parts are 0.
constexpr std::array<std::int64_t, 3> version_triple(std::string_view v) {
  std::array<std::int64_t, 3> out{};
  std::size_t part = 0;
  bool in_number = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      if (part < 3) out[part] = out[part] * 10 + (c - '0');
      in_number = true;
    } else if (in_number) {
      ++part;
      in_number = false;
    }
  }
  return out;
}
}  // namespace detail

/// Whether the job's TransformerEngine is at least `minimum` (false when te_version is unknown).
constexpr bool te_at_least(const strategy_spec& s, const version_text& minimum) {
  if (s.te_version.empty()) return false;
  return detail::version_triple(s.te_version.view()) >= detail::version_triple(minimum.view());
}

/// The pipeline schedule the strategy runs: `pipeline_schedule`, or what interleaving_size implies.
constexpr pipeline_schedule_kind pipeline_schedule_of(const strategy_spec& s) {
  if (s.pipeline_schedule) return *s.pipeline_schedule;
  return s.interleaving_size > 1 ? pipeline_schedule_kind::interleaved_1f1b : pipeline_schedule_kind::one_f_one_b;
}

/// Whether context parallelism of `cp` ranks can cut a `seq`-token sequence: Megatron's
/// get_batch_on_this_cp_rank cuts it into 2*cp chunks, rank r keeping chunks r and 2*cp-1-r (the
/// load-balanced causal split TE's ring, all-to-all and all-gather all assume); cp 1 cuts nothing.
constexpr bool cp_splits_sequence(std::int64_t seq, std::int64_t cp) { return cp <= 1 || seq % (2 * cp) == 0; }
/// Whether sequence parallelism over `tp` ranks splits each context-parallel rank's seq / cp tokens.
constexpr bool sp_splits_sequence(std::int64_t seq, std::int64_t cp, std::int64_t tp) { return (seq / cp) % tp == 0; }

/// Whether schedule `k` defers weight gradients to passes of their own (ZB-H1's and DualPipeV's W
/// passes; TE's delay_wgrad_compute path).
constexpr bool schedule_splits_weight_gradients(pipeline_schedule_kind k) {
  return k == pipeline_schedule_kind::zb_h1 || k == pipeline_schedule_kind::dualpipev;
}
/// Whether weight gradients run apart from input gradients: Megatron's delay_wgrad_compute, or a
/// schedule that defers them.
constexpr bool splits_weight_gradients(const strategy_spec& s) {
  return s.delay_wgrad_compute || schedule_splits_weight_gradients(pipeline_schedule_of(s));
}

namespace detail {
/// The schedule against the interleaving it needs.
constexpr void validate_pipeline_schedule(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (!s.pipeline_schedule) return;
  const pipeline_schedule_kind k = *s.pipeline_schedule;
  if (k == pipeline_schedule_kind::invalid)
    report_error(api, "strategy.pipeline_schedule",
                 "strategy.pipeline_schedule must be \"1f1b\", \"interleaved_1f1b\", \"zb_h1\" or \"dualpipev\"");
  if ((k == pipeline_schedule_kind::zb_h1 || k == pipeline_schedule_kind::dualpipev) && s.interleaving_size > 1)
    report_error(api, "strategy.pipeline_schedule",
                 "strategy.pipeline_schedule=\"{}\" cannot run with strategy.interleaving_size={} (it places its own "
                 "model chunks; use interleaving_size=1)",
                 enum_name(k), s.interleaving_size);
  if (k == pipeline_schedule_kind::interleaved_1f1b && s.interleaving_size == 1)
    report_error(api, "strategy.pipeline_schedule",
                 "strategy.pipeline_schedule=\"interleaved_1f1b\" needs strategy.interleaving_size > 1, got 1");
  if (k == pipeline_schedule_kind::one_f_one_b && s.interleaving_size > 1)
    report_error(api, "strategy.pipeline_schedule",
                 "strategy.pipeline_schedule=\"1f1b\" with strategy.interleaving_size={} is interleaved_1f1b",
                 s.interleaving_size);
}

/// The optimizer choice and Muon's settings.
/// Megatron's precision-aware optimizer: its dtypes (arguments.py choices), fp32 throughout
/// without it (optimizer_config.py asserts), Adam only, the distributed optimizer or Megatron-FSDP
/// (core/optimizer/__init__.py), and needed by the optimizer's CPU offload (arguments.py).
constexpr void validate_precision_aware_optimizer(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (s.main_params_dtype != dtype_kind::fp32 && s.main_params_dtype != dtype_kind::fp16)
    report_error(api, "strategy.main_params_dtype",
                 "strategy.main_params_dtype must be \"fp32\" or \"fp16\", got \"{}\"", enum_name(s.main_params_dtype));
  for (const auto& [field, d] : {std::pair{std::string_view{"strategy.exp_avg_dtype"}, s.exp_avg_dtype},
                                 std::pair{std::string_view{"strategy.exp_avg_sq_dtype"}, s.exp_avg_sq_dtype}}) {
    if (d == dtype_kind::invalid) report_error(api, field, "{} must be \"fp32\", \"fp16\", \"bf16\" or \"fp8\"", field);
    if (!s.use_precision_aware_optimizer && d != dtype_kind::fp32)
      report_error(api, field,
                   "{}=\"{}\" needs strategy.use_precision_aware_optimizer=true (Megatron optimizer_config.py: fp32 "
                   "only without the precision-aware optimizer)",
                   field, enum_name(d));
  }
  if (!s.use_precision_aware_optimizer && s.main_params_dtype != dtype_kind::fp32)
    report_error(api, "strategy.main_params_dtype",
                 "strategy.main_params_dtype=\"{}\" needs strategy.use_precision_aware_optimizer=true (Megatron "
                 "optimizer_config.py: fp32 only without the precision-aware optimizer)",
                 enum_name(s.main_params_dtype));
  if (megatron_optimizer_offload(s) && !s.use_precision_aware_optimizer)
    report_error(
        api, "strategy.optimizer_cpu_offload",
        "strategy.optimizer_cpu_offload=true with Megatron's optimizer (strategy.zero_state=1 or Megatron-FSDP) "
        "needs strategy.use_precision_aware_optimizer=true (Megatron arguments.py: the hybrid device optimizer "
        "reuses its code path; without it the fp32 master shard stays on the GPU)");
  if (s.optimizer_fp8_recipe == fp8_recipe_kind::invalid)
    report_error(api, "strategy.optimizer_fp8_recipe",
                 "strategy.optimizer_fp8_recipe must be \"delayed\", \"tensorwise\", \"blockwise\", \"mxfp8\" or "
                 "\"nvfp4\"");
  if (!s.use_precision_aware_optimizer) return;
  if (s.optimizer != optimizer_kind::adam)
    report_error(api, "strategy.use_precision_aware_optimizer",
                 "strategy.use_precision_aware_optimizer=true needs strategy.optimizer=\"adam\" (Megatron "
                 "optimizer_config.py: only supported with adam)");
  if (!(s.zero_state == 1 || megatron_fsdp(s)))
    report_error(api, "strategy.use_precision_aware_optimizer",
                 "strategy.use_precision_aware_optimizer=true needs Megatron's distributed optimizer "
                 "(strategy.zero_state=1) or Megatron-FSDP (strategy.data_parallel_sharding_strategy), got "
                 "strategy.zero_state={} (Megatron core/optimizer/__init__.py)",
                 s.zero_state);
}

constexpr void validate_muon(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (s.optimizer == optimizer_kind::invalid)
    report_error(api, "strategy.optimizer", "strategy.optimizer must be \"adam\" or \"muon\"");
  if (s.muon_tp_mode == muon_tp_mode_kind::invalid)
    report_error(api, "strategy.muon_tp_mode",
                 "strategy.muon_tp_mode must be \"blockwise\", \"duplicated\" or \"distributed\"");
  // A count below one is wrong whichever optimizer runs (a config that sets it means something).
  if (s.muon_num_ns_steps < 1)
    report_error(api, "strategy.muon_num_ns_steps", "strategy.muon_num_ns_steps={} must be >= 1", s.muon_num_ns_steps);
  if (s.optimizer != optimizer_kind::muon) return;
  if (s.muon_tp_mode == muon_tp_mode_kind::distributed)
    report_error(api, "strategy.muon_tp_mode",
                 "strategy.muon_tp_mode=\"distributed\" is not modelled (use \"blockwise\" or \"duplicated\")");
  if (s.zero_state >= 2)
    report_error(api, "strategy.optimizer",
                 "strategy.optimizer=\"muon\" with strategy.zero_state={} is not modelled: Megatron runs Muon "
                 "plain (zero_state 0) or as its layer-wise distributed optimizer (zero_state 1)",
                 s.zero_state);
  if (s.optimizer_cpu_offload)
    report_error(api, "strategy.optimizer_cpu_offload",
                 "strategy.optimizer_cpu_offload=true with strategy.optimizer=\"muon\" is not modelled");
  if (s.overlap_param_gather)
    report_error(api, "strategy.overlap_param_gather",
                 "strategy.overlap_param_gather=true with strategy.optimizer=\"muon\" is not modelled (the layer-wise "
                 "optimizer all-gathers the parameters after its step)");
}

/// Megatron-FSDP's sharding strategy against zero_state.
constexpr void validate_sharding(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (!s.data_parallel_sharding_strategy) return;
  const dp_sharding_kind k = *s.data_parallel_sharding_strategy;
  if (k == dp_sharding_kind::invalid)
    report_error(api, "strategy.data_parallel_sharding_strategy",
                 "strategy.data_parallel_sharding_strategy must be \"no_shard\", \"optim\", \"optim_grads\" or "
                 "\"optim_grads_params\"");
  if (sharding_level_of(k) != s.zero_state)
    report_error(api, "strategy.data_parallel_sharding_strategy",
                 "strategy.data_parallel_sharding_strategy=\"{}\" shards at ZeRO stage {}, but strategy.zero_state={}; "
                 "the two fields must agree (or leave zero_state out)",
                 enum_name(k), sharding_level_of(k), s.zero_state);
}

/// Context parallelism's layout (TransformerEngine context_parallel.py, Megatron-LM parallel_state.py).
constexpr void validate_context_parallel(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  const auto& h = s.hierarchical_context_parallel_sizes;
  if (h && s.cp_comm_type != cp_comm_kind::a2a_p2p)
    report_error(api, "strategy.hierarchical_context_parallel_sizes",
                 "strategy.hierarchical_context_parallel_sizes is used only with strategy.cp_comm_type=\"a2a+p2p\"");
  if (s.cp_size <= 1) return;
  if (s.cp_comm_type == cp_comm_kind::a2a_p2p) {
    if (!h)
      report_error(api, "strategy.hierarchical_context_parallel_sizes",
                   "strategy.cp_comm_type=\"a2a+p2p\" needs strategy.hierarchical_context_parallel_sizes [a2a size, "
                   "p2p size]");
    if ((*h)[0] < 1 || (*h)[1] < 1 || (*h)[0] > s.cp_size || (*h)[1] > s.cp_size || (*h)[0] * (*h)[1] != s.cp_size)
      report_error(api, "strategy.hierarchical_context_parallel_sizes",
                   "strategy.hierarchical_context_parallel_sizes=[{}, {}] must be positive with product "
                   "strategy.cp_size={}",
                   (*h)[0], (*h)[1], s.cp_size);
  }
  if (!cp_splits_sequence(s.seq_len, s.cp_size))
    report_error(api, "strategy.seq_len",
                 "strategy.seq_len={} must be divisible by 2*cp_size={} (context parallelism's load-balanced split)",
                 s.seq_len, 2 * s.cp_size);
}

/// Deepest pipeline accepted. Published runs use at most 64 stages (Narayanan et al. 2021, "Efficient
/// Large-Scale Language Model Training on GPU Clusters", Table 1: 1T parameters at pp 64); the 1F1B
/// simulation costs about 4p^2 rank steps before its steady-phase shortcut (schedule/one_f_one_b.hpp),
/// so 128 stages (twice the deepest) keep an estimate under a second.
inline constexpr std::int64_t max_pipeline_stages = 128;

/// Most forward passes (stages x micro-batches x model chunks) simulated one by one: 2^24, e.g. 128
/// stages x 131,072 micro-batches, well past any real job (100,000 micro-batches of issue 15's scale
/// list) and about a second of simulation. Plain 1F1B stops at its steady phase and has no limit.
inline constexpr double max_simulated_passes = 16777216.0;

/// Sizes and the products the estimate forms.
constexpr void validate_strategy_sizes(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  using detail::require_size;
  require_size(api, "strategy.seq_len", s.seq_len, 1);
  require_size(api, "strategy.micro_batch_size", s.micro_batch_size, 1);
  require_size(api, "strategy.micro_batch_num", s.micro_batch_num, 1);
  require_size(api, "strategy.world_size", s.world_size, 1);
  require_size(api, "strategy.tp_size", s.tp_size, 1);
  require_size(api, "strategy.cp_size", s.cp_size, 1);
  require_size(api, "strategy.pp_size", s.pp_size, 1);
  if (s.pp_size > max_pipeline_stages)
    report_error(api, "strategy.pp_size",
                 "strategy.pp_size={} exceeds {} pipeline stages (the schedule simulation grows with the square of "
                 "the stage count)",
                 s.pp_size, max_pipeline_stages);
  const bool pass_by_pass =
      s.interleaving_size > 1 || (s.pipeline_schedule && (*s.pipeline_schedule == pipeline_schedule_kind::zb_h1 ||
                                                          *s.pipeline_schedule == pipeline_schedule_kind::dualpipev));
  const double passes = static_cast<double>(s.pp_size) * static_cast<double>(s.micro_batch_num) *
                        static_cast<double>(s.interleaving_size);
  if (s.pp_size > 1 && pass_by_pass && passes > max_simulated_passes)
    report_error(api, "strategy.micro_batch_num",
                 "strategy.pp_size*micro_batch_num*interleaving_size={} exceeds {}: the interleaved, ZB-H1 and "
                 "DualPipeV schedules are simulated pass by pass",
                 passes, max_simulated_passes);
  require_size(api, "strategy.ep_size", s.ep_size, 1);
  require_size(api, "strategy.etp_size", s.etp_size, 1);
  require_size(api, "strategy.interleaving_size", s.interleaving_size, 1);
  require_size(api, "strategy.recompute_layer_num", s.recompute_layer_num, 0);
  require_size(api, "strategy.num_layers_in_first_pipeline_stage", s.num_layers_in_first_pipeline_stage, 0);
  require_size(api, "strategy.num_layers_in_last_pipeline_stage", s.num_layers_in_last_pipeline_stage, 0);
  require_size(api, "strategy.microbatch_group_size_per_vp_stage", s.microbatch_group_size_per_vp_stage, 1);
  // Products the estimate forms must stay exact: tokens of one micro-batch are a GEMM dimension
  // (int32 in cuBLAS); tokens of one iteration must stay below 2^53 (exact in a double).
  // With context parallelism a rank holds seq_len/cp_size tokens of each sequence (its GEMMs' dimension).
  const double rank_tokens = static_cast<double>(s.seq_len) * static_cast<double>(s.micro_batch_size) /
                             static_cast<double>(s.cp_size > 0 ? s.cp_size : 1);
  if (rank_tokens > static_cast<double>(max_dimension)) {
    if (s.cp_size > 1)
      report_error(api, "strategy.micro_batch_size",
                   "strategy.seq_len*micro_batch_size/cp_size={} tokens per micro-batch per rank exceeds {}",
                   rank_tokens, max_dimension);
    report_error(api, "strategy.micro_batch_size",
                 "strategy.seq_len*micro_batch_size={} tokens per micro-batch exceeds {}",
                 static_cast<double>(s.seq_len) * static_cast<double>(s.micro_batch_size), max_dimension);
  }
  if (static_cast<double>(s.seq_len) * static_cast<double>(s.micro_batch_size) *
          static_cast<double>(s.micro_batch_num) * static_cast<double>(s.world_size) >
      9007199254740992.0)
    report_error(api, "strategy.micro_batch_num",
                 "strategy.seq_len*micro_batch_size*micro_batch_num*world_size={} tokens per iteration exceeds 2^53",
                 static_cast<double>(s.seq_len) * static_cast<double>(s.micro_batch_size) *
                     static_cast<double>(s.micro_batch_num) * static_cast<double>(s.world_size));
}
/// The low-precision fields: each needs `fp8`, counts are non-negative.
constexpr void validate_fp8_fields(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (s.fp8_recipe == fp8_recipe_kind::invalid)
    report_error(api, "strategy.fp8_recipe",
                 "strategy.fp8_recipe must be \"delayed\", \"tensorwise\", \"blockwise\", \"mxfp8\" or \"nvfp4\"");
  if (!s.fp8 && s.fp8_recipe != fp8_recipe_kind::delayed)
    report_error(api, "strategy.fp8_recipe", "strategy.fp8_recipe=\"{}\" requires strategy.fp8=true",
                 enum_name(s.fp8_recipe));
  if (!s.fp8 && s.fp8_param_gather)
    report_error(api, "strategy.fp8_param_gather", "strategy.fp8_param_gather=true requires strategy.fp8=true");
  if (!s.fp8 && s.fp8_first_last_layers_bf16)
    report_error(api, "strategy.fp8_first_last_layers_bf16",
                 "strategy.fp8_first_last_layers_bf16=true requires strategy.fp8=true");
  if (s.fp8_param_gather && s.zero_state < 1)
    report_error(api, "strategy.fp8_param_gather",
                 "strategy.fp8_param_gather=true needs the distributed optimizer (strategy.zero_state >= 1), as "
                 "Megatron-LM's --fp8-param-gather");
  detail::require_size(api, "strategy.fp8_layers_at_start_in_bf16", s.fp8_layers_at_start_in_bf16, 0);
  detail::require_size(api, "strategy.fp8_layers_at_end_in_bf16", s.fp8_layers_at_end_in_bf16, 0);
  if (s.fp8 && s.fp8_first_last_layers_bf16 && s.fp8_recipe == fp8_recipe_kind::delayed)
    report_error(api, "strategy.fp8_first_last_layers_bf16",
                 "strategy.fp8_first_last_layers_bf16=true needs a recipe other than \"delayed\" (Megatron-LM "
                 "fp8_utils.py: delayed scaling does not support first / last layers in bf16)");
}

/// TE's fused grouped MLP for the experts (use_transformer_engine_op_fuser): Megatron asserts the
/// configurations TEGroupedMLP._is_fused_impl_supported declines (experts.py).
constexpr void validate_op_fuser(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (!s.use_transformer_engine_op_fuser) return;
  if (s.etp_size > 1)
    report_error(api, "strategy.use_transformer_engine_op_fuser",
                 "strategy.use_transformer_engine_op_fuser=true needs strategy.etp_size=1, got {} (Megatron-LM "
                 "experts.py: the fused grouped MLP does not support expert tensor parallelism)",
                 s.etp_size);
  if (s.fine_grained_activation_offloading &&
      (s.offload_modules.contains(offload_module::expert_fc1) || s.offload_modules.contains(offload_module::moe_act)))
    report_error(api, "strategy.use_transformer_engine_op_fuser",
                 "strategy.use_transformer_engine_op_fuser=true cannot run with strategy.offload_modules "
                 "\"expert_fc1\" or \"moe_act\" (Megatron-LM experts.py: their offload runs unfused only)");
}

/// The rules of overlap_moe_expert_parallel_comm and delay_wgrad_compute that concern the strategy
/// alone (Megatron-LM transformer_config.py __post_init__; the model's are `expert_overlap_model_rules`
/// in spec/validate.hpp). Calls `broken(field, rule, values...)` for each rule `s` breaks, in order:
/// validation refuses the first; the strategy search skips candidates that break any.
template <class Sink>
constexpr void expert_overlap_strategy_rules(const strategy_spec& s, Sink&& broken) {
  constexpr std::string_view field = "strategy.overlap_moe_expert_parallel_comm";
  if (s.delay_wgrad_compute && !s.overlap_moe_expert_parallel_comm)
    broken("strategy.delay_wgrad_compute",
           "strategy.delay_wgrad_compute=true needs strategy.overlap_moe_expert_parallel_comm=true (Megatron-LM "
           "transformer_config.py)");
  if (!s.overlap_moe_expert_parallel_comm) return;
  if (s.ep_size < 2)
    broken(field, "{}=true needs expert parallelism (strategy.ep_size > 1), got ep_size={}", field, s.ep_size);
  if (s.pp_size > 1 && s.interleaving_size < 2)
    broken(field,
           "{}=true with strategy.pp_size={} needs the interleaved schedule (strategy.interleaving_size > 1), as "
           "Megatron-LM asserts",
           field, s.pp_size);
  if (const auto k = pipeline_schedule_of(s);
      k == pipeline_schedule_kind::zb_h1 || k == pipeline_schedule_kind::dualpipev)
    broken(field, "{}=true runs Megatron-LM's 1F1B schedules, not strategy.pipeline_schedule=\"{}\"", field,
           enum_name(k));
  if (s.moe_dispatcher_policy != dispatcher_kind::all2all && s.moe_dispatcher_policy != dispatcher_kind::flex)
    broken(field, "{}=true needs strategy.moe_dispatcher_policy \"all2all\" or \"flex\", got \"{}\"", field,
           enum_name(s.moe_dispatcher_policy));
  if (recompute_active(s) && s.recompute_granularity == recompute_kind::full_block)
    broken(field, "{}=true excludes full recompute (strategy.recompute_granularity \"full_block\")", field);
  // SimuMax's mlp_only replays the whole MoE block, exchanges included: Megatron's "moe" module.
  if (recompute_active(s) && s.recompute_granularity == recompute_kind::mlp_only)
    broken(field,
           "{}=true excludes recomputing the MoE block with its exchanges (strategy.recompute_granularity "
           "\"mlp_only\"; Megatron refuses \"moe\" in recompute_modules)",
           field);
  if (s.megatron_recompute && s.megatron_recompute_modules.contains(recompute_module::moe))
    broken(field, "{}=true excludes \"moe\" in strategy.megatron_recompute_modules", field);
  if (s.dtype == dtype_kind::fp32)
    broken(field, "{}=true needs a bf16 or fp16 model (strategy.dtype), got \"fp32\"", field);
}

/// The rules of tp_comm_overlap: Megatron-LM asserts sequence parallelism (arguments.py) and TE's
/// userbuffers need a tensor-parallel group; the forward reduce-scatter's method and the SM and
/// chunk counts must be ones TE runs.
constexpr void validate_tp_comm_overlap(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  if (s.tp_comm_overlap_rs_method != userbuffers_method::pipeline &&
      s.tp_comm_overlap_rs_method != userbuffers_method::ring_exchange)
    report_error(api, "strategy.tp_comm_overlap_rs_method",
                 "strategy.tp_comm_overlap_rs_method must be \"pipeline\" or \"ring_exchange\"");
  if (!(s.tp_comm_overlap_num_sm >= 1 && s.tp_comm_overlap_num_sm <= 1024))
    report_error(api, "strategy.tp_comm_overlap_num_sm", "strategy.tp_comm_overlap_num_sm={} must be in [1, 1024]",
                 s.tp_comm_overlap_num_sm);
  if (!(s.tp_comm_overlap_num_splits >= 1 && s.tp_comm_overlap_num_splits <= 1024))
    report_error(api, "strategy.tp_comm_overlap_num_splits",
                 "strategy.tp_comm_overlap_num_splits={} must be in [1, 1024]", s.tp_comm_overlap_num_splits);
  if (!s.tp_comm_overlap) return;
  if (s.tp_size < 2)
    report_error(api, "strategy.tp_comm_overlap",
                 "strategy.tp_comm_overlap=true needs tensor parallelism (strategy.tp_size > 1), got tp_size={}",
                 s.tp_size);
  if (!s.enable_sequence_parallel)
    report_error(api, "strategy.tp_comm_overlap",
                 "strategy.tp_comm_overlap=true needs strategy.enable_sequence_parallel=true (Megatron-LM "
                 "arguments.py asserts it)");
  if (splits_weight_gradients(s))
    report_error(api, "strategy.tp_comm_overlap",
                 "strategy.tp_comm_overlap=true excludes weight gradients run apart (strategy.delay_wgrad_compute, "
                 "pipeline_schedule \"zb_h1\" or \"dualpipev\"): TE asserts \"ub_bulk_wgrad is not supported when "
                 "enabling delay_wgrad_compute\" (pytorch/module/_common.py)");
}

/// Refuses the first of `expert_overlap_strategy_rules` that `s` breaks.
constexpr void validate_expert_comm_overlap(const strategy_spec& s) {
  expert_overlap_strategy_rules(s, [](std::string_view field, std::string_view rule, const auto&... values) {
    report_error("llmsim::strategy", field, rule, values...);
  });
}

/// Element type, communication choices, divisibility, ZeRO and memory settings.
constexpr void validate_strategy_choices(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  using detail::require_size;
  if (s.dtype != dtype_kind::bf16 && s.dtype != dtype_kind::fp16 && s.dtype != dtype_kind::fp32)
    report_error(api, "strategy.dtype", "strategy.dtype must be \"bf16\", \"fp16\" or \"fp32\"");
  if (s.cp_comm_type == cp_comm_kind::invalid)
    report_error(api, "strategy.cp_comm_type",
                 "strategy.cp_comm_type must be \"a2a\", \"p2p\", \"all_gather\" or \"a2a+p2p\"");
  if (s.cp_a2a_mode == cp_a2a_kind::invalid)
    report_error(api, "strategy.cp_a2a_mode", "strategy.cp_a2a_mode must be \"async_cp\" or \"sync_cp\"");
  if (s.moe_dispatcher_policy == dispatcher_kind::invalid)
    report_error(api, "strategy.moe_dispatcher_policy",
                 "strategy.moe_dispatcher_policy must be \"all2all\", \"all2all-seq\", \"allgather\" or \"flex\"");
  if (s.recompute_granularity == recompute_kind::invalid)
    report_error(api, "strategy.recompute_granularity",
                 "strategy.recompute_granularity must be null, \"full_block\", \"attn_only\", \"mlp_only\", "
                 "\"sdp_only\" or \"selective_recompute\"");
  if (s.order_of_paralielism.view() != "tp-cp-ep-dp-pp")
    report_error(api, "strategy.order_of_paralielism",
                 "strategy.order_of_paralielism=\"{}\" must be \"tp-cp-ep-dp-pp\" (the only rank order modelled)",
                 s.order_of_paralielism);
  if (s.seq_len % s.cp_size != 0)
    report_error(api, "strategy.cp_size", "strategy.cp_size={} must divide strategy.seq_len={}", s.cp_size, s.seq_len);
  validate_context_parallel(s);
  if (s.world_size % shard_size(s) != 0)
    report_error(api, "strategy.world_size", "strategy.world_size={} must be divisible by tp_size*pp_size*cp_size={}",
                 s.world_size, shard_size(s));
  if (s.world_size % (s.ep_size * s.etp_size * s.pp_size) != 0)
    report_error(api, "strategy.world_size", "strategy.world_size={} must be divisible by ep_size*etp_size*pp_size={}",
                 s.world_size, s.ep_size * s.etp_size * s.pp_size);
  if (s.zero_state < 0 || s.zero_state > 3)
    report_error(api, "strategy.zero_state", "strategy.zero_state={} must be 0, 1, 2 or 3", s.zero_state);
  validate_sharding(s);
  // A caching allocator reserves more than it allocates, but not twice as much: PyTorch's splits
  // blocks and rounds to 2 MiB / 20 MiB segments (c10/cuda/CUDACachingAllocator.cpp); SimuMax uses 0.94.
  if (!detail::is_finite(s.mem_factor) || s.mem_factor < 0.5 || s.mem_factor > 1)
    report_error(api, "strategy.mem_factor", "strategy.mem_factor={} must be in [0.5, 1] (allocated / reserved)",
                 s.mem_factor);
  if (!detail::is_finite(s.attention_sparse_ratio) || s.attention_sparse_ratio < 0 || s.attention_sparse_ratio >= 1)
    report_error(api, "strategy.attention_sparse_ratio", "strategy.attention_sparse_ratio={} must be in [0, 1)",
                 s.attention_sparse_ratio);
  if (s.interleaving_size > 1 && s.pp_size < 2)
    report_error(api, "strategy.interleaving_size",
                 "strategy.interleaving_size={} requires strategy.pp_size > 1, got {}", s.interleaving_size, s.pp_size);
  if (s.interleaving_size > 1 && !s.pp_comm_async && s.pp_size <= 2)
    report_error(api, "strategy.pp_size",
                 "strategy.interleaving_size={} with pp_comm_async=false requires strategy.pp_size > 2 (Megatron: no "
                 "two p2p pairs between the same ranks), got {}",
                 s.interleaving_size, s.pp_size);
  validate_pipeline_schedule(s);
  if (s.microbatch_group_size_per_vp_stage && *s.microbatch_group_size_per_vp_stage < s.pp_size)
    report_error(api, "strategy.microbatch_group_size_per_vp_stage",
                 "strategy.microbatch_group_size_per_vp_stage={} must be at least strategy.pp_size={}",
                 *s.microbatch_group_size_per_vp_stage, s.pp_size);
  validate_fp8_fields(s);
  validate_op_fuser(s);
  validate_expert_comm_overlap(s);
  validate_tp_comm_overlap(s);
  if (s.cache_groupgemm_col_fp8_inputs && !s.fp8)
    report_error(api, "strategy.cache_groupgemm_col_fp8_inputs",
                 "strategy.cache_groupgemm_col_fp8_inputs requires strategy.fp8=true");
  if (s.offload_groupgemm_col_inputs && s.recompute_granularity == recompute_kind::full_block)
    report_error(api, "strategy.offload_groupgemm_col_inputs",
                 "strategy.offload_groupgemm_col_inputs cannot be combined with recompute_granularity \"full_block\"");
}
/// Recompute flags and kernel choices.
constexpr void validate_strategy_recompute_and_kernels(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  using detail::require_size;
  if (s.recompute_granularity == recompute_kind::selective_recompute && !s.megatron_recompute) {
    if (s.mla_rms_recompute && !s.attn_recompute)
      report_error(api, "strategy.mla_rms_recompute",
                   "strategy.mla_rms_recompute=true requires strategy.attn_recompute=true");
    if (s.mlp_rms_recompute && !s.mlp_recompute)
      report_error(api, "strategy.mlp_rms_recompute",
                   "strategy.mlp_rms_recompute=true requires strategy.mlp_recompute=true");
  }
  if (!s.megatron_recompute && !s.megatron_recompute_modules.empty())
    report_error(api, "strategy.megatron_recompute_modules",
                 "strategy.megatron_recompute_modules requires strategy.megatron_recompute=true");
  if (s.megatron_recompute) {
    if (!s.enable_recompute)
      report_error(api, "strategy.megatron_recompute",
                   "strategy.megatron_recompute=true requires strategy.enable_recompute=true");
    if (s.recompute_granularity != recompute_kind::selective_recompute)
      report_error(api, "strategy.megatron_recompute",
                   "strategy.megatron_recompute=true requires strategy.recompute_granularity \"selective_recompute\"");
    if (s.recompute_layer_num <= 0)
      report_error(api, "strategy.recompute_layer_num",
                   "strategy.megatron_recompute=true requires strategy.recompute_layer_num > 0, got {}",
                   s.recompute_layer_num);
    if (s.megatron_recompute_modules.empty())
      report_error(api, "strategy.megatron_recompute_modules",
                   "strategy.megatron_recompute=true requires a non-empty strategy.megatron_recompute_modules");
    if (s.megatron_recompute_modules.contains(recompute_module::core_attn) &&
        s.megatron_recompute_modules.contains(recompute_module::mla_up_proj))
      report_error(api, "strategy.megatron_recompute_modules",
                   "strategy.megatron_recompute_modules: \"core_attn\" with \"mla_up_proj\" is not modelled yet "
                   "(the up-projection checkpoint re-derives the attention's inputs)");
    if (s.attn_recompute || s.mla_rms_recompute || s.mlp_recompute || s.mlp_rms_recompute || s.recompute_variance)
      report_error(api, "strategy.megatron_recompute",
                   "strategy.megatron_recompute=true excludes the legacy selective flags (attn_recompute, "
                   "mla_rms_recompute, mlp_recompute, mlp_rms_recompute, recompute_variance)");
  }
  validate_muon(s);
  validate_precision_aware_optimizer(s);
  // Megatron arguments.py: --optimizer-cpu-offload needs --use-precision-aware-optimizer, which
  // core/optimizer get_megatron_optimizer allows only with the distributed optimizer.
  if (s.optimizer_cpu_offload && s.zero_state < 1)
    report_error(api, "strategy.optimizer_cpu_offload",
                 "strategy.optimizer_cpu_offload=true needs the distributed optimizer (strategy.zero_state >= 1): "
                 "Megatron's CPU offload runs on the precision-aware optimizer, which needs it");
  if (s.optimizer_cpu_offload && s.fp8 && s.fp8_param_gather && s.fp8_recipe != fp8_recipe_kind::delayed)
    report_error(api, "strategy.optimizer_cpu_offload",
                 "strategy.optimizer_cpu_offload=true with strategy.fp8_param_gather=true needs strategy.fp8_recipe "
                 "\"delayed\" (Megatron arguments.py), got \"{}\"",
                 enum_name(s.fp8_recipe));
  if (s.overlap_param_gather && s.zero_state < 1)
    report_error(api, "strategy.overlap_param_gather",
                 "strategy.overlap_param_gather=true needs the distributed optimizer (strategy.zero_state >= 1), as in "
                 "Megatron-LM");
  if (!s.use_flash_sdp && !s.use_math_sdp)
    report_error(api, "strategy.use_flash_sdp", "one of strategy.use_flash_sdp and strategy.use_math_sdp must be true");
}
}  // namespace detail

/// Checks one strategy on its own.
/// Fine-grained activation offloading's own rules (Megatron transformer_config.py __post_init__).
constexpr void validate_activation_offload(const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  if (!s.fine_grained_activation_offloading && !s.offload_modules.empty())
    report_error(api, "strategy.offload_modules",
                 "strategy.offload_modules requires strategy.fine_grained_activation_offloading=true");
  if (s.fine_grained_activation_offloading && s.offload_modules.empty())
    report_error(api, "strategy.offload_modules",
                 "strategy.fine_grained_activation_offloading=true requires a non-empty strategy.offload_modules");
  if (s.offload_modules.contains(offload_module::attn_proj) && !s.offload_modules.contains(offload_module::core_attn))
    report_error(api, "strategy.offload_modules",
                 "strategy.offload_modules: \"attn_proj\" requires \"core_attn\" (Megatron transformer_config.py)");
  if (s.fine_grained_activation_offloading && s.cpu_offloading)
    report_error(api, "strategy.cpu_offloading",
                 "strategy.cpu_offloading=true excludes strategy.fine_grained_activation_offloading=true (Megatron "
                 "transformer_config.py)");
  if (s.cpu_offloading_num_layers < 0)
    report_error(api, "strategy.cpu_offloading_num_layers", "strategy.cpu_offloading_num_layers={} must be >= 0",
                 s.cpu_offloading_num_layers);
}

constexpr void validate(const strategy_spec& s) {
  detail::validate_strategy_sizes(s);
  detail::validate_strategy_choices(s);
  detail::validate_strategy_recompute_and_kernels(s);
  validate_activation_offload(s);
}

/// Layers held by each pipeline stage (Megatron: first/last overrides, middle stages share the rest evenly).
struct stage_layers {
  std::int64_t first = 0;
  std::int64_t middle = 0;  ///< each middle stage (0 when pp <= 2)
  std::int64_t last = 0;
};

/// How `model` splits over `strategy.pp_size` stages; validate(model, strategy, ...) checks it is
/// even. With the embedding / loss accounted as layers (Megatron `get_num_layers_to_build`), every
/// stage gets (L + slots) / pp and the first (last) stage one layer fewer.
constexpr stage_layers split_layers(const model_spec& m, const strategy_spec& s) {
  const std::int64_t pp = s.pp_size;
  if (pp == 1) return {m.layer_num, 0, m.layer_num};
  const std::int64_t embedding_slot = s.account_for_embedding_in_pipeline_split ? 1 : 0;
  const std::int64_t loss_slot = s.account_for_loss_in_pipeline_split ? 1 : 0;
  if (embedding_slot + loss_slot > 0) {
    const std::int64_t each = (m.layer_num + embedding_slot + loss_slot) / pp;
    return {each - embedding_slot, pp > 2 ? each : 0, each - loss_slot};
  }
  std::int64_t rest = m.layer_num;
  std::int64_t even_stages = pp;
  if (s.num_layers_in_first_pipeline_stage) {
    rest -= *s.num_layers_in_first_pipeline_stage;
    --even_stages;
  }
  if (s.num_layers_in_last_pipeline_stage) {
    rest -= *s.num_layers_in_last_pipeline_stage;
    --even_stages;
  }
  const std::int64_t each = even_stages > 0 ? rest / even_stages : 0;
  return {s.num_layers_in_first_pipeline_stage.value_or(each), pp > 2 ? each : 0,
          s.num_layers_in_last_pipeline_stage.value_or(each)};
}

LLMSIM_END_NAMESPACE
