/// \file llmsim/llm_analysis/training.hpp
/// llm-analysis's training analysis (analysis.py `train()` and `LLMAnalysis.training()`): memory per
/// GPU (weights, ZeRO-sharded optimizer states and gradients, activations under a recomputation
/// level), the largest micro-batch that fits, and the iteration time.
///
/// ```cpp
/// llm_analysis::training_params p;
/// p.seq_len = 4096; p.batch_size_per_gpu = 1; p.global_batch_size = 32; p.total_num_gpus = 8;
/// const auto s = llm_analysis::training(model, gpu, dtype, p);
/// double t = s["latency_per_iter"];
/// ```
#pragma once

#include <llmsim/llm_analysis/latency.hpp>
#include <llmsim/llm_analysis/setup.hpp>
#include <llmsim/llm_analysis/summary.hpp>

#include <cstdint>
#include <optional>
#include <utility>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// The parameters of llm-analysis's `train()`, by the same names and with the same defaults (an
/// empty optional is its None). The configs themselves are passed to `training` instead of names.
struct training_params {
  std::optional<std::int64_t> batch_size_per_gpu;
  std::optional<std::int64_t> gradient_accumulation_steps;
  std::optional<std::int64_t> global_batch_size;
  std::optional<std::int64_t> seq_len;
  std::optional<double> total_num_tokens;
  llm_analysis::activation_recomputation activation_recomputation = llm_analysis::activation_recomputation::NONE;
  llm_analysis::ds_zero ds_zero = llm_analysis::ds_zero::NONE;
  bool fwd_prefetch = true;
  bool bwd_prefetch = true;
  std::optional<std::int64_t> dp_size;
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  std::optional<std::int64_t> sp_size;
  std::int64_t ep_size = 1;
  std::optional<std::int64_t> total_num_gpus;
  std::int64_t layernorm_dtype_bytes = 4;
  std::int64_t master_weights_dtype_bytes = 4;
  std::optional<std::int64_t> other_op_bytes;  ///< None: Adam (two fp32 moments besides the master weights)
  bool flash_attn = true;
  bool softmax_dropout = false;
  std::optional<std::int64_t> mlp_activation_quant_bits;
  std::optional<std::int64_t> mlp_1linear_quant_bits;
  std::optional<std::int64_t> mlp_gelu_input_quant_bits;
  std::optional<std::int64_t> mlp_2linear_quant_bits;
  bool mlp_recompute_gelu = false;
  std::optional<double> achieved_tflops;
  std::optional<double> flops_efficiency;
  std::optional<double> hbm_memory_efficiency = 1.0;
  double intra_node_memory_efficiency = 1;
  double inter_node_memory_efficiency = 1;
  std::int64_t num_gpus_per_node = 8;
};

namespace detail {

inline constexpr std::string_view training_api = "llmsim::llm_analysis::training";

/// dp_size, rdp_size and total_num_gpus from what is given (analysis.py `train`): dp_size and
/// total_num_gpus both given make the rest replicated data parallelism.
struct gpu_counts {
  std::int64_t dp = 1, rdp = 1;
  std::optional<std::int64_t> total;
};
constexpr gpu_counts resolve_gpu_counts(const training_params& p) {
  require_positive(training_api, "dp_size", p.dp_size);
  require_positive(training_api, "total_num_gpus", p.total_num_gpus);
  require_positive(training_api, "tp_size", p.tp_size);
  require_positive(training_api, "pp_size", p.pp_size);
  const std::int64_t mp = p.tp_size * p.pp_size;
  gpu_counts c;
  c.total = p.total_num_gpus;
  if (p.total_num_gpus && p.dp_size) {
    if (*p.total_num_gpus % (*p.dp_size * mp) != 0)
      llmsim::detail::report_error(training_api, "total_num_gpus",
                                   "total_num_gpus={} must be a multiple of dp_size * tp_size * pp_size = {}",
                                   *p.total_num_gpus, *p.dp_size * mp);
    c.dp = *p.dp_size;
    c.rdp = *p.total_num_gpus / (*p.dp_size * mp);
  } else if (p.total_num_gpus) {
    if (*p.total_num_gpus % mp != 0)
      llmsim::detail::report_error(training_api, "total_num_gpus",
                                   "total_num_gpus={} must be a multiple of tp_size * pp_size = {}", *p.total_num_gpus,
                                   mp);
    c.dp = *p.total_num_gpus / mp;
  } else if (p.dp_size) {
    c.dp = *p.dp_size;
    c.total = c.dp * mp;
  }
  return c;
}

/// {batch_size_per_gpu, gradient_accumulation_steps, global_batch_size} as analysis.py
/// `config_batch_size_and_gradient_accumulation_steps` completes them (dp counts replicas too).
struct batch_config {
  std::int64_t batch_size_per_gpu = 0, gradient_accumulation_steps = 0, global_batch_size = 0;
};
/// bs x gas x dp, the global batch, refused past max_dimension (it would overflow the counts).
constexpr std::int64_t global_batch_of(std::int64_t bs, std::int64_t gas, std::int64_t dp) {
  const double product = static_cast<double>(bs) * static_cast<double>(gas) * static_cast<double>(dp);
  if (product > static_cast<double>(max_dimension))
    llmsim::detail::report_error(
        training_api, "global_batch_size",
        "batch_size_per_gpu={} x gradient_accumulation_steps={} x dp_size={} = {} must be <= {}", bs, gas, dp, product,
        max_dimension);
  return bs * gas * dp;
}

constexpr batch_config configure_batch(std::int64_t max_batch, std::optional<std::int64_t> bs,
                                       std::optional<std::int64_t> gas, std::optional<std::int64_t> gbs,
                                       std::int64_t dp) {
  constexpr auto api = training_api;
  require_positive(api, "batch_size_per_gpu", bs);
  require_positive(api, "gradient_accumulation_steps", gas);
  require_positive(api, "global_batch_size", gbs);
  if (gbs && bs && gas) {
    if (*gbs != global_batch_of(*bs, *gas, dp))
      llmsim::detail::report_error(api, "global_batch_size",
                                   "global_batch_size={} must equal batch_size_per_gpu * gradient_accumulation_steps * "
                                   "dp_size = {}",
                                   *gbs, global_batch_of(*bs, *gas, dp));
    return {*bs, *gas, *gbs};
  }
  if (gbs && bs) {
    if (*gbs % (*bs * dp) != 0)
      llmsim::detail::report_error(api, "global_batch_size",
                                   "global_batch_size={} must be a multiple of batch_size_per_gpu * dp_size = {}", *gbs,
                                   *bs * dp);
    return {*bs, *gbs / (*bs * dp), *gbs};
  }
  if (gbs && gas) {
    if (*gbs % (*gas * dp) != 0)
      llmsim::detail::report_error(
          api, "global_batch_size",
          "global_batch_size={} must be a multiple of gradient_accumulation_steps * dp_size = {}", *gbs, *gas * dp);
    return {*gbs / (*gas * dp), *gas, *gbs};
  }
  if (bs) return {*bs, gas ? *gas : 1, global_batch_of(*bs, gas ? *gas : 1, dp)};
  if (gbs) {
    if (*gbs % dp != 0)
      llmsim::detail::report_error(api, "global_batch_size", "global_batch_size={} must be a multiple of dp_size={}",
                                   *gbs, dp);
    const std::int64_t per_gpu = *gbs / dp;
    if (max_batch >= per_gpu) return {per_gpu, 1, *gbs};
    // The largest divisor of per_gpu that fits, over the divisor pairs (d, per_gpu / d) with
    // d <= sqrt(per_gpu): at most 46,341 steps for a count bounded by max_dimension.
    std::int64_t best = 0;
    for (std::int64_t d = 1; d <= per_gpu / d; ++d) {
      if (per_gpu % d != 0) continue;
      for (const std::int64_t divisor : {d, per_gpu / d})
        if (divisor <= max_batch && divisor > best) best = divisor;
    }
    if (best > 0) return {best, *gbs / (best * dp), *gbs};
    llmsim::detail::report_error(api, "global_batch_size",
                                 "no micro-batch fits in memory (max_batch_size_per_gpu={}) for global_batch_size={}",
                                 max_batch, *gbs);
  }
  if (max_batch < 1)
    llmsim::detail::report_error(api, "batch_size_per_gpu",
                                 "batch_size_per_gpu not given and no micro-batch fits in memory "
                                 "(max_batch_size_per_gpu={})",
                                 max_batch);
  const std::int64_t g = gas ? *gas : 1;
  return {max_batch, g, global_batch_of(max_batch, g, dp)};
}

/// Bytes per element of an optionally quantized MLP activation (0: the activation width).
constexpr double quant_bytes(std::optional<std::int64_t> bits, std::optional<std::int64_t> all) {
  if (all) return static_cast<double>(*all) / bits_per_byte;
  return bits ? static_cast<double>(*bits) / bits_per_byte : 0.0;
}

/// The model's activations per GPU at micro-batch `b`: all num_layers layers (the first pipeline
/// stage holds p x L/p layers' worth, arXiv:2205.05198 sec. 4.2.3), embeddings and the final norm.
struct model_activation {
  layer_activation layers;  ///< each part times num_layers
  double input_embedding = 0, output_embedding = 0, total = 0;
};
constexpr model_activation activation_per_gpu(const analysis& a, double b, double s, const activation_options& o) {
  const double n = static_cast<double>(a.model.config.num_layers);
  const layer_activation l = a.activation_layer(b, s, false, o);
  model_activation m{{l.total * n, l.attn * n, l.mlp * n, l.layernorm * n}};
  m.input_embedding = a.activation_input_embedding(b, s);
  m.output_embedding = a.activation_output_embedding(b, s);
  m.total =
      m.layers.total + m.input_embedding + m.output_embedding + a.activation_layernorm(b, s, o.layernorm_dtype_bytes);
  return m;
}

/// FLOPs recomputed per micro-batch for a recomputation level.
constexpr double recompute_flops(const analysis& a, double b, double s, activation_recomputation rec) {
  switch (rec) {
    case activation_recomputation::FULL:
      return a.flops_fwd_total(b, s);
    case activation_recomputation::NORM_ATTN_NORM:
    case activation_recomputation::ATTN:
      return a.flops_attn(b, s) * static_cast<double>(a.model.config.num_layers);
    case activation_recomputation::ATTN_COMPUTE:
      return a.flops_attn_compute_total(b, s);
    case activation_recomputation::NONE:
      break;
  }
  return 0;
}

/// Seconds recomputing per micro-batch. llm-analysis quirk: for ATTN_COMPUTE it multiplies the
/// FLOPs of all layers by the stage's layer count again, and divides by tp * pp.
constexpr double recompute_latency(const analysis& a, double b, double s, activation_recomputation rec) {
  const double n = a.layers_per_gpu();
  const double attn = latency_attn(a, b, s, false), mlp = latency_mlp(a, b, s, false, rec);
  const double norm = latency_layernorm(a, b, s);
  switch (rec) {
    case activation_recomputation::FULL:
      return n * (attn + mlp + 2 * norm);
    case activation_recomputation::NORM_ATTN_NORM:
      return n * (attn + 2 * norm);
    case activation_recomputation::ATTN:
      return n * attn;
    case activation_recomputation::ATTN_COMPUTE:
      return n * a.flops_attn_compute_total(b, s) /
             (a.tp() * static_cast<double>(a.par.pp_size) * a.tflops_per_gpu() * tera);
    case activation_recomputation::NONE:
      break;
  }
  return 0;
}

/// Weights, optimizer states and gradients per GPU.
struct state_memory {
  double weight = 0, weight_embedding = 0, weight_attn = 0, weight_mlp = 0, weight_layernorm = 0;
  double unsharded_embedding = 0;
  layer_activation unsharded_layer;
  double optimizer_state = 0, gradient = 0;
};
constexpr state_memory state_memory_per_gpu(const analysis& a, const training_params& p) {
  const double n = a.layers_per_gpu();
  const double master = static_cast<double>(p.master_weights_dtype_bytes);
  const double op = p.other_op_bytes ? static_cast<double>(*p.other_op_bytes) + master : 12.0;  // Adam: 4 + 2 x 4
  state_memory m;
  m.weight_embedding = a.weight_memory_embedding(p.ds_zero, true);
  m.unsharded_embedding = a.weight_memory_embedding(p.ds_zero, false);
  const layer_activation w = a.weight_memory_layer(p.ds_zero, true);
  m.weight_attn = w.attn * n;
  m.weight_mlp = w.mlp * n;
  m.weight_layernorm = w.layernorm * n;
  m.weight = m.weight_embedding + w.total * n + a.weight_memory_last_layernorm(p.ds_zero);
  m.unsharded_layer = a.weight_memory_layer(p.ds_zero, false);
  const auto layer = a.state_memory_layer(p.ds_zero, op, master);
  const auto emb = a.state_memory_block(a.params_embedding(), p.ds_zero, op, master);
  const auto last = a.state_memory_block(a.params_last_layernorm(), p.ds_zero, op, master);
  m.optimizer_state = layer.optimizer_state * n + emb.optimizer_state + last.optimizer_state;
  m.gradient = layer.gradient * n + emb.gradient + last.gradient;
  return m;
}

/// The largest micro-batch whose activations, logits gradient or prefetch buffer fit in what the
/// weights and optimizer states leave (may be <= 0 when nothing fits, as llm-analysis reports it).
constexpr std::int64_t max_micro_batch(const analysis& a, double memory_left, double act_bs1, double prefetch,
                                       double s) {
  const auto fits = [&](std::int64_t m) {
    const double loss = a.activation_output_embedding(static_cast<double>(m), s);
    return !(memory_left < (prefetch > loss ? prefetch : loss) + act_bs1 * static_cast<double>(m));
  };
  const double q = memory_left / act_bs1;
  const std::int64_t top =  // Python's floor division
      floor_count(training_api, "max_batch_size_per_gpu", q, "mem_per_GPU_in_GB, seq_len and the model's sizes");
  // analysis.py steps down from `top` one at a time until it fits; what it needs grows with m, so a
  // doubling then bisecting search finds the same micro-batch in O(log) steps
  if (fits(top)) return top;
  std::int64_t bad = top, step = 1, good = top - 1;
  while (!fits(good)) {
    bad = good;
    step *= 2;
    good = top - step;
  }
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    if (fits(mid)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  return good;
}

/// Memory of the chosen micro-batch and everything that follows from it.
struct training_memory {
  state_memory state;
  double fwd_prefetch = 0, bwd_prefetch = 0, memory_left = 0;
  model_activation act_bs1, act;
  double loss_bwd = 0;
  std::int64_t max_batch = 0;
  batch_config batch;
};

constexpr training_memory training_memory_per_gpu(const analysis& a, const training_params& p,
                                                  const activation_options& o, double s) {
  training_memory m;
  m.state = state_memory_per_gpu(a, p);
  // ZeRO-3 prefetch buffers: the embedding and a layer ahead in the forward pass, one or two layers
  // in the backward pass
  m.fwd_prefetch = m.state.unsharded_embedding + m.state.unsharded_layer.total;
  m.bwd_prefetch = static_cast<double>(int{p.fwd_prefetch} + int{p.bwd_prefetch}) * m.state.unsharded_layer.total;
  const double prefetch = m.fwd_prefetch > m.bwd_prefetch ? m.fwd_prefetch : m.bwd_prefetch;
  m.memory_left = a.gpu.mem_per_GPU_in_GB * 1073741824.0 - m.state.weight - m.state.optimizer_state;  // GiB
  m.act_bs1 = activation_per_gpu(a, 1, s, o);
  m.max_batch = max_micro_batch(a, m.memory_left, m.act_bs1.total, prefetch, s);
  m.batch = configure_batch(m.max_batch, p.batch_size_per_gpu, p.gradient_accumulation_steps, p.global_batch_size,
                            a.par.dp_size * a.par.rdp_size);
  const auto b = static_cast<double>(m.batch.batch_size_per_gpu);
  m.act = m.batch.batch_size_per_gpu == 1 ? m.act_bs1 : activation_per_gpu(a, b, s, o);
  m.loss_bwd = a.activation_output_embedding(b, s);  // the logits' gradient
  return m;
}

/// Iteration time and its parts.
struct training_time {
  double flops_per_micro_batch = 0, latency_per_micro_batch = 0, latency_per_iter = 0;
  double latency_per_iter_using_flops = 0;
  forward_latency fwd;
};

constexpr training_time training_latency(const analysis& a, const training_params& p, double b, double s,
                                         std::int64_t gas, double weight_grad_op_state) {
  training_time t;
  const double fwd_flops = a.flops_fwd_total(b, s);
  // backward = 2 x forward FLOPs
  t.flops_per_micro_batch = fwd_flops + 2 * fwd_flops + recompute_flops(a, b, s, p.activation_recomputation);
  t.latency_per_iter_using_flops = t.flops_per_micro_batch /
                                   (a.tp() * static_cast<double>(a.par.pp_size) * a.tflops_per_gpu() * 1e12) *
                                   static_cast<double>(gas);
  t.fwd = latency_forward(a, b, s, false, p.activation_recomputation);
  // backward priced as twice the forward pass
  t.latency_per_micro_batch = t.fwd.total * 3 + recompute_latency(a, b, s, p.activation_recomputation);
  // the optimizer step reads weights, gradients and states once from HBM
  t.latency_per_iter = t.latency_per_micro_batch * static_cast<double>(gas) + a.seconds_of_hbm(weight_grad_op_state);
  return t;
}

constexpr void put_forward(summary& out, const forward_latency& f) {
  out.put("latency_fwd_attn", f.attn);
  out.put("latency_fwd_mlp", f.mlp);
  out.put("latency_fwd_layernorm", f.layernorm);
  out.put("latency_fwd_tp_comm", f.tp_comm);
  out.put("latency_fwd_sharded_dp_comm", f.sharded_dp_comm);
  out.put("latency_fwd_input_embedding", f.input_embedding);
  out.put("latency_fwd_output_embedding_loss", f.output_embedding_loss);
}

/// A count Python holds as an int when it is one (the MLP and embedding parameter counts).
constexpr void put_count(summary& out, std::string_view key, double v) {
  if (v == static_cast<double>(static_cast<std::int64_t>(v)) && v < 9.0e15) {
    out.put_int(key, static_cast<std::int64_t>(v));
  } else {
    out.put(key, v);
  }
}

constexpr void put_training_counts(summary& out, const analysis& a, const training_params& p, const training_memory& m,
                                   std::int64_t seq) {
  out.put_int("batch_size_per_gpu", m.batch.batch_size_per_gpu);
  out.put_int("max_batch_size_per_gpu", m.max_batch);
  out.put_int("gradient_accumulation_steps", m.batch.gradient_accumulation_steps);
  out.put_int("global_batch_size", m.batch.global_batch_size);
  out.put_int("dp_size", a.par.dp_size);
  out.put_int("rdp_size", a.par.rdp_size);
  out.put_int("tp_size", a.par.tp_size);
  out.put_int("pp_size", a.par.pp_size);
  out.put_int("sp_size", a.par.sp_size);
  out.put_int("ep_size", a.par.ep_size);
  out.put_text("ds_zero", name(p.ds_zero));
  out.put_int("total_num_gpus", a.par.tp_size * a.par.pp_size * a.par.dp_size * a.par.rdp_size);
  out.put_int("seq_len", seq);
  out.put("total_num_tokens", p.total_num_tokens);
  out.put("num_params_total", a.params_total());
  put_count(out, "num_params_total_mlp", a.params_mlp() * static_cast<double>(a.model.config.num_layers));
  put_count(out, "num_params_total_embedding", a.params_embedding());
  out.put("num_params_total_others",
          a.params_total() - a.params_mlp() * static_cast<double>(a.model.config.num_layers) - a.params_embedding());
  out.put("num_active_params_total", a.active_params_total());
  out.put_text("activation_recomputation", name(p.activation_recomputation));
  out.put_int("layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  if (p.mlp_activation_quant_bits) {
    out.put_int("mlp_activation_quant_bits", *p.mlp_activation_quant_bits);
  } else {
    out.put_null("mlp_activation_quant_bits");
  }
  out.put_flag("mlp_recompute_gelu", p.mlp_recompute_gelu);
  out.put_flag("mlp_gated_linear_units", a.model.config.mlp_gated_linear_units);
  out.put("achieved_flops", a.tflops_per_gpu());
  out.put("flops_efficiency", a.flops_efficiency);
  out.put("hbm_memory_efficiency", a.hbm_memory_efficiency);
}

constexpr void put_training_memory(summary& out, const training_memory& m) {
  const auto& st = m.state;
  out.put("weight_memory_per_gpu", st.weight);
  out.put("weight_memory_embedding_per_gpu", st.weight_embedding);
  out.put("weight_memory_attn_per_gpu", st.weight_attn);
  out.put("weight_memory_mlp_per_gpu", st.weight_mlp);
  out.put("weight_memory_layernorm_per_gpu", st.weight_layernorm);
  out.put("unsharded_weight_memory_embedding", st.unsharded_embedding);
  out.put("unsharded_weight_memory_per_layer", st.unsharded_layer.total);
  out.put("unsharded_weight_memory_attn_per_layer", st.unsharded_layer.attn);
  out.put("unsharded_weight_memory_mlp_per_layer", st.unsharded_layer.mlp);
  out.put("unshared_weight_memory_layernorm", st.unsharded_layer.layernorm);  // llm-analysis's spelling
  out.put("gradient_memory_per_gpu", st.gradient);
  out.put("optimizer_state_memory_per_gpu", st.optimizer_state);
  out.put("(weight+op_state)_memory_per_gpu", st.optimizer_state + st.weight);
  out.put("estimated_fwd_prefetch_memory_per_gpu", m.fwd_prefetch);
  out.put("estimated_bwd_prefetch_memory_per_gpu", m.bwd_prefetch);
  out.put("loss_bwd_memory", m.loss_bwd);
  out.put("activation_memory_batch_size_1", m.act_bs1.total);
  out.put("activation_memory_per_gpu", m.act.total);
  out.put("activation_memory_attn_per_gpu", m.act.layers.attn);
  out.put("activation_memory_mlp_per_gpu", m.act.layers.mlp);
  out.put("activation_memory_layernorm_per_gpu", m.act.layers.layernorm);
  out.put("activation_memory_input_embedding_per_gpu", m.act.input_embedding);
  out.put("activation_memory_output_embedding_per_gpu", m.act.output_embedding);
  out.put("(weight+op_state+act)_memory_per_gpu", st.optimizer_state + st.weight + m.act.total);
  out.put("(weight+op_state+grad)_memory_per_gpu", st.weight + st.optimizer_state + st.gradient);
  // llm-analysis quirk: the peak adds the larger of activations and gradients, and of the backward
  // prefetch and the logits' gradient, but not the forward prefetch
  const double act_or_grad = m.act.total > st.gradient ? m.act.total : st.gradient;
  const double bwd_or_loss = m.bwd_prefetch > m.loss_bwd ? m.bwd_prefetch : m.loss_bwd;
  out.put("estimated_peak_memory_per_gpu", st.optimizer_state + st.weight + act_or_grad + bwd_or_loss);
}

}  // namespace detail

/// llm-analysis's `train()`: its summary dict, keys in its order.
constexpr summary training(const model_config& model, const gpu_config& gpu, const dtype_config& dtype,
                           const training_params& p) {
  using namespace detail;
  constexpr auto api = training_api;
  if (p.tp_size > p.num_gpus_per_node)
    llmsim::detail::report_error(api, "tp_size", "tp_size={} must be <= num_gpus_per_node={}", p.tp_size,
                                 p.num_gpus_per_node);
  const gpu_counts gpus = resolve_gpu_counts(p);
  const parallelism par{p.tp_size, p.pp_size, gpus.dp, gpus.rdp, p.ep_size, p.sp_size ? *p.sp_size : p.tp_size};
  const analysis a = make_analysis(api, model, gpu, dtype, par,
                                   {p.achieved_tflops, std::nullopt, p.flops_efficiency, p.hbm_memory_efficiency,
                                    p.intra_node_memory_efficiency, p.inter_node_memory_efficiency});
  const std::int64_t seq = checked_seq_len(api, model, p.seq_len);
  require_positive(api, "layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  require_positive(api, "master_weights_dtype_bytes", p.master_weights_dtype_bytes);
  if (p.other_op_bytes && *p.other_op_bytes < 0)
    llmsim::detail::report_error(api, "other_op_bytes", "other_op_bytes={} must be >= 0", *p.other_op_bytes);
  for (const auto& [field, bits] : {std::pair{"mlp_activation_quant_bits", p.mlp_activation_quant_bits},
                                    std::pair{"mlp_1linear_quant_bits", p.mlp_1linear_quant_bits},
                                    std::pair{"mlp_gelu_input_quant_bits", p.mlp_gelu_input_quant_bits},
                                    std::pair{"mlp_2linear_quant_bits", p.mlp_2linear_quant_bits}})
    require_positive(api, field, bits);
  if (p.total_num_tokens && !(*p.total_num_tokens > 0 && *p.total_num_tokens <= 1e30))
    llmsim::detail::report_error(api, "total_num_tokens", "total_num_tokens={} must be > 0 and <= 1e30",
                                 *p.total_num_tokens);

  activation_options o;
  o.recomputation = p.activation_recomputation;
  o.layernorm_dtype_bytes = static_cast<double>(p.layernorm_dtype_bytes);
  o.flash_attn = p.flash_attn;
  o.softmax_dropout = p.softmax_dropout;
  o.mlp_1linear_bytes = quant_bytes(p.mlp_1linear_quant_bits, p.mlp_activation_quant_bits);
  o.mlp_gelu_input_bytes = quant_bytes(p.mlp_gelu_input_quant_bits, p.mlp_activation_quant_bits);
  o.mlp_2linear_bytes = quant_bytes(p.mlp_2linear_quant_bits, p.mlp_activation_quant_bits);
  o.mlp_recompute_gelu = p.mlp_recompute_gelu;
  o.gated_linear_units = model.mlp_gated_linear_units;
  const auto s = static_cast<double>(seq);
  const training_memory m = training_memory_per_gpu(a, p, o, s);
  const auto b = static_cast<double>(m.batch.batch_size_per_gpu);
  const double state = m.state.weight + m.state.optimizer_state + m.state.gradient;
  const training_time t = training_latency(a, p, b, s, m.batch.gradient_accumulation_steps, state);

  summary out;
  put_training_counts(out, a, p, m, seq);
  out.put("num_flops_total_per_micro_batch", t.flops_per_micro_batch);
  put_training_memory(out, m);
  out.put("latency_per_micro_batch", t.latency_per_micro_batch);
  out.put("latency_fwd", t.fwd.total);
  put_forward(out, t.fwd);
  out.put("latency_per_iter", t.latency_per_iter);
  out.put("device_tokens_per_sec", python_round2(s * b / t.latency_per_iter));
  std::optional<double> total, total_flops, gpu_hours;
  if (p.total_num_tokens) {
    // whole iterations: floor(tokens / (global batch x seq_len))
    const double iters = python_floor(*p.total_num_tokens / (static_cast<double>(m.batch.global_batch_size) * s));
    total = t.latency_per_iter * iters;
    total_flops = t.latency_per_iter_using_flops * iters;
    gpu_hours = *total * static_cast<double>(par.tp_size * par.pp_size * par.dp_size * par.rdp_size) / 3600;
  }
  out.put("total_training_latency", total);
  out.put("latency_per_iter_using_flops", t.latency_per_iter_using_flops);
  out.put("total_training_latency_using_flops", total_flops);
  out.put("gpu_hours", gpu_hours);
  return out;
}
}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
