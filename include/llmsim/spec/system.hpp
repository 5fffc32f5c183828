/// \file llmsim/spec/system.hpp
/// `system_spec`: one accelerator type and the networks between accelerators — field for field the
/// SimuMax system format (docs/system.md of MooreThreads/SimuMax): peak rates and default
/// efficiencies per op kind, measured efficiencies per exact shape key, HBM bandwidth per
/// memory-bound op kind, and network tiers with per-collective scale/offset/efficiency/latency.
///
/// Shape-keyed tables are views (`efficiency_table`) so the same spec type serves a `constexpr`
/// catalogue (views of static arrays) and a file loaded at run time (views of storage the loader
/// owns, see `llmsim::json::system_config`).
#pragma once

#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/spec/fields.hpp>
#include <llmsim/spec/model.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

LLMSIM_BEGIN_NAMESPACE

/// One measured efficiency: the shape key exactly as the system file writes it.
struct shape_efficiency {
  std::string_view shape;
  double efficiency = 0;
};

namespace detail {
/// A shape-key field's value as a positive count ("4096"), or 0 when it is not one ("TN", "bf16").
constexpr double key_count(std::string_view v) {
  const std::optional<std::int64_t> n = decimal_count(v);
  return n ? static_cast<double>(*n) : 0;
}
/// The counts a table interpolates in: a GEMM's m, k, n, a grouped GEMM's M (rows per expert), N
/// and K, an attention's seq_len. Batch, head counts, head dims and expert counts are not: they
/// change the kernel's tiling or its choice, not only how long it runs.
constexpr bool interpolable_count(std::string_view name) {
  for (const std::string_view n : {"m", "k", "n", "M", "N", "K", "seq_len"})
    if (name == n) return true;
  return false;
}
/// Two shape keys with the same fields in the same order ("name=value, name=value, ...") that
/// differ in one field only, an interpolable count in both: that field's position and the two
/// counts.
struct one_field_apart {
  std::size_t field = 0;
  double ours = 0, theirs = 0;
};
constexpr std::optional<one_field_apart> apart_in_one_count(std::string_view ours, std::string_view theirs) {
  std::optional<one_field_apart> found;
  for (std::size_t field = 0;; ++field) {
    const std::size_t end_a = ours.find(", "), end_b = theirs.find(", ");
    const std::string_view a = ours.substr(0, end_a), b = theirs.substr(0, end_b);
    const std::size_t eq_a = a.find('='), eq_b = b.find('=');
    if (eq_a == std::string_view::npos || a.substr(0, eq_a) != b.substr(0, eq_b)) return std::nullopt;
    if (a != b) {
      const double x = key_count(a.substr(eq_a + 1)), y = key_count(b.substr(eq_b + 1));
      // A second difference, not counts, or a count not interpolated in.
      if (found || x <= 0 || y <= 0 || !interpolable_count(a.substr(0, eq_a))) return std::nullopt;
      found = one_field_apart{field, x, y};
    }
    if ((end_a == std::string_view::npos) != (end_b == std::string_view::npos)) return std::nullopt;
    if (end_a == std::string_view::npos) return found;
    ours.remove_prefix(end_a + 2);
    theirs.remove_prefix(end_b + 2);
  }
}
}  // namespace detail

/// Remembers at run time what efficiency_table::interpolate found for each shape: a search prices
/// the same shapes many times over, and each answer scans the whole table. A loaded system file's
/// tables carry one (json::system_config); it must be safe to share between threads.
struct interpolation_memo {
  interpolation_memo() = default;
  interpolation_memo(const interpolation_memo&) = delete;
  interpolation_memo& operator=(const interpolation_memo&) = delete;
  virtual ~interpolation_memo() = default;
  /// nullopt when `shape` was not asked before; else what was found (nullopt: nothing).
  [[nodiscard]] virtual std::optional<std::optional<double>> recall(std::string_view shape) const = 0;
  virtual void remember(std::string_view shape, std::optional<double> found) const = 0;
};

/// A view of measured efficiencies sorted by key (the loader sorts; catalogue tables are written sorted).
struct efficiency_table {
  /// The widest pair of measured counts interpolated across (upper / lower). Chosen on SimuMax's
  /// tables, each GEMM held out in turn: B200 (514 GEMMs) mean / max |error| 9.7 / 80.9 %
  /// unbounded (346 interpolable), 9.7 / 80.9 % within 16, 9.2 / 63.8 % within 8 (285), 9.8 /
  /// 63.8 % within 4; A100 (183) 3.1 / 29.8 % unbounded (120), 3.1 / 29.8 % within 8 (111). Wider
  /// gaps fall to the kernel model.
  static constexpr double max_interpolation_ratio = 8;

  const shape_efficiency* entries = nullptr;
  std::size_t count = 0;
  const interpolation_memo* memo = nullptr;  ///< at run time, interpolate's answers so far (none: scan each time)

  [[nodiscard]] constexpr const shape_efficiency* begin() const { return entries; }
  [[nodiscard]] constexpr const shape_efficiency* end() const { return entries + count; }
  [[nodiscard]] constexpr std::size_t size() const { return count; }
  [[nodiscard]] constexpr bool empty() const { return count == 0; }
  /// The efficiency measured for exactly `shape`, if any (binary search; O(log n)).
  [[nodiscard]] constexpr std::optional<double> find(std::string_view shape) const {
    std::size_t lo = 0, hi = count;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (entries[mid].shape < shape)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < count && entries[lo].shape == shape) return entries[lo].efficiency;
    return std::nullopt;
  }
  /// For a shape the table lacks: the efficiency between the nearest measured shapes below and
  /// above it that differ from it in one count only (detail::interpolable_count), linear in that
  /// count's logarithm, if they lie within max_interpolation_ratio of each other. Where several
  /// counts have such shapes on both sides, the one whose two lie closest (smallest ratio); the
  /// mean of those that tie. nullopt otherwise.
  [[nodiscard]] constexpr std::optional<double> interpolate(std::string_view shape) const {
    if (count == 0) return std::nullopt;
    if (std::is_constant_evaluated() || memo == nullptr) return interpolate_by_scan(shape);
    if (const auto known = memo->recall(shape)) return *known;
    const std::optional<double> found = interpolate_by_scan(shape);
    memo->remember(shape, found);
    return found;
  }
  /// interpolate(), scanning the table.
  [[nodiscard]] constexpr std::optional<double> interpolate_by_scan(std::string_view shape) const {
    constexpr std::size_t max_fields = 16;
    struct side {
      double count = 0, efficiency = 0;
    };
    std::array<side, max_fields> below{}, above{};
    std::array<double, max_fields> ours{};  // the shape's own count in each field
    for (const shape_efficiency& e : *this) {
      const auto d = detail::apart_in_one_count(shape, e.shape);
      if (!d || d->field >= max_fields) continue;
      ours[d->field] = d->ours;
      side& lower = below[d->field];
      side& upper = above[d->field];
      if (d->theirs < d->ours && d->theirs > lower.count) lower = {d->theirs, e.efficiency};
      if (d->theirs > d->ours && (upper.count == 0 || d->theirs < upper.count)) upper = {d->theirs, e.efficiency};
    }
    double best_span = 0, sum = 0;  // the closest pairs' span, and their interpolations' sum
    int ties = 0;
    for (std::size_t f = 0; f < max_fields; ++f) {
      if (below[f].count == 0 || above[f].count == 0) continue;
      if (above[f].count > max_interpolation_ratio * below[f].count) continue;
      const double ratio = above[f].count / below[f].count, span = detail::log2_of(ratio);
      if (ties > 0 && span > best_span * (1 + 1e-12)) continue;
      if (ties == 0 || span < best_span * (1 - 1e-12)) ties = 0, sum = 0, best_span = span;
      const double t = detail::log2_of(ours[f] / below[f].count) / span;
      sum += below[f].efficiency + (above[f].efficiency - below[f].efficiency) * t;
      ++ties;
    }
    if (ties == 0) return std::nullopt;
    return sum / ties;
  }
  /// Equal when both hold the same keys with the same efficiencies (not the same storage).
  friend constexpr bool operator==(const efficiency_table& a, const efficiency_table& b) {
    if (a.count != b.count) return false;
    for (std::size_t i = 0; i < a.count; ++i)
      if (a.entries[i].shape != b.entries[i].shape || a.entries[i].efficiency != b.entries[i].efficiency) return false;
    return true;
  }
  [[nodiscard]] constexpr bool is_sorted() const {
    for (std::size_t i = 1; i < count; ++i)
      if (!(entries[i - 1].shape < entries[i].shape)) return false;
    return true;
  }
};

/// A value per communication-group size, e.g. measured bus bandwidth for DP groups of 2 and 4.
struct group_size_table {
  static constexpr std::size_t capacity = 16;
  std::array<std::pair<std::int64_t, double>, capacity> entries{};
  std::size_t count = 0;
  [[nodiscard]] constexpr std::optional<double> find(std::int64_t group_size) const {
    for (std::size_t i = 0; i < count; ++i)
      if (entries[i].first == group_size) return entries[i].second;
    return std::nullopt;
  }
  constexpr void set(std::int64_t group_size, double v) {
    for (std::size_t i = 0; i < count; ++i)
      if (entries[i].first == group_size) {
        entries[i].second = v;
        return;
      }
    if (count == capacity)
      detail::report_error("llmsim::system", "", "a group-size table holds at most {} entries", capacity);
    entries[count++] = {group_size, v};
  }
  [[nodiscard]] constexpr bool empty() const { return count == 0; }
  friend constexpr bool operator==(const group_size_table& a, const group_size_table& b) {
    if (a.count != b.count) return false;
    for (std::size_t i = 0; i < a.count; ++i)
      if (b.find(a.entries[i].first) != a.entries[i].second) return false;
    return true;
  }
};

/// Compute op kinds of `accelerator.op`.
enum class compute_kind : std::uint8_t {
  default_kind,
  matmul,
  fp8_matmul,
  group_matmul,
  fp8_group_matmul,
  sdp_fwd,
  sdp_bwd,
  fp4_matmul,       ///< NVFP4 GEMMs (llmsim's extension of the SimuMax format)
  fp4_group_matmul  ///< NVFP4 grouped GEMMs (likewise)
};
inline constexpr std::array<std::string_view, 9> compute_kind_names{
    "default", "matmul",  "fp8_matmul", "group_matmul",    "fp8_group_matmul",
    "sdp_fwd", "sdp_bwd", "fp4_matmul", "fp4_group_matmul"};

/// Memory-bound op kinds of `accelerator.bandwidth`.
enum class memory_kind : std::uint8_t { default_kind, permute_fwd, permute_bwd, ce, ce_fusion };
inline constexpr std::array<std::string_view, 5> memory_kind_names{"default", "permute_fwd", "permute_bwd", "ce",
                                                                   "ce_fusion"};

/// Collectives of `networks.<tier>.op`.
enum class collective_kind : std::uint8_t { all_reduce, all_gather, reduce_scatter, p2p, all2all };
inline constexpr std::array<std::string_view, 5> collective_kind_names{"all_reduce", "all_gather", "reduce_scatter",
                                                                       "p2p", "all2all"};

/// `accelerator.op.<kind>`: peak rate, efficiency when no shape matches, measured efficiency per shape.
struct compute_op_spec {
  bool present = false;
  double tflops = 0;
  double efficient_factor = 0;
  efficiency_table accurate_efficient_factor = {};
  friend constexpr bool operator==(const compute_op_spec&, const compute_op_spec&) = default;
};

/// `accelerator.bandwidth.<kind>` and `networks.<tier>.bandwidth`.
struct bandwidth_spec {
  bool present = false;
  double gbps = 0;  ///< GB/s as SimuMax uses it: times 2^30 bytes per second
  double efficient_factor = 0;
  double latency_us = 0;
  double fixed_latency = 0;  ///< added once per operation (network tiers)
  group_size_table fixed_latency_us_by_comm_num = {};
  friend constexpr bool operator==(const bandwidth_spec&, const bandwidth_spec&) = default;
};

enum class accelerator_mode : std::uint8_t { invalid, roofline, only_compute };
template <>
struct enum_names<accelerator_mode> {
  static constexpr std::array<std::pair<accelerator_mode, std::string_view>, 3> value{
      {{accelerator_mode::invalid, ""},
       {accelerator_mode::roofline, "roofline"},
       {accelerator_mode::only_compute, "only_compute"}}};
};

/// The architecture whose fitted kernel model (cost/kernel_model.hpp) prices shapes a measured
/// table lacks (llmsim extension `accelerator.kernel_model`); `none`: the op kinds' efficient_factor.
enum class kernel_architecture : std::uint8_t { none, ampere, hopper, blackwell, cdna3, blackwell_ultra };
template <>
struct enum_names<kernel_architecture> {
  static constexpr std::array<std::pair<kernel_architecture, std::string_view>, 6> value{
      {{kernel_architecture::none, "none"},
       {kernel_architecture::ampere, "ampere"},
       {kernel_architecture::hopper, "hopper"},
       {kernel_architecture::blackwell, "blackwell"},
       {kernel_architecture::cdna3, "cdna3"},
       {kernel_architecture::blackwell_ultra, "blackwell_ultra"}}};
};

struct accelerator_spec {
  fixed_string<32> backend = "cuda";
  double mem_gbs = 0;  ///< device memory in GB (SimuMax reads it as GiB: 80 for an 80 GB part)
  std::array<compute_op_spec, compute_kind_names.size()> op{};
  std::array<bandwidth_spec, memory_kind_names.size()> bandwidth{};
  accelerator_mode mode = accelerator_mode::roofline;
  /// CUDA compute capability, e.g. 8.0 (A100), 9.0 (H100), 10.0 (B200); 0 when unknown (llmsim
  /// extension: sizes TransformerEngine's cuBLAS workspaces).
  double compute_capability = 0;
  /// llmsim extension: the fitted kernel model for shapes without a measured efficiency, and the
  /// streaming multiprocessors (CUs) the model spreads attention blocks over (data sheet).
  kernel_architecture kernel_model = kernel_architecture::none;
  std::int64_t sm_count = 0;
  /// llmsim extension: this part's modelled GEMM and grouped-GEMM rates as a multiple of its kernel
  /// model's share of the data-sheet peak: a part whose power limit holds its clocks higher (or
  /// lower) than on the part the model was fitted to, at the same data-sheet peak (1: the same share).
  double gemm_sustained_scale = 1;
  /// llmsim extension: GB/s each way between one GPU and host memory, what activation and optimizer
  /// offload copies cross (0: the PCIe x16 link of its generation, see cost/step_cost.hpp
  /// `host_link_bytes_per_second`; Grace-based parts: NVLink-C2C).
  double host_link_gbs = 0;
  friend constexpr bool operator==(const accelerator_spec&, const accelerator_spec&) = default;
};

/// `networks.<tier>.op.<collective>`: bytes moved = size * scale * (1 + offset / n) for a group of n.
struct collective_spec {
  bool present = false;
  double scale = 1;
  double offset = 0;
  std::optional<double> efficient_factor = {};  ///< absent: the tier's bandwidth.efficient_factor
  std::optional<double> latency_us = {};        ///< absent: the tier's bandwidth.latency_us
  std::optional<double> fixed_latency_us = {};
  group_size_table fixed_latency_us_by_comm_num = {};
  group_size_table dp_fixed_bw = {};  ///< measured GB/s for data-parallel groups of a given size
  friend constexpr bool operator==(const collective_spec&, const collective_spec&) = default;
};

/// The link class of a tier in NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc:
/// NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET). `none`: the tier's fitted latencies (SimuMax format).
enum class nccl_link_kind : std::uint8_t { none, nvlink, pci, net };
template <>
struct enum_names<nccl_link_kind> {
  static constexpr std::array<std::pair<nccl_link_kind, std::string_view>, 4> value{{{nccl_link_kind::none, ""},
                                                                                     {nccl_link_kind::nvlink, "nvlink"},
                                                                                     {nccl_link_kind::pci, "pci"},
                                                                                     {nccl_link_kind::net, "net"}}};
};

/// One network tier such as `high_intra_node` or `inter_node`.
struct network_tier {
  fixed_string<32> name = {};
  /// llmsim extension (`nccl_link`): price this tier's collectives with NCCL's own protocol model
  /// (network_cost.hpp `nccl_collective_time`) instead of the fitted per-step latencies, plus the
  /// tier's `bandwidth.fixed_latency` once per collective call (not per p2p send / receive); the
  /// format's other latencies are refused on such a tier (`detail::validate_nccl_tier`).
  nccl_link_kind nccl_link = nccl_link_kind::none;
  /// llmsim extension (`shared_link`): the tier is one link that every group of a collective's kind
  /// inside a node crosses at once (a PCIe host's inter-socket link): each of the node's
  /// num_per_node / n groups of n ranks gets its share of the bandwidth, and an all-to-all carries
  /// the bytes its ranks send across (network_cost.hpp `shared_link_all2all_factor`).
  bool shared_link = false;
  double processor_usage = 0;
  bandwidth_spec bandwidth = {};
  std::array<collective_spec, collective_kind_names.size()> op{};
  friend constexpr bool operator==(const network_tier&, const network_tier&) = default;
};

/// A cluster: the accelerator and its networks.
struct system_spec {
  static constexpr std::size_t max_networks = 8;
  fixed_string<64> sys_name = "null";
  std::int64_t num_per_node = 8;
  accelerator_spec accelerator = {};
  bool intra_with_pcie = false;  ///< (`networks.intra_with_pcie`) GPUs talk over PCIe inside a node
  bool FC8 = false;  ///< NVLink fully connected among 8 GPUs (SimuMax's name)  // NOLINT(readability-identifier-naming)
  std::array<network_tier, max_networks> networks{};
  std::size_t network_count = 0;

  /// The tier named `name`, or nullptr.
  [[nodiscard]] constexpr const network_tier* network(std::string_view name) const {
    for (std::size_t i = 0; i < network_count; ++i)
      if (networks[i].name.view() == name) return &networks[i];
    return nullptr;
  }
  [[nodiscard]] constexpr const compute_op_spec& op(compute_kind k) const {
    return accelerator.op[static_cast<std::size_t>(k)];
  }
  [[nodiscard]] constexpr const bandwidth_spec& memory(memory_kind k) const {
    return accelerator.bandwidth[static_cast<std::size_t>(k)];
  }
  friend constexpr bool operator==(const system_spec&, const system_spec&) = default;
};

/// The ranges a real device or network can have (issue 15), wide by orders of magnitude around
/// today's parts — A100 312 and B300 about 5,000 dense TFLOP/s, HBM 1.5-8 TB/s, links 25-900 GB/s
/// (SimuMax's system files) — yet finite, so every time and rate an estimate prints stays finite.
namespace system_limits {
inline constexpr double min_tflops = 1e-3;     ///< TFLOP/s: 1 GFLOP/s
inline constexpr double max_tflops = 1e6;      ///< TFLOP/s: 1 EFLOP/s on one device
inline constexpr double min_gbps = 1e-3;       ///< GB/s: 1 MB/s
inline constexpr double max_gbps = 1e6;        ///< GB/s: 1 PB/s
inline constexpr double max_latency_us = 1e6;  ///< one second for one kernel or one message
/// Efficiency factors are fractions of a data-sheet rate; measured ones exceed 1 where a table's
/// convention differs from the data sheet (SimuMax's network tables reach 1.45, its GEMM tables
/// 1.20), never by 2x.
inline constexpr double max_efficient_factor = 2;
inline constexpr double max_mem_gbs = 1e5;           ///< GiB of one device: 100 TiB
inline constexpr double max_collective_scale = 1e3;  ///< bytes moved per byte of a collective's size
}  // namespace system_limits

namespace detail {
/// `v` is finite and in [lo, hi] (in (0, hi] when `lo` is 0 and `zero_allowed` is false).
constexpr bool in_range(double v, double lo, double hi, bool zero_allowed = true) {
  return is_finite(v) && v >= lo && v <= hi && (zero_allowed || v > 0);
}
}  // namespace detail

namespace detail {
/// The error-field names of a bandwidth entry's values (an HBM kind, or a network tier's link).
struct bandwidth_fields {
  std::string_view gbps, efficient_factor, latency_us, fixed_latency, fixed_latency_us_by_comm_num;
};
inline constexpr bandwidth_fields accelerator_bandwidth_fields{
    "system.accelerator.bandwidth.gbps", "system.accelerator.bandwidth.efficient_factor",
    "system.accelerator.bandwidth.latency_us", "system.accelerator.bandwidth.fixed_latency",
    "system.accelerator.bandwidth.fixed_latency_us_by_comm_num"};
inline constexpr bandwidth_fields network_bandwidth_fields{
    "system.networks.bandwidth.gbps", "system.networks.bandwidth.efficient_factor",
    "system.networks.bandwidth.latency_us", "system.networks.bandwidth.fixed_latency",
    "system.networks.bandwidth.fixed_latency_us_by_comm_num"};

/// A bandwidth entry in range. Its dotted path is `head` + `name` + `tail`
/// ("system.networks." "inter_node" ".bandwidth").
constexpr void validate_bandwidth(const bandwidth_spec& bw, std::string_view head, std::string_view name,
                                  std::string_view tail, const bandwidth_fields& f) {
  constexpr std::string_view api = "llmsim::system";
  using namespace system_limits;
  if (!in_range(bw.gbps, min_gbps, max_gbps))
    report_error(api, f.gbps, "{}{}{}.gbps={} must be in [{}, {}] GB/s", head, name, tail, bw.gbps, min_gbps, max_gbps);
  if (!in_range(bw.efficient_factor, 0, max_efficient_factor, false))
    report_error(api, f.efficient_factor, "{}{}{}.efficient_factor={} must be in (0, {}]", head, name, tail,
                 bw.efficient_factor, max_efficient_factor);
  if (!in_range(bw.latency_us, 0, max_latency_us))
    report_error(api, f.latency_us, "{}{}{}.latency_us={} must be in [0, {}] us", head, name, tail, bw.latency_us,
                 max_latency_us);
  if (!in_range(bw.fixed_latency, 0, max_latency_us))
    report_error(api, f.fixed_latency, "{}{}{}.fixed_latency={} must be in [0, {}] us", head, name, tail,
                 bw.fixed_latency, max_latency_us);
  const auto& by_n = bw.fixed_latency_us_by_comm_num;
  for (std::size_t e = 0; e < by_n.count; ++e)
    if (!in_range(by_n.entries[e].second, 0, max_latency_us))
      report_error(api, f.fixed_latency_us_by_comm_num,
                   "{}{}{}.fixed_latency_us_by_comm_num[{}]={} must be in [0, {}] us", head, name, tail,
                   by_n.entries[e].first, by_n.entries[e].second, max_latency_us);
}

/// One collective entry of a network tier in range.
constexpr void validate_collective(const collective_spec& op, std::string_view tier, std::string_view kind) {
  constexpr std::string_view api = "llmsim::system";
  using namespace system_limits;
  if (!in_range(op.scale, 0, max_collective_scale, false))
    report_error(api, "system.networks.op.scale", "system.networks.{}.op.{}.scale={} must be in (0, {}]", tier, kind,
                 op.scale, max_collective_scale);
  if (!in_range(op.offset, -1, 1))
    report_error(api, "system.networks.op.offset", "system.networks.{}.op.{}.offset={} must be in [-1, 1]", tier, kind,
                 op.offset);
  if (op.efficient_factor && !in_range(*op.efficient_factor, 0, max_efficient_factor, false))
    report_error(api, "system.networks.op.efficient_factor",
                 "system.networks.{}.op.{}.efficient_factor={} must be in (0, {}]", tier, kind, *op.efficient_factor,
                 max_efficient_factor);
  if (op.latency_us && !in_range(*op.latency_us, 0, max_latency_us))
    report_error(api, "system.networks.op.latency_us", "system.networks.{}.op.{}.latency_us={} must be in [0, {}] us",
                 tier, kind, *op.latency_us, max_latency_us);
  if (op.fixed_latency_us && !in_range(*op.fixed_latency_us, 0, max_latency_us))
    report_error(api, "system.networks.op.fixed_latency_us",
                 "system.networks.{}.op.{}.fixed_latency_us={} must be in [0, {}] us", tier, kind, *op.fixed_latency_us,
                 max_latency_us);
  for (std::size_t e = 0; e < op.fixed_latency_us_by_comm_num.count; ++e)
    if (!in_range(op.fixed_latency_us_by_comm_num.entries[e].second, 0, max_latency_us))
      report_error(api, "system.networks.op.fixed_latency_us_by_comm_num",
                   "system.networks.{}.op.{}.fixed_latency_us_by_comm_num[{}]={} must be in [0, {}] us", tier, kind,
                   op.fixed_latency_us_by_comm_num.entries[e].first, op.fixed_latency_us_by_comm_num.entries[e].second,
                   max_latency_us);
  for (std::size_t e = 0; e < op.dp_fixed_bw.count; ++e)
    if (!in_range(op.dp_fixed_bw.entries[e].second, min_gbps, max_gbps))
      report_error(api, "system.networks.op.dp_fixed_bw",
                   "system.networks.{}.op.{}.dp_fixed_bw[{}]={} must be in [{}, {}] GB/s", tier, kind,
                   op.dp_fixed_bw.entries[e].first, op.dp_fixed_bw.entries[e].second, min_gbps, max_gbps);
}

/// A tier priced by NCCL's model (`nccl_link`) takes its latencies from that model plus
/// `bandwidth.fixed_latency` per call (network_cost.hpp `collective_time`): the format's per-step
/// and per-op latencies would be ignored, so a tier that sets one (non-zero) is refused by name.
constexpr void validate_nccl_tier(const network_tier& net) {
  constexpr std::string_view api = "llmsim::system";
  if (net.nccl_link == nccl_link_kind::none) return;
  const std::string_view link = enum_name(net.nccl_link);
  const auto any_nonzero = [](const group_size_table& t) {
    for (std::size_t e = 0; e < t.count; ++e)
      if (t.entries[e].second != 0) return true;
    return false;
  };
  if (net.bandwidth.latency_us != 0)
    report_error(api, "system.networks.bandwidth.latency_us",
                 "system.networks.{}.bandwidth.latency_us={} is not used with nccl_link=\"{}\" (NCCL's model prices "
                 "the latencies): set it to 0 or remove nccl_link",
                 net.name, net.bandwidth.latency_us, link);
  if (any_nonzero(net.bandwidth.fixed_latency_us_by_comm_num))
    report_error(api, "system.networks.bandwidth.fixed_latency_us_by_comm_num",
                 "system.networks.{}.bandwidth.fixed_latency_us_by_comm_num is not used with nccl_link=\"{}\" "
                 "(bandwidth.fixed_latency adds one latency per call): remove it or nccl_link",
                 net.name, link);
  for (std::size_t c = 0; c < net.op.size(); ++c) {
    const collective_spec& op = net.op[c];
    const std::string_view kind = collective_kind_names[c];
    if (op.latency_us && *op.latency_us != 0)
      report_error(api, "system.networks.op.latency_us",
                   "system.networks.{}.op.{}.latency_us={} is not used with nccl_link=\"{}\" (NCCL's model prices the "
                   "latencies): remove it or nccl_link",
                   net.name, kind, *op.latency_us, link);
    if (op.fixed_latency_us && *op.fixed_latency_us != 0)
      report_error(api, "system.networks.op.fixed_latency_us",
                   "system.networks.{}.op.{}.fixed_latency_us={} is not used with nccl_link=\"{}\" "
                   "(bandwidth.fixed_latency adds one latency per call): remove it or nccl_link",
                   net.name, kind, *op.fixed_latency_us, link);
    if (any_nonzero(op.fixed_latency_us_by_comm_num))
      report_error(api, "system.networks.op.fixed_latency_us_by_comm_num",
                   "system.networks.{}.op.{}.fixed_latency_us_by_comm_num is not used with nccl_link=\"{}\" "
                   "(bandwidth.fixed_latency adds one latency per call): remove it or nccl_link",
                   net.name, kind, link);
  }
}

/// The network tiers of a system: bandwidths, latencies and collective factors in range.
constexpr void validate_networks(const system_spec& sys) {
  constexpr std::string_view api = "llmsim::system";
  if (sys.network_count == 0)
    report_error(api, "system.networks", "system.networks must define at least one network tier");
  for (std::size_t i = 0; i < sys.network_count; ++i) {
    const auto& net = sys.networks[i];
    if (!in_range(net.processor_usage, 0, 1))
      report_error(api, "system.networks.processor_usage", "system.networks.{}.processor_usage={} must be in [0, 1]",
                   net.name, net.processor_usage);
    validate_bandwidth(net.bandwidth, "system.networks.", net.name.view(), ".bandwidth", network_bandwidth_fields);
    for (std::size_t c = 0; c < net.op.size(); ++c)
      if (net.op[c].present) validate_collective(net.op[c], net.name.view(), collective_kind_names[c]);
    validate_nccl_tier(net);
  }
}

/// One compute entry of the accelerator in range.
constexpr void validate_compute_op(const compute_op_spec& op, std::string_view kind) {
  constexpr std::string_view api = "llmsim::system";
  using namespace system_limits;
  if (!in_range(op.tflops, min_tflops, max_tflops))
    report_error(api, "system.accelerator.op.tflops", "system.accelerator.op.{}.tflops={} must be in [{}, {}] TFLOP/s",
                 kind, op.tflops, min_tflops, max_tflops);
  // 0 is SimuMax's "no flat factor": only the measured shapes price this kind (compute_cost.hpp).
  if (!in_range(op.efficient_factor, 0, max_efficient_factor))
    report_error(api, "system.accelerator.op.efficient_factor",
                 "system.accelerator.op.{}.efficient_factor={} must be in [0, {}]", kind, op.efficient_factor,
                 max_efficient_factor);
  for (const auto& e : op.accurate_efficient_factor)
    if (!in_range(e.efficiency, 0, max_efficient_factor, false))
      report_error(api, "system.accelerator.op.accurate_efficient_factor",
                   "system.accelerator.op.{}.accurate_efficient_factor[\"{}\"]={} must be in (0, {}]", kind, e.shape,
                   e.efficiency, max_efficient_factor);
  if (!op.accurate_efficient_factor.is_sorted())
    report_error(api, "system.accelerator.op.accurate_efficient_factor",
                 "system.accelerator.op.{}.accurate_efficient_factor must be sorted by shape key without duplicates",
                 kind);
}
}  // namespace detail

/// Checks one system on its own.
constexpr void validate(const system_spec& sys) {
  constexpr std::string_view api = "llmsim::system";
  using detail::report_error;
  if (sys.num_per_node < 1 || sys.num_per_node > 1024)
    report_error(api, "system.num_per_node", "system.num_per_node={} must be in [1, 1024]", sys.num_per_node);
  if (!detail::in_range(sys.accelerator.mem_gbs, 0, system_limits::max_mem_gbs, false))
    report_error(api, "system.accelerator.mem_gbs", "system.accelerator.mem_gbs={} must be in (0, {}] GiB",
                 sys.accelerator.mem_gbs, system_limits::max_mem_gbs);
  if (sys.accelerator.kernel_model != kernel_architecture::none &&
      !(sys.accelerator.sm_count >= 1 && sys.accelerator.sm_count <= 100000))
    report_error(api, "system.accelerator.sm_count",
                 "system.accelerator.sm_count={} must be in [1, 100000] when system.accelerator.kernel_model is {}",
                 sys.accelerator.sm_count, enum_name(sys.accelerator.kernel_model));
  if (!(sys.accelerator.sm_count >= 0 && sys.accelerator.sm_count <= 100000))
    report_error(api, "system.accelerator.sm_count",
                 "system.accelerator.sm_count={} must be in [0, 100000] (0: unknown)", sys.accelerator.sm_count);
  if (!detail::in_range(sys.accelerator.gemm_sustained_scale, 0, system_limits::max_efficient_factor, false))
    report_error(api, "system.accelerator.gemm_sustained_scale",
                 "system.accelerator.gemm_sustained_scale={} must be in (0, {}] (1: the kernel model's own share)",
                 sys.accelerator.gemm_sustained_scale, system_limits::max_efficient_factor);
  if (sys.accelerator.gemm_sustained_scale != 1 && sys.accelerator.kernel_model == kernel_architecture::none)
    report_error(api, "system.accelerator.gemm_sustained_scale",
                 "system.accelerator.gemm_sustained_scale={} needs a system.accelerator.kernel_model (it scales the "
                 "model's GEMMs; a file without one gives each GEMM kind its efficient_factor)",
                 sys.accelerator.gemm_sustained_scale);
  if (!(sys.accelerator.host_link_gbs >= 0 && sys.accelerator.host_link_gbs <= 1e6))
    report_error(api, "system.accelerator.host_link_gbs",
                 "system.accelerator.host_link_gbs={} must be in [0, 1e6] GB/s (0: PCIe x16 of the GPU's generation)",
                 sys.accelerator.host_link_gbs);
  if (!detail::in_range(sys.accelerator.compute_capability, 0, 100))
    report_error(api, "system.accelerator.compute_capability",
                 "system.accelerator.compute_capability={} must be in [0, 100] (0: unknown)",
                 sys.accelerator.compute_capability);
  if (sys.accelerator.mode == accelerator_mode::invalid)
    report_error(api, "system.accelerator.mode", "system.accelerator.mode must be \"roofline\" or \"only_compute\"");
  if (!sys.op(compute_kind::default_kind).present)
    report_error(api, "system.accelerator.op.default",
                 "system.accelerator.op.default is required (used for every op kind without its own entry)");
  if (!sys.memory(memory_kind::default_kind).present)
    report_error(
        api, "system.accelerator.bandwidth.default",
        "system.accelerator.bandwidth.default is required (used for every memory-bound op without its own entry)");
  for (std::size_t k = 0; k < sys.accelerator.op.size(); ++k)
    if (sys.accelerator.op[k].present) detail::validate_compute_op(sys.accelerator.op[k], compute_kind_names[k]);
  // `default` is the device's 16-bit peak: SimuMax measures MFU against it (every SimuMax system
  // file sets it to the BF16 tensor-core peak, as matmul and attention), so a 16-bit kind faster
  // than it would report more model FLOP/s than the peak. FP8 and FP4 kinds may exceed it.
  const double peak = sys.op(compute_kind::default_kind).tflops;
  for (const compute_kind k :
       {compute_kind::matmul, compute_kind::group_matmul, compute_kind::sdp_fwd, compute_kind::sdp_bwd}) {
    const compute_op_spec& op = sys.op(k);
    if (op.present && op.tflops > peak)
      report_error(api, "system.accelerator.op.tflops",
                   "system.accelerator.op.{}.tflops={} must not exceed system.accelerator.op.default.tflops={}: "
                   "default is the 16-bit peak MFU is measured against",
                   compute_kind_names[static_cast<std::size_t>(k)], op.tflops, peak);
  }
  for (std::size_t k = 0; k < sys.accelerator.bandwidth.size(); ++k) {
    if (!sys.accelerator.bandwidth[k].present) continue;
    detail::validate_bandwidth(sys.accelerator.bandwidth[k], "system.accelerator.bandwidth.", memory_kind_names[k], "",
                               detail::accelerator_bandwidth_fields);
  }
  detail::validate_networks(sys);
}

/// Memory of one device: `accelerator.mem_gbs` GiB, as SimuMax reads it (an "80 GB" part has
/// 80 GiB = 85899345920 bytes; GPU memory sizes are binary).
constexpr bytes device_memory(const system_spec& sys) {
  return bytes{static_cast<std::int64_t>(sys.accelerator.mem_gbs * 1073741824.0)};
}

namespace detail {
/// Whether `name` contains `token`, ignoring ASCII case.
constexpr bool contains_token(std::string_view name, std::string_view token) {
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  for (std::size_t i = 0; i + token.size() <= name.size(); ++i) {
    std::size_t k = 0;
    while (k < token.size() && lower(name[i + k]) == token[k]) ++k;
    if (k == token.size()) return true;
  }
  return false;
}
}  // namespace detail

/// The CUDA compute capability named by a system's `sys_name` ("a100_pcie_bf16" -> 8.0), for
/// system files that do not state it (SimuMax's have no such field); 0 when the name names no
/// known NVIDIA data-centre GPU. Values from NVIDIA's CUDA GPU compute-capability table; longer
/// names are tried first so that "a100" is not read as "a10".
constexpr double compute_capability_from_name(std::string_view sys_name) {
  struct entry {
    std::string_view token;
    double capability;
  };
  constexpr std::array<entry, 17> table{{{"gb300", 10.3},
                                         {"gb200", 10.0},
                                         {"b300", 10.3},
                                         {"b200", 10.0},
                                         {"b100", 10.0},
                                         {"gh200", 9.0},
                                         {"h100", 9.0},
                                         {"h200", 9.0},
                                         {"h800", 9.0},
                                         {"h20", 9.0},
                                         {"a100", 8.0},
                                         {"a800", 8.0},
                                         {"a30", 8.0},
                                         {"l40", 8.9},
                                         {"a40", 8.6},
                                         {"a10", 8.6},
                                         {"v100", 7.0}}};
  for (const auto& e : table)
    if (detail::contains_token(sys_name, e.token)) return e.capability;
  return 0;
}

/// The compute capability a system states, else the one its `sys_name` implies, else 0 (unknown).
constexpr double known_compute_capability(const system_spec& sys) {
  if (sys.accelerator.compute_capability > 0) return sys.accelerator.compute_capability;
  return compute_capability_from_name(sys.sys_name.view());
}

LLMSIM_END_NAMESPACE
