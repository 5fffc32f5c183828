/// \file llmsim/schedule/interleaved.hpp
/// Megatron-LM's interleaved 1F1B schedule (`forward_backward_pipelining_with_interleaving`),
/// simulated over every rank and every model chunk instead of a bubble formula:
/// - v model chunks per rank; virtual stage c·p + r runs chunk c of rank r.
/// - Rank r runs its chunk-forwards and chunk-backwards in Megatron's order: the schedule table
///   walks micro-batches in groups of g = microbatch_group_size_per_vp_stage (default p), all
///   chunks of a group before the next group; (p - r - 1)·2 + (v - 1)·g warm-up forwards (all of
///   them when m = p), then one forward and one backward alternately, then the remaining
///   backwards (backward chunks in reverse order).
/// - A chunk-forward needs the previous virtual stage's forward of the same micro-batch, a
///   chunk-backward the next virtual stage's backward (the last one its own forward), each plus
///   one transfer when the stages sit on different ranks. With `async_p2p` (Megatron
///   --overlap-p2p-communication) transfers run beside compute; without it the sender waits for
///   its send.
/// Each chunk takes 1/v of its rank's per-micro-batch time.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/schedule/one_f_one_b.hpp>

#include <cstdint>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// One chunk-pass of the interleaved schedule.
struct chunk_pass {
  std::int64_t micro_batch = 0;
  std::int64_t chunk = 0;
  bool forward = true;
};

/// Warm-up chunk-forwards of rank `rank` (Megatron: all of them when m = p).
constexpr std::int64_t interleaved_warmup(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t g,
                                          std::int64_t rank) {
  const std::int64_t total = m * v;
  if (m == p) return total;
  const std::int64_t w = (p - rank - 1) * 2 + (v - 1) * g;
  return w < total ? w : total;
}

/// Entry `k` of Megatron's schedule table: micro-batch and chunk of the k-th chunk-forward. The
/// last group holds the micro-batches left when fewer than g remain.
constexpr chunk_pass schedule_table_entry(std::int64_t k, std::int64_t v, std::int64_t m, std::int64_t g) {
  const std::int64_t group = k / (g * v);
  const std::int64_t start = group * g;
  const std::int64_t size = start + g >= m ? m - start : g;
  const std::int64_t within = k - group * g * v;
  return {start + within % size, within / size, true};
}

/// The i-th chunk-pass rank `rank` runs (0 <= i < 2·m·v).
constexpr chunk_pass interleaved_pass(std::int64_t i, std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t g,
                                      std::int64_t rank) {
  const std::int64_t total = m * v, warmup = interleaved_warmup(p, v, m, g, rank), steady = total - warmup;
  auto backward = [&](std::int64_t k) {
    chunk_pass c = schedule_table_entry(k, v, m, g);
    c.chunk = v - 1 - c.chunk;
    c.forward = false;
    return c;
  };
  if (i < warmup) return schedule_table_entry(i, v, m, g);
  if (i < warmup + 2 * steady) {
    const std::int64_t j = i - warmup;
    return j % 2 == 0 ? schedule_table_entry(warmup + j / 2, v, m, g) : backward(j / 2);
  }
  return backward(steady + (i - warmup - 2 * steady));
}

/// Simulates interleaved 1F1B over `timings.size()` ranks with `v` chunks each, `m` micro-batches
/// in groups of `g`. Returns every rank's finish and the slowest.
constexpr pipeline_result simulate_interleaved(const std::vector<stage_timing>& timings, std::int64_t v, std::int64_t m,
                                               std::int64_t g, bool async_p2p,
                                               std::vector<pipeline_event>* events = nullptr) {
  const auto p = static_cast<std::int64_t>(timings.size());
  const std::int64_t stages = p * v, passes = 2 * m * v;
  pipeline_result out;
  out.finish.assign(timings.size(), seconds{});
  if (p == 0 || m <= 0) return out;
  // Finish time of each (virtual stage, micro-batch) forward and backward; -1 until it has run.
  std::vector<double> fwd(static_cast<std::size_t>(stages * m), -1.0), bwd(static_cast<std::size_t>(stages * m), -1.0);
  std::vector<std::int64_t> next(timings.size(), 0);
  std::vector<double> clock(timings.size(), 0.0);
  auto at = [&](std::int64_t stage, std::int64_t mb) {
    return static_cast<std::size_t>(mb * stages + stage);
  };  // neighbouring passes, neighbouring entries
  // Run a rank until its next pass waits on another rank, then go to that rank (follow the
  // dependency instead of sweeping): every pass is visited once, plus at most p hops per stall.
  std::int64_t r = 0, next_scan = 0, hops = 0;
  while (true) {
    const auto ri = static_cast<std::size_t>(r);
    std::int64_t blocked_on = -1;
    while (next[ri] < passes) {
      const chunk_pass c = interleaved_pass(next[ri], p, v, m, g, r);
      const std::int64_t stage = c.chunk * p + r;
      // The stage this pass waits for (a backward of the last stage waits for its own forward).
      const std::int64_t from = c.forward ? stage - 1 : (stage == stages - 1 ? stage : stage + 1);
      double ready = 0;
      if (from >= 0) {
        const double dep =
            c.forward || stage == stages - 1 ? fwd[at(from, c.micro_batch)] : bwd[at(from, c.micro_batch)];
        if (dep < 0) {
          blocked_on = from % p;
          break;
        }
        ready = dep + (from % p != r ? timings[static_cast<std::size_t>(from % p)].p2p.value : 0.0);
      }
      const double start = clock[ri] > ready ? clock[ri] : ready;
      const double work = (c.forward ? timings[ri].forward.value : timings[ri].backward.value) / static_cast<double>(v);
      (c.forward ? fwd : bwd)[at(stage, c.micro_batch)] = start + work;
      if (events != nullptr)
        events->push_back({r, c.forward ? pipeline_event::kind::forward : pipeline_event::kind::backward, c.micro_batch,
                           c.chunk, start, start + work});
      const bool sends = c.forward ? stage < stages - 1 : stage > 0;
      clock[ri] = start + work + (!async_p2p && sends && p > 1 ? timings[ri].p2p.value : 0.0);
      ++next[ri];
      hops = 0;
    }
    if (blocked_on < 0) {  // finished: continue with the first rank that is not
      while (next_scan < p && next[static_cast<std::size_t>(next_scan)] == passes) ++next_scan;
      if (next_scan == p) break;
      r = next_scan;
      continue;
    }
    if (++hops > p + 1)
      detail::report_error("llmsim::schedule", "",
                           "the interleaved schedule deadlocked with {} stages, {} chunks and {} micro-batches", p, v,
                           m);
    r = blocked_on;
  }
  double total = 0;
  for (std::size_t k = 0; k < timings.size(); ++k) {
    out.finish[k] = seconds{clock[k]};
    total = clock[k] > total ? clock[k] : total;
  }
  out.total = seconds{total};
  return out;
}

LLMSIM_END_NAMESPACE
