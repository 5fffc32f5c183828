/// \file llmsim/cost/compute_cost.hpp
/// Time of one kernel on one accelerator: a roofline over its floating-point work and the bytes it
/// moves, with the efficiency looked up by exact shape key in the system file
/// (`accelerator.op.<kind>.accurate_efficient_factor`), else interpolated between the measured
/// shapes around it, else the kernel model's, else the kind's `efficient_factor`.
#pragma once

#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/spec/system.hpp>

#include <string_view>

LLMSIM_BEGIN_NAMESPACE

/// Bytes per second of `gbps` as the system format means it: GB/s with GB = 2^30 bytes.
constexpr double format_gbps_to_bytes_per_second(double gbps) { return gbps * 1073741824.0; }

/// The `accelerator.op` entry a kernel of `kind` uses: its own, else `default`.
constexpr const compute_op_spec& compute_entry(const system_spec& sys, compute_kind kind) {
  const auto& own = sys.op(kind);
  return own.present ? own : sys.op(compute_kind::default_kind);
}
/// The `accelerator.bandwidth` entry a memory-bound kernel of `kind` uses: its own, else `default`.
constexpr const bandwidth_spec& memory_entry(const system_spec& sys, memory_kind kind) {
  const auto& own = sys.memory(kind);
  return own.present ? own : sys.memory(memory_kind::default_kind);
}

/// The time of one kernel and how it was obtained.
struct kernel_cost {
  seconds time{};             ///< max(compute, memory): the roofline
  seconds compute{};          ///< flops / (peak * efficiency)
  seconds memory{};           ///< bytes / (HBM bandwidth * efficiency) + launch latency
  double efficiency = 0;      ///< the compute efficiency used
  bool measured = false;      ///< the efficiency came from the shape-keyed table
  bool interpolated = false;  ///< ... else from its measured shapes around this one
  bool modelled = false;      ///< ... else from the system's kernel model (cost/kernel_model.hpp)
};

/// Compute-bound part: flops / (tflops * 1e12 * efficiency). The efficiency is the table's for
/// `shape`, else interpolated between the table's shapes around it (efficiency_table::interpolate),
/// else `modelled` when positive (the kernel model's), else the kind's efficient_factor.
/// `counted_share`: the share of the measured convention's work that `flop_count` counts (an
/// attention call counting only its causal pairs, where tables and efficient factors count every
/// pair as SimuMax measures training): the same kernel time needs the efficiency times that share.
/// `modelled` carries it already. Zero work costs nothing.
constexpr kernel_cost compute_cost(const system_spec& sys, compute_kind kind, double flop_count, std::string_view shape,
                                   double modelled = 0, double counted_share = 1) {
  kernel_cost c;
  if (flop_count <= 0) return c;
  const auto& op = compute_entry(sys, kind);
  const auto measured = op.accurate_efficient_factor.find(shape);
  const auto between = measured ? std::nullopt : op.accurate_efficient_factor.interpolate(shape);
  c.measured = measured.has_value();
  c.interpolated = between.has_value();
  c.modelled = !c.measured && !c.interpolated && modelled > 0;
  c.efficiency = c.modelled ? modelled
                            : (measured  ? *measured
                               : between ? *between
                                         : op.efficient_factor) *
                                  counted_share;
  if (c.efficiency <= 0)
    detail::report_error(
        "llmsim::estimate", "system.accelerator.op.efficient_factor",
        "system.accelerator.op.{}.efficient_factor is 0 and no efficiency is measured for shape \"{}\"",
        compute_kind_names[static_cast<std::size_t>(kind)], shape);
  c.compute = seconds{flop_count / (op.tflops * 1e12 * c.efficiency)};
  c.time = c.compute;
  return c;
}

/// Memory-bound part: bytes / (gbps * 2^30 * efficiency) plus the entry's per-kernel latency
/// (SimuMax system format: `latency_us` is paid by every kernel that touches memory).
constexpr seconds memory_time(const system_spec& sys, memory_kind kind, double byte_count) {
  if (byte_count <= 0) return {};
  const auto& bw = memory_entry(sys, kind);
  return seconds{byte_count / (format_gbps_to_bytes_per_second(bw.gbps) * bw.efficient_factor) + bw.latency_us * 1e-6};
}

/// The bf16 op kind a low-precision kind is the faster twin of (matmul for fp8_matmul and
/// fp4_matmul, group_matmul for the grouped ones); any other kind is its own.
constexpr compute_kind bf16_twin(compute_kind kind) {
  switch (kind) {
    case compute_kind::fp8_matmul:
    case compute_kind::fp4_matmul:
      return compute_kind::matmul;
    case compute_kind::fp8_group_matmul:
    case compute_kind::fp4_group_matmul:
      return compute_kind::group_matmul;
    default:
      return kind;
  }
}

/// Dense tensor-core peak of a low-precision kind over BF16 dense on compute capability `cc`, from
/// NVIDIA's data sheets: FP8 twice BF16 from Ada/Hopper on (H100 SXM 1979 vs 989 TFLOPS, B200 4.5
/// vs 2.25 PFLOPS), FP4 four times on Blackwell (B200 9 PFLOPS); 0 where the GPU has no such
/// tensor cores (A100 and older: no FP8) or `cc` is unknown.
constexpr double low_precision_speedup(compute_kind kind, double cc) {
  switch (kind) {
    case compute_kind::fp8_matmul:
    case compute_kind::fp8_group_matmul:
      return cc >= 8.9 ? 2.0 : 0.0;
    case compute_kind::fp4_matmul:
    case compute_kind::fp4_group_matmul:
      return cc >= 10 ? 4.0 : 0.0;
    default:
      return 0.0;
  }
}

/// Whether the system's own `accelerator.op.<kind>` entry can price a kernel of `shape`: it is
/// present and has an efficiency measured for the shape (or around it) or a positive efficient_factor.
/// (SimuMax prices an entry with efficient_factor 0 by dividing by it: its shipped B200 file has
/// fp8 entries with `efficient_factor: 0` and no table, i.e. no usable figures.)
constexpr bool entry_prices(const system_spec& sys, compute_kind kind, std::string_view shape) {
  const auto& own = sys.op(kind);
  return own.present && (own.efficient_factor > 0 || own.accurate_efficient_factor.find(shape).has_value() ||
                         own.accurate_efficient_factor.interpolate(shape).has_value());
}

/// A kernel with both work and traffic (`modelled`: as in compute_cost): `roofline` mode takes the
/// larger; `only_compute` takes the compute time unless there is none. `modelled_quadrature` (a
/// GEMM): when the kernel model gave the efficiency, the compute time and the time to stream the
/// bytes add in quadrature (cost/kernel_model.hpp), never below the roofline's memory time.
constexpr kernel_cost kernel_time(const system_spec& sys, compute_kind kind, double flop_count, std::string_view shape,
                                  memory_kind traffic_kind, double byte_count, double modelled = 0,
                                  double counted_share = 1, bool modelled_quadrature = false) {
  kernel_cost c = compute_cost(sys, kind, flop_count, shape, modelled, counted_share);
  c.memory = memory_time(sys, traffic_kind, byte_count);
  if (sys.accelerator.mode == accelerator_mode::only_compute)
    c.time = c.compute.value > 0 ? c.compute : c.memory;
  else if (c.modelled && modelled_quadrature && c.memory.value > 0) {
    const seconds streaming = c.memory - seconds{memory_entry(sys, traffic_kind).latency_us * 1e-6};
    const seconds joined{detail::hypot_of(c.compute.value, streaming.value)};
    c.time = joined > c.memory ? joined : c.memory;
  } else
    c.time = c.compute > c.memory ? c.compute : c.memory;
  return c;
}

LLMSIM_END_NAMESPACE
