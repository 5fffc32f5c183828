/// \file llmsim/llm_analysis/configs.hpp
/// The three configs of llm-analysis (github.com/cli99/llm-analysis, llm_analysis/config.py at
/// commit d841e40): a model, a GPU and a data-type config, with the fields and defaults of its
/// `ModelConfig`, `GPUConfig` and `DtypeConfig`, so that its JSON files load unchanged
/// (<llmsim/json/llm_analysis.hpp>). Plain aggregates: usable in constant expressions.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/spec/model.hpp>

#include <cstdint>
#include <optional>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// A transformer as llm-analysis describes it (config.py `ModelConfig`). Unset optionals take the
/// defaults of `resolve`.
struct model_config {
  fixed_string<128> name;
  std::int64_t num_layers = 0;
  std::int64_t n_head = 0;
  std::int64_t hidden_dim = 0;
  std::int64_t vocab_size = 0;
  std::optional<std::int64_t> max_seq_len;
  std::optional<std::int64_t> num_key_value_heads;  ///< GQA; defaults to n_head
  std::optional<double> ffn_embed_dim;              ///< defaults to hidden_dim * expansion_ratio (4)
  std::optional<double> expansion_ratio;            ///< defaults to ffn_embed_dim / hidden_dim
  fixed_string<64> model_type;
  std::int64_t moe_num_experts = 1;
  std::int64_t moe_top_k = 1;
  bool mlp_gated_linear_units = false;
};

/// A GPU (config.py `GPUConfig`); missing integer peaks default to 2x / 4x the FP16 peak.
struct gpu_config {
  fixed_string<64> name;
  double mem_per_GPU_in_GB = 0;  // NOLINT(readability-identifier-naming): llm-analysis's field name
  double hbm_bandwidth_in_GB_per_sec = 0;
  double intra_node_bandwidth_in_GB_per_sec = 0;
  double intra_node_min_message_latency = 0;
  double peak_fp16_TFLOPS = 0;                      // NOLINT(readability-identifier-naming)
  std::optional<double> peak_i8_TFLOPS;             // NOLINT(readability-identifier-naming)
  std::optional<double> peak_i4_TFLOPS;             // NOLINT(readability-identifier-naming)
  double inter_node_bandwidth_in_GB_per_sec = 200;  // config.py: 200 Gb/s HDR InfiniBand assumed
};

/// Bits of the weights, activations and embedding (config.py `DtypeConfig`, e.g. "w4a16e16").
struct dtype_config {
  fixed_string<32> name{"w16a16e16"};
  std::int64_t weight_bits = 16;
  std::int64_t activation_bits = 16;
  std::int64_t embedding_bits = 16;
};

/// A model config with its defaults filled in (what config.py's `__post_init__` derives).
struct resolved_model {
  model_config config;
  double ffn_embed_dim = 0;
  double expansion_ratio = 0;
  std::int64_t num_key_value_heads = 0;
  double num_key_value_groups = 0;  ///< n_head / num_key_value_heads (a float in llm-analysis)
};

/// Fills the defaults and checks what the formulas divide by.
constexpr resolved_model resolve(const model_config& m) {
  constexpr std::string_view api = "llmsim::llm_analysis::model_config";
  if (m.num_layers < 1) llmsim::detail::report_error(api, "num_layers", "num_layers={} must be >= 1", m.num_layers);
  if (m.n_head < 1) llmsim::detail::report_error(api, "n_head", "n_head={} must be >= 1", m.n_head);
  if (m.hidden_dim < 1) llmsim::detail::report_error(api, "hidden_dim", "hidden_dim={} must be >= 1", m.hidden_dim);
  if (m.vocab_size < 1) llmsim::detail::report_error(api, "vocab_size", "vocab_size={} must be >= 1", m.vocab_size);
  if (m.moe_num_experts < 1)
    llmsim::detail::report_error(api, "moe_num_experts", "moe_num_experts={} must be >= 1", m.moe_num_experts);
  for (const auto& [field, v] : {std::pair<std::string_view, std::int64_t>{"num_layers", m.num_layers},
                                 {"n_head", m.n_head},
                                 {"hidden_dim", m.hidden_dim},
                                 {"vocab_size", m.vocab_size},
                                 {"moe_num_experts", m.moe_num_experts},
                                 {"max_seq_len", m.max_seq_len.value_or(1)}})
    if (v < 1 || v > max_dimension)
      llmsim::detail::report_error(api, field, "{}={} must be >= 1 and <= {}", field, v, max_dimension);
  if (m.moe_top_k < 1 || m.moe_top_k > m.moe_num_experts)
    llmsim::detail::report_error(api, "moe_top_k", "moe_top_k={} must be in [1, moe_num_experts={}]", m.moe_top_k,
                                 m.moe_num_experts);
  resolved_model r{m};
  const auto h = static_cast<double>(m.hidden_dim);
  if (!m.ffn_embed_dim && !m.expansion_ratio) {
    r.ffn_embed_dim = 4 * h;
    r.expansion_ratio = 4;
  } else if (!m.ffn_embed_dim) {
    r.expansion_ratio = *m.expansion_ratio;
    r.ffn_embed_dim = h * r.expansion_ratio;
  } else {
    r.ffn_embed_dim = *m.ffn_embed_dim;
    r.expansion_ratio = m.expansion_ratio ? *m.expansion_ratio : r.ffn_embed_dim / h;
  }
  if (!(r.ffn_embed_dim > 0))
    llmsim::detail::report_error(api, "ffn_embed_dim", "ffn_embed_dim={} must be > 0", r.ffn_embed_dim);
  r.num_key_value_heads = m.num_key_value_heads ? *m.num_key_value_heads : m.n_head;
  if (r.num_key_value_heads < 1 || m.n_head % r.num_key_value_heads != 0)
    llmsim::detail::report_error(api, "num_key_value_heads", "num_key_value_heads={} must divide n_head={}",
                                 r.num_key_value_heads, m.n_head);
  r.num_key_value_groups = static_cast<double>(m.n_head) / static_cast<double>(r.num_key_value_heads);
  return r;
}

/// The integer-GEMM peaks of a GPU, defaulted as config.py does.
constexpr double peak_i8_tflops(const gpu_config& g) {
  return g.peak_i8_TFLOPS ? *g.peak_i8_TFLOPS : 2 * g.peak_fp16_TFLOPS;
}
constexpr double peak_i4_tflops(const gpu_config& g) {
  return g.peak_i4_TFLOPS ? *g.peak_i4_TFLOPS : 4 * g.peak_fp16_TFLOPS;
}

/// Checks a GPU config: every rate the formulas divide by must be positive.
/// Data-sheet magnitudes a GPU config may state (GB, GB/s, TFLOPS): 1e-6 .. 1e9, far around every
/// real part, so that no latency or batch size overflows (a typo such as 1e308 or 1e-320 is refused).
inline constexpr double min_sheet_value = 1e-6, max_sheet_value = 1e9;

constexpr void check_sheet_value(std::string_view api, std::string_view field, double v) {
  if (!(v >= min_sheet_value && v <= max_sheet_value))
    llmsim::detail::report_error(api, field, "{}={} must be in [{}, {}]", field, v, min_sheet_value, max_sheet_value);
}

constexpr void check(const gpu_config& g) {
  constexpr std::string_view api = "llmsim::llm_analysis::gpu_config";
  check_sheet_value(api, "mem_per_GPU_in_GB", g.mem_per_GPU_in_GB);
  check_sheet_value(api, "hbm_bandwidth_in_GB_per_sec", g.hbm_bandwidth_in_GB_per_sec);
  check_sheet_value(api, "intra_node_bandwidth_in_GB_per_sec", g.intra_node_bandwidth_in_GB_per_sec);
  check_sheet_value(api, "inter_node_bandwidth_in_GB_per_sec", g.inter_node_bandwidth_in_GB_per_sec);
  if (!(g.intra_node_min_message_latency >= 0 && g.intra_node_min_message_latency <= max_sheet_value))
    llmsim::detail::report_error(api, "intra_node_min_message_latency",
                                 "intra_node_min_message_latency={} must be in [0, {}]",
                                 g.intra_node_min_message_latency, max_sheet_value);
  check_sheet_value(api, "peak_fp16_TFLOPS", g.peak_fp16_TFLOPS);
  // the integer peaks may be 0 (a V100 has no integer tensor cores): checked when a data type uses them
  if (!(peak_i8_tflops(g) >= 0))
    llmsim::detail::report_error(api, "peak_i8_TFLOPS", "peak_i8_TFLOPS={} must be >= 0", peak_i8_tflops(g));
  if (!(peak_i4_tflops(g) >= 0))
    llmsim::detail::report_error(api, "peak_i4_TFLOPS", "peak_i4_TFLOPS={} must be >= 0", peak_i4_tflops(g));
}

/// Checks a data-type config: llm-analysis prices a GEMM at the wider of the weight and activation
/// widths, which must be 4, 8 or 16 bits (analysis.py `get_TFLOPS_per_gpu`).
constexpr void check(const dtype_config& d) {
  constexpr std::string_view api = "llmsim::llm_analysis::dtype_config";
  if (d.weight_bits < 1) llmsim::detail::report_error(api, "weight_bits", "weight_bits={} must be >= 1", d.weight_bits);
  if (d.activation_bits < 1)
    llmsim::detail::report_error(api, "activation_bits", "activation_bits={} must be >= 1", d.activation_bits);
  if (d.embedding_bits < 1)
    llmsim::detail::report_error(api, "embedding_bits", "embedding_bits={} must be >= 1", d.embedding_bits);
  const auto wider = d.weight_bits > d.activation_bits ? d.weight_bits : d.activation_bits;
  if (wider != 4 && wider != 8 && wider != 16)
    llmsim::detail::report_error(api, "weight_bits", "max(weight_bits={}, activation_bits={}) must be 4, 8 or 16",
                                 d.weight_bits, d.activation_bits);
}

}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
