/// \file llmsim/llm_analysis/analysis.hpp
/// The per-layer formulas of llm-analysis (llm_analysis/analysis.py, class `LLMAnalysis`, commit
/// d841e40): parameter counts, weight / optimizer / gradient / activation bytes, FLOPs and the
/// roofline latencies of one forward pass. `training` and `inference` (their own headers) assemble
/// them the way analysis.py does. Each formula reproduces llm-analysis, including where it is wrong;
/// such places carry a "llm-analysis quirk" comment (listed in README.md, section "llm-analysis, reproduced").
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/llm_analysis/configs.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// analysis.py `ActivationRecomputation`: what the backward pass recomputes.
enum class activation_recomputation : int { NONE = 0, ATTN_COMPUTE = 1, ATTN = 2, NORM_ATTN_NORM = 3, FULL = 4 };
/// analysis.py `DSZeRO`: what DeepSpeed ZeRO shards across the data-parallel group.
enum class ds_zero : int { NONE = 0, STAGE_1 = 1, STAGE_2 = 2, STAGE_3 = 3 };

constexpr std::string_view name(activation_recomputation r) {
  constexpr std::string_view names[] = {"NONE", "ATTN_COMPUTE", "ATTN", "NORM_ATTN_NORM", "FULL"};
  return names[static_cast<int>(r)];
}
constexpr std::string_view name(ds_zero z) {
  constexpr std::string_view names[] = {"NONE", "STAGE_1", "STAGE_2", "STAGE_3"};
  return names[static_cast<int>(z)];
}

/// config.py `ParallelismConfig`: dp_size is the sharded (ZeRO) data-parallel size, rdp_size the
/// replicated one; sp_size is Megatron sequence parallelism (1 or tp_size).
struct parallelism {
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  std::int64_t dp_size = 1;
  std::int64_t rdp_size = 1;
  std::int64_t ep_size = 1;
  std::int64_t sp_size = 1;
};

/// Bytes per byte-sized unit (constant.py BITS_PER_BYTE) and the GB/TFLOPS scales analysis.py uses.
inline constexpr double bits_per_byte = 8;
inline constexpr double giga = 1e9;
inline constexpr double tera = 1e12;

/// Options of the activation-memory formulas that `training` exposes (analysis.py keyword names).
struct activation_options {
  activation_recomputation recomputation = activation_recomputation::NONE;
  double layernorm_dtype_bytes = 4;
  bool flash_attn = true;
  bool softmax_dropout = false;
  double mlp_1linear_bytes = 0;  ///< bytes per element of each MLP input; 0 = the activation width
  double mlp_gelu_input_bytes = 0;
  double mlp_2linear_bytes = 0;
  bool mlp_recompute_gelu = false;
  bool gated_linear_units = false;
};

/// Activation memory of one layer split as llm-analysis reports it.
struct layer_activation {
  double total = 0, attn = 0, mlp = 0, layernorm = 0;
};

/// One forward pass of a layer, by part (seconds), as analysis.py `get_latency_fwd_per_layer`.
struct layer_latency {
  double total = 0, attn = 0, mlp = 0, layernorm = 0, tp_comm = 0, sharded_dp_comm = 0;
};

/// The model, GPU, data types, parallel sizes and efficiencies one analysis runs with.
struct analysis {
  resolved_model model;
  gpu_config gpu;
  dtype_config dtype;
  parallelism par;
  double flops_efficiency = 1;       ///< constant.py FLOPS_EFFICIENCY
  double hbm_memory_efficiency = 1;  ///< constant.py HBM_MEMORY_EFFICIENCY
  double intra_node_memory_efficiency = 1;
  double inter_node_memory_efficiency = 1;

  [[nodiscard]] constexpr double h() const { return static_cast<double>(model.config.hidden_dim); }
  [[nodiscard]] constexpr double vocab() const { return static_cast<double>(model.config.vocab_size); }
  [[nodiscard]] constexpr double experts() const { return static_cast<double>(model.config.moe_num_experts); }
  [[nodiscard]] constexpr double top_k() const { return static_cast<double>(model.config.moe_top_k); }
  [[nodiscard]] constexpr double tp() const { return static_cast<double>(par.tp_size); }
  [[nodiscard]] constexpr double sp() const { return static_cast<double>(par.sp_size); }
  [[nodiscard]] constexpr double ep() const { return static_cast<double>(par.ep_size); }
  [[nodiscard]] constexpr double dp() const { return static_cast<double>(par.dp_size); }
  [[nodiscard]] constexpr double weight_bytes() const { return static_cast<double>(dtype.weight_bits) / bits_per_byte; }
  [[nodiscard]] constexpr double act_bytes() const {
    return static_cast<double>(dtype.activation_bits) / bits_per_byte;
  }
  [[nodiscard]] constexpr double embed_bytes() const {
    return static_cast<double>(dtype.embedding_bits) / bits_per_byte;
  }
  /// Layers held by one pipeline stage: floor(num_layers / pp_size) (analysis.py takes the floor).
  [[nodiscard]] constexpr double layers_per_gpu() const {
    return static_cast<double>(model.config.num_layers / par.pp_size);
  }

  // ---- rates -----------------------------------------------------------------------------------
  [[nodiscard]] constexpr double hbm_bandwidth() const {
    return gpu.hbm_bandwidth_in_GB_per_sec * hbm_memory_efficiency;
  }
  [[nodiscard]] constexpr double intra_node_bandwidth() const {
    return gpu.intra_node_bandwidth_in_GB_per_sec * intra_node_memory_efficiency;
  }
  [[nodiscard]] constexpr double inter_node_bandwidth() const {
    return gpu.inter_node_bandwidth_in_GB_per_sec * inter_node_memory_efficiency;
  }
  /// Achieved TFLOP/s: the peak of the wider of the weight and activation types times the
  /// efficiency (a w4a16 GEMM runs at the FP16 peak).
  [[nodiscard]] constexpr double tflops_per_gpu() const {
    const auto wider = dtype.weight_bits > dtype.activation_bits ? dtype.weight_bits : dtype.activation_bits;
    const double peak = wider == 4 ? peak_i4_tflops(gpu) : wider == 8 ? peak_i8_tflops(gpu) : gpu.peak_fp16_TFLOPS;
    return peak * flops_efficiency;
  }
  [[nodiscard]] constexpr double seconds_of_flops(double flops) const { return flops / (tflops_per_gpu() * tera); }
  [[nodiscard]] constexpr double seconds_of_hbm(double bytes) const { return bytes / (hbm_bandwidth() * giga); }

  // ---- parameters ------------------------------------------------------------------------------
  /// Input embedding only: llm-analysis always ties the output layer to it.
  [[nodiscard]] constexpr double params_embedding() const { return h() * vocab(); }
  /// Q and output projections (h^2 each) plus K and V (h * kv_heads/n_head * h each). llm-analysis
  /// quirk: with fewer KV heads than tp_size it counts tp_size KV heads (the replicated heads),
  /// so the model's parameter count changes with tp_size.
  [[nodiscard]] constexpr double params_attn() const {
    const double kv = static_cast<double>(model.num_key_value_heads);
    double heads_per_gpu = kv / tp();
    if (heads_per_gpu < 1) heads_per_gpu = 1;
    const double kv_heads = heads_per_gpu * tp();
    return 2 * h() * h() + 2 * h() * (h() * kv_heads / static_cast<double>(model.config.n_head));
  }
  /// Two (three with gated linear units) h x ffn matrices per expert.
  [[nodiscard]] constexpr double params_mlp() const {
    return (model.config.mlp_gated_linear_units ? 3.0 : 2.0) * h() * model.ffn_embed_dim * experts();
  }
  [[nodiscard]] constexpr double params_router() const {
    return model.config.moe_num_experts > 1 ? h() * experts() : 0;
  }
  [[nodiscard]] constexpr double params_layernorm() const { return 2 * h(); }  // two norms' scales
  [[nodiscard]] constexpr double params_last_layernorm() const { return h(); }
  [[nodiscard]] constexpr double params_layer() const {
    return params_attn() + params_mlp() + params_router() + params_layernorm();
  }
  [[nodiscard]] constexpr double params_total() const {
    return static_cast<double>(model.config.num_layers) * params_layer() + params_embedding() + params_last_layernorm();
  }
  [[nodiscard]] constexpr double active_params_total() const {
    const double layer = params_attn() + params_mlp() * top_k() / experts() + params_router() + params_layernorm();
    return static_cast<double>(model.config.num_layers) * layer + params_embedding() + params_last_layernorm();
  }

  // ---- weights, optimizer states, gradients ----------------------------------------------------
  /// Embedding weights per GPU: split by tp, and by dp under ZeRO-3 when `sharded`.
  [[nodiscard]] constexpr double weight_memory_embedding(ds_zero zero, bool sharded) const {
    double m = params_embedding() / tp() * embed_bytes();
    if (sharded && zero == ds_zero::STAGE_3) m /= dp();
    return m;
  }
  /// Weights of one layer {total, attn, mlp, layernorm}; ZeRO-3 shards them by dp (the MLP by
  /// dp/ep) when `sharded`. llm-analysis quirk: the norms are not split by tp.
  [[nodiscard]] constexpr layer_activation weight_memory_layer(ds_zero zero, bool sharded) const {
    const bool z3 = sharded && zero == ds_zero::STAGE_3;
    const double shard = z3 ? dp() : 1, mlp_shard = z3 ? dp() / ep() : 1;
    layer_activation w;
    w.attn = params_attn() * weight_bytes() / tp() / shard;
    w.mlp = (params_mlp() / ep() + params_router()) * weight_bytes() / tp() / mlp_shard;
    w.layernorm = params_layernorm() * weight_bytes() / shard;
    w.total = w.attn + w.mlp + w.layernorm;
    return w;
  }
  [[nodiscard]] constexpr double weight_memory_last_layernorm(ds_zero zero) const {
    double m = params_last_layernorm() * weight_bytes() / tp();
    if (zero == ds_zero::STAGE_3) m /= dp();
    return m;
  }
  /// {optimizer state, gradient} bytes of one layer: Adam keeps `op_bytes` per parameter (fp32
  /// master + two moments = 12 by default), gradients `master_bytes`; ZeRO-1 shards the states by
  /// dp (the MLP by dp/ep), ZeRO-2 the gradients too.
  struct state_and_gradient {
    double optimizer_state = 0, gradient = 0;
  };
  [[nodiscard]] constexpr state_and_gradient state_memory_layer(ds_zero zero, double op_bytes,
                                                                double master_bytes) const {
    const bool z1 = zero >= ds_zero::STAGE_1, z2 = zero >= ds_zero::STAGE_2;
    state_and_gradient s;
    s.optimizer_state = op_bytes * params_mlp() / ep() / tp() / (z1 ? dp() / ep() : 1) +
                        op_bytes * ((params_attn() + params_router()) / tp() + params_layernorm()) / (z1 ? dp() : 1);
    s.gradient = params_mlp() * master_bytes / ep() / tp() / (z2 ? dp() / ep() : 1) +
                 (params_attn() + params_router() + params_layernorm()) * master_bytes / tp() / (z2 ? dp() : 1);
    return s;
  }
  /// The same for a block of `params` split by tp (the embedding, the last norm).
  [[nodiscard]] constexpr state_and_gradient state_memory_block(double params, ds_zero zero, double op_bytes,
                                                                double master_bytes) const {
    state_and_gradient s;
    s.optimizer_state = op_bytes * params / tp();
    if (zero >= ds_zero::STAGE_1) s.optimizer_state /= dp();
    s.gradient = master_bytes * params / tp();
    if (zero >= ds_zero::STAGE_2) s.gradient /= dp();
    return s;
  }

  // ---- activations -----------------------------------------------------------------------------
  /// Attention activations of one layer (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4).
  /// Inference keeps the largest live buffer: max(3 tensors of s*b*h, the attention scores).
  [[nodiscard]] constexpr double activation_attn(double b, double s, bool inference, bool flash_attn,
                                                 bool softmax_dropout, activation_recomputation rec) const {
    const double sbh = s * b * h(), bpa = act_bytes(), heads = static_cast<double>(model.config.n_head);
    if (rec >= activation_recomputation::NORM_ATTN_NORM) return 0;
    if (rec == activation_recomputation::ATTN) return sbh * bpa / sp();
    double scores = 0;
    if (rec == activation_recomputation::NONE) {
      scores = flash_attn ? (2 * sbh + 4 * heads * s * b) * bpa / tp() : 2 * heads * s * s * b * bpa / tp();
      if (softmax_dropout) scores += heads * s * s * b / tp();  // one byte per mask element
    }
    if (inference) {
      const double three = 3 * bpa * sbh / tp();
      return three > scores ? three : scores;
    }
    // input of QKV (sequence-parallel), Q, K, V and the attention output, the scores, and the
    // one-byte attention-dropout mask
    return (sbh / sp() + 4 * sbh / tp()) * bpa + scores + sbh / sp();
  }
  /// MLP activations of one layer (same source): its input, the GeLU input and the second GEMM's
  /// input; MoE adds router/softmax inputs and the top-k dispatched copies.
  [[nodiscard]] constexpr double activation_mlp(double b, double s, bool inference, const activation_options& o) const {
    if (o.recomputation == activation_recomputation::FULL) return 0;
    const double bpa = act_bytes(), sbh = s * b * h(), er = model.expansion_ratio;
    const double b1 = o.mlp_1linear_bytes > 0 ? o.mlp_1linear_bytes : bpa;
    const double bg = o.mlp_gelu_input_bytes > 0 ? o.mlp_gelu_input_bytes : bpa;
    const double b2 = o.mlp_2linear_bytes > 0 ? o.mlp_2linear_bytes : bpa;
    if (inference) {
      const double widest = b1 > bg * er ? b1 : bg * er;
      return widest * sbh * top_k() / tp();
    }
    double m = 0;
    if (model.config.moe_num_experts > 1) {
      m = 2 * bpa * sbh / sp() + b1 * sbh * top_k() + b1 * b * s * top_k() + b1 * sbh * top_k() / sp();
    } else {
      m = bpa * sbh / sp();
    }
    const double wide = er * sbh * top_k() / tp();
    if (o.mlp_recompute_gelu && o.gated_linear_units) {
      m += (1.0 / 3 * bg) * wide;
    } else if (o.mlp_recompute_gelu) {
      m += bg * wide;
    } else {
      m += (bg + b2) * wide;
    }
    return m;
  }
  [[nodiscard]] constexpr double activation_layernorm(double b, double s, double dtype_bytes) const {
    return s * b * h() / sp() * dtype_bytes;
  }
  [[nodiscard]] constexpr double activation_input_embedding(double b, double s) const {
    return h() * b * s * act_bytes() / tp();
  }
  /// The logits.
  [[nodiscard]] constexpr double activation_output_embedding(double b, double s) const {
    return vocab() * b * s * act_bytes() / tp();
  }
  /// One layer's activations: summed in training (one norm less under NORM_ATTN_NORM), the largest
  /// part in inference (buffers reused); FULL recomputation keeps only the layer input.
  [[nodiscard]] constexpr layer_activation activation_layer(double b, double s, bool inference,
                                                            const activation_options& o) const {
    layer_activation a;
    if (o.recomputation == activation_recomputation::FULL) {
      a.total = s * b * h() * act_bytes() / tp();
      a.layernorm = a.total;
      return a;
    }
    a.attn = activation_attn(b, s, inference, o.flash_attn, o.softmax_dropout, o.recomputation);
    a.mlp = activation_mlp(b, s, inference, o);
    const double norm = activation_layernorm(b, s, o.layernorm_dtype_bytes);
    if (inference) {
      a.total = a.attn > a.mlp ? a.attn : a.mlp;
      if (norm > a.total) a.total = norm;
      a.layernorm = norm;
    } else {
      a.layernorm = o.recomputation == activation_recomputation::NORM_ATTN_NORM ? norm : 2 * norm;
      a.total = a.attn + a.mlp + a.layernorm;
    }
    return a;
  }
  /// KV cache of one layer: K and V of every token, at least one KV head per tensor-parallel GPU.
  [[nodiscard]] constexpr double kv_cache_layer(double b, double s, double dtype_bytes) const {
    const double head_dim = h() / static_cast<double>(model.config.n_head);
    double heads_per_gpu = static_cast<double>(model.num_key_value_heads) / tp();
    if (heads_per_gpu < 1) heads_per_gpu = 1;
    return 2 * b * s * head_dim * heads_per_gpu * dtype_bytes;
  }

  // ---- FLOPs -----------------------------------------------------------------------------------
  /// Q and output projections 4bsh^2, K and V 4bsh^2/groups, scores and context 4bs^2h (no causal
  /// halving).
  [[nodiscard]] constexpr double flops_attn(double b, double s) const {
    return 4 * b * s * h() * h() + 4 * b * s * h() * h() / model.num_key_value_groups + 4 * b * s * s * h();
  }
  /// llm-analysis quirk: counts one expert's GEMMs (top-k is ignored) per token.
  [[nodiscard]] constexpr double flops_mlp(double b, double s) const {
    return (model.config.mlp_gated_linear_units ? 6.0 : 4.0) * b * s * h() * h() * model.expansion_ratio;
  }
  [[nodiscard]] constexpr double flops_fwd_total(double b, double s) const {
    return (flops_attn(b, s) + flops_mlp(b, s)) * static_cast<double>(model.config.num_layers) +
           2 * b * s * h() * vocab();
  }
  /// The recomputed score and context GEMMs of all layers (selective recomputation).
  [[nodiscard]] constexpr double flops_attn_compute_total(double b, double s) const {
    return 4 * b * s * s * h() * static_cast<double>(model.config.num_layers);
  }
};

}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
