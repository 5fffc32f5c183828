// `llmsim infer`: serving a model on the engine (estimate/inference.hpp) — time to first token,
// time per output token, end-to-end latency, tokens/s per GPU and per user, weights / KV cache /
// activation memory, the largest batch, offline throughput and, with a price, $ per million tokens.
#pragma once

#include <llmsim/json/inference.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace llmsim_cli {

namespace lj = llmsim::json;

struct infer_args {
  std::string model, system, format = "text";
  std::string weights = "bf16", activations = "bf16", kv_cache = "bf16", gqa_decode_reads = "per_kv_head";
  std::string expert_weights;  ///< empty: as --weights
  std::string micro_batching = "per_stage";
  bool no_cuda_graphs = false;
  llmsim::inference_spec spec{};
};

inline CLI::App* add_infer_command(CLI::App& app, infer_args& a) {
  auto* c = app.add_subcommand("infer", "Serving estimate: prefill, decode steps, memory, largest batch, $ per token.");
  c->add_option("--model", a.model, "Model config file or catalogue name")->required();
  c->add_option("--system", a.system, "System config file or catalogue name")->required();
  c->add_option("--batch", a.spec.batch, "Sequences decoded together per replica")->capture_default_str();
  c->add_option("--input-len", a.spec.input_len, "Prompt tokens per sequence")->required();
  c->add_option("--output-len", a.spec.output_len, "Generated tokens per sequence")->required();
  c->add_option("--tp", a.spec.tp, "Tensor-parallel size")->capture_default_str();
  c->add_option("--pp", a.spec.pp, "Pipeline stages")->capture_default_str();
  c->add_option("--ep", a.spec.ep,
                "Expert-parallel size (MoE; the experts over the tp x dp GPUs; above --tp, in-flight replicas sharing "
                "experts run their steps in lockstep)")
      ->capture_default_str();
  c->add_option("--dp", a.spec.dp, "Replicas")->capture_default_str();
  c->add_option("--weights", a.weights,
                "Decoder-linear weights as stored (nvfp4: E2M1 + an E4M3 scale per 16; mxfp4: + an E8M0 scale per 32)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"}))
      ->capture_default_str();
  c->add_option("--expert-weights", a.expert_weights,
                "The routed experts' weights as stored, where the checkpoint quantizes them alone (gpt-oss: mxfp4; "
                "default: as --weights)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"}));
  c->add_option("--int4-group-size", a.spec.int4_group_size, "int4: elements per scale group")->capture_default_str();
  c->add_option("--activations", a.activations,
                "GEMM inputs (fp8 needs --weights fp8; fp4, NVFP4 on FP4 tensor cores, needs --weights nvfp4)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}))
      ->capture_default_str();
  c->add_option("--kv-cache", a.kv_cache, "KV-cache elements")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "int8"}))
      ->capture_default_str();
  c->add_option("--gqa-decode-reads", a.gqa_decode_reads,
                "How decode attention reads a grouped-query layer's KV cache: once per KV head (FlashDecoding, "
                "FlashAttention with packed GQA, TensorRT-LLM XQA), or once per query head (the masked MHA kernel "
                "of FasterTransformer and TensorRT-LLM up to 0.6)")
      ->check(CLI::IsMember({"per_kv_head", "per_query_head"}))
      ->capture_default_str();
  c->add_option("--micro-batching", a.micro_batching,
                "How a pipeline (--pp > 1) splits the batch into micro-batches that follow one another through the "
                "stages: ceil(batch / pp) sequences each, taking turns on the stages (TensorRT-LLM's default), or "
                "FasterTransformer's rule (batch / pp when pp divides it, halved while over --micro-batch-token-limit "
                "tokens and even; each decode step fills and drains the pipeline)")
      ->check(CLI::IsMember({"per_stage", "fastertransformer"}))
      ->capture_default_str();
  c->add_option("--micro-batch-token-limit", a.spec.micro_batch_token_limit,
                "--micro-batching fastertransformer: halve while a micro-batch holds more tokens (v5.1 on: 1024, "
                "v5.0: 8192, its betas: 2048)")
      ->capture_default_str();
  c->add_flag("--no-cuda-graphs", a.no_cuda_graphs,
              "Decode steps launch kernel by kernel, as prefill always does: a step takes at least kernels x "
              "--host-launch-us and each collective pays --eager-collective-us");
  c->add_option("--host-launch-us", a.spec.host_launch_us, "Host cost of one kernel launch without CUDA graphs")
      ->capture_default_str();
  c->add_option("--eager-collective-us", a.spec.eager_collective_us,
                "Time each NCCL-priced collective (catalogue systems) of a pass without CUDA graphs adds to NCCL's "
                "latency model (SimuMax's B200 eager-mode fit)")
      ->capture_default_str();
  c->add_option("--kernel-latency-us", a.spec.kernel_latency_us,
                "Device time each kernel adds to its bytes over bandwidth (replaces the system file's latency_us)")
      ->capture_default_str();
  c->add_option("--concurrency", a.spec.concurrency,
                "In-flight (continuous) batching of this many clients in all (spread over the --dp replicas), each "
                "sending its next request when its last completes (and waiting out the step the others then run): "
                "the steady state replaces the static --batch and --micro-batching (with --request-rate: the most "
                "in flight; 0: a static batch)")
      ->capture_default_str();
  c->add_option("--request-rate", a.spec.request_rate,
                "Open-loop in-flight batching: requests arrive at this mean rate a second over all replicas, a "
                "Poisson process (benchmark_serving --request-rate); with --concurrency, at most that many admitted, "
                "at least one a replica; past the slots' rate, saturated (0: closed loop or a static batch)")
      ->capture_default_str();
  c->add_flag("--overlap-scheduling", a.spec.overlap_scheduling,
              "In-flight batching: the engine schedules the next step while one runs (vLLM --async-scheduling, "
              "SGLang's default, TensorRT-LLM's PyTorch overlap loop): an arriving request joins a step later");
  c->add_option("--max-running", a.spec.max_running,
                "In-flight batching and the offline figure: the most sequences a step holds (vLLM max_num_seqs, "
                "TensorRT-LLM max_batch_size; 0: as many as memory and --prefill-chunk-tokens allow)")
      ->capture_default_str();
  c->add_option("--memory-fraction", a.spec.memory_fraction, "Share of device memory the server may fill")
      ->capture_default_str();
  c->add_option("--prefill-chunk-tokens", a.spec.prefill_chunk_tokens,
                "In-flight batching (--concurrency, the offline figure): the most tokens a step holds, decode tokens "
                "and prompt chunks (TensorRT-LLM max_num_tokens, vLLM max_num_batched_tokens); also the most "
                "sequences")
      ->capture_default_str();
  c->add_option("--usd-per-gpu-hour", a.spec.usd_per_gpu_hour, "Price of one GPU-hour (no default: $ only when given)");
  c->add_option("--max-batch-limit", a.spec.max_batch_limit, "The largest batch the largest-batch search tries")
      ->capture_default_str();
  c->add_option("--format", a.format, "Output format (text is the default)")->check(CLI::IsMember({"text", "json"}));
  return c;
}

namespace detail {

/// "12.345 ms".
inline std::string ms_text(llmsim::seconds t) {
  char text[48];
  std::snprintf(text, sizeof text, "%.3f ms", t.value * 1e3);
  return text;
}

/// "in-flight, open loop at 4 requests/s (Poisson)[, at most 64 in flight]".
inline std::string open_loop_load(const llmsim::inference_spec& i) {
  char rate[64];
  std::snprintf(rate, sizeof rate, "%g", i.request_rate);
  std::string load = "in-flight, open loop at " + std::string(rate) + " requests/s (Poisson)";
  if (i.concurrency > 0) load += ", at most " + std::to_string(i.concurrency) + " in flight";
  return load;
}

inline void print_inference_text(const std::string& model, const std::string& system, const llmsim::inference_spec& i,
                                 const llmsim::inference_result& r) {
  const std::string load = !r.in_flight ? "batch " + std::to_string(i.batch)
                           : i.request_rate > 0
                               ? open_loop_load(i)
                               : "in-flight, " + std::to_string(i.concurrency) + " concurrent requests";
  std::printf("%s on %s: %s, input %lld, output %lld tokens; tp %lld pp %lld ep %lld dp %lld (%lld GPUs)\n",
              model.c_str(), system.c_str(), load.c_str(), static_cast<long long>(i.input_len),
              static_cast<long long>(i.output_len), static_cast<long long>(i.tp), static_cast<long long>(i.pp),
              static_cast<long long>(i.ep), static_cast<long long>(i.dp), static_cast<long long>(r.gpus));
  if (r.in_flight) {
    std::printf("  running                  %10.1f sequences on average (%.0f prompt tokens a step%s), %s\n",
                r.mean_running, r.prefill_tokens_per_step,
                r.token_budget_bound ? "; prompts wait for room in full steps" : "",
                r.saturated ? "the queue growing" : (ms_text(r.queue) + " queued").c_str());
    if (r.cap_bound)
      std::printf(
          "  capped: the %lld admitted complete %.3f requests a second of the %g arriving; the client's "
          "backlog grows, its wait not in the latencies below\n",
          static_cast<long long>(i.concurrency), r.request_rate * static_cast<double>(i.dp), i.request_rate);
    if (r.saturated)
      std::printf(
          "  saturated: requests arrive faster than the %.3f a second the slots complete; the queue grows "
          "without bound and the latencies below leave it out\n",
          r.request_rate * static_cast<double>(i.dp));
    if (r.saturated)
      std::printf("  time to first token      %10.3f ms  (a full batch's prompt steps, after a queue that grows)\n",
                  r.ttft.value * 1e3);
    else
      std::printf("  time to first token      %10.3f ms  (%s, then the prompt's steps)\n", r.ttft.value * 1e3,
                  i.request_rate > 0 ? "a slot and the step in progress" : "queue");
    std::printf(
        "  time per output token    %10.3f ms  (after the first: decode steps and the prompt chunks among them; "
        "%.0f kernels a decode step)\n",
        r.tpot.value * 1e3, r.decode_kernels);
    std::printf("  requests/s               %10.3f per replica\n", r.request_rate);
  } else {
    std::printf("  time to first token      %10.3f ms  (prefill, %.1f TFLOP/s per GPU)\n", r.ttft.value * 1e3,
                r.prefill_tflops);
    std::printf("  time per output token    %10.3f ms  (first step %.3f, last %.3f; %.0f kernels per step)\n",
                r.tpot.value * 1e3, r.first_step.value * 1e3, r.last_step.value * 1e3, r.decode_kernels);
  }
  if (i.pp > 1 && !r.in_flight)
    std::printf("  pipeline micro-batches   %10lld at prefill, %lld at each decode step (%s)\n",
                static_cast<long long>(r.prefill_micro_batches), static_cast<long long>(r.decode_micro_batches),
                std::string(llmsim::enum_name(i.micro_batching)).c_str());
  std::printf("  end-to-end latency       %10.3f ms\n", r.e2e.value * 1e3);
  std::printf("  output tokens/s          %10.1f per replica, %.1f per GPU, %.1f per user while decoding\n",
              r.output_tok_s, r.output_tok_s_per_gpu, r.decode_tok_s_per_user);
  std::printf(
      "  memory per GPU           %10.2f GB = weights %.2f + KV cache %.2f (%.0f B/token) + activations %.2f;"
      " %s %.2f GB usable\n",
      r.peak_bytes / 1e9, r.weight_bytes / 1e9, r.kv_cache_bytes / 1e9, r.kv_bytes_per_token, r.activation_bytes / 1e9,
      r.fits ? "fits in" : "EXCEEDS", r.capacity_bytes / 1e9);
  std::printf("  largest static batch     %10lld%s\n", static_cast<long long>(r.max_batch),
              r.max_batch_at_limit ? " (the search limit, --max-batch-limit; more may fit)" : "");
  std::printf("  offline (in-flight)      %10lld sequences, %.1f output tokens/s per GPU\n",
              static_cast<long long>(r.offline_batch), r.offline_output_tok_s_per_gpu);
  if (r.usd_per_million_output_tokens > 0) {
    if (r.offline_batch > 0)
      std::printf("  $ per million output tokens %7.4f at this batch, %.4f offline\n", r.usd_per_million_output_tokens,
                  r.offline_usd_per_million_output_tokens);
    else  // nothing fits in flight: no offline rate, so no offline price (JSON: null)
      std::printf("  $ per million output tokens %7.4f at this batch, none offline (no sequence fits)\n",
                  r.usd_per_million_output_tokens);
  }
}
}  // namespace detail

/// Runs `llmsim infer`; `does_not_fit` is the exit status when the batch's memory exceeds the GPU's.
inline int run_infer(infer_args& a, int does_not_fit) {
  a.spec.weights = llmsim::enum_from_name<llmsim::weight_format>(a.weights);
  if (!a.expert_weights.empty())
    a.spec.expert_weights = llmsim::enum_from_name<llmsim::weight_format>(a.expert_weights);
  a.spec.activations = llmsim::enum_from_name<llmsim::activation_format>(a.activations);
  a.spec.kv_cache = llmsim::enum_from_name<llmsim::kv_cache_format>(a.kv_cache);
  a.spec.gqa_decode_reads = llmsim::enum_from_name<llmsim::gqa_decode_read_kind>(a.gqa_decode_reads);
  a.spec.micro_batching = llmsim::enum_from_name<llmsim::pipeline_micro_batching>(a.micro_batching);
  a.spec.cuda_graphs = !a.no_cuda_graphs;
  const llmsim::model_spec model = lj::load_model(a.model);
  const lj::system_config system = lj::load_system(a.system);
  const llmsim::inference_result r = llmsim::infer(model, a.spec, system.spec());
  const int status = r.fits ? 0 : does_not_fit;
  if (!r.fits)  // exit status 3: say why on stderr too, as the other commands do
    std::fprintf(stderr,
                 "llmsim infer: %s %lld needs %.2f GB per GPU (weights %.2f, KV cache %.2f, activations %.2f), "
                 "more than the %.2f GB usable (--memory-fraction of device memory); the largest %s that fits is "
                 "%lld\n",
                 r.in_flight ? "in flight, running" : "batch",
                 static_cast<long long>(r.in_flight ? (r.running > 0 ? r.running : 1) : a.spec.batch),
                 r.peak_bytes / 1e9, r.weight_bytes / 1e9, r.kv_cache_bytes / 1e9, r.activation_bytes / 1e9,
                 r.capacity_bytes / 1e9, r.in_flight ? "in-flight batch" : "static batch",
                 static_cast<long long>(r.in_flight ? r.offline_batch : r.max_batch));
  if (a.format == "json") {
    const lj::value out{{"inference", lj::to_json(a.spec)}, {"result", lj::to_json(r)}, {"exit_status", status}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    detail::print_inference_text(a.model, a.system, a.spec, r);
  }
  return status;
}

}  // namespace llmsim_cli
