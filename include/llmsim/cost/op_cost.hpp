/// \file llmsim/cost/op_cost.hpp
/// Prices the ops programs emit — the one place where a kernel or a collective gets a time:
/// GEMMs, grouped GEMMs and fused attention by the roofline with the system's per-shape
/// efficiency (compute_cost.hpp), memory-bound kernels by bytes over bandwidth, collectives by
/// the network tier of their group (network_cost.hpp).
#pragma once

#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/kernel_model.hpp>
#include <llmsim/cost/network_cost.hpp>
#include <llmsim/program/dense.hpp>

LLMSIM_BEGIN_NAMESPACE

/// Time of a collective of `bytes` over the job's `group` (tp, ep, etp, or a level of cp); nothing
/// for a group of one. A p2p moves its buffer to one neighbour: priced as a pair (the KV ring of
/// context parallelism sends to the next cp rank and receives from the previous one at once).
constexpr seconds group_collective_time(const build_context& c, comm_group group, collective_kind kind, double bytes) {
  const std::int64_t size = layout_of(c.s(), group).size;
  const network_tier* tier = group == comm_group::tp    ? c.tp_tier
                             : group == comm_group::ep  ? c.ep_tier
                             : group == comm_group::etp ? c.etp_tier
                                                        : nullptr;
  if (size <= 1) return {};
  if (group == comm_group::cp || group == comm_group::cp_a2a || group == comm_group::cp_ring)
    tier = &resolve_tier(c.sys(), c.s(), group);
  if (kind == collective_kind::p2p) return collective_time(c.sys(), c.s(), *tier, {kind, bytes, 2, group});
  if (tier == nullptr)
    detail::report_error("llmsim::cost", "", "no network tier resolved for the {} group",
                         comm_group_names[static_cast<std::size_t>(group)]);
  return collective_time(c.sys(), c.s(), *tier, {kind, bytes, size, group});
}

/// The shape key a compute op is looked up by (empty for unkeyed ops: the kind's efficient_factor).
constexpr shape_key key_of(const op& o) {
  if (!o.keyed) return {};
  switch (o.kind) {
    case op_kind::gemm:
      return o.gemm.key();
    case op_kind::grouped_gemm:
      return o.grouped.key();
    case op_kind::attention:
      return o.attention.key();
    default:
      return {};
  }
}

namespace detail {
/// An entry that prices every shape alike: no measured table, a usable efficient_factor.
constexpr bool prices_without_shape(const compute_op_spec& e) {
  return e.accurate_efficient_factor.empty() && e.efficient_factor > 0;
}
/// Whether pricing `o` (compute_op_cost) never reads its shape key: every entry it can reach
/// prices without one, and no refusal can name the shape. Building the key is a string of the
/// shape's dimensions; with catalogue systems (no measured tables) it is most of an op's price.
constexpr bool shape_unread(const system_spec& sys, const op& o) {
  const compute_kind twin = bf16_twin(o.compute);
  if (twin == o.compute || sys.op(o.compute).present) return prices_without_shape(compute_entry(sys, o.compute));
  return low_precision_speedup(o.compute, known_compute_capability(sys)) > 0 &&
         prices_without_shape(compute_entry(sys, twin));
}
/// The share of an all-pairs attention's work that `o`'s FLOPs count (compute_cost
/// `counted_share`): its score pairs over q_len x kv_len; 1 for other ops. Exact for the square
/// causal calls the tables measure (prefill); a decode step or a chunk of a prefill counts nearly
/// all its pairs and keeps nearly the whole efficiency of a square causal kernel, whose real rate
/// per pair is about half that: such calls are priced up to twice as fast in compute (decode
/// attention is memory-bound, where this does not show).
constexpr double counted_share(const op& o) { return o.kind == op_kind::attention ? o.attention.counted_share() : 1; }
}  // namespace detail

/// The roofline of compute op `o`: the efficiency of its shape from the system's table (measured,
/// or interpolated between measured shapes), else its kernel model (cost/kernel_model.hpp), else
/// the kind's efficient_factor; a causal attention call's table and flat efficiencies times the
/// share of pairs it counts (detail::counted_share). A low-precision GEMM (fp8 / fp4 kinds) whose
/// own system entry cannot price it (`entry_prices`: absent, or efficient_factor 0 without a
/// measured shape or measured shapes around it) is
/// priced by a documented rule instead: its bf16 twin's entry (same shape key, grouped keys with
/// dtype=bf16: the twin's measured efficiency or efficient_factor) at the data-sheet low-precision
/// peak, i.e. its FLOPs divided by `low_precision_speedup`. Where that speedup is unknown (compute
/// capability unknown or without such tensor cores) it is refused, never priced at 0 or inf.
constexpr kernel_cost compute_op_cost(const system_spec& sys, const op& o) {
  const shape_key key = detail::shape_unread(sys, o) ? shape_key{} : key_of(o);
  const compute_kind twin = bf16_twin(o.compute);
  if (twin == o.compute || !o.keyed || entry_prices(sys, o.compute, key.view()))
    return kernel_time(sys, o.compute, o.flops, key.view(), memory_kind::default_kind, o.bytes,
                       modelled_efficiency(sys, o.compute, o), detail::counted_share(o), o.kind == op_kind::gemm);
  const double cc = known_compute_capability(sys);
  const double speedup = low_precision_speedup(o.compute, cc);
  if (speedup <= 0)
    detail::report_error("llmsim::estimate", "system.accelerator.op",
                         "system.accelerator.op.{} cannot price shape \"{}\" (absent, or efficient_factor 0 with no "
                         "measured efficiency for it or around it) and its rate cannot be derived from {}: system {} "
                         "has compute capability "
                         "{} (FP8 needs >= 8.9, FP4 >= 10; set system.accelerator.compute_capability or give the op "
                         "an efficient_factor)",
                         compute_kind_names[static_cast<std::size_t>(o.compute)], key.view(),
                         compute_kind_names[static_cast<std::size_t>(twin)], sys.sys_name, cc);
  op bf16 = o;
  bf16.compute = twin;
  bf16.grouped.fp8 = bf16.grouped.fp4 = false;
  const shape_key twin_key = detail::shape_unread(sys, o) ? shape_key{} : key_of(bf16);
  return kernel_time(sys, twin, o.flops / speedup, twin_key.view(), memory_kind::default_kind, o.bytes,
                     modelled_efficiency(sys, twin, bf16) * modelled_share_over_bf16(sys, o.compute),
                     detail::counted_share(o), o.kind == op_kind::gemm);
}

/// What a TP collective of `comm` seconds that TE's userbuffers overlap with a GEMM of `gemm`
/// seconds (op::userbuffers, strategy.tp_comm_overlap) adds to that GEMM, on a GPU of `sms` SMs
/// (transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp):
/// - ring exchange, n = tp chunks: each step's GEMM chunk (gemm / n) runs while one chunk travels
///   (comm / (n - 1)) by copy engine; the last chunk has nothing beside it. Exposed: the n - 1
///   steps where the transfer outlasts the chunk.
/// - pipeline, n = num_splits chunks on sms - k SMs (TE's set_sm_margin): the first chunk runs
///   alone, chunk i's reduce-scatter (comm / n) beside chunk i + 1, the last reduce-scatter alone.
/// - bulk: the whole collective on k SMs beside the whole GEMM; with the SM margin (TE's default)
///   the GEMM runs on the other sms - k SMs throughout: max(comm, gemm x sms / (sms - k)); without
///   (Megatron-Bridge's configs) it shares them only while the collective lasts: max(comm, gemm +
///   comm x k / sms).
/// The collective's own time is NCCL's for the same bytes (network_cost.hpp), an assumption: TE's
/// userbuffers kernels and copy-engine transfers are not NCCL's. Validation (`validate(m, s, sys)`)
/// refuses a system whose sm_count does not exceed k.
constexpr seconds userbuffers_exposed(const op& o, seconds comm, seconds gemm, std::int64_t sms) {
  const double c = comm.value, g = gemm.value, k = static_cast<double>(o.userbuffers_sms);
  const auto n = static_cast<double>(o.userbuffers_chunks);
  const auto s = static_cast<double>(sms);
  if (k > 0 && s <= k) return comm;  // no SMs left for the GEMM: validation refuses such a system
  double pair = g;
  switch (o.userbuffers) {
    case userbuffers_method::ring_exchange: {
      const double step = n > 1 ? c / (n - 1) : c, chunk = g / n;
      pair = g + (n - 1) * (step > chunk ? step - chunk : 0.0);
      break;
    }
    case userbuffers_method::pipeline: {
      const double chunk = g / n * s / (s - k), piece = c / n;
      pair = chunk + (n - 1) * (chunk > piece ? chunk : piece) + piece;
      break;
    }
    case userbuffers_method::bulk: {
      const double gemm_beside = o.userbuffers_sm_margin ? g * s / (s - k) : g + c * k / s;
      pair = c > gemm_beside ? c : gemm_beside;
      break;
    }
    default:
      return comm;
  }
  return seconds{pair > g ? pair - g : 0.0};
}

/// Prices `o`, adds its time to the pass of `l` it belongs to and returns it: compute and memory
/// kernels to `fwd` / `bwd` (weight-gradient kernels also to `bwd_weight`), collectives to
/// `fwd_comm` / `bwd_comm`; compute ops count a shape-table lookup (and a miss when the table
/// lacks the shape).
constexpr seconds price_op(const build_context& c, leaf& l, const op& o) {
  if (o.kind == op_kind::collective) {
    const seconds t = group_collective_time(c, o.group, o.collective, o.bytes);
    // Beside the previous compute op (TE ring attention's KV exchange): only what outlasts it is
    // exposed. A userbuffers collective is recorded as its pair's span from the GEMM's start.
    seconds exposed = !o.beside_previous ? t : (t > l.last_compute ? t - l.last_compute : seconds{});
    seconds recorded = t;
    if (o.userbuffers != userbuffers_method::none) {
      exposed = userbuffers_exposed(o, t, l.last_compute, c.sys().accelerator.sm_count);
      recorded = l.last_compute + exposed;
    }
    (o.is_backward() ? l.bwd_comm : l.fwd_comm) += exposed;
    if (o.group == comm_group::ep) (o.is_backward() ? l.bwd_a2a : l.fwd_a2a) += t;
    if (o.pass == pass_kind::backward_weight) l.bwd_weight_comm += exposed;
    return recorded;
  }
  seconds t{};
  if (o.kind == op_kind::memory) {
    t = memory_time(c.sys(), o.memory, o.bytes);
  } else {
    const kernel_cost cost = compute_op_cost(c.sys(), o);
    t = cost.time;
    ++l.efficiency_lookups;
    if (!cost.measured) ++l.efficiency_misses;
    if (cost.interpolated) ++l.efficiency_interpolated;
    if (cost.modelled) ++l.efficiency_modelled;
  }
  (o.is_backward() ? l.bwd : l.fwd) += t;
  if (o.pass == pass_kind::backward_weight) l.bwd_weight += t;
  l.last_compute = t;
  return t;
}

/// `price_op`, and the op with its time kept in the context's record (the trace's pricing).
constexpr seconds record_op(const build_context& c, leaf& l, const op& o) {
  const seconds t = price_op(c, l, o);
  if (c.record != nullptr) c.record->add(l, o, t);
  return t;
}

/// A build context for a job whose specs passed validation: the tiers its groups use and the op
/// pricing installed.
constexpr build_context make_build_context(const model_spec& m, const strategy_spec& s, const system_spec& sys,
                                           std::int64_t vocab) {
  return {&m,
          &s,
          &sys,
          s.tp_size > 1 ? &resolve_tier(sys, s, comm_group::tp) : nullptr,
          vocab,
          is_moe(m) && s.ep_size > 1 ? &resolve_tier(sys, s, comm_group::ep) : nullptr,
          is_moe(m) && s.etp_size > 1 ? &resolve_tier(sys, s, comm_group::etp) : nullptr,
          &price_op};
}

LLMSIM_END_NAMESPACE
