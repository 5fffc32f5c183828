/// \file llmsim/cost/network_cost.hpp
/// Which network tier a communication group uses and how long a collective takes on it, as the
/// SimuMax system format defines its fitted network figures (FORMAT.md; SimuMax docs/system.md):
/// ring algorithms move size * scale * (n + offset) / n bytes and take (n + offset) * scale latency
/// steps; a fixed per-call latency (optionally per group size) is added; PCIe data-parallel groups
/// may carry a measured bus bandwidth per group size (`dp_fixed_bw`).
#pragma once

#include <llmsim/core/units.hpp>
#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/program/op.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

/// How the ranks of one group sit: its size and the span of consecutive ranks it covers.
struct group_layout {
  std::int64_t size = 1;
  std::int64_t span = 1;    ///< ranks from the group's first to last member (rank order tp-cp-ep-dp-pp)
  std::int64_t stride = 1;  ///< distance between neighbouring members
};

/// Size, span and stride of `g` under Megatron's rank order (tp fastest, then cp, dp, pp).
constexpr group_layout layout_of(const strategy_spec& s, comm_group g) {
  const std::int64_t tp = s.tp_size, cp = s.cp_size, dp = dp_size(s), pp = s.pp_size;
  switch (g) {
    case comm_group::tp:
      return {tp, tp, 1};
    case comm_group::cp:
      return {cp, tp * cp, tp};
    case comm_group::dp:
      return {dp, tp * cp * dp, tp * cp};
    case comm_group::pp:
      return {pp, s.world_size, s.world_size / pp};
    case comm_group::ep:
      return {s.ep_size, s.ep_size * s.etp_size, s.etp_size};
    case comm_group::etp:
      return {s.etp_size, s.etp_size, 1};
    case comm_group::edp:
      return {edp_size(s), s.world_size / pp, s.ep_size * s.etp_size};
    case comm_group::cp_a2a:  // the first level: neighbouring cp ranks (Megatron create_hierarchical_groups)
      return {cp_a2a_size(s), tp * cp_a2a_size(s), tp};
    case comm_group::cp_ring:  // the second level: every cp_a2a_size-th cp rank
      return {cp_ring_size(s), tp * cp, tp * cp_a2a_size(s)};
  }
  return {};
}

namespace detail {
constexpr const net_name& requested_net(const strategy_spec& s, comm_group g) {
  switch (g) {
    case comm_group::tp:
      return s.tp_net;
    case comm_group::cp:
      return s.cp_net;
    case comm_group::pp:
      return s.pp_net;
    case comm_group::dp:
      return s.dp_net;
    case comm_group::ep:
      return s.ep_net;
    case comm_group::etp:
      return s.etp_net;
    case comm_group::edp:
      return s.edp_net;
    case comm_group::cp_a2a:
    case comm_group::cp_ring:
      return s.cp_net;
  }
  return s.tp_net;
}
constexpr bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
/// The PCIe tier `intra_node_pcie_<k>x` with the smallest k that covers `span` ranks, if any.
constexpr const network_tier* pcie_tier_covering(const system_spec& sys, std::int64_t span) {
  const network_tier* best = nullptr;
  std::int64_t best_k = 0;
  for (std::size_t i = 0; i < sys.network_count; ++i) {
    const auto name = sys.networks[i].name.view();
    if (!starts_with(name, "intra_node_pcie_") || name.size() < 18 || name.back() != 'x') continue;
    const std::optional<std::int64_t> k = detail::decimal_count(name.substr(16, name.size() - 17));
    if (k && *k >= span && (best == nullptr || *k < best_k)) {
      best = &sys.networks[i];
      best_k = *k;
    }
  }
  return best;
}
}  // namespace detail

namespace detail {
/// The tier group `g` takes when its members cover `span` consecutive ranks and `same_node` says
/// whether they share a node: the strategy's explicit `<group>_net`, else `auto` (see resolve_tier).
constexpr const network_tier& tier_of_group(const system_spec& sys, const strategy_spec& s, comm_group g,
                                            std::int64_t span, bool same_node) {
  std::string_view name = requested_net(s, g).view();
  if (name == "auto") {
    if (sys.intra_with_pcie && same_node) {
      if (const auto* t = pcie_tier_covering(sys, span)) return *t;
      name = "inter_node";
    } else {
      name = same_node ? "high_intra_node" : "inter_node";
    }
  }
  const auto* tier = sys.network(name);
  if (tier == nullptr)
    report_error("llmsim::estimate", "system.networks",
                 "the {} group needs network tier \"{}\", which system {} does not define",
                 comm_group_names[static_cast<std::size_t>(g)], name, sys.sys_name);
  return *tier;
}
}  // namespace detail

/// The tier group `g` communicates over. An explicit `<group>_net` in the strategy wins; `auto`
/// picks from where the ranks sit (SimuMax's rule): on PCIe machines the smallest
/// `intra_node_pcie_<k>x` tier covering the group's span; on NVLink machines `high_intra_node`
/// when the group fits in one node (for the pipeline: when neighbouring stages share a node);
/// otherwise `inter_node`.
constexpr const network_tier& resolve_tier(const system_spec& sys, const strategy_spec& s, comm_group g) {
  const group_layout lay = layout_of(s, g);
  const bool same_node = g == comm_group::pp ? lay.stride < sys.num_per_node : lay.span <= sys.num_per_node;
  return detail::tier_of_group(sys, s, g, lay.span, same_node);
}

/// The tier of Megatron's embedding group: the first and the last rank of each pipeline, which sum
/// the gradients of the word embedding they both hold (parallel_state.py default_embedding_ranks;
/// finalize_model_grads.py _allreduce_word_embedding_grads). Its members are (pp - 1) pipeline
/// strides apart: the pipeline group's tier as for a group spanning the whole pipeline.
constexpr const network_tier& embedding_group_tier(const system_spec& sys, const strategy_spec& s) {
  const std::int64_t span = layout_of(s, comm_group::pp).span;
  return detail::tier_of_group(sys, s, comm_group::pp, span, span <= sys.num_per_node);
}

/// One collective call.
struct collective_call {
  collective_kind kind = collective_kind::all_reduce;
  double size_bytes = 0;  ///< the full buffer (for all-gather: the gathered result)
  std::int64_t group_size = 1;
  comm_group group = comm_group::tp;
};

namespace detail {
/// NCCL's latency model (NVIDIA/nccl src/graph/tuning.cc at 01afd20a, `baseLat` and `hwLat`, in
/// us; protocols LL, LL128, Simple): a call costs the algorithm's base latency plus one hardware
/// latency per step, and NCCL runs the algorithm and protocol whose latency + bytes / bandwidth is
/// least. Departures: the tree's per-size `treeCorrectionFactor` is left out, and all-to-all and
/// p2p (which tuning.cc does not model) take ring steps of their kind.
inline constexpr std::array<double, 3> nccl_ring_base_us{3.6, 10.0, 8.4};
inline constexpr std::array<double, 3> nccl_tree_base_us{4.4, 4.4, 0.0};
/// Per-step latency by link (NVLink, PCI, network) and protocol.
inline constexpr std::array<std::array<double, 3>, 3> nccl_ring_step_us{
    {{.47, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 9.6}}};
inline constexpr std::array<std::array<double, 3>, 3> nccl_tree_step_us{
    {{.52, 1.2, 28}, {1.0, 1.9, 28}, {5.0, 8.5, 50}}};
/// Share of the link bandwidth a protocol moves payload at (tuning.cc): LL sends 4 B of data per 8 B
/// line and all-reduce rings reach 1/4 (1/3 for the other collectives on one node), LL128 120 of
/// every 128 B (0.92; 0.7 with one GPU per node), Simple all of it.
constexpr double nccl_protocol_share(std::size_t protocol, bool all_reduce, bool multi_node, bool one_per_node) {
  if (protocol == 0) return all_reduce || multi_node ? 0.25 : 1.0 / 3.0;
  if (protocol == 1) return one_per_node ? 0.7 : 0.92;
  return 1.0;
}
/// Tree all-reduce (tuning.cc): bus bandwidth x 0.9 (LL x 1/3.8, LL128 x 0.915) at half the
/// algorithm bandwidth.
constexpr double nccl_tree_share(std::size_t protocol) {
  return 0.9 * (protocol == 0 ? 1 / 3.8 : protocol == 1 ? 0.915 : 1.0) * 0.5;
}
/// log2 rounded down (tuning.cc `log2i`).
constexpr double log2_floor(double x) {
  double n = 0;
  for (double v = 2; v <= x; v *= 2) n += 1;
  return n;
}

/// The shape of one NCCL call: ranks, ranks per node, nodes, ring steps and which link is inside a node.
struct nccl_call {
  collective_kind kind = collective_kind::all_reduce;
  double ranks = 1, per_node = 1, nodes = 1;
  double steps = 0, inter_steps = 0;
  std::size_t intra = 0;  ///< 0 NVLink, 1 PCI
  double size = 0, traffic = 0, bytes_per_second = 0;
  [[nodiscard]] constexpr bool multi_node() const { return nodes > 1; }
  [[nodiscard]] constexpr bool all_reduce() const { return kind == collective_kind::all_reduce; }
};

/// Ring time with protocol `p`. LL on a multi-node ring pays 1.8x the intra-node step latency; a
/// Simple all-reduce across nodes of at least ranks/16 x 64 KiB pays 1.9x its latency ("plateau
/// effect of ring").
constexpr double nccl_ring_seconds(const nccl_call& c, std::size_t p) {
  const double intra_us = nccl_ring_step_us[c.intra][p] * (c.multi_node() && p == 0 ? 1.8 : 1.0);
  double latency =
      nccl_ring_base_us[p] + (c.steps - c.inter_steps) * intra_us + c.inter_steps * nccl_ring_step_us[2][p];
  if (p == 2 && c.multi_node() && c.all_reduce() && c.size >= c.ranks / 16.0 * 65536) latency *= 1.9;
  const double share = nccl_protocol_share(p, c.all_reduce(), c.multi_node(), c.per_node < 2);
  return latency * 1e-6 + c.traffic / (c.bytes_per_second * share);
}
/// Tree all-reduce time with protocol `p`: 2 x ((ranks per node − 1) intra steps + log2(nodes)
/// network steps), the whole buffer at the tree's bandwidth.
constexpr double nccl_tree_seconds(const nccl_call& c, std::size_t p) {
  const double intra_us = nccl_tree_step_us[c.intra][p] * (c.multi_node() && p == 0 ? 1.8 : 1.0);
  const double latency =
      nccl_tree_base_us[p] + 2 * ((c.per_node - 1) * intra_us + log2_floor(c.nodes) * nccl_tree_step_us[2][p]);
  return latency * 1e-6 + c.size / (c.bytes_per_second * nccl_tree_share(p));
}
}  // namespace detail

/// One collective priced by NCCL's model: `n` ranks, `per_node` of them per node, moving `traffic`
/// bytes per rank (ring) at `bytes_per_second` (the tier's link bandwidth and efficiency). LL128 is
/// offered on NVLink only (tuning.cc enables it by default only there).
constexpr seconds nccl_collective_time(const system_spec& sys, nccl_link_kind link, collective_kind kind,
                                       std::int64_t n, std::int64_t per_node, double size, double traffic,
                                       double bytes_per_second) {
  detail::nccl_call c{.kind = kind,
                      .ranks = static_cast<double>(n),
                      .per_node = static_cast<double>(per_node),
                      .nodes = static_cast<double>((n + per_node - 1) / per_node),
                      .size = size,
                      .traffic = traffic,
                      .bytes_per_second = bytes_per_second};
  c.steps = c.all_reduce() ? 2 * (c.ranks - 1) : kind == collective_kind::p2p ? 1 : c.ranks - 1;
  c.inter_steps = !c.multi_node()                ? 0
                  : c.all_reduce()               ? 2 * (c.nodes - 1)
                  : kind == collective_kind::p2p ? 1
                                                 : c.nodes - 1;
  c.intra = link == nccl_link_kind::pci || (link == nccl_link_kind::net && sys.intra_with_pcie) ? 1 : 0;
  double best = -1;
  for (std::size_t p = 0; p < 3; ++p) {
    if (p == 1 && c.intra != 0) continue;
    const double ring = detail::nccl_ring_seconds(c, p);
    if (best < 0 || ring < best) best = ring;
    if (c.all_reduce()) best = std::min(best, detail::nccl_tree_seconds(c, p));
  }
  return seconds{best};
}

/// An all-to-all across a shared link (a PCIe host's socket link, the node's first `per_node / 2`
/// ranks on one side) against the ring traffic the tier prices: with a of the group's n ranks on
/// one side and b on the other, each rank sending size/n to every peer, each direction of the link
/// carries a x b x size/n, where a ring crosses it with one rank's (n - 1)/n x size. The factor is
/// a b / (n - 1): 1 for a pair split across, 16/7 for eight split 4 + 4, 8/5 for six split 4 + 2.
/// A group on one side crosses nothing: it keeps the ring's traffic (factor 1).
constexpr double shared_link_all2all_factor(const group_layout& g, std::int64_t per_node) {
  const std::int64_t half = per_node / 2;
  if (g.size <= 1 || half < 1) return 1;
  std::int64_t first = 0;  // members of the group starting at rank 0 on the first side
  for (std::int64_t j = 0; j < g.size; ++j)
    if ((j * g.stride) % per_node < half) ++first;
  const auto a = static_cast<double>(first), b = static_cast<double>(g.size - first);
  return a * b > 0 ? a * b / static_cast<double>(g.size - 1) : 1.0;
}

/// Time of one collective on `tier` (ring model of the system format, see the file comment).
/// `s` supplies how many groups share a node's inter-node links.
constexpr seconds collective_time(const system_spec& sys, const strategy_spec& s, const network_tier& tier,
                                  const collective_call& c) {
  const std::int64_t n = c.group_size;
  if (n <= 1 || c.size_bytes <= 0) return {};
  const auto& op = tier.op[static_cast<std::size_t>(c.kind)];
  if (!op.present)
    detail::report_error("llmsim::estimate", "system.networks.op",
                         "network tier \"{}\" of system {} does not define op.{}", tier.name, sys.sys_name,
                         collective_kind_names[static_cast<std::size_t>(c.kind)]);
  const bool data_parallel = c.group == comm_group::dp;
  // Ring traffic per rank: all-reduce 2(n-1)/n of the buffer, all-gather / reduce-scatter (n-1)/n, p2p all of it.
  double traffic = c.size_bytes * op.scale * (static_cast<double>(n) + op.offset) / static_cast<double>(n);
  const std::string_view tier_name = tier.name.view();
  if (detail::starts_with(tier_name, "intra_node_pcie") && data_parallel) {
    // A measured bus bandwidth for data-parallel groups of this size replaces the ring model.
    if (const auto fixed = op.dp_fixed_bw.find(n)) return seconds{traffic / format_gbps_to_bytes_per_second(*fixed)};
  }
  double bandwidth = tier.bandwidth.gbps;
  // The node's groups of this kind cross the link together (a job smaller than a node has fewer).
  if (const std::int64_t in_node = s.world_size < sys.num_per_node ? s.world_size : sys.num_per_node;
      tier.shared_link && n < in_node)
    bandwidth /= static_cast<double>(in_node / n);
  if (tier.shared_link && c.kind == collective_kind::all2all)
    traffic *= shared_link_all2all_factor(layout_of(s, c.group), sys.num_per_node);
  if (sys.FC8 && tier_name == "high_intra_node" && sys.num_per_node > 1)
    bandwidth *=
        static_cast<double>(n - 1) / static_cast<double>(sys.num_per_node - 1);  // fully connected: links to n-1 peers
  if (tier_name == "inter_node") {
    const auto npn = static_cast<double>(sys.num_per_node);
    if (c.kind == collective_kind::p2p) bandwidth /= npn;  // one NIC's share of the node's bandwidth
    if (c.kind == collective_kind::all2all &&
        (c.group == comm_group::ep || c.group == comm_group::cp || c.group == comm_group::cp_a2a)) {
      const std::int64_t nodes = (n + sys.num_per_node - 1) / sys.num_per_node;
      const double k = static_cast<double>(nodes < 1 ? 1 : nodes);
      traffic *= (k - 1) / k;  // only the part leaving the node crosses the NIC
      bandwidth /= npn;
    }
    if (c.kind == collective_kind::all_reduce || c.kind == collective_kind::all_gather ||
        c.kind == collective_kind::reduce_scatter) {
      // Groups of one node share its NICs: tp gradient groups (ep*etp expert ones) run side by side.
      // The dense gradients reduce over dp*cp (Megatron's dp-cp group), whose members are tp apart.
      std::int64_t sharing = 1;
      if (data_parallel) sharing = s.tp_size;
      if (c.group == comm_group::edp) sharing = s.ep_size * s.etp_size;
      // The embedding group (first and last stage): each member reaches the other node over its own
      // NIC, one of the node's `num_per_node` (NCCL's one NIC per GPU, as a pipeline send).
      if (c.group == comm_group::pp) sharing = sys.num_per_node;
      bandwidth /= static_cast<double>(sharing < sys.num_per_node ? sharing : sys.num_per_node);
    }
  }
  const double efficiency = op.efficient_factor ? *op.efficient_factor : tier.bandwidth.efficient_factor;
  if (tier.nccl_link != nccl_link_kind::none) {
    const std::int64_t stride = layout_of(s, c.group).stride;
    std::int64_t per_node = sys.num_per_node / (stride < sys.num_per_node ? stride : sys.num_per_node);
    if (tier_name != "inter_node" || per_node > n) per_node = n;
    // The tier's per-call latency (kernel_model.hpp `collective_call_latency_us`) was fitted to
    // collectives only: a pipeline send / receive does not carry it.
    const double call_us = c.kind == collective_kind::p2p ? 0.0 : tier.bandwidth.fixed_latency;
    return nccl_collective_time(sys, tier.nccl_link, c.kind, n, per_node < 1 ? 1 : per_node, c.size_bytes, traffic,
                                format_gbps_to_bytes_per_second(bandwidth) * efficiency) +
           seconds{call_us * 1e-6};
  }
  double latency_us = op.latency_us ? *op.latency_us : tier.bandwidth.latency_us;
  if (c.kind != collective_kind::p2p)
    latency_us *= (static_cast<double>(n) + op.offset) * op.scale;  // one latency per ring step
  double fixed_us = 0;
  if (const auto by_n = op.fixed_latency_us_by_comm_num.find(n))
    fixed_us = *by_n;
  else if (op.fixed_latency_us)
    fixed_us = *op.fixed_latency_us;
  else if (const auto tier_by_n = tier.bandwidth.fixed_latency_us_by_comm_num.find(n))
    fixed_us = *tier_by_n;
  else
    fixed_us = tier.bandwidth.fixed_latency;
  return seconds{traffic / (format_gbps_to_bytes_per_second(bandwidth) * efficiency) + (latency_us + fixed_us) * 1e-6};
}

LLMSIM_END_NAMESPACE
