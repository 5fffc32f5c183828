// `llmsim llm-analysis train|infer`: llm-analysis's `train` / `infer` entry points with its flag
// names (--model_name, --gpu_name, --dtype_name, --tp_size, ...), its config folders
// (--configs, default ../shared/reference/llm-analysis) and its summary keys (--format json).
#pragma once

#include <llmsim/json/llm_analysis.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#ifndef LLMSIM_LLM_ANALYSIS_CONFIGS
#define LLMSIM_LLM_ANALYSIS_CONFIGS "../shared/reference/llm-analysis"
#endif

namespace llmsim_cli {

namespace la = llmsim::llm_analysis;

struct llm_analysis_args {
  CLI::App* train = nullptr;
  CLI::App* infer = nullptr;
  std::string configs = LLMSIM_LLM_ANALYSIS_CONFIGS;
  std::string format = "text";
  std::string log_level;  ///< accepted for llm-analysis command lines; llmsim does not log
  bool allow_oom = false;
  std::string model_name = "facebook_opt-1.3b", gpu_name = "a100-sxm-40gb", dtype_name = "w16a16e16";
  la::training_params train_params;
  std::int64_t activation_recomputation = 0, train_ds_zero = 0;
  la::inference_params infer_params;
  std::int64_t infer_ds_zero = 0;
};

namespace detail {

inline void add_common(CLI::App* cmd, llm_analysis_args& a) {
  cmd->add_option("--model_name", a.model_name, "Model config name (model_configs/*.json \"name\") or a .json file")
      ->capture_default_str();
  cmd->add_option("--gpu_name", a.gpu_name, "GPU config name (gpu_configs/)")->capture_default_str();
  cmd->add_option("--dtype_name", a.dtype_name, "Data-type config name (dtype_configs/), e.g. w4a16e16")
      ->capture_default_str();
  cmd->add_option("--configs", a.configs, "llm-analysis config folder (model_configs/, gpu_configs/, dtype_configs/)")
      ->capture_default_str()
      ->type_name("DIR");
  cmd->add_option("--format", a.format, "Output format (text is the default); json prints llm-analysis's summary dict")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--log_level", a.log_level, "Accepted for llm-analysis command lines (no effect)");
}

template <class T>
void opt(CLI::App* cmd, const char* name, T& field, const char* help) {
  cmd->add_option(name, field, help);
}

inline void add_train(CLI::App* parent, llm_analysis_args& a) {
  auto* c = a.train = parent->add_subcommand("train", "llm-analysis train(): training memory and iteration time");
  add_common(c, a);
  auto& p = a.train_params;
  opt(c, "--batch_size_per_gpu", p.batch_size_per_gpu, "Micro-batch size (default: the largest that fits)");
  opt(c, "--gradient_accumulation_steps", p.gradient_accumulation_steps, "Gradient accumulation steps");
  opt(c, "--global_batch_size", p.global_batch_size, "Global batch size");
  opt(c, "--seq_len", p.seq_len, "Sequence length (default: the model's max_seq_len)");
  opt(c, "--total_num_tokens", p.total_num_tokens, "Tokens to train on: total time and GPU-hours");
  opt(c, "--activation_recomputation", a.activation_recomputation,
      "0 NONE, 1 ATTN_COMPUTE, 2 ATTN, 3 NORM_ATTN_NORM, 4 FULL");
  opt(c, "--ds_zero", a.train_ds_zero, "DeepSpeed ZeRO stage 0-3");
  opt(c, "--fwd_prefetch", p.fwd_prefetch, "ZeRO-3 forward prefetch (true/false)");
  opt(c, "--bwd_prefetch", p.bwd_prefetch, "ZeRO-3 backward prefetch (true/false)");
  opt(c, "--dp_size", p.dp_size, "Sharded data-parallel size");
  opt(c, "--tp_size", p.tp_size, "Tensor-parallel size");
  opt(c, "--pp_size", p.pp_size, "Pipeline-parallel size");
  opt(c, "--sp_size", p.sp_size, "Sequence-parallel size (default tp_size)");
  opt(c, "--ep_size", p.ep_size, "Expert-parallel size");
  opt(c, "--total_num_gpus", p.total_num_gpus, "GPUs in all");
  opt(c, "--layernorm_dtype_bytes", p.layernorm_dtype_bytes, "Bytes per norm activation");
  opt(c, "--master_weights_dtype_bytes", p.master_weights_dtype_bytes, "Bytes per master weight / gradient");
  opt(c, "--other_op_bytes", p.other_op_bytes, "Optimizer-state bytes per parameter besides the master weights");
  opt(c, "--flash_attn", p.flash_attn, "Flash attention (true/false)");
  opt(c, "--softmax_dropout", p.softmax_dropout, "Dropout after softmax (true/false)");
  opt(c, "--mlp_activation_quant_bits", p.mlp_activation_quant_bits, "Bits of all MLP activations");
  opt(c, "--mlp_1linear_quant_bits", p.mlp_1linear_quant_bits, "Bits of the first MLP GEMM's input");
  opt(c, "--mlp_gelu_input_quant_bits", p.mlp_gelu_input_quant_bits, "Bits of the GeLU input");
  opt(c, "--mlp_2linear_quant_bits", p.mlp_2linear_quant_bits, "Bits of the second MLP GEMM's input");
  opt(c, "--mlp_recompute_gelu", p.mlp_recompute_gelu, "Recompute GeLU in backward (true/false)");
  opt(c, "--achieved_tflops", p.achieved_tflops, "Achieved TFLOP/s per GPU (overrides flops_efficiency)");
  opt(c, "--flops_efficiency", p.flops_efficiency, "FLOP efficiency in (0, 1] (default 1)");
  opt(c, "--hbm_memory_efficiency", p.hbm_memory_efficiency, "HBM efficiency in (0, 1] (default 1)");
  opt(c, "--intra_node_memory_efficiency", p.intra_node_memory_efficiency, "NVLink efficiency in (0, 1]");
  opt(c, "--inter_node_memory_efficiency", p.inter_node_memory_efficiency, "Network efficiency in (0, 1]");
  opt(c, "--num_gpus_per_node", p.num_gpus_per_node, "GPUs per node (tp_size must not exceed it)");
  c->add_flag("--allow-oom", a.allow_oom,
              "Exit 0 even when estimated_peak_memory_per_gpu exceeds the GPU memory (else exit status 3)");
}

inline void add_infer(CLI::App* parent, llm_analysis_args& a) {
  auto* c = a.infer = parent->add_subcommand("infer", "llm-analysis infer(): prefill/decode latency, KV cache, cost");
  add_common(c, a);
  auto& p = a.infer_params;
  opt(c, "--batch_size_per_gpu", p.batch_size_per_gpu, "Batch size (default 1)");
  opt(c, "--ds_zero", a.infer_ds_zero, "DeepSpeed ZeRO stage 0-3");
  opt(c, "--dp_size", p.dp_size, "Data-parallel size (default 1)");
  opt(c, "--tp_size", p.tp_size, "Tensor-parallel size (default 1)");
  opt(c, "--pp_size", p.pp_size, "Pipeline-parallel size (default 1)");
  opt(c, "--sp_size", p.sp_size, "Sequence-parallel size (default tp_size)");
  opt(c, "--seq_len", p.seq_len, "Prompt tokens (default 512)");
  opt(c, "--num_tokens_to_generate", p.num_tokens_to_generate, "Generated tokens (default 32)");
  opt(c, "--use_kv_cache", p.use_kv_cache, "Use a KV cache (true/false, default true)");
  opt(c, "--layernorm_dtype_bytes", p.layernorm_dtype_bytes, "Bytes per norm activation (default 2)");
  opt(c, "--kv_cache_dtype_bytes", p.kv_cache_dtype_bytes, "Bytes per KV-cache element (default: activation width)");
  opt(c, "--achieved_tflops", p.achieved_tflops, "Achieved TFLOP/s per GPU (overrides flops_efficiency)");
  opt(c, "--achieved_memory_bandwidth_GBs", p.achieved_memory_bandwidth_GBs,
      "Achieved HBM GB/s (overrides hbm_memory_efficiency)");
  opt(c, "--flops_efficiency", p.flops_efficiency, "FLOP efficiency in (0, 1] (default 1)");
  opt(c, "--hbm_memory_efficiency", p.hbm_memory_efficiency, "HBM efficiency in (0, 1] (default 1)");
  opt(c, "--intra_node_memory_efficiency", p.intra_node_memory_efficiency, "NVLink efficiency in (0, 1]");
  opt(c, "--inter_node_memory_efficiency", p.inter_node_memory_efficiency, "Network efficiency in (0, 1]");
  opt(c, "--cost_per_gpu_hour", p.cost_per_gpu_hour, "Dollars per GPU-hour: cost per 1000 tokens");
}

/// A summary value for people: bytes in KiB..TiB, seconds in us..days, counts in K..T (as
/// llm-analysis's readable summary does), the rest as it is.
inline std::string readable(std::string_view key, const la::summary_value& v) {
  char text[64];
  const auto scaled = [&](double x, double base, const char* const* units, const char* suffix) {
    int i = 0;
    while (i < 4 && std::fabs(x) >= base) {
      x /= base;
      ++i;
    }
    std::snprintf(text, sizeof text, "%.2f %s%s", x, units[i], suffix);
    return std::string(text);
  };
  switch (v.type) {
    case la::summary_value::kind::null:
      return "None";
    case la::summary_value::kind::flag:
      return v.flag ? "True" : "False";
    case la::summary_value::kind::text:
      return std::string(v.text);
    default:
      break;
  }
  const double x = v.as_double();
  static constexpr const char* binary[] = {"", "Ki", "Mi", "Gi", "Ti"};
  static constexpr const char* decimal[] = {"", "K", "M", "G", "T"};
  if (key.find("latency") != std::string_view::npos) {
    if (x >= 86400) return std::snprintf(text, sizeof text, "%.2f days", x / 86400), std::string(text);
    if (x >= 3600) return std::snprintf(text, sizeof text, "%.2f hours", x / 3600), std::string(text);
    if (x >= 60) return std::snprintf(text, sizeof text, "%.2f minutes", x / 60), std::string(text);
    if (x >= 1) return std::snprintf(text, sizeof text, "%.2f s", x), std::string(text);
    if (x >= 1e-3) return std::snprintf(text, sizeof text, "%.2f ms", x * 1e3), std::string(text);
    return std::snprintf(text, sizeof text, "%.2f us", x * 1e6), std::string(text);
  }
  if (key.find("memory") != std::string_view::npos && key.find("efficiency") == std::string_view::npos)
    return scaled(x, 1024, binary, "B");
  if (key.find("efficiency") != std::string_view::npos) {
    std::snprintf(text, sizeof text, "%.6g", x);
    return text;
  }
  if (key.find("num_params") != std::string_view::npos || key.find("num_active_params") != std::string_view::npos ||
      key.find("flops") != std::string_view::npos || key == "total_num_tokens")
    return scaled(x, 1000, decimal, "");
  if (v.type == la::summary_value::kind::integer) return std::to_string(v.integer);
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

inline void print_summary(const la::summary& s, const std::string& format, const char* title) {
  if (format == "json") {
    std::printf("%s\n", llmsim::json::llm_analysis::to_json(s).dump(4).c_str());
    return;
  }
  std::printf("llm-analysis %s summary (llmsim reproduction)\n", title);
  for (const auto& [key, v] : s.items) std::printf("  %s: %s\n", std::string(key).c_str(), readable(key, v).c_str());
}

template <class Enum>
Enum checked_enum(const char* field, std::int64_t v, std::int64_t last) {
  if (v < 0 || v > last)
    llmsim::detail::report_error("llmsim llm-analysis", field, "{}={} must be in [0, {}]", field, v, last);
  return static_cast<Enum>(v);
}

}  // namespace detail

/// Adds `llm-analysis` with its `train` and `infer` subcommands to `app`.
inline CLI::App* add_llm_analysis(CLI::App& app, llm_analysis_args& a) {
  auto* cmd = app.add_subcommand(
      "llm-analysis",
      "llm-analysis (cli99/llm-analysis) reproduced: train / infer with its flag names and summary keys.");
  cmd->require_subcommand(1);
  detail::add_train(cmd, a);
  detail::add_infer(cmd, a);
  return cmd;
}

/// Runs the parsed subcommand; `does_not_fit` is the exit status for a job that does not fit in
/// GPU memory (an llm-analysis inference assertion, or a training peak above the device memory).
inline int run_llm_analysis(llm_analysis_args& a, int does_not_fit) {
  namespace lj = llmsim::json::llm_analysis;
  const bool train = a.train->parsed();
  const auto model = lj::find_model_config(a.configs, a.model_name);
  const auto gpu = lj::find_gpu_config(a.configs, a.gpu_name);
  const auto dtype = lj::find_dtype_config(a.configs, a.dtype_name);
  if (train) {
    a.train_params.activation_recomputation =
        detail::checked_enum<la::activation_recomputation>("activation_recomputation", a.activation_recomputation, 4);
    a.train_params.ds_zero = detail::checked_enum<la::ds_zero>("ds_zero", a.train_ds_zero, 3);
    const auto s = la::training(model, gpu, dtype, a.train_params);
    detail::print_summary(s, a.format, "train");
    const double device = gpu.mem_per_GPU_in_GB * 1073741824.0;
    if (s["estimated_peak_memory_per_gpu"] <= device || a.allow_oom) return 0;
    std::fprintf(stderr,
                 "llmsim: estimated_peak_memory_per_gpu %.2f GiB exceeds mem_per_GPU_in_GB %g of %s (exit status "
                 "%d; --allow-oom exits 0)\n",
                 s["estimated_peak_memory_per_gpu"] / 1073741824.0, gpu.mem_per_GPU_in_GB,
                 std::string(gpu.name.view()).c_str(), does_not_fit);
    return does_not_fit;
  }
  a.infer_params.ds_zero = detail::checked_enum<la::ds_zero>("ds_zero", a.infer_ds_zero, 3);
  la::summary s;
  try {
    s = la::inference(model, gpu, dtype, a.infer_params);
  } catch (const llmsim::config_error& e) {
    if (e.field() != la::detail::does_not_fit_field) throw;
    std::fprintf(stderr, "error: %s\n", e.what());
    if (a.format == "json") {
      llmsim::json::value out = {{"error", {{"message", e.what()}, {"field", e.field()}, {"api", e.api()}}},
                                 {"exit_status", does_not_fit}};
      std::printf("%s\n", out.dump(2).c_str());
    }
    return does_not_fit;
  }
  detail::print_summary(s, a.format, "infer");
  return 0;
}

}  // namespace llmsim_cli
