/// \file llmsim/schedule/interleaved.hpp
/// Megatron-LM's interleaved 1F1B schedule (`forward_backward_pipelining_with_interleaving`),
/// simulated over every rank and every model chunk instead of a bubble formula:
/// - v model chunks per rank; virtual stage c·p + r runs chunk c of rank r.
/// - Rank r runs its chunk-forwards and chunk-backwards in Megatron's order: the schedule table
///   walks micro-batches in groups of g = microbatch_group_size_per_vp_stage (default p), all
///   chunks of a group before the next group; (p - r - 1)·2 + (v - 1)·g warm-up forwards (capped at
///   m·v), then one forward and one backward alternately, then the remaining
///   backwards (backward chunks in reverse order).
/// - A chunk-forward needs the previous virtual stage's forward of the same micro-batch, a
///   chunk-backward the next virtual stage's backward (the last one its own forward), each plus
///   one transfer when the stages sit on different ranks. With `async_p2p` (Megatron
///   --overlap-p2p-communication) transfers run beside compute; without it the sender waits for
///   its send.
/// - `combined` (Megatron --overlap-moe-expert-parallel-comm): one more warm-up forward, and each
///   steady-state forward runs with the backward after it as one combined step
///   (combined_1f1b.py), an overlapped pair for the engine. With p = 1 and v = 1 this is
///   combined_1f1b_schedule_for_no_pipelining: F0, then (F1, B0), (F2, B1), ..., then the last B.
/// Each chunk takes 1/v of its rank's per-micro-batch time. The simulation is the pass-list engine
/// (schedule/engine.hpp) over the order `interleaved_passes` writes.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/schedule/engine.hpp>
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

/// Warm-up chunk-forwards of rank `rank`: 2 (p - rank - 1) + (v - 1) g, capped at the m v total
/// (Megatron-LM schedules.py get_pp_rank_microbatches; before 4295be1a6c, 2024, every chunk-forward
/// was warm-up when m = p, a rule since dropped); `combined`: one more, so that the forward and
/// backward of every combined step are independent.
constexpr std::int64_t interleaved_warmup(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t g,
                                          std::int64_t rank, bool combined = false) {
  const std::int64_t total = m * v;
  const std::int64_t w = (p - rank - 1) * 2 + (v - 1) * g + (combined ? 1 : 0);
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
                                      std::int64_t rank, bool combined = false) {
  const std::int64_t total = m * v, warmup = interleaved_warmup(p, v, m, g, rank, combined), steady = total - warmup;
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

/// Whether a rank's i-th chunk-pass (of 2 x `total` = 2·m·v) is the forward of a combined step,
/// given its `warmup` forwards: a steady-state forward (even offset after the warm-up), run with the
/// backward right after it (combined_1f1b.py). The schedule, the memory walk and the hidden
/// exchange all pair passes by this rule.
constexpr bool starts_combined_step(std::int64_t i, std::int64_t warmup, std::int64_t total) {
  return i >= warmup && i + 1 < 2 * total - warmup && (i - warmup) % 2 == 0;
}

/// Rank by rank, the chunk-passes of interleaved 1F1B as pass lists for the engine; `combined`:
/// each steady-state forward paired with the backward after it.
constexpr pass_lists interleaved_passes(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t g,
                                        bool combined = false) {
  pass_lists out;
  out.passes.reserve(static_cast<std::size_t>(2 * p * v * m));
  out.begin.push_back(0);
  for (std::int64_t r = 0; r < p; ++r) {
    const std::int64_t warmup = interleaved_warmup(p, v, m, g, r, combined);
    for (std::int64_t i = 0; i < 2 * m * v; ++i) {
      const chunk_pass c = interleaved_pass(i, p, v, m, g, r, combined);
      const bool pair = combined && starts_combined_step(i, warmup, m * v);
      out.passes.push_back({c.forward ? pass_type::forward : pass_type::backward, c.micro_batch, c.chunk, pair});
    }
    out.begin.push_back(out.passes.size());
  }
  return out;
}

/// The engine's setup for `timings` split evenly over `v` looped chunks.
constexpr schedule_setup interleaved_setup(const std::vector<stage_timing>& timings, std::int64_t v, bool async_p2p) {
  schedule_setup in;
  in.ranks = static_cast<std::int64_t>(timings.size());
  in.chunks = v;
  in.async_p2p = async_p2p;
  for (const stage_timing& t : timings) {
    for (std::int64_t c = 0; c < v; ++c)
      in.durations.push_back(
          {t.forward.value / static_cast<double>(v), t.backward.value / static_cast<double>(v), 0.0, 0.0, 0.0});
    in.p2p.push_back(t.p2p.value);
  }
  return in;
}

/// Interleaved 1F1B on a prepared setup: `in.ranks` ranks of `in.chunks` chunks each with their
/// own pass times (uneven chunks of a pipeline layout), `m` micro-batches in groups of `g`;
/// `combined` as in `interleaved_passes` (the chunks' forward_comm / backward_comm are the
/// exchanges a combined step overlaps).
constexpr pipeline_result simulate_interleaved_setup(const schedule_setup& in, std::int64_t m, std::int64_t g,
                                                     std::vector<pipeline_event>* events = nullptr,
                                                     bool combined = false) {
  const std::int64_t p = in.ranks, v = in.chunks;
  if (events != nullptr)
    return detail::simulate_passes(in, interleaved_passes(p, v, m, g, combined), m, nullptr, events).pipe;
  // Passes that wait on each other are at most the warm-up apart: 2p + (v - 1)g (+ 1) chunk-passes.
  const std::int64_t lag = (2 * p + (v - 1) * g + (combined ? 1 : 0)) / v + g + 1;
  return run_schedule(in, m, g, lag, [&](std::int64_t k) { return interleaved_passes(p, v, k, g, combined); }).pipe;
}

/// Simulates interleaved 1F1B over `timings.size()` ranks with `v` chunks each, `m` micro-batches
/// in groups of `g` (schedule/engine.hpp; long runs with the steady-period extension, every
/// micro-batch when `events` is given). Returns every rank's finish and the slowest.
constexpr pipeline_result simulate_interleaved(const std::vector<stage_timing>& timings, std::int64_t v, std::int64_t m,
                                               std::int64_t g, bool async_p2p,
                                               std::vector<pipeline_event>* events = nullptr) {
  const auto p = static_cast<std::int64_t>(timings.size());
  if (p == 0 || m <= 0) {
    pipeline_result none;
    none.finish.assign(timings.size(), seconds{});
    return none;
  }
  return simulate_interleaved_setup(interleaved_setup(timings, v, async_p2p), m, g, events);
}

LLMSIM_END_NAMESPACE
