/// \file llmsim/schedule/sharded_dp.hpp
/// The data-parallel stream of one micro-batch's forward and backward under ZeRO-2/3 and FSDP:
/// per-unit parameter all-gathers (ZeRO-3) prefetched one unit ahead, and per-unit gradient
/// reduce-scatters (ZeRO-2/3) issued as each unit's backward ends. A unit is what the framework
/// gathers and frees as one: a decoder layer for Megatron-FSDP (`fsdp_unit_modules` =
/// TransformerLayer, megatron/core/distributed/fsdp/mcore_fsdp_adapter.py) and for PyTorch FSDP2
/// wrapped per layer (torch/distributed/fsdp/_fully_shard); the embedding and the output layer
/// with the loss are units of their own. The stream runs in issue order (one NCCL stream, as
/// Megatron-FSDP's runtime_schedule.md describes for a shared communicator):
/// - forward: AG_0 at the start; when unit i's compute starts (its gather done), AG_{i+1} is
///   issued (prefetch); unit i's compute waits for AG_i;
/// - backward, units in reverse: AG_{n-1} at the start; when unit i's backward starts, AG_{i-1}
///   is issued, when it ends RS_i; the backward ends when the stream has drained (DeepSpeed
///   stage3.py `independent_gradient_partition_epilogue` synchronises its reduce stream, FSDP2's
///   post-backward callback waits for the last reduce-scatter). Without overlap the reduce-scatter
///   runs on the compute stream after each unit's backward (DeepSpeed ZeRO-2 with overlap_comm off).
/// The exposed time of a pass is its length minus its compute.
#pragma once

#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/core/error.hpp>

#include <cstdint>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// One unit of a stage (seconds of one micro-batch); `repeat` identical units in a row.
struct shard_unit {
  double forward = 0, backward = 0;  ///< compute, with the unit's own tensor-parallel collectives
  double gather = 0;                 ///< all-gather of its parameters (ZeRO-3), else 0
  double reduce = 0;                 ///< reduce-scatter of its gradients (ZeRO-2/3)
  std::int64_t repeat = 1;
};

namespace detail {
/// The unit list with every repetition written out.
constexpr std::vector<shard_unit> expand_units(const std::vector<shard_unit>& units) {
  std::vector<shard_unit> out;
  for (const shard_unit& u : units)
    for (std::int64_t k = 0; k < u.repeat; ++k) out.push_back({u.forward, u.backward, u.gather, u.reduce, 1});
  return out;
}
}  // namespace detail

/// Exposed time of one forward over `units`: AG_0 up front, AG_{i+1} issued as unit i starts.
constexpr double sharded_forward_exposed(const std::vector<shard_unit>& units) {
  const std::vector<shard_unit> u = detail::expand_units(units);
  if (u.empty()) return 0;
  double stream = u[0].gather, ready = u[0].gather, t = 0, compute = 0;
  for (std::size_t i = 0; i < u.size(); ++i) {
    const double start = detail::later(t, ready);
    if (i + 1 < u.size()) {
      stream = detail::later(stream, start) + u[i + 1].gather;
      ready = stream;
    }
    t = start + u[i].forward;
    compute += u[i].forward;
  }
  return t - compute;
}

/// Exposed time of one backward over `units` (run last to first): AG_{i-1} issued as unit i
/// starts, RS_i as it ends; `overlap_reduce`: the reduce-scatter runs beside the next unit's
/// compute, else the compute waits for it. The pass ends when the stream is drained.
constexpr double sharded_backward_exposed(const std::vector<shard_unit>& units, bool overlap_reduce) {
  const std::vector<shard_unit> u = detail::expand_units(units);
  if (u.empty()) return 0;
  const std::size_t n = u.size();
  double stream = u[n - 1].gather, ready = u[n - 1].gather, t = 0, compute = 0;
  for (std::size_t k = n; k > 0; --k) {
    const std::size_t i = k - 1;
    const double start = detail::later(t, ready);
    if (i > 0) {
      stream = detail::later(stream, start) + u[i - 1].gather;
      ready = stream;
    }
    t = start + u[i].backward;
    compute += u[i].backward;
    if (u[i].reduce > 0) {
      stream = detail::later(stream, t) + u[i].reduce;
      if (!overlap_reduce) t = stream;
    }
  }
  return detail::later(t, stream) - compute;
}

LLMSIM_END_NAMESPACE
