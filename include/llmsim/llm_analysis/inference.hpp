/// \file llmsim/llm_analysis/inference.hpp
/// llm-analysis's inference analysis (analysis.py `infer()` and `LLMAnalysis.inference()`):
/// weight and KV-cache memory, the largest prefill and decode batches, prefill and per-token decode
/// latency, tokens/s and, given a GPU-hour price, dollars per 1000 tokens.
#pragma once

#include <llmsim/llm_analysis/latency.hpp>
#include <llmsim/llm_analysis/setup.hpp>
#include <llmsim/llm_analysis/summary.hpp>

#include <cstdint>
#include <optional>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// The parameters of llm-analysis's `infer()`, by the same names and with the same defaults.
struct inference_params {
  std::int64_t batch_size_per_gpu = 1;
  llm_analysis::ds_zero ds_zero = llm_analysis::ds_zero::NONE;
  std::int64_t dp_size = 1;
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  std::optional<std::int64_t> sp_size;
  std::int64_t seq_len = 512;
  std::int64_t num_tokens_to_generate = 32;
  bool use_kv_cache = true;
  std::int64_t layernorm_dtype_bytes = 2;
  std::optional<double> kv_cache_dtype_bytes;  ///< None: the activation width
  std::optional<double> achieved_tflops;
  std::optional<double> achieved_memory_bandwidth_GBs;  // NOLINT(readability-identifier-naming)
  std::optional<double> flops_efficiency;
  std::optional<double> hbm_memory_efficiency;
  double intra_node_memory_efficiency = 1;
  double inter_node_memory_efficiency = 1;
  std::optional<double> cost_per_gpu_hour;
};

namespace detail {

inline constexpr std::string_view inference_api = "llmsim::llm_analysis::inference";

/// The field an inference that does not fit in GPU memory names (the CLI exits 3 on it).
inline constexpr std::string_view does_not_fit_field = "mem_per_GPU_in_GB";

/// Activations of one forward pass at inference: the largest layer buffer or the logits.
constexpr double inference_activation(const analysis& a, double b, double s, double layernorm_bytes) {
  activation_options o;
  o.layernorm_dtype_bytes = layernorm_bytes;
  const double layer = a.activation_layer(b, s, true, o).total;
  const double logits = a.activation_output_embedding(b, s);
  return layer > logits ? layer : logits;
}

struct inference_memory {
  double weight = 0, weight_embedding = 0, memory_left = 0;
  double prefill_activation = 0, decode_activation = 0, kv_cache = 0;
  std::int64_t prefill_max_batch = 0, decode_max_batch = 0;
};

constexpr inference_memory inference_memory_per_gpu(const analysis& a, const inference_params& p, double kv_bytes) {
  constexpr auto api = inference_api;
  const double b = static_cast<double>(p.batch_size_per_gpu), s = static_cast<double>(p.seq_len);
  const double total_len = static_cast<double>(p.seq_len + p.num_tokens_to_generate);
  const double ln = static_cast<double>(p.layernorm_dtype_bytes);
  inference_memory m;
  // llm-analysis quirk: the layers' weights ignore ZeRO-3 (analysis.py passes ds_zero where the
  // is_sharded flag belongs) while the embedding and last norm are sharded by it
  m.weight_embedding = a.weight_memory_embedding(p.ds_zero, true);
  m.weight = a.weight_memory_layer(ds_zero::NONE, true).total * a.layers_per_gpu() + m.weight_embedding +
             a.weight_memory_last_layernorm(p.ds_zero);
  const double device = a.gpu.mem_per_GPU_in_GB * 1073741824.0;  // GiB
  m.memory_left = device - m.weight;
  if (!(m.memory_left > 0))
    llmsim::detail::report_error(api, does_not_fit_field, "the weights ({} bytes per GPU) do not fit in {}={} GiB",
                                 m.weight, does_not_fit_field, a.gpu.mem_per_GPU_in_GB);
  const double bs1 = inference_activation(a, 1, s, ln);
  m.prefill_max_batch =
      floor_count(api, "prefill_max_batch_size_per_gpu", m.memory_left / bs1, "mem_per_GPU_in_GB and seq_len");
  m.prefill_activation = inference_activation(a, b, s, ln);
  if (!(m.memory_left > m.prefill_activation))
    llmsim::detail::report_error(api, does_not_fit_field,
                                 "prefill activations of batch_size_per_gpu={} ({} bytes) do not fit in the {} bytes "
                                 "{}={} GiB leaves after the weights (largest prefill batch {})",
                                 p.batch_size_per_gpu, m.prefill_activation, m.memory_left, does_not_fit_field,
                                 a.gpu.mem_per_GPU_in_GB, m.prefill_max_batch);
  if (p.use_kv_cache) {
    m.kv_cache = a.kv_cache_layer(b, total_len, kv_bytes) * a.layers_per_gpu();
    m.decode_activation = inference_activation(a, b, 1, ln);
    m.decode_max_batch =
        floor_count(api, "decode_max_batch_size_per_gpu", m.memory_left / ((m.decode_activation + m.kv_cache) / b),
                    "mem_per_GPU_in_GB, seq_len and num_tokens_to_generate");
    if (!(m.memory_left > m.kv_cache + m.decode_activation))
      llmsim::detail::report_error(api, does_not_fit_field,
                                   "KV cache and decode activations of batch_size_per_gpu={} ({} bytes) do not fit in "
                                   "the {} bytes {}={} GiB leaves after the weights (largest decode batch {})",
                                   p.batch_size_per_gpu, m.kv_cache + m.decode_activation, m.memory_left,
                                   does_not_fit_field, a.gpu.mem_per_GPU_in_GB, m.decode_max_batch);
  } else {
    m.decode_max_batch =
        floor_count(api, "decode_max_batch_size_per_gpu", m.memory_left / bs1, "mem_per_GPU_in_GB and seq_len");
    if (p.batch_size_per_gpu > m.decode_max_batch)
      llmsim::detail::report_error(
          api, does_not_fit_field, "batch_size_per_gpu={} exceeds the largest batch {} that fits in {}={} GiB",
          p.batch_size_per_gpu, m.decode_max_batch, does_not_fit_field, a.gpu.mem_per_GPU_in_GB);
    // llm-analysis quirk: without the logits here, unlike the other activation figures
    activation_options o;
    o.layernorm_dtype_bytes = ln;
    m.decode_activation = a.activation_layer(b, total_len, true, o).total;
  }
  return m;
}

constexpr void put_forward(summary& out, std::string_view prefix_kind, const forward_latency& f) {
  const bool prefill = prefix_kind == "prefill";
  out.put(prefill ? "prefill_latency_fwd_attn" : "decode_latency_fwd_attn", f.attn);
  out.put(prefill ? "prefill_latency_fwd_mlp" : "decode_latency_fwd_mlp", f.mlp);
  out.put(prefill ? "prefill_latency_fwd_layernorm" : "decode_latency_fwd_layernorm", f.layernorm);
  out.put(prefill ? "prefill_latency_fwd_tp_comm" : "decode_latency_fwd_tp_comm", f.tp_comm);
  out.put(prefill ? "prefill_latency_fwd_sharded_dp_comm" : "decode_latency_fwd_sharded_dp_comm", f.sharded_dp_comm);
  out.put(prefill ? "prefill_latency_fwd_input_embedding" : "decode_latency_fwd_input_embedding", f.input_embedding);
  out.put(prefill ? "prefill_latency_fwd_output_embedding_loss" : "decode_latency_fwd_output_embedding_loss",
          f.output_embedding_loss);
}

constexpr void put_inference_head(summary& out, const analysis& a, const inference_params& p) {
  const double mlp_total = a.params_mlp() * static_cast<double>(a.model.config.num_layers);
  out.put_int("batch_size_per_gpu", p.batch_size_per_gpu);
  out.put_int("seq_len", p.seq_len);
  out.put_int("tp_size", a.par.tp_size);
  out.put_int("ep_size", a.par.ep_size);
  out.put_int("pp_size", a.par.pp_size);
  out.put_int("num_tokens_to_generate", p.num_tokens_to_generate);
  out.put("num_params_total", a.params_total());
  if (mlp_total == static_cast<double>(static_cast<std::int64_t>(mlp_total)) && mlp_total < 9.0e15) {
    out.put_int("num_params_total_mlp", static_cast<std::int64_t>(mlp_total));
  } else {
    out.put("num_params_total_mlp", mlp_total);
  }
  out.put_int("num_params_total_embedding", a.model.config.hidden_dim * a.model.config.vocab_size);
  out.put("num_params_total_others", a.params_total() - mlp_total - a.params_embedding());
  out.put("num_active_params_total", a.active_params_total());
  out.put("flops_efficiency", a.flops_efficiency);
  out.put("hbm_memory_efficiency", a.hbm_memory_efficiency);
  out.put_int("layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  out.put_flag("use_kv_cache", p.use_kv_cache);
}

constexpr void check_inference_params(const inference_params& p) {
  constexpr auto api = inference_api;
  require_positive(api, "batch_size_per_gpu", p.batch_size_per_gpu);
  require_positive(api, "seq_len", p.seq_len);
  require_positive(api, "num_tokens_to_generate", p.num_tokens_to_generate);
  require_positive(api, "layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  if (p.kv_cache_dtype_bytes && !(*p.kv_cache_dtype_bytes > 0))
    llmsim::detail::report_error(api, "kv_cache_dtype_bytes", "kv_cache_dtype_bytes={} must be > 0",
                                 *p.kv_cache_dtype_bytes);
  if (p.cost_per_gpu_hour && !(*p.cost_per_gpu_hour > 0 && *p.cost_per_gpu_hour <= 1e9))
    llmsim::detail::report_error(api, "cost_per_gpu_hour", "cost_per_gpu_hour={} must be > 0 and <= 1e9",
                                 *p.cost_per_gpu_hour);
}

}  // namespace detail

/// llm-analysis's `infer()`: its summary dict, keys in its order.
constexpr summary inference(const model_config& model, const gpu_config& gpu, const dtype_config& dtype,
                            const inference_params& p) {
  using namespace detail;
  constexpr auto api = inference_api;
  check_inference_params(p);
  const parallelism par{p.tp_size, p.pp_size, p.dp_size, 1, 1, p.sp_size ? *p.sp_size : p.tp_size};
  const analysis a =
      make_analysis(api, model, gpu, dtype, par,
                    {p.achieved_tflops, p.achieved_memory_bandwidth_GBs, p.flops_efficiency, p.hbm_memory_efficiency,
                     p.intra_node_memory_efficiency, p.inter_node_memory_efficiency});
  if (model.max_seq_len && p.seq_len > *model.max_seq_len)
    llmsim::detail::report_error(api, "seq_len", "seq_len={} must be <= max_seq_len={} of {}", p.seq_len,
                                 *model.max_seq_len, model.name);
  const double kv_bytes = p.kv_cache_dtype_bytes ? *p.kv_cache_dtype_bytes : a.act_bytes();
  const inference_memory m = inference_memory_per_gpu(a, p, kv_bytes);
  const double b = static_cast<double>(p.batch_size_per_gpu), s = static_cast<double>(p.seq_len);
  const double g = static_cast<double>(p.num_tokens_to_generate);
  // without a KV cache each new token reruns the sequence: priced at its mean length, (s + g) // 2
  const double decode_len = p.use_kv_cache ? 1.0 : static_cast<double>((p.seq_len + p.num_tokens_to_generate) / 2);
  // llm-analysis quirk: every decode step reads and writes the KV cache of the final length s + g
  const double kv_latency = p.use_kv_cache ? 2 * m.kv_cache / (a.hbm_bandwidth() * giga) : 0.0;
  const forward_latency prefill = latency_forward(a, b, s, true, activation_recomputation::NONE);
  const forward_latency decode = latency_forward(a, b, decode_len, true, activation_recomputation::NONE);
  const double decode_latency = decode.total + kv_latency;
  const double total_decode = decode_latency * g;
  const double per_token = (prefill.total + total_decode) / g;

  summary out;
  put_inference_head(out, a, p);
  out.put("kv_cache_latency", kv_latency);
  out.put("kv_cache_memory_per_gpu", m.kv_cache);
  out.put("weight_memory_per_gpu", m.weight);
  out.put("weight_memory_embedding_per_gpu", m.weight_embedding);
  out.put("prefill_activation_memory_per_gpu", m.prefill_activation);
  out.put_int("prefill_max_batch_size_per_gpu", m.prefill_max_batch);
  out.put("prefill_num_flops_fwd_total", a.flops_fwd_total(b, s));
  out.put("decode_activation_memory_per_gpu", m.decode_activation);
  out.put_int("decode_max_batch_size_per_gpu", m.decode_max_batch);
  out.put("decode_num_flops_fwd_total", a.flops_fwd_total(b, decode_len));
  out.put("prefill_latency", prefill.total);
  put_forward(out, "prefill", prefill);
  out.put("decode_latency", decode_latency);
  put_forward(out, "decode", decode);
  out.put("total_decode_latency", total_decode);
  out.put("total_latency", prefill.total + decode_latency * g);
  out.put("total_per_token_latency", per_token);
  const double prefill_tps = b * s / prefill.total, decode_tps = b / decode_latency, total_tps = b / per_token;
  out.put("prefill_tokens_per_sec", prefill_tps);
  out.put("decode_tokens_per_sec", decode_tps);
  out.put("total_tokens_per_sec", total_tps);
  if (p.cost_per_gpu_hour) {
    // dollars per 1000 tokens on the tp x pp GPUs serving one replica
    const double usd_per_sec = *p.cost_per_gpu_hour * static_cast<double>(p.tp_size * p.pp_size) / 3600;
    out.put("prefill_cost_per_1k_tokens", 1000 * usd_per_sec / prefill_tps);
    out.put("decode_cost_per_1k_tokens", 1000 * usd_per_sec / decode_tps);
    out.put("total_cost_per_1k_tokens", 1000 * usd_per_sec / total_tps);
  }
  return out;
}

}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
