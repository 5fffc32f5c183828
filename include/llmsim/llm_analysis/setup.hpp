/// \file llmsim/llm_analysis/setup.hpp
/// What llm-analysis's `LLMAnalysis.__init__` decides before any formula: the FLOP and HBM
/// efficiencies (an achieved rate given wins over an efficiency) and the sequence-parallel size.
#pragma once

#include <llmsim/llm_analysis/analysis.hpp>
#include <llmsim/spec/model.hpp>

#include <optional>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {
namespace detail {

/// Python's floor of `x` (a double of 2^52 or more is whole already; NaN and infinities stay).
constexpr double python_floor(double x) {
  constexpr double whole_from = 4503599627370496.0;  // 2^52
  if (!(x > -whole_from && x < whole_from)) return x;
  auto f = static_cast<double>(static_cast<std::int64_t>(x));
  return f > x ? f - 1 : f;
}

/// floor(`q`) as a count (a largest batch): refused, naming `field` and what it depends on, when
/// it does not fit a 64-bit integer (a zero-sized activation or a memory of 1e308 GB) instead of
/// the undefined conversion.
constexpr std::int64_t floor_count(std::string_view api, std::string_view field, double q, std::string_view inputs) {
  constexpr double limit = 9.0e18;  // below 2^63
  if (!(q > -limit && q < limit))
    llmsim::detail::report_error(api, field, "{} = {} is beyond a 64-bit count: check {}", field, q, inputs);
  return static_cast<std::int64_t>(python_floor(q));
}

/// The smallest efficiency accepted (see `efficiency`).
inline constexpr double min_efficiency = 1e-6;

/// An efficiency from an achieved rate (over `peak`) or given directly; 1 when neither is given.
constexpr double efficiency(std::string_view api, std::string_view achieved_name, std::optional<double> achieved,
                            std::string_view efficiency_name, std::optional<double> given, double peak) {
  if (achieved && !(*achieved > 0))
    llmsim::detail::report_error(api, achieved_name, "{}={} must be > 0", achieved_name, *achieved);
  if (given && !(*given > 0 && *given <= 1))
    llmsim::detail::report_error(api, efficiency_name, "{}={} must be in (0, 1]", efficiency_name, *given);
  const double e = achieved ? *achieved / peak : given ? *given : 1.0;
  // Below one part in a million every latency overflows to infinity: refused as the typo it is.
  if (!(e >= min_efficiency && e <= 1))
    llmsim::detail::report_error(
        api, achieved ? achieved_name : efficiency_name, "{}={} gives an efficiency {} outside [{}, 1]",
        achieved ? achieved_name : efficiency_name, achieved ? *achieved : e, e, min_efficiency);
  return e;
}

/// A count (sizes, lengths, batches): 1 .. max_dimension, as the other specs bound theirs, so that
/// the sums and products the formulas form stay inside 64-bit integers.
constexpr void require_positive(std::string_view api, std::string_view field, std::int64_t v) {
  if (v < 1 || v > max_dimension)
    llmsim::detail::report_error(api, field, "{}={} must be >= 1 and <= {}", field, v, max_dimension);
}
constexpr void require_positive(std::string_view api, std::string_view field, const std::optional<std::int64_t>& v) {
  if (v) require_positive(api, field, *v);
}

/// The analysis of one run: configs checked, efficiencies and sizes resolved.
struct analysis_inputs {
  std::optional<double> achieved_tflops;
  std::optional<double> achieved_memory_bandwidth_GBs;  // NOLINT(readability-identifier-naming)
  std::optional<double> flops_efficiency;
  std::optional<double> hbm_memory_efficiency;
  double intra_node_memory_efficiency = 1;
  double inter_node_memory_efficiency = 1;
};

constexpr analysis make_analysis(std::string_view api, const model_config& model, const gpu_config& gpu,
                                 const dtype_config& dtype, const parallelism& par, const analysis_inputs& in) {
  check(gpu);
  check(dtype);
  analysis a{resolve(model), gpu, dtype, par};
  require_positive(api, "tp_size", par.tp_size);
  require_positive(api, "pp_size", par.pp_size);
  require_positive(api, "dp_size", par.dp_size);
  require_positive(api, "ep_size", par.ep_size);
  require_positive(api, "sp_size", par.sp_size);
  // The experts' ranks sit inside the data-parallel group: dp / ep replicas of each expert
  // (analysis.py's sharded weight all-gather and ZeRO shards divide by dp_size / ep_size).
  if (par.dp_size % par.ep_size != 0)
    llmsim::detail::report_error(api, "ep_size",
                                 "ep_size={} must divide dp_size={} (the expert-parallel ranks are "
                                 "data-parallel ranks)",
                                 par.ep_size, par.dp_size);
  if (par.pp_size > model.num_layers)
    llmsim::detail::report_error(api, "pp_size", "pp_size={} must be <= num_layers={} of {}", par.pp_size,
                                 model.num_layers, model.name);
  if (par.sp_size > 1 && par.sp_size != par.tp_size)
    llmsim::detail::report_error(api, "sp_size", "sp_size={} must be 1 or tp_size={} (Megatron sequence parallelism)",
                                 par.sp_size, par.tp_size);
  if (!(a.tflops_per_gpu() > 0)) {
    const auto wider = dtype.weight_bits > dtype.activation_bits ? dtype.weight_bits : dtype.activation_bits;
    llmsim::detail::report_error(api, wider == 8 ? "peak_i8_TFLOPS" : "peak_i4_TFLOPS",
                                 "data type {} computes at {} bits, but GPU {} has no such peak ({})", dtype.name,
                                 wider, gpu.name, wider == 8 ? peak_i8_tflops(gpu) : peak_i4_tflops(gpu));
  }
  a.hbm_memory_efficiency =
      efficiency(api, "achieved_memory_bandwidth_GBs", in.achieved_memory_bandwidth_GBs, "hbm_memory_efficiency",
                 in.hbm_memory_efficiency, gpu.hbm_bandwidth_in_GB_per_sec);
  a.flops_efficiency = efficiency(api, "achieved_tflops", in.achieved_tflops, "flops_efficiency", in.flops_efficiency,
                                  gpu.peak_fp16_TFLOPS);
  if (!(in.intra_node_memory_efficiency > 0 && in.intra_node_memory_efficiency <= 1))
    llmsim::detail::report_error(api, "intra_node_memory_efficiency",
                                 "intra_node_memory_efficiency={} must be in (0, 1]", in.intra_node_memory_efficiency);
  if (!(in.inter_node_memory_efficiency > 0 && in.inter_node_memory_efficiency <= 1))
    llmsim::detail::report_error(api, "inter_node_memory_efficiency",
                                 "inter_node_memory_efficiency={} must be in (0, 1]", in.inter_node_memory_efficiency);
  a.intra_node_memory_efficiency = in.intra_node_memory_efficiency;
  a.inter_node_memory_efficiency = in.inter_node_memory_efficiency;
  return a;
}

/// The input sequence length: checked against the model's max_seq_len when it has one.
constexpr std::int64_t checked_seq_len(std::string_view api, const model_config& m, std::optional<std::int64_t> seq) {
  if (!seq) {
    if (!m.max_seq_len)
      llmsim::detail::report_error(api, "seq_len", "seq_len must be given: model {} has no max_seq_len", m.name);
    return *m.max_seq_len;
  }
  require_positive(api, "seq_len", *seq);
  if (m.max_seq_len && *seq > *m.max_seq_len)
    llmsim::detail::report_error(api, "seq_len", "seq_len={} must be <= max_seq_len={} of {}", *seq, *m.max_seq_len,
                                 m.name);
  return *seq;
}

}  // namespace detail
}  // namespace llm_analysis
LLMSIM_END_NAMESPACE
