/// \file llmsim/estimate/inference.hpp
/// Serving a model: prefill (time to first token), each decode step over the growing KV cache
/// (time per output token), end-to-end latency, throughput per GPU and per user, the memory of
/// weights, KV cache and activations, the largest batch that fits, and the offline throughput of
/// in-flight batching. The same leaves and cost/ as training (program/dense.hpp
/// `inference_forward`): a forward of `batch` sequences of `input_len` tokens, then forwards of one
/// token per sequence whose attention reads the cache. A static batch, as FasterTransformer and
/// TensorRT-LLM's gptSessionBenchmark run it: every sequence starts together and runs to its
/// last token. A pipeline splits the batch into micro-batches that follow one another through
/// the stages (`pipeline_micro_batching`).
#pragma once

#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/cost/kernel_model.hpp>
#include <llmsim/cost/op_cost.hpp>
#include <llmsim/estimate/model_counts.hpp>
#include <llmsim/program/layer.hpp>
#include <llmsim/spec/validate.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// How the decoder linears' weights are stored. `nvfp4`: 4-bit E2M1 with an E4M3 scale per 16
/// elements (NVIDIA's NVFP4, ModelOpt / TensorRT-LLM checkpoints); `mxfp4`: E2M1 with an E8M0 scale
/// per 32 (OCP Microscaling MXFP4, gpt-oss's experts), read by weight-only kernels.
enum class weight_format : std::uint8_t { bf16, fp16, fp8, int8, int4, nvfp4, mxfp4 };
template <>
struct enum_names<weight_format> {
  static constexpr std::array<std::pair<weight_format, std::string_view>, 7> value{{{weight_format::bf16, "bf16"},
                                                                                    {weight_format::fp16, "fp16"},
                                                                                    {weight_format::fp8, "fp8"},
                                                                                    {weight_format::int8, "int8"},
                                                                                    {weight_format::int4, "int4"},
                                                                                    {weight_format::nvfp4, "nvfp4"},
                                                                                    {weight_format::mxfp4, "mxfp4"}}};
};
/// The GEMMs' input precision: 16-bit, FP8 (W8A8 with FP8 tensor cores, TRT-LLM / vLLM fp8) or
/// NVFP4 (W4A4 with FP4 tensor cores: Blackwell, TRT-LLM / vLLM NVFP4 checkpoints).
enum class activation_format : std::uint8_t { bf16, fp16, fp8, fp4 };
template <>
struct enum_names<activation_format> {
  static constexpr std::array<std::pair<activation_format, std::string_view>, 4> value{
      {{activation_format::bf16, "bf16"},
       {activation_format::fp16, "fp16"},
       {activation_format::fp8, "fp8"},
       {activation_format::fp4, "fp4"}}};
};
/// How the KV cache is stored.
enum class kv_cache_format : std::uint8_t { bf16, fp16, fp8, int8 };
template <>
struct enum_names<kv_cache_format> {
  static constexpr std::array<std::pair<kv_cache_format, std::string_view>, 4> value{{{kv_cache_format::bf16, "bf16"},
                                                                                      {kv_cache_format::fp16, "fp16"},
                                                                                      {kv_cache_format::fp8, "fp8"},
                                                                                      {kv_cache_format::int8, "int8"}}};
};

/// How a decode step's attention kernel reads a grouped-query (GQA / MQA) layer's KV cache.
/// `per_kv_head`: once per KV head, every query head of its group served from it (FlashDecoding,
/// TensorRT-LLM's XQA kernel and its masked MHA since 0.7, FlashAttention with packed GQA).
/// `per_query_head`: once per query head. The masked multi-head attention kernel of
/// FasterTransformer and TensorRT-LLM up to 0.6 runs "a single CUDA thread-block per head"
/// (TensorRT-LLM docs/source/gpt_attention.md at v0.6.1, "Generation Phase"), each block reading
/// its group's K and V; that the re-reads reach HBM (no reuse in L2) is this option's assumption.
/// TensorRT-LLM's release notes list "MMHA optimization for MQA and GQA" under 0.7.0, and its later
/// performance.md calls the GQA (XQA) kernels "experimental and not enabled by default"
/// (`TRTLLM_ENABLE_XQA=1`). Multi-head layers and MLA read the same either way.
enum class gqa_decode_read_kind : std::uint8_t { per_kv_head, per_query_head };
template <>
struct enum_names<gqa_decode_read_kind> {
  static constexpr std::array<std::pair<gqa_decode_read_kind, std::string_view>, 2> value{
      {{gqa_decode_read_kind::per_kv_head, "per_kv_head"}, {gqa_decode_read_kind::per_query_head, "per_query_head"}}};
};

/// How a pipeline-parallel replica splits its batch into micro-batches, each passing through the
/// stages behind the one before (pp = 1: one micro-batch, the batch). Either rule makes
/// ceil(batch / size) micro-batches of `size` sequences, the last holding the rest.
/// `per_stage`: size ceil(batch / pp), in prefill and decode alike, micro-batches taking turns on
/// each stage (TensorRT-LLM's GptSession default, cpp/tensorrt_llm/runtime/gptSession.cpp
/// `MicroBatchConfig`: numCtxBatches = numGenBatches = pipelineParallelism, of
/// ceil(maxBatchSize / pp) sequences; the batch here stands for maxBatchSize, which
/// gptSessionBenchmark sets to the largest batch of its sweep, so its smaller batches run in
/// fewer micro-batches than this rule gives them).
/// `fastertransformer`: FasterTransformer's `getLocalBatchSize`
/// (src/fastertransformer/utils/nccl_utils.cc): batch / pp sequences when pp divides the batch,
/// else the batch, halved while it holds more than `micro_batch_token_limit` tokens and is even;
/// a decode step holds one token a sequence. Its ParallelGpt (v5.0-v5.3) ends each decode step by
/// broadcasting the new tokens from the last stage and synchronising the host, so every step fills
/// and drains the pipeline (the broadcast itself, a few bytes a sequence, is not priced).
enum class pipeline_micro_batching : std::uint8_t { per_stage, fastertransformer };
template <>
struct enum_names<pipeline_micro_batching> {
  static constexpr std::array<std::pair<pipeline_micro_batching, std::string_view>, 2> value{
      {{pipeline_micro_batching::per_stage, "per_stage"},
       {pipeline_micro_batching::fastertransformer, "fastertransformer"}}};
};

/// One serving job: a model replica over tp x pp GPUs (experts over ep of them), `dp` replicas.
struct inference_spec {
  std::int64_t batch = 1;       ///< sequences one replica decodes together
  std::int64_t input_len = 0;   ///< prompt tokens per sequence
  std::int64_t output_len = 1;  ///< generated tokens per sequence (the first comes from prefill)
  std::int64_t tp = 1, pp = 1, ep = 1, dp = 1;
  weight_format weights = weight_format::bf16;
  /// int4 weights: elements per bf16 scale (gpt-fast `--groupsize`, AWQ / GPTQ group size).
  std::int64_t int4_group_size = 128;
  /// The routed experts' weights as stored, where a checkpoint quantizes them alone (gpt-oss's MXFP4
  /// experts beside bf16 attention; NVIDIA's NVFP4 DeepSeek-R1 beside FP8 attention); unset: `weights`.
  std::optional<weight_format> expert_weights{};
  activation_format activations = activation_format::bf16;
  kv_cache_format kv_cache = kv_cache_format::bf16;
  gqa_decode_read_kind gqa_decode_reads = gqa_decode_read_kind::per_kv_head;
  pipeline_micro_batching micro_batching = pipeline_micro_batching::per_stage;
  /// `fastertransformer` micro-batching halves a micro-batch while it holds more tokens than this:
  /// 1024 in FasterTransformer v5.1 and later (nccl_utils.cc `getLocalBatchSize`), 8192 in v5.0, 2048 in its betas.
  std::int64_t micro_batch_token_limit = 1024;
  /// The decode step is one CUDA graph (vLLM, TensorRT-LLM with `--enable_cuda_graph` or its
  /// executor's cuda_graph_mode, gpt-fast's torch.compile "reduce-overhead"): kernels launch back to
  /// back. Without, the host launches each kernel (a step
  /// takes at least kernels x `host_launch_us`) and each collective pays `eager_collective_us`.
  /// Prefill is launched kernel by kernel either way: TensorRT-LLM's GptSession runs its context
  /// step through `executeContext` and replays graphs for generation steps only
  /// (cpp/tensorrt_llm/runtime/gptSession.cpp `generateSingleBatch`); gpt-fast compiles only
  /// `decode_one_token` with mode="reduce-overhead" (generate.py).
  bool cuda_graphs = true;
  /// Host cost of one kernel launch without graphs: an assumption, of the order of the
  /// few-microsecond launch overheads CUDA Graphs remove (NVIDIA blog "Getting Started with CUDA
  /// Graphs", 2019).
  double host_launch_us = 4.0;
  /// Device time each kernel adds to its bytes over bandwidth (launch gap, ramp-up, stragglers,
  /// memory latency), microseconds: Hazy Research's estimate for H100 decode, "an optimistic 5 us
  /// of stalling per kernel (counting stragglers, kernel launch, and memory latencies)" ("Look Ma,
  /// No Bubbles! Designing a Low-Latency Megakernel for Llama-1B", 2025; they measure the launch
  /// gap alone at 1.3 us under CUDA graphs); a batch-1 Llama-1B figure, applied to every GPU and
  /// framework as an assumption. It replaces the system's
  /// `accelerator.bandwidth.*.latency_us`, which measured system files (SimuMax's: 30-40 us) and
  /// the kernel model fit to eager-mode training, where the host's per-op cost shows.
  double kernel_latency_us = 5.0;
  /// Time each NCCL collective of a pass the host launches kernel by kernel (prefill; decode without
  /// `cuda_graphs`) adds beyond NCCL's own latency model (host enqueue, stream waits, the ranks'
  /// arrival at the call), microseconds: the per-call latency fitted to the eager-mode NVLink
  /// collectives of SimuMax's B200 table (kernel_model.hpp `kernel_models::blackwell`), applied to
  /// every GPU and framework as an assumption (no Ampere or Hopper table measures it). A pass
  /// replayed as a CUDA graph pays none. Pipeline sends do not pay it.
  double eager_collective_us = kernel_models::blackwell.collective_call_latency_us;
  /// In-flight batching: the engine schedules step n + 1 while step n runs (vLLM
  /// `--async-scheduling`, SGLang's default overlap scheduler `event_loop_overlap`, TensorRT-LLM's
  /// PyTorch executor `_executor_loop_overlap`), so a request arriving during step n joins step
  /// n + 2, one step later than in a loop that schedules between steps (vLLM V1's
  /// `EngineCore.step` without it, SGLang's `event_loop_normal`).
  bool overlap_scheduling = false;
  /// Share of device memory the server may fill (vLLM `gpu_memory_utilization` default 0.9;
  /// TensorRT-LLM `kv_cache_free_gpu_mem_fraction` default 0.9 of what the weights leave).
  double memory_fraction = 0.9;
  /// Tokens per KV-cache block of a paged cache (vLLM `block_size` default 16): in-flight batching
  /// allocates whole blocks.
  std::int64_t kv_block_tokens = 16;
  /// The tokens one in-flight step holds at most, decode tokens and prompt chunks (TensorRT-LLM
  /// `max_num_tokens`, BuildConfig default 8192; vLLM `max_num_batched_tokens`), and so the most
  /// sequences: the offline batch's memory holds one such step's activations, not the whole batch's
  /// prompts at once.
  std::int64_t prefill_chunk_tokens = 8192;
  std::int64_t max_batch_limit = 1 << 16;  ///< the largest batch the max-batch search tries
  double usd_per_gpu_hour = 0;             ///< price of one GPU-hour (0: no dollar figures)
  /// In-flight (continuous) batching of `concurrency` clients, each sending its next request as its
  /// last one completes (vLLM's and SGLang's benchmark clients' --max-concurrency, trtllm-bench's
  /// --concurrency), spread evenly over the dp replicas: the steady state replaces the static batch
  /// (`batch` is then unused). 0: a static batch.
  std::int64_t concurrency = 0;
  /// In-flight batching: the most sequences one step holds (TensorRT-LLM max_batch_size, vLLM
  /// max_num_seqs, SGLang max_running_requests); 0: as many as memory holds.
  std::int64_t max_running = 0;
  /// Open-loop in-flight serving: requests arrive at this mean rate, a Poisson process, per second
  /// over all replicas (vLLM's and SGLang's benchmark clients' --request-rate), split evenly over
  /// them; `concurrency`, if set, caps the requests in flight (--max-concurrency). 0: closed loop
  /// (`concurrency`) or a static batch.
  double request_rate = 0;
};

/// Bytes of one weight element stored as `format`: int4 carries a bf16 scale per group
/// (gpt-fast quantize.py `WeightOnlyInt4QuantHandler`: scales and zeros per group, 2 x 2 bytes).
constexpr double stored_weight_bytes(weight_format format, const inference_spec& i) {
  switch (format) {
    case weight_format::fp8:
    case weight_format::int8:
      return 1;
    case weight_format::int4:
      return 0.5 + 4.0 / static_cast<double>(i.int4_group_size);
    case weight_format::nvfp4:  // a 1-byte E4M3 scale per 16 (the fp32 tensor scale is negligible)
      return 0.5 + 1.0 / 16;
    case weight_format::mxfp4:  // a 1-byte E8M0 scale per 32 (OCP MX v1.0, block size 32)
      return 0.5 + 1.0 / 32;
    default:
      return 2;
  }
}
/// ... of a decoder-linear weight, and of a routed expert's.
constexpr double stored_weight_bytes(const inference_spec& i) { return stored_weight_bytes(i.weights, i); }
constexpr double stored_expert_weight_bytes(const inference_spec& i) {
  return stored_weight_bytes(i.expert_weights.value_or(i.weights), i);
}
constexpr double kv_cache_bytes(const inference_spec& i) {
  return i.kv_cache == kv_cache_format::fp8 || i.kv_cache == kv_cache_format::int8 ? 1 : 2;
}
/// Times a decode step's attention streams each KV head's cache: the query heads a KV head serves
/// when the kernel reads it per query head (see gqa_decode_read_kind), else once.
constexpr double decode_kv_read_repeats(const model_spec& m, const inference_spec& i) {
  const bool grouped = m.attention_type != attention_kind::mla && m.kv_head_num < m.head_num;
  // Per rank: its query heads over its KV heads (one replicated head past tp = kv_head_num).
  return grouped && i.gqa_decode_reads == gqa_decode_read_kind::per_query_head
             ? static_cast<double>(m.head_num / i.tp) / static_cast<double>(kv_heads_per_rank(m, i.tp))
             : 1.0;
}

/// Checks an inference job against its model and system; errors name the `inference.<field>`.
constexpr void validate(const model_spec& m, const inference_spec& i, const system_spec& sys) {
  constexpr std::string_view api = "llmsim::inference";
  using detail::report_error;
  validate(m);
  validate(sys);
  auto positive = [&](std::int64_t v, std::string_view field, std::int64_t most) {
    if (v < 1 || v > most) report_error(api, field, "{}={} must be in [1, {}]", field, v, most);
  };
  positive(i.batch, "inference.batch", 1 << 24);
  positive(i.input_len, "inference.input_len", 1 << 24);
  positive(i.output_len, "inference.output_len", 1 << 20);  // each decode step is priced
  positive(i.tp, "inference.tp", 1 << 16);
  positive(i.pp, "inference.pp", 1 << 16);
  positive(i.ep, "inference.ep", 1 << 16);
  positive(i.dp, "inference.dp", 1 << 16);
  positive(i.int4_group_size, "inference.int4_group_size", 1 << 20);
  // A group's bf16 scale and zero cost 4/g bytes a weight: below 16 elements int4 stores 0.75 B or
  // more, no longer a 4-bit format (GPTQ / AWQ kernels take groups of 32, 64 or 128).
  if ((i.weights == weight_format::int4 || i.expert_weights == weight_format::int4) && i.int4_group_size < 16)
    report_error(api, "inference.int4_group_size",
                 "inference.int4_group_size={} must be >= 16 (its bf16 scale and "
                 "zero per group cost 4/g bytes a weight)",
                 i.int4_group_size);
  positive(i.kv_block_tokens, "inference.kv_block_tokens", 1 << 20);
  positive(i.prefill_chunk_tokens, "inference.prefill_chunk_tokens", 1 << 24);
  positive(i.max_batch_limit, "inference.max_batch_limit", 1 << 24);
  positive(i.micro_batch_token_limit, "inference.micro_batch_token_limit", std::int64_t{1} << 40);
  for (const auto& [v, field] :
       {std::pair{i.concurrency, "inference.concurrency"}, std::pair{i.max_running, "inference.max_running"}})
    if (v < 0 || v > (1 << 24)) report_error(api, field, "{}={} must be in [0, {}]", field, v, 1 << 24);
  if (!(i.request_rate >= 0 && i.request_rate <= 1e9))
    report_error(api, "inference.request_rate", "inference.request_rate={} must be in [0, 1e9]", i.request_rate);
  // Arrivals split over the replicas, each admitting whole requests: a cap below one a replica
  // would leave replicas that can admit none.
  if (i.request_rate > 0 && i.concurrency > 0 && i.concurrency < i.dp)
    report_error(api, "inference.concurrency",
                 "inference.concurrency={} must be >= inference.dp={} with a request rate (each replica admits "
                 "whole requests)",
                 i.concurrency, i.dp);
  if (!(i.kernel_latency_us >= 0 && i.kernel_latency_us <= 1e4))
    report_error(api, "inference.kernel_latency_us", "inference.kernel_latency_us={} must be in [0, 10000]",
                 i.kernel_latency_us);
  if (!(i.host_launch_us >= 0 && i.host_launch_us <= 1e4))
    report_error(api, "inference.host_launch_us", "inference.host_launch_us={} must be in [0, 10000]",
                 i.host_launch_us);
  if (!(i.eager_collective_us >= 0 && i.eager_collective_us <= 1e4))
    report_error(api, "inference.eager_collective_us", "inference.eager_collective_us={} must be in [0, 10000]",
                 i.eager_collective_us);
  if (!(i.memory_fraction > 0 && i.memory_fraction <= 1))
    report_error(api, "inference.memory_fraction", "inference.memory_fraction={} must be in (0, 1]", i.memory_fraction);
  if (!(i.usd_per_gpu_hour >= 0 && i.usd_per_gpu_hour <= 1e6))
    report_error(api, "inference.usd_per_gpu_hour", "inference.usd_per_gpu_hour={} must be in [0, 1e6]",
                 i.usd_per_gpu_hour);
  if (is_hybrid(m) || m.experimental_attention_variant)
    report_error(api, "model", "inference of {} models is not modelled (hybrid / DeepSeek-V4 attention)",
                 is_hybrid(m) ? "model.hybrid_override_pattern" : "model.experimental_attention_variant");
  if (m.head_num % i.tp != 0)
    report_error(api, "inference.tp", "inference.tp={} must divide model.head_num={}", i.tp, m.head_num);
  // Past kv_head_num ranks each holds one replicated KV head (`kv_heads_per_rank`): tp a multiple of it.
  if (m.attention_type != attention_kind::mla && m.kv_head_num % i.tp != 0 && i.tp % m.kv_head_num != 0)
    report_error(api, "inference.tp",
                 "inference.tp={} must divide model.kv_head_num={} or be a multiple of it (each rank then holds one "
                 "replicated KV head)",
                 i.tp, m.kv_head_num);
  if (m.intermediate_size && *m.intermediate_size % i.tp != 0)
    report_error(api, "inference.tp", "inference.tp={} must divide model.intermediate_size={}", i.tp,
                 *m.intermediate_size);
  if (i.pp > m.layer_num)
    report_error(api, "inference.pp", "inference.pp={} exceeds model.layer_num={} (a stage holds whole layers)", i.pp,
                 m.layer_num);
  if (is_moe(m) && m.expert_num % i.ep != 0)
    report_error(api, "inference.ep", "inference.ep={} must divide model.expert_num={}", i.ep, m.expert_num);
  if (is_moe(m) && (i.ep >= i.tp ? i.ep % i.tp : i.tp % i.ep) != 0)
    report_error(api, "inference.ep",
                 "inference.ep={} and inference.tp={} must divide one another (the experts' tensor-parallel "
                 "split is tp / ep)",
                 i.ep, i.tp);
  if (is_moe(m) && i.ep < i.tp && expert_ffn_size(m) % (i.tp / i.ep) != 0)
    report_error(api, "inference.tp", "inference.tp / inference.ep={} must divide the expert FFN width {}", i.tp / i.ep,
                 expert_ffn_size(m));
  if (i.ep > 1 && (i.tp * i.dp) % i.ep != 0)
    report_error(api, "inference.ep",
                 "inference.ep={} must divide inference.tp x inference.dp={} (the experts sit on "
                 "the GPUs of the attention's tensor- and data-parallel groups)",
                 i.ep, i.tp * i.dp);
  if (i.activations == activation_format::fp8 && i.weights != weight_format::fp8)
    report_error(api, "inference.activations",
                 "inference.activations=fp8 needs inference.weights=fp8 (FP8 GEMMs read both operands in FP8)");
  if (i.activations == activation_format::fp4 &&
      (i.weights != weight_format::nvfp4 || i.expert_weights.value_or(weight_format::nvfp4) != weight_format::nvfp4))
    report_error(api, "inference.activations",
                 "inference.activations=fp4 needs inference.weights=nvfp4 and expert_weights unset or nvfp4 (NVFP4 "
                 "GEMMs read both operands in NVFP4)");
  if (i.activations == activation_format::fp4) {
    // FP4 tensor cores where the compute capability is known (the rule low-precision GEMMs are priced
    // by), else a system that gives FP4 GEMMs a rate of its own.
    const double cc = known_compute_capability(sys);
    const bool fp4_rate = sys.accelerator.op[static_cast<std::size_t>(compute_kind::fp4_matmul)].present;
    if (cc > 0 ? low_precision_speedup(compute_kind::fp4_matmul, cc) <= 0 : !fp4_rate)
      report_error(api, "inference.activations",
                   "inference.activations=fp4 needs FP4 tensor cores (compute capability >= 10.0; where it is "
                   "unknown, 0, an accelerator.op.fp4_matmul entry); system {} has {}",
                   sys.sys_name, cc);
  }
  if (i.expert_weights && !is_moe(m))
    report_error(api, "inference.expert_weights",
                 "inference.expert_weights={} needs a model with routed experts; model.expert_num is {}",
                 enum_name(*i.expert_weights), m.expert_num);
  if (i.activations == activation_format::fp8 && i.expert_weights.value_or(weight_format::fp8) != weight_format::fp8)
    report_error(api, "inference.expert_weights",
                 "inference.expert_weights={} with inference.activations=fp8: experts reading other weights "
                 "beside FP8 activations (W4A8) are not modelled; leave it unset or fp8",
                 enum_name(*i.expert_weights));
  if (i.activations == activation_format::fp8 || i.weights == weight_format::fp8 ||
      i.expert_weights == weight_format::fp8 || i.kv_cache == kv_cache_format::fp8) {
    const double cc = known_compute_capability(sys);
    const std::string_view field = i.weights == weight_format::fp8          ? "inference.weights"
                                   : i.expert_weights == weight_format::fp8 ? "inference.expert_weights"
                                                                            : "inference.kv_cache";
    if (cc > 0 && cc < 8.9)
      report_error(api, field,
                   "FP8 weights, activations or KV cache need FP8 tensor cores (compute capability >= 8.9); "
                   "system {} has {}",
                   sys.sys_name, cc);
  }
}

/// The times and sizes of one serving job on one replica.
struct inference_result {
  seconds ttft{};             ///< prefill of the batch, its first output token included (time to first token)
  seconds tpot{};             ///< mean decode step (time per output token after the first); 0 when output_len = 1
  seconds e2e{};              ///< ttft + every decode step
  seconds first_step{};       ///< the first decode step (context input_len + 1), the fastest
  seconds last_step{};        ///< the last decode step (context input_len + output_len - 1), the slowest
  double prefill_tflops = 0;  ///< prefill FLOPs of the replica / ttft / GPUs, TFLOP/s per GPU
  double decode_kernels = 0;  ///< kernels and collectives of one decode step, all stages and micro-batches
  std::int64_t prefill_micro_batches = 1;  ///< the batch's split through a pipeline at prefill (1 without)
  std::int64_t decode_micro_batches = 1;   ///< ... at each decode step
  double output_tok_s = 0;                 ///< batch x output_len / e2e, one replica
  double output_tok_s_per_gpu = 0;         ///< ... per GPU of the replica (TRT-LLM's out tok/s/GPU)
  double decode_tok_s_per_user = 0;        ///< 1 / tpot: what a user sees once tokens stream
  double weight_bytes = 0;                 ///< weights per GPU (the fullest pipeline stage)
  double kv_cache_bytes = 0;               ///< KV cache per GPU at the full context, the whole batch
  /// KV cache of one token over the stage's layers, per GPU, averaged over the full context
  /// (sliding-window layers hold only the last W tokens): kv_cache_bytes / (batch x context)
  double kv_bytes_per_token = 0;
  double activation_bytes = 0;  ///< peak transient of prefill (largest leaf) and the logits, per GPU
  double peak_bytes = 0;        ///< weights + KV cache + activations
  double capacity_bytes = 0;    ///< device memory x memory_fraction
  bool fits = false;
  std::int64_t max_batch = 0;       ///< the largest static batch whose memory fits at the full context
  bool max_batch_at_limit = false;  ///< max_batch reached inference_spec::max_batch_limit (more may fit)
  /// In-flight batching: sequences whose paged cache at the mean context fits, at most
  /// prefill_chunk_tokens and max_running of them
  std::int64_t offline_batch = 0;
  double offline_output_tok_s_per_gpu = 0;   ///< output tokens/s per GPU of the replica at offline_batch
  double usd_per_million_output_tokens = 0;  ///< at the batch given (0 without a price)
  double offline_usd_per_million_output_tokens = 0;
  std::int64_t gpus = 0;  ///< tp x pp x dp
  /// In-flight batching (inference_spec::concurrency or request_rate > 0): the steady state the
  /// figures above describe (ttft, tpot = one step, e2e, output rates, memory at `running` sequences).
  bool in_flight = false;
  std::int64_t running = 0;            ///< sequences one step holds (prefilling or decoding)
  double mean_running = 0;             ///< `running` before rounding (open loop: a time average)
  double in_system = 0;                ///< requests admitted, running or waiting for a slot: request_rate x e2e
  double prefill_tokens_per_step = 0;  ///< prompt tokens each step prefills beside the decode tokens
  /// A request's wait before its prompt enters: for a free slot (clients beyond `running`); open
  /// loop, for the step in progress when it arrives
  seconds queue{};
  double request_rate = 0;  ///< completed requests per second, one replica
  /// Open loop: requests arrive faster than the slots complete them, so the queue grows without
  /// bound; the rates are the slots' and the latencies leave the queue out
  bool saturated = false;
  /// Open loop under a cap (inference_spec::concurrency): the arrivals reach the cap's closed-loop
  /// rate, so it admits fewer than arrive and the client's backlog grows
  bool cap_bound = false;
  /// Each step is full at inference_spec::prefill_chunk_tokens: prompts wait for room, and fewer
  /// sequences than the slots allow decode at once.
  bool token_budget_bound = false;
};

namespace detail {
/// The strategy one forward of a replica runs: `tokens` new tokens per sequence, no sequence
/// parallelism (inference all-reduces over tp: TRT-LLM, vLLM, FasterTransformer), no dropout.
constexpr strategy_spec inference_strategy(const model_spec& m, const inference_spec& i, std::int64_t batch,
                                           std::int64_t tokens) {
  strategy_spec s;
  s.seq_len = tokens;
  s.micro_batch_size = batch;
  s.micro_batch_num = 1;
  s.tp_size = i.tp;
  s.pp_size = 1;  // each stage is priced alone; see price_forward
  s.ep_size = is_moe(m) ? i.ep : 1;
  // Experts over ep ranks, each expert's FFN split over the rest of the tp group (vLLM's default
  // tensor-parallel MoE is ep 1, etp = tp; --enable-expert-parallel is ep = tp, etp 1).
  s.etp_size = s.ep_size >= i.tp ? 1 : i.tp / s.ep_size;
  s.world_size = i.tp * (s.ep_size > i.tp ? s.ep_size / i.tp : 1);
  s.dtype = i.activations == activation_format::fp16 ? dtype_kind::fp16 : dtype_kind::bf16;
  s.fp8 = i.activations == activation_format::fp8 || i.activations == activation_format::fp4;
  // Static per-tensor scales from calibration; NVFP4 adds its per-16 block scales in the cast.
  s.fp8_recipe = i.activations == activation_format::fp4 ? fp8_recipe_kind::nvfp4 : fp8_recipe_kind::delayed;
  s.enable_sequence_parallel = false;
  s.enable_dropout = false;
  s.use_flash_sdp = true;
  s.recompute_granularity = recompute_kind::none;
  return s;
}

/// The model as a server runs its experts: dropless and unpadded (vLLM's fused_moe, SGLang and
/// TensorRT-LLM route every token to its top-k experts, each expert computing the rows it got), so
/// a training config's padding to capacity (`moe_pad_expert_input_to_capacity`, Megatron's
/// drop-and-pad) or a capacity factor below 1 does not apply.
constexpr model_spec serving_model(model_spec m) {
  m.moe_pad_expert_input_to_capacity = false;
  if (m.capacity < 1) m.capacity = 1;  // balanced routing then drops nothing
  return m;
}

/// Replicas whose tokens one expert-parallel group serves: ep / tp when the experts span several
/// tensor-parallel replicas (data-parallel attention), else 1.
constexpr double replicas_per_expert_group(const inference_spec& i) {
  return i.ep > i.tp ? static_cast<double>(i.ep / i.tp) : 1.0;
}

/// One priced forward of a replica, every pipeline stage in turn.
struct forward_cost {
  seconds time{};       ///< kernels and collectives, stages in sequence, plus the stage-to-stage sends
  seconds attention{};  ///< of which core attention (every layer)
  seconds ends{};       ///< of which embedding, final norm and LM head
  seconds send{};       ///< one stage-to-stage send (none for pp = 1)
  /// The fullest stage's layers but their core attention: its MoE and dense layers, each at its
  /// own time (its attention is stage_share of every layer's, all layers' alike).
  seconds stage_layers_but_attention{};
  double stage_share = 1;     ///< the fullest stage's share of the decoder layers (of their attention)
  double kernels = 0;         ///< kernels and collectives launched
  double flops = 0;           ///< compute work, all GPUs of the replica
  double peak_transient = 0;  ///< largest leaf transient on one GPU
  double weight_bytes = 0;    ///< weights of the fullest stage, per GPU
  /// The fullest stage's time: its layers, both ends (whichever stage holds them: an upper bound)
  /// and one send on.
  [[nodiscard]] constexpr seconds stage() const {
    return stage_layers_but_attention + attention * stage_share + ends + send;
  }
  /// This forward with core attention taking `t` (a decode step at another cache length).
  [[nodiscard]] constexpr forward_cost with_attention(seconds t) const {
    forward_cost f = *this;
    f.time += t - attention;
    f.attention = t;
    return f;
  }
};

/// One pass's micro-batches: `count` of them, `size` sequences each but the last, which holds
/// `last` (see pipeline_micro_batching).
struct micro_batches {
  std::int64_t count = 1, size = 1, last = 1;
};
constexpr micro_batches split_batch(const inference_spec& i, std::int64_t batch, std::int64_t tokens) {
  std::int64_t size = batch;
  if (i.pp > 1 && i.micro_batching == pipeline_micro_batching::per_stage) size = (batch + i.pp - 1) / i.pp;
  if (i.pp > 1 && i.micro_batching == pipeline_micro_batching::fastertransformer) {
    if (batch % i.pp == 0) size = batch / i.pp;
    while (size * tokens > i.micro_batch_token_limit && size % 2 == 0) size /= 2;
  }
  const std::int64_t count = (batch + size - 1) / size;
  return {count, size, batch - (count - 1) * size};
}

/// A prefill of micro-batches `full` (each but the last) and `last`: the first's way through
/// every stage, then each other one a fullest-stage time behind it (a filled pipeline).
constexpr seconds pipelined_prefill(const forward_cost& full, const forward_cost& last, const micro_batches& mb) {
  if (mb.count == 1) return last.time;
  return full.time + full.stage() * static_cast<double>(mb.count - 2) + last.stage();
}
/// A decode step of every micro-batch. Taking turns (per_stage): a micro-batch's next token waits
/// for its way through every stage, and the fullest stage serves all micro-batches in turn; the
/// longer of the two. FasterTransformer fills and drains the pipeline each step, as a prefill.
constexpr seconds pipelined_step(const inference_spec& i, const forward_cost& full, const forward_cost& last,
                                 const micro_batches& mb) {
  if (i.micro_batching == pipeline_micro_batching::fastertransformer) return pipelined_prefill(full, last, mb);
  if (mb.count == 1) return last.time;
  const seconds busy = full.stage() * static_cast<double>(mb.count - 1) + last.stage();
  return busy > full.time ? busy : full.time;
}

/// Decoder layers of the fullest pipeline stage: ceil(layer_num / pp) (an uneven split puts the
/// extra layers on some stages, as Megatron's and vLLM's partitions do).
constexpr std::int64_t fullest_stage_layers(const model_spec& m, const inference_spec& i) {
  return (m.layer_num + i.pp - 1) / i.pp;
}

/// Adds `repeat` runs of block `b` to `f`; the op record counts its kernels.
constexpr void add_block(forward_cost& f, const leaf_block& b, double repeat, const op_record& ops, double tp) {
  for (const leaf& l : b) {
    f.time += (l.fwd + l.fwd_comm) * repeat;
    if (l.id == leaf_id::core_attention) f.attention += l.fwd * repeat;
    if (l.fwd_peak > f.peak_transient) f.peak_transient = l.fwd_peak;
  }
  double flops = 0, kernels = 0;
  for (const priced_op& p : ops.ops) {
    flops += p.o.flops;
    // A collective over a group of one launches nothing.
    if (p.o.kind != op_kind::collective || p.time.value > 0) kernels += 1;
  }
  f.kernels += kernels * repeat;
  f.flops += flops * repeat * tp;
}

/// Bytes of one block's weights on one GPU: decoder linears at `stored` bytes an element (the
/// router stays 16-bit), the rest at `element`.
constexpr double block_weight_bytes(const leaf_block& b, double stored, double expert_stored, double element) {
  double bytes = 0;
  for (const leaf& l : b) {
    const bool linear = l.kind == leaf_kind::linear_column || l.kind == leaf_kind::linear_row;
    const bool expert = l.id == leaf_id::experts_linear_fc1 || l.id == leaf_id::experts_linear_fc2;
    bytes += l.params * (expert ? expert_stored : linear && l.id != leaf_id::router ? stored : element);
  }
  return bytes;
}
}  // namespace detail

/// `sys` as a serving pass prices kernels on it: each memory-bound kernel's latency is the job's
/// `kernel_latency_us`, not the training-fitted latency of the system file, and a collective priced
/// by NCCL's model (`nccl_link` tiers) carries the job's `eager_collective_us` beyond NCCL's own
/// latencies in an `eager` pass (launched kernel by kernel), nothing in a CUDA-graph replay: either
/// replaces the per-call latency the system carries (fitted to eager training). Tiers priced by a
/// measured file's own per-step latencies (no `nccl_link`) keep them in every pass.
constexpr system_spec serving_system(system_spec sys, const inference_spec& i, bool eager) {
  for (auto& bw : sys.accelerator.bandwidth) bw.latency_us = i.kernel_latency_us;
  for (std::size_t t = 0; t < sys.network_count; ++t)
    if (sys.networks[t].nccl_link != nccl_link_kind::none)
      sys.networks[t].bandwidth.fixed_latency = eager ? i.eager_collective_us : 0;
  return sys;
}

/// Prices one forward of a replica: `batch` sequences of `tokens` new tokens over `kv_cached`
/// cached ones. The LM head scores only each sequence's last token (TRT-LLM without
/// gather_context_logits, vLLM); the stages pass the hidden states on over the pp tier.
constexpr detail::forward_cost price_forward(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                             std::int64_t batch, std::int64_t tokens, std::int64_t kv_cached) {
  const strategy_spec s = detail::inference_strategy(m, i, batch, tokens);
  const model_spec served = detail::serving_model(m);
  const std::int64_t vocab = padded_vocab(m, i.tp);
  // A forward over cached tokens is a decode step (prefill caches nothing before it).
  const double kv_reads = kv_cached > 0 ? decode_kv_read_repeats(m, i) : 1.0;
  const inference_forward layers{
      .kv_cached = kv_cached,
      .weight_bytes = stored_weight_bytes(i),
      .expert_weight_bytes = stored_expert_weight_bytes(i),
      .kv_bytes = kv_cache_bytes(i),
      .routed_tokens = static_cast<double>(batch * tokens) * detail::replicas_per_expert_group(i),
      .kv_read_repeats = kv_reads};
  const double element = static_cast<double>(dtype_bytes(s.dtype));
  const inference_forward lm_forward{.kv_cached = kv_cached, .weight_bytes = element, .kv_bytes = kv_cache_bytes(i)};
  build_context c = make_build_context(served, s, sys, vocab);
  op_record ops;
  c.pricing = &record_op;
  c.record = &ops;
  c.inference = &layers;
  build_context layer = c;
  layer.quantized = s.fp8;
  detail::forward_cost f;
  const double tp = static_cast<double>(i.tp), stages = static_cast<double>(i.pp);
  const std::int64_t dense = detail::dense_layer_count(m), moe = m.layer_num - dense;
  const double stored = stored_weight_bytes(i);
  std::array<double, 2> layer_weights{};  // one dense, one MoE layer
  std::array<seconds, 2> layer_rest{};    // ... and its time but core attention
  for (const bool is_moe_layer : {false, true}) {
    const std::int64_t n = is_moe_layer ? moe : dense;
    if (n == 0) continue;
    ops.ops.clear();
    const leaf_block b = decoder_layer_leaves(layer, is_moe_layer, false);
    const seconds before = f.time - f.attention;
    detail::add_block(f, b, static_cast<double>(n), ops, tp);
    layer_weights[is_moe_layer ? 1 : 0] = detail::block_weight_bytes(b, stored, layers.expert_weight_bytes, element);
    layer_rest[is_moe_layer ? 1 : 0] = (f.time - f.attention - before) / static_cast<double>(n);
  }
  const seconds decoder_time = f.time;
  strategy_spec last = s;
  last.seq_len = 1;
  build_context h = c;
  h.strategy = &last;
  h.inference = &lm_forward;
  ops.ops.clear();
  leaf_block edge;
  edge.push(embedding_leaf(c));
  edge.push(norm_leaf(h, leaf_id::final_layernorm));
  leaf lm_head = linear_leaf(h, leaf_id::output_layer, true, m.hidden_size, vocab / i.tp);
  // The sampler needs every vocabulary shard's logits: an all-gather over tp (vLLM LogitsProcessor
  // with `tensor_model_parallel_all_gather`; TensorRT-LLM's lm_head gathers its output).
  h.collective(lm_head, pass_kind::forward, comm_group::tp, collective_kind::all_gather,
               static_cast<double>(batch * vocab) * c.element_bytes());
  edge.push(lm_head);
  detail::add_block(f, edge, 1, ops, tp);
  f.ends = f.time - decoder_time;
  // The fullest stage: as many layers as any stage holds, as many of them MoE layers as it can or
  // as few (Megatron's --first-k-dense-replace puts the dense layers first; which mix weighs or
  // takes more depends on the model and the batch), the larger; one stage holds the embedding and
  // the head (this one once when tied), a pipeline its larger end.
  const std::int64_t held = detail::fullest_stage_layers(m, i);
  const std::int64_t most_moe = moe < held ? moe : held, fewest_moe = held > dense ? held - dense : 0;
  const auto larger_mix = [&](auto dense_layer, auto moe_layer) {
    const auto mix = [&](std::int64_t n) {
      return moe_layer * static_cast<double>(n) + dense_layer * static_cast<double>(held - n);
    };
    return mix(most_moe) > mix(fewest_moe) ? mix(most_moe) : mix(fewest_moe);
  };
  const double embedding = edge.leaves[0].params * element, head = (edge.leaves[1].params + lm_head.params) * element;
  const double ends = i.pp > 1                ? (embedding > head ? embedding : head)
                      : m.tie_word_embeddings ? embedding + edge.leaves[1].params * element
                                              : embedding + head;
  f.weight_bytes = larger_mix(layer_weights[0], layer_weights[1]) + ends;
  f.stage_layers_but_attention = larger_mix(layer_rest[0], layer_rest[1]);
  if (i.pp > 1) {
    strategy_spec piped = s;
    piped.pp_size = i.pp;
    piped.world_size = s.world_size * i.pp;
    const double hidden = static_cast<double>(batch * tokens * m.hidden_size) * c.element_bytes();
    const network_tier& tier = resolve_tier(sys, piped, comm_group::pp);
    f.send = collective_time(sys, piped, tier, {collective_kind::p2p, hidden, 2, comm_group::pp});
    f.time += (stages - 1) * f.send;
    f.kernels += stages - 1;
  }
  f.stage_share = static_cast<double>(held) / static_cast<double>(m.layer_num);
  return f;
}

namespace detail {
/// Core attention of one decode step at `kv_cached` cached tokens, every layer of the replica.
constexpr seconds decode_attention(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                   std::int64_t batch, std::int64_t kv_cached) {
  const strategy_spec s = inference_strategy(m, i, batch, 1);
  const inference_forward f{.kv_cached = kv_cached,
                            .weight_bytes = 2,
                            .kv_bytes = kv_cache_bytes(i),
                            .kv_read_repeats = decode_kv_read_repeats(m, i)};
  build_context c = make_build_context(m, s, sys, padded_vocab(m, i.tp));
  c.inference = &f;
  return core_attention_leaf(c).fwd * static_cast<double>(m.layer_num);
}

/// KV-cache bytes of one token on one GPU over a stage's layers: K and V of this rank's KV heads
/// (GQA: kv_head_num / tp of them), or MLA's compressed latent and rope key, which every tp rank
/// holds whole (DeepSeek-V2 §2.1: kv_lora_rank + qk_rope_head_dim per token and layer).
constexpr double kv_bytes_per_token(const model_spec& m, const inference_spec& i) {
  const double layers = static_cast<double>(fullest_stage_layers(m, i));
  if (m.attention_type == attention_kind::mla)
    return layers * static_cast<double>(*m.kv_lora_rank + *m.qk_pos_emb_head_dim) * kv_cache_bytes(i);
  return layers * 2.0 * static_cast<double>(kv_heads_per_rank(m, i.tp) * head_dim(m)) * kv_cache_bytes(i);
}

/// Per-GPU bytes of a static batch at `context` tokens per sequence: weights, cache, transients
/// (prefill's largest leaf and the fp32 logits of the batch's last tokens). The transients are
/// the whole batch's even where a pipeline prefills it in micro-batches: FasterTransformer
/// allocates its buffers for the batch (ParallelGpt::allocateBuffer); for the others an upper
/// bound.
struct serving_memory {
  double weights = 0, kv = 0, activations = 0;
  [[nodiscard]] constexpr double total() const { return weights + kv + activations; }
};
/// What one prefill step holds in flight: the whole static batch's prompts at once, or (in-flight
/// batching) at most `prefill_chunk_tokens` of them: whole prompts while they fit, else a chunk of one.
struct prefill_step {
  std::int64_t sequences = 1, tokens = 1;
};
constexpr prefill_step static_prefill(const inference_spec& i, std::int64_t batch) { return {batch, i.input_len}; }
constexpr prefill_step chunked_prefill(const inference_spec& i, std::int64_t batch) {
  if (i.input_len >= i.prefill_chunk_tokens) return {1, i.prefill_chunk_tokens};
  const std::int64_t whole = i.prefill_chunk_tokens / i.input_len;
  return {batch < whole ? batch : whole, i.input_len};
}

constexpr serving_memory memory_at(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                   std::int64_t batch, double context, prefill_step step) {
  const forward_cost prefill = price_forward(m, sys, i, step.sequences, step.tokens, 0);
  const double logits = static_cast<double>(batch * padded_vocab(m, i.tp) / i.tp) * 4;
  // Windowed layers keep the last W tokens only (vLLM's sliding-window KV manager, TensorRT-LLM's
  // cyclic cache): window_cached_share of the context, averaged over the layers.
  const double cached = context * window_cached_share(m, context);
  return {prefill.weight_bytes, static_cast<double>(batch) * cached * kv_bytes_per_token(m, i),
          prefill.peak_transient + logits};
}

/// The largest batch in [0, limit] whose memory at `context` fits `capacity` (memory grows with
/// the batch, so a binary search).
constexpr std::int64_t largest_batch(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                     double context, double capacity, bool in_flight) {
  std::int64_t lo = 0, hi = i.max_batch_limit;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    const prefill_step step = in_flight ? chunked_prefill(i, mid) : static_prefill(i, mid);
    if (memory_at(m, sys, i, mid, context, step).total() <= capacity)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// The host's bound on an `eager` pass of `kernels` launches (no CUDA graph): each stage's host
/// launches its own kernels while earlier stages run, so the fullest stage's share bounds. An
/// assumption that holds where a stage's receive is queued on its stream (FasterTransformer's
/// ParallelGpt and TensorRT-LLM call NCCL send / recv, which do not block the host); an engine whose
/// host waits for the previous stage (vLLM's CPU-side recv_tensor_dict) launches stage after stage,
/// not modelled.
constexpr seconds launch_bound(const inference_spec& i, double kernels, bool eager) {
  return seconds{eager ? kernels / static_cast<double>(i.pp) * i.host_launch_us * 1e-6 : 0.0};
}

/// A pass of `batch` sequences of `tokens` new tokens over `kv_cached` cached ones, as its
/// micro-batches: the full ones and the last.
struct micro_batched_forward {
  micro_batches split{};
  forward_cost full{}, last{};
  [[nodiscard]] constexpr double kernels() const {
    return full.kernels * static_cast<double>(split.count - 1) + last.kernels;
  }
  [[nodiscard]] constexpr double flops() const {
    return full.flops * static_cast<double>(split.count - 1) + last.flops;
  }
};
constexpr micro_batched_forward price_micro_batches(const model_spec& m, const system_spec& sys,
                                                    const inference_spec& i, std::int64_t batch, std::int64_t tokens,
                                                    std::int64_t kv_cached) {
  micro_batched_forward p{.split = split_batch(i, batch, tokens)};
  p.full = price_forward(m, sys, i, p.split.size, tokens, kv_cached);
  p.last = p.split.last == p.split.size ? p.full : price_forward(m, sys, i, p.split.last, tokens, kv_cached);
  return p;
}

/// Decode steps of a static batch: steps 1 .. output_len - 1 at kv_cached = input_len + step - 1.
/// Everything but attention is the same at every step; attention is priced at each cache length.
struct decode_totals {
  seconds total{}, first{}, last{};
  double kernels = 0;
};
constexpr decode_totals decode_steps(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                     std::int64_t batch) {
  decode_totals d;
  if (i.output_len <= 1) return d;
  const micro_batched_forward step = price_micro_batches(m, sys, i, batch, 1, i.input_len);
  const micro_batches& mb = step.split;
  d.kernels = step.kernels();
  const seconds bound = launch_bound(i, d.kernels, !i.cuda_graphs);
  for (std::int64_t k = 1; k < i.output_len; ++k) {
    const std::int64_t cached = i.input_len + k - 1;
    const forward_cost full = step.full.with_attention(decode_attention(m, sys, i, mb.size, cached));
    const forward_cost last =
        mb.last == mb.size ? full : step.last.with_attention(decode_attention(m, sys, i, mb.last, cached));
    const seconds gpu = pipelined_step(i, full, last, mb);
    const seconds t = gpu > bound ? gpu : bound;
    d.total += t;
    if (k == 1) d.first = t;
    d.last = t;
  }
  return d;
}

/// Prefill and decode of one static batch: ttft and the summed steps.
struct batch_times {
  seconds ttft{};
  decode_totals decode{};
  double prefill_flops = 0;
};
/// `file_sys` as the system file or catalogue gives it: the prefill runs eagerly, the decode steps
/// as the job launches them (`cuda_graphs`).
constexpr batch_times time_batch(const model_spec& m, const system_spec& file_sys, const inference_spec& i,
                                 std::int64_t batch) {
  const micro_batched_forward prefill =
      price_micro_batches(m, serving_system(file_sys, i, true), i, batch, i.input_len, 0);
  const seconds gpu = pipelined_prefill(prefill.full, prefill.last, prefill.split);
  const seconds bound = launch_bound(i, prefill.kernels(), true);
  const decode_totals decode = decode_steps(m, serving_system(file_sys, i, !i.cuda_graphs), i, batch);
  return {gpu > bound ? gpu : bound, decode, prefill.flops()};
}

/// In-flight batching's mean cached context: the prompt and, on average, half the output generated.
constexpr std::int64_t in_flight_context(const inference_spec& i) { return i.input_len + (i.output_len + 1) / 2; }

/// Sequences or tokens a steady state's mean `n` puts in a round: whole ones, a fraction running
/// whole (the 1e-12 keeps a sum's rounding error, 63.999999..., from adding one).
constexpr std::int64_t whole_count(double n) { return static_cast<std::int64_t>(ceil_div(n * (1 - 1e-12), 1)); }

/// One step of in-flight batching on one micro-batch: `decode` sequences each adding a token over
/// `context` cached ones, beside `prefill` prompt tokens (chunks of input_len-token prompts), of
/// which `completed` prompts end in this step. The linear layers and collectives run once over
/// every token of the step, the weights read once for all (vLLM's and TensorRT-LLM's mixed
/// batches); core attention is the decode sequences' over their caches plus, for every input_len
/// tokens prefilled, one whole prompt's causal attention (a chunk attends to the prefix before it;
/// the prefix's cache re-read by later chunks is not priced); the LM head scores the decode
/// sequences and the completed prompts.
constexpr forward_cost mixed_step(const model_spec& m, const system_spec& sys, const inference_spec& i,
                                  std::int64_t decode, std::int64_t prefill, std::int64_t completed,
                                  std::int64_t context) {
  const forward_cost all = price_forward(m, sys, i, 1, decode + prefill, 0);
  const std::int64_t scored = decode + completed > 0 ? decode + completed : 1;
  // Both ends: `all`'s (every token's embedding, one token's norm and head) with the head of the
  // scored tokens in place of its one: + head(scored) - head(1).
  const forward_cost head = price_forward(m, sys, i, scored, 1, context), one = price_forward(m, sys, i, 1, 1, context);
  seconds attention = decode > 0 ? decode_attention(m, sys, i, decode, context) : seconds{};
  if (prefill > 0) {  // one variable-length kernel over the round's prompts (a chunk: its share of one)
    const std::int64_t prompts = completed > 0 ? completed : 1;
    attention += price_forward(m, sys, i, prompts, i.input_len, 0).attention *
                 (static_cast<double>(prefill) / static_cast<double>(prompts * i.input_len));
  }
  forward_cost f = all;
  f.ends = all.ends + head.ends - one.ends;
  f.time = all.time - all.ends - all.attention + f.ends + attention;
  f.attention = attention;
  f.kernels += head.kernels - one.kernels;
  return f;
}

/// A round of in-flight batching, every running sequence advancing a token: `decode` sequences'
/// tokens over up to one micro-batch per pipeline stage (TensorRT-LLM's in-flight batching over pp
/// keeps one per stage in flight), ceil(decode / pp) each as a static batch splits (fewer
/// micro-batches when fewer sequences), one of them also carrying `prefill` prompt tokens (a
/// request stays in its micro-batch). The round is the longer of that micro-batch's way
/// through the stages and the fullest stage serving every micro-batch; `first_token` is the
/// prompt's micro-batch's way through (its first token). An eager round (one carrying prompt
/// tokens; a decode round without CUDA graphs) takes at least its launches from the host.
struct in_flight_round {
  seconds time{}, first_token{};
  double kernels = 0;
  std::int64_t micro_batches = 1;
};
constexpr in_flight_round price_round(const model_spec& m, const system_spec& file_sys, const inference_spec& i,
                                      double decode, double prefill, std::int64_t context) {
  const bool eager = prefill > 0 || !i.cuda_graphs;
  const system_spec sys = serving_system(file_sys, i, eager);
  const std::int64_t sequences = whole_count(decode);
  inference_spec per_stage = i;  // in-flight batching splits per stage whatever the static rule
  per_stage.micro_batching = pipeline_micro_batching::per_stage;
  const micro_batches split = split_batch(per_stage, sequences > 0 ? sequences : 1, 1);
  const std::int64_t per_micro = sequences > 0 ? split.size : 0;
  const auto others = static_cast<double>(split.count - 1);
  const std::int64_t tokens = whole_count(prefill);
  const auto completed = static_cast<std::int64_t>(prefill / static_cast<double>(i.input_len) + 0.5);
  const forward_cost carrying = mixed_step(m, sys, i, per_micro, tokens, completed, context);
  const forward_cost plain = tokens == 0 ? carrying : mixed_step(m, sys, i, per_micro, 0, 0, context);
  const seconds busy = plain.stage() * others + carrying.stage();
  // The prompt's micro-batch: its way through, not before its stages' hosts have launched its
  // kernels (each its share, side by side, as `launch_bound` assumes).
  const seconds own_launches = launch_bound(i, carrying.kernels, eager);
  in_flight_round r{.time = carrying.time > busy ? carrying.time : busy,
                    .first_token = carrying.time > own_launches ? carrying.time : own_launches,
                    .kernels = plain.kernels * others + carrying.kernels,
                    .micro_batches = split.count};
  const seconds bound = launch_bound(i, r.kernels, eager);
  if (bound > r.time) r.time = bound;
  return r;
}

/// The steady state of in-flight batching: `clients` requests in the system, at most `slots` of
/// them holding a place in the batch, the rest queued.
struct in_flight_state {
  double running = 0;         ///< sequences holding a slot
  double decode = 0;          ///< of which decoding, each adding a token a round, on average
  double prefill_tokens = 0;  ///< prompt tokens a round prefills, on average
  bool budget_bound = false;  ///< rounds full at prefill_chunk_tokens leave slots empty
  double prompt_share = 0;    ///< share of the rounds carrying this replica's prompt tokens
  /// Share of the rounds lasting a prompt round: this replica's and, where the experts span
  /// replicas run in lockstep (`any_of_share`), rounds another of them spends on its prompts.
  double long_share = 0;
  in_flight_round with_prompt{}, without{};
  seconds tpot{}, queue{}, ttft{}, e2e{};
  double request_rate = 0;  ///< completed requests/s, one replica
  double life = 1;          ///< rounds a request holds its slot: its prompt's and its decode rounds
  /// The mean round over the mix of rounds with and without prompt tokens.
  [[nodiscard]] constexpr seconds mean_round() const {
    return without.time * (1 - long_share) + with_prompt.time * long_share;
  }
  /// What an arrival at a random moment waits for the round in progress: E[t^2] / (2 E[t]) over
  /// the mix (renewal theory's mean residual life).
  [[nodiscard]] constexpr seconds residual_round() const {
    const double p = long_share, t1 = with_prompt.time.value, t0 = without.time.value;
    return seconds{(p * t1 * t1 + (1 - p) * t0 * t0) / (2 * mean_round().value)};
  }
};

/// Replicas whose rounds run in lockstep (`replicas_per_expert_group`: experts spread over more GPUs
/// than one replica's tensor-parallel group, attention data-parallel): they exchange tokens in every
/// MoE layer, so each replica's round waits for the slowest of its EP group's (vLLM's data-parallel
/// deployment aligns the ranks' forward passes, running dummy ones on idle ranks; TensorRT-LLM's
/// attention-DP balance blog measures the idle time of ranks without context requests): the share
/// of rounds in which this replica or any of its `replicas` - 1 partners carries prompt tokens, each
/// in `own` of its rounds independently, a partner busy (serving clients) with probability `busy`:
/// 1 - (1 - own) (1 - busy own)^(replicas - 1). Partners are taken to serve as many clients as this
/// replica; with pp > 1 two replicas' prompts may ride different micro-batches, whose stage serves
/// both (not priced: the round is taken as one prompt round).
constexpr double any_of_share(double own, double replicas, double busy) {
  double none = 1 - own;
  for (double r = 1; r < replicas && none > 0; ++r) none *= 1 - busy * own;
  return 1 - none;
}
/// The replicas of `m`'s serving in lockstep: an MoE model's expert group's
/// (`replicas_per_expert_group`); a dense model's run apart (no all-to-all joins them).
constexpr double lockstep_replicas(const model_spec& m, const inference_spec& i) {
  return is_moe(m) ? replicas_per_expert_group(i) : 1.0;
}

/// Scheduling points a round: a pipeline of `pp` stages keeps up to pp micro-batches in flight and
/// schedules one as each leaves its last stage (vLLM's batch queue of pp batches, TensorRT-LLM's
/// in-flight batching over pp), so a request waits for a stage's share of a round, not a whole one.
constexpr double scheduling_points(const inference_spec& i) { return static_cast<double>(i.pp); }
/// Steps already scheduled after the one in progress, which a newly arrived request also waits:
/// one with overlap scheduling (`inference_spec::overlap_scheduling`), else none.
constexpr double steps_scheduled_ahead(const inference_spec& i) { return i.overlap_scheduling ? 1.0 : 0.0; }
/// What a request arriving at a random moment beside others waits to be scheduled: the residual of
/// the step in progress and the steps scheduled ahead, each a stage's share under a pipeline.
constexpr seconds arrival_wait(const inference_spec& i, const in_flight_state& now) {
  return (now.residual_round() + now.mean_round() * steps_scheduled_ahead(i)) / scheduling_points(i);
}

/// The share of requests a client sends as its last one completes that find the engine busy, and
/// so wait for a step: the step in progress when they arrive began as the last one's ended (vLLM,
/// TensorRT-LLM and SGLang admit requests between steps; the client's turnaround, a few ms, is left
/// out). The engine is busy unless all of the other `clients` - 1 ended in that same round, each
/// with probability 1 / `life` (a request's last round is one of its life rounds): 1 -
/// life^-(clients - 1). One client never waits (the engine is idle), nor do requests of one
/// round (all end together).
constexpr double resend_busy_share(double clients, double life) {
  double all_ended = 1;
  for (double other = 1; other < clients && all_ended > 1e-300; ++other) all_ended /= life;
  return 1 - all_ended;
}
/// Rounds a resent request waits on average: when the engine is busy, the whole step in progress
/// (it began as the request's last one ended) and the steps scheduled ahead, each a stage's share
/// under a pipeline.
constexpr double resend_wait_rounds(const inference_spec& i, double clients, double life) {
  return resend_busy_share(clients, life) * (1 + steps_scheduled_ahead(i)) / scheduling_points(i);
}

/// Chunked prefill in continuous batching (vLLM V1, TensorRT-LLM's in-flight batching; SGLang
/// mixes prompt chunks into decode steps only with --enable-mixed-chunk, by default it runs them as
/// steps of their own, not modelled):
/// a round holds every decoding sequence's next token and, when prompts wait, prompt tokens up to
/// the round's token budget B (prefill_chunk_tokens: TensorRT-LLM max_num_tokens, vLLM
/// max_num_batched_tokens, which also bound the running sequences). A request holds its slot for
/// its prompt's k rounds (k = ceil(input_len / (B - decode tokens)); its first token comes with
/// the last) and output_len - 1 = D decode rounds, so R busy slots hold R D / (k + D) decoding
/// sequences on average and take R / (k + D) prompts a round, as one chunk (several prompts share
/// a round when they come faster than one a round) in a share of the rounds, whose other requests
/// decode; the prompt tokens a round must fit beside the decode tokens: R (D + input_len) / (k +
/// D) <= B bounds R. Every round
/// advances every busy request, so X = R / ((k + D) t) requests/s at a mean round t (Little's
/// law); a request's decode rounds take its life less its own prompt rounds; clients beyond R
/// queue (clients - R) / X each. `resending` clients (the closed loop: each sends its next request
/// as its last completes) spend W = `resend_wait_rounds` of a round waiting for a scheduling point,
/// out of the batch: clients x life / (life + W) of them offered to it on average, the wait then in
/// the queue, (clients - R) / X = W t below the slots (Little's law again).
constexpr in_flight_state in_flight(const model_spec& m, const system_spec& file_sys, const inference_spec& i,
                                    double clients, std::int64_t slots, bool resending = false,
                                    double partner_busy = 1) {
  const auto input = static_cast<double>(i.input_len), rounds_decoding = static_cast<double>(i.output_len - 1);
  const auto budget = static_cast<double>(i.prefill_chunk_tokens);
  in_flight_state st;
  double k = 1;
  for (int pass = 0; pass < 16; ++pass) {  // k grows with the decode tokens; they shrink as k grows
    const double life = k + rounds_decoding, most = budget * life / (rounds_decoding + input);
    const double present = resending ? clients * life / (life + resend_wait_rounds(i, clients, life)) : clients;
    const double offered = present < static_cast<double>(slots) ? present : static_cast<double>(slots);
    st.budget_bound = offered > most;
    st.running = st.budget_bound ? most : offered;
    st.decode = st.running * rounds_decoding / life;
    const double room = budget - st.decode, next = input <= room ? 1.0 : ceil_div(input, room > 1 ? room : 1.0);
    if (next <= k) break;
    k = next;
  }
  const double life = k + rounds_decoding;
  st.life = life;
  st.prefill_tokens = st.running * input / life;
  const double single = input / k;  // one prompt's chunk
  const double chunk = st.prefill_tokens > single ? st.prefill_tokens : single;
  const double share = st.prefill_tokens / chunk;  // rounds carrying prompt tokens
  st.prompt_share = share;
  st.long_share = any_of_share(share, lockstep_replicas(m, i), partner_busy);
  // A round carrying prompt tokens holds chunk k / input_len prefilling requests, the others
  // decoding; a round without holds every busy request decoding (on average R D / (k + D) decode).
  const double prefilling = chunk * k / input, decoding = st.running - prefilling;
  const std::int64_t context = in_flight_context(i);
  st.with_prompt = price_round(m, file_sys, i, decoding > 0 ? decoding : 0, chunk, context);
  st.without = st.decode > 0 ? price_round(m, file_sys, i, st.running, 0, context) : st.with_prompt;
  const seconds mean_round = st.mean_round();
  st.request_rate = st.running / (life * mean_round.value);
  const seconds prompt = st.with_prompt.time * (k - 1) + st.with_prompt.first_token;
  // As serving benchmarks measure it: (e2e - ttft) / (output_len - 1).
  st.tpot = rounds_decoding > 0 ? (mean_round * life - prompt) / rounds_decoding : seconds{};
  const double waiting = clients - st.running;
  st.queue = seconds{waiting > 0 ? waiting / st.request_rate : 0.0};
  st.ttft = st.queue + prompt;
  st.e2e = st.queue + mean_round * life;
  return st;
}

/// Poisson(n) probabilities of k = first, first + 1, ..., n +- (10 sqrt(n) + 10) (the rest below
/// 1e-20), from the mode by the ratios p(k + 1) / p(k) = n / (k + 1), normalised: no e^-n to
/// underflow.
struct poisson_span {
  std::int64_t first = 0;
  std::vector<double> weight{};
};
constexpr poisson_span poisson_weights(double n) {
  const double spread = 10 * sqrt_of(n) + 10;
  const auto mode = static_cast<std::int64_t>(n);
  const auto first = static_cast<std::int64_t>(n - spread > 0 ? n - spread : 0.0);
  const auto last = static_cast<std::int64_t>(n + spread) + 1;
  poisson_span span{.first = first, .weight = std::vector<double>(static_cast<std::size_t>(last - first + 1), 0.0)};
  const auto at = [&](std::int64_t k) -> double& { return span.weight[static_cast<std::size_t>(k - first)]; };
  at(mode) = 1;
  for (std::int64_t k = mode; k < last; ++k) at(k + 1) = at(k) * n / static_cast<double>(k + 1);
  for (std::int64_t k = mode; k > first; --k) at(k - 1) = at(k) * static_cast<double>(k) / n;
  double total = 0;
  for (const double w : span.weight) total += w;
  for (double& w : span.weight) w /= total;
  return span;
}

/// The closed-loop states of 1, 2, ... requests on one replica, each priced once; past the slots
/// only the queue grows, (c - slots) / X more (`in_flight`'s clients beyond the batch).
struct closed_loop_states {
  const model_spec& m;
  const system_spec& file_sys;
  const inference_spec& i;
  std::int64_t slots = 1;
  std::vector<in_flight_state> priced{};  // [c - 1] for c = 1..
  std::vector<bool> known{};
  std::int64_t cap = 0;                     ///< the most requests admitted (0: no cap)
  std::optional<in_flight_state> resent{};  // the cap's closed loop, priced once
  /// The closed loop of the cap's requests, held ones sent as one ends (`in_flight` resending).
  constexpr const in_flight_state& at_cap() {
    if (!resent) resent = in_flight(m, file_sys, i, static_cast<double>(cap), slots, true);
    return *resent;
  }
  constexpr in_flight_state at(std::int64_t c) {
    if (c > slots) {
      in_flight_state st = at(slots);
      const seconds more{static_cast<double>(c - slots) / st.request_rate};
      st.queue += more;
      st.ttft += more;
      st.e2e += more;
      return st;
    }
    const auto k = static_cast<std::size_t>(c - 1);
    if (priced.size() <= k) priced.resize(k + 1), known.resize(k + 1, false);
    if (!known[k]) priced[k] = in_flight(m, file_sys, i, static_cast<double>(c), slots), known[k] = true;
    return priced[k];
  }
};

/// What a request arriving at one replica sees in open-loop serving, averaged over the others.
struct arrival_view {
  seconds ttft{}, tpot{}, e2e{}, queue{};  ///< queue: for a slot, then for the step in progress
  double occupancy = 0;                    ///< sequences in the batch, time average
  double admitted = 0;                     ///< requests admitted (in the batch or queued), time average
  double prefill_tokens = 0;               ///< prompt tokens a step, over the steps run
  std::int64_t typical = 1;                ///< the requests of the most likely state, for its counts
};
/// A closed-loop state's own figures as what its requests see: `admitted` of them, the wait for a
/// slot left out when `without_queue` (saturated: it grows with the run).
constexpr arrival_view view_of(const in_flight_state& st, double admitted, std::int64_t typical, bool without_queue) {
  const seconds left_out = without_queue ? st.queue : seconds{};
  return {.ttft = st.ttft - left_out,
          .tpot = st.tpot,
          .e2e = st.e2e - left_out,
          .queue = st.queue - left_out,
          .occupancy = st.running,
          .admitted = admitted,
          .prefill_tokens = st.prefill_tokens,
          .typical = typical};
}
/// Continuous batching serves every admitted request at once, an infinite-server queue (M/G/inf):
/// the requests in the system are Poisson with mean `n` whatever the service times, and an arrival
/// finds them so (Poisson arrivals see time averages, PASTA). Finding K, at most `admitted` of them
/// admitted (a --max-concurrency cap), its rounds are the closed loop's of 1 + min(K, admitted - 1)
/// requests; entering at once beside K >= 1 others, it first waits out the step in progress, the
/// residual E[t^2] / (2 E[t]) of the K-request state's rounds (vLLM and TensorRT-LLM admit
/// requests between steps; `arrival_wait`); queued for a slot, it enters as one leaves, at a
/// step's end; held by the cap, it is sent as one ends (its clock starts then): the cap's closed
/// loop of resent requests, as the closed loop's clients are. Past the slots the closed loop queues the excess,
/// (1 + K - slots) / X ahead of it: the Poisson count of a server without slots, so an upper bound
/// where slots bind (a single slot is an M/D/1 queue, whose wait is half as long).
constexpr arrival_view seen_on_arrival(closed_loop_states& states, double n, std::int64_t admitted) {
  const poisson_span span = poisson_weights(n);
  arrival_view v;
  double best = -1, busy = 0;
  for (std::size_t j = 0; j < span.weight.size(); ++j) {
    const std::int64_t found = span.first + static_cast<std::int64_t>(j);
    const std::int64_t in_server = found < admitted ? found : admitted;
    const double w = span.weight[j];
    v.admitted += w * static_cast<double>(in_server);
    // Held by the cap, it is sent as one ends: the cap's closed loop, its wait for a scheduling
    // point (or a slot) in its queue.
    const bool held = found >= admitted;
    const in_flight_state with = held ? states.at_cap() : states.at(1 + found);
    seconds wait{};
    if (in_server > 0) {
      const in_flight_state now = held ? with : states.at(in_server);
      v.occupancy += w * now.running;
      v.prefill_tokens += w * now.prefill_tokens;
      busy += w;
      if (!held && with.queue.value == 0) wait = arrival_wait(states.i, now);  // enters at once, mid-step
    }
    v.ttft += (with.ttft + wait) * w;
    v.tpot += with.tpot * w;
    v.e2e += (with.e2e + wait) * w;
    v.queue += (with.queue + wait) * w;
    if (w > best) best = w, v.typical = held ? admitted : 1 + found;
  }
  if (busy > 0) v.prefill_tokens /= busy;  // a step's: steps run only while requests are in
  return v;
}

/// Open-loop serving of one replica: requests arrive at `rate` a second, a Poisson process
/// (benchmark_serving --request-rate), at most `cap` of them admitted when cap > 0
/// (--max-concurrency, whose held arrivals wait at the client, their clock not yet started). The
/// Poisson mean n solves admitted(n) = rate x e2e(n) (Little's law; admitted and e2e as
/// `seen_on_arrival` prices them, admitted = n without a cap): the smallest root, by doubling and
/// bisection (a cap's own closed-loop rate is the caller's to check first). Arrivals
/// at or past the slots' rate X (the closed loop of a full batch) saturate an uncapped replica:
/// the queue grows without bound (`saturated`: rate X, latencies of a full batch without it).
struct open_loop_result {
  arrival_view view{};  ///< view.admitted: the requests in the system
  double rate = 0;
  bool saturated = false;
  bool capped_closed = false;  ///< the arrivals reach the cap's rate: its closed loop
};
constexpr open_loop_result open_loop(const model_spec& m, const system_spec& file_sys, const inference_spec& i,
                                     double rate, std::int64_t slots, std::int64_t cap) {
  closed_loop_states states{.m = m, .file_sys = file_sys, .i = i, .slots = slots, .cap = cap};
  constexpr std::int64_t uncapped = std::int64_t{1} << 40;  // more than any count of requests
  const std::int64_t admitted = cap > 0 ? cap : uncapped;
  const in_flight_state full = states.at(slots);
  open_loop_result out{.rate = rate};
  const auto saturate = [&] {
    return open_loop_result{
        .view = view_of(full, full.running, slots, true), .rate = full.request_rate, .saturated = true};
  };
  if (cap == 0 && rate >= full.request_rate) return saturate();
  // Requests admitted less those the arrivals' stay brings (Little): >= 0 once n holds the steady state.
  const auto surplus = [&](double n) {
    const arrival_view v = seen_on_arrival(states, n, admitted);
    return v.admitted - rate * v.e2e.value;
  };
  // The root is at least the arrivals during one request's stay alone; from there by doubling,
  // then bisection to a relative 2^-60.
  double lo = rate * states.at(1).e2e.value, hi = 2 * lo;
  constexpr double top = 1e7;  // more requests in the system than that: as good as saturated
  while (surplus(hi) < 0 && hi < top) lo = hi, hi *= 2;
  if (surplus(hi) < 0) return saturate();
  for (int step = 0; step < 60; ++step) {
    const double mid = (lo + hi) / 2;
    (surplus(mid) < 0 ? lo : hi) = mid;
  }
  out.view = seen_on_arrival(states, hi, admitted);
  return out;
}

/// Dollars per million output tokens at `tok_s` output tokens/s of `gpus` GPUs.
constexpr double usd_per_million(double usd_per_gpu_hour, double gpus, double tok_s) {
  return usd_per_gpu_hour > 0 && tok_s > 0 ? usd_per_gpu_hour * gpus / 3600.0 / tok_s * 1e6 : 0;
}
}  // namespace detail

namespace detail {
/// `r`'s figures for a static batch of inference_spec::batch sequences.
constexpr void static_batch_figures(inference_result& r, const model_spec& m, const system_spec& file_sys,
                                    const inference_spec& i, const system_spec& sys) {
  const double gpus_per_replica = static_cast<double>(i.tp * i.pp);
  const batch_times t = time_batch(m, file_sys, i, i.batch);
  r.ttft = t.ttft;
  r.e2e = t.ttft + t.decode.total;
  r.tpot = i.output_len > 1 ? t.decode.total / static_cast<double>(i.output_len - 1) : seconds{};
  r.first_step = t.decode.first;
  r.last_step = t.decode.last;
  r.decode_kernels = t.decode.kernels;
  r.prefill_micro_batches = split_batch(i, i.batch, i.input_len).count;
  r.decode_micro_batches = split_batch(i, i.batch, 1).count;
  r.prefill_tflops = t.prefill_flops / t.ttft.value / gpus_per_replica / 1e12;
  r.output_tok_s = static_cast<double>(i.batch * i.output_len) / r.e2e.value;
  const double context = static_cast<double>(i.input_len + i.output_len);
  const serving_memory mem = memory_at(m, sys, i, i.batch, context, static_prefill(i, i.batch));
  r.weight_bytes = mem.weights;
  r.kv_cache_bytes = mem.kv;
  r.activation_bytes = mem.activations;
  r.peak_bytes = mem.total();
}

/// One replica's serving: its view, rate and flags, and the closed-loop state whose step counts and
/// flags the figures show.
struct replica_serving {
  open_loop_result o{};
  in_flight_state shown{};
};
/// One replica open loop at `rate` with at most `cap` requests admitted (0: no cap): the cap's
/// closed loop when the arrivals reach its rate, else `open_loop`.
constexpr replica_serving serve_replica(const model_spec& m, const system_spec& file_sys, const inference_spec& i,
                                        double rate, std::int64_t slots, std::int64_t cap) {
  replica_serving at_cap{};
  if (cap > 0) {
    const in_flight_state closed = in_flight(m, file_sys, i, static_cast<double>(cap), slots, true);
    at_cap = {.o = {.view = view_of(closed, static_cast<double>(cap), cap, false),
                    .rate = closed.request_rate,
                    .capped_closed = true},
              .shown = closed};
    if (rate >= closed.request_rate) return at_cap;
  }
  replica_serving out{.o = open_loop(m, file_sys, i, rate, slots, cap)};
  // An open loop that finds no root under a cap (more than 1e7 requests in the system: only within
  // a hair of the cap's rate) is the cap's closed loop at the arrivals' rate, never saturation.
  if (cap > 0 && out.o.saturated) {
    at_cap.o.rate = rate;
    return at_cap;
  }
  out.shown = in_flight(m, file_sys, i, static_cast<double>(out.o.view.typical), slots);
  return out;
}

/// `r`'s figures for in-flight batching over `slots` a replica: closed loop at
/// inference_spec::concurrency clients, or open loop at inference_spec::request_rate, each
/// replica an equal share of it, `concurrency` then capping the requests admitted. The clients (or
/// the cap) spread over the dp replicas in whole numbers, c mod dp of them one more: rates are
/// the replicas' mean, latencies each request's mean, the rest the fuller replica's.
constexpr void in_flight_figures(inference_result& r, const model_spec& m, const system_spec& file_sys,
                                 const inference_spec& i, const system_spec& sys, std::int64_t slots,
                                 double paged_context) {
  r.in_flight = true;
  const std::int64_t usable = slots > 0 ? slots : 1;
  // Closed loop with fewer clients than replicas: a lockstep partner serves clients with the
  // probability that one of the other dp - 1 replicas is among the concurrency - 1 others busy.
  const double busy_partner = i.concurrency <= 0 || i.concurrency >= i.dp
                                  ? 1.0
                                  : static_cast<double>(i.concurrency - 1) / static_cast<double>(i.dp - 1);
  const auto serve = [&](std::int64_t clients) -> replica_serving {
    if (i.request_rate > 0)
      return serve_replica(m, file_sys, i, i.request_rate / static_cast<double>(i.dp), usable, clients);
    const in_flight_state st = in_flight(m, file_sys, i, static_cast<double>(clients), usable, true, busy_partner);
    return {.o = {.view = view_of(st, static_cast<double>(clients), clients, false), .rate = st.request_rate},
            .shown = st};
  };
  const std::int64_t fewer = i.concurrency / i.dp, fuller = i.concurrency % i.dp;
  const replica_serving full = serve(fuller > 0 ? fewer + 1 : fewer);
  // Replicas with no client serve nothing (validate refuses a cap below the replicas).
  const replica_serving less = fuller == 0 ? full : fewer > 0 ? serve(fewer) : replica_serving{};
  const double n_full = static_cast<double>(fuller > 0 ? fuller : i.dp), n_less = static_cast<double>(i.dp) - n_full;
  const double rate_full = full.o.rate * n_full, rate_less = less.o.rate * n_less;
  const auto mean = [&](seconds a, seconds b) { return (a * rate_full + b * rate_less) / (rate_full + rate_less); };
  const arrival_view& view = full.o.view;
  r.saturated = full.o.saturated || less.o.saturated;
  r.cap_bound = full.o.capped_closed || less.o.capped_closed;
  r.request_rate = (rate_full + rate_less) / static_cast<double>(i.dp);
  r.ttft = mean(view.ttft, less.o.view.ttft);
  r.tpot = mean(view.tpot, less.o.view.tpot);
  r.e2e = mean(view.e2e, less.o.view.e2e);
  r.queue = view.queue;
  r.mean_running = view.occupancy;
  r.prefill_tokens_per_step = view.prefill_tokens;
  r.in_system = view.admitted;  // the fuller replica's, as its running and memory
  const in_flight_state& shown = full.shown;
  r.first_step = r.last_step = r.tpot;
  r.running = static_cast<std::int64_t>(r.mean_running + 0.5);
  r.token_budget_bound = shown.budget_bound;
  r.decode_kernels = shown.without.kernels;
  r.prefill_micro_batches = shown.with_prompt.micro_batches;
  r.decode_micro_batches = shown.without.micro_batches;
  r.prefill_tflops = 0;  // prompts share their rounds with decode tokens: no prefill rate of their own
  r.output_tok_s = r.request_rate * static_cast<double>(i.output_len);
  // Memory of the (fuller replica's) busy slots (one when none fits: what one would need).
  const std::int64_t most = whole_count(r.mean_running);  // the sequences most steps hold
  const std::int64_t held = most > 0 ? most : 1;
  const serving_memory mem = memory_at(m, sys, i, held, paged_context, chunked_prefill(i, held));
  r.weight_bytes = mem.weights;
  r.kv_cache_bytes = mem.kv;
  r.activation_bytes = mem.activations;
  r.peak_bytes = mem.total();
}
}  // namespace detail

/// Estimates one serving job whose specs passed `validate`.
constexpr inference_result infer_validated(const model_spec& m, const inference_spec& i, const system_spec& file_sys) {
  const system_spec sys = serving_system(file_sys, i, !i.cuda_graphs);  // memory and largest batches
  inference_result r;
  const double gpus_per_replica = static_cast<double>(i.tp * i.pp);
  r.gpus = i.tp * i.pp * i.dp;
  const double context = static_cast<double>(i.input_len + i.output_len);
  r.capacity_bytes = static_cast<double>(device_memory(sys).value) * i.memory_fraction;
  r.max_batch = detail::largest_batch(m, sys, i, context, r.capacity_bytes, false);
  r.max_batch_at_limit = r.max_batch == i.max_batch_limit;
  // In-flight batching holds each sequence's cache at its current length in whole blocks: on
  // average half the output generated.
  const std::int64_t mean_context = detail::in_flight_context(i), block = i.kv_block_tokens;
  const auto paged = static_cast<double>((mean_context + block - 1) / block * block);
  r.offline_batch = detail::largest_batch(m, sys, i, paged, r.capacity_bytes, true);
  // A step's token budget also bounds its sequences (vLLM: max_num_batched_tokens >= max_num_seqs).
  if (r.offline_batch > i.prefill_chunk_tokens) r.offline_batch = i.prefill_chunk_tokens;
  if (i.max_running > 0 && r.offline_batch > i.max_running) r.offline_batch = i.max_running;
  const bool in_flight = i.concurrency > 0 || i.request_rate > 0;
  if (in_flight)
    detail::in_flight_figures(r, m, file_sys, i, sys, r.offline_batch, paged);
  else
    detail::static_batch_figures(r, m, file_sys, i, sys);
  r.output_tok_s_per_gpu = r.output_tok_s / gpus_per_replica;
  r.decode_tok_s_per_user = r.tpot.value > 0 ? 1 / r.tpot.value : 0;
  // Per token of the full context: kv_cache_bytes = batch x context x this (a window lowers it).
  r.kv_bytes_per_token = detail::kv_bytes_per_token(m, i) * window_cached_share(m, context);
  r.fits = r.peak_bytes <= r.capacity_bytes && (!in_flight || r.offline_batch > 0);
  // Offline: in-flight batching of as many requests as fit, each slot refilled as it frees.
  if (r.offline_batch > 0) {
    const auto batch = static_cast<double>(r.offline_batch);
    const detail::in_flight_state o = detail::in_flight(m, file_sys, i, batch, r.offline_batch);
    r.offline_output_tok_s_per_gpu = o.request_rate * static_cast<double>(i.output_len) / gpus_per_replica;
  }
  r.usd_per_million_output_tokens = detail::usd_per_million(i.usd_per_gpu_hour, gpus_per_replica, r.output_tok_s);
  r.offline_usd_per_million_output_tokens =
      detail::usd_per_million(i.usd_per_gpu_hour, 1, r.offline_output_tok_s_per_gpu);
  return r;
}

/// Validates and estimates one serving job.
constexpr inference_result infer(const model_spec& m, const inference_spec& i, const system_spec& sys) {
  validate(m, i, sys);
  return infer_validated(m, i, sys);
}

LLMSIM_END_NAMESPACE
