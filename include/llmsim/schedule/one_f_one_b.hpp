/// \file llmsim/schedule/one_f_one_b.hpp
/// The non-interleaved 1F1B pipeline schedule of Megatron-LM
/// (`forward_backward_pipelining_without_interleaving`), simulated over ranks and micro-batches:
/// rank r runs min(p - r - 1, m) warm-up forwards, then alternates one forward and one backward,
/// then drains the remaining backwards. Sends and receives are blocking pairs that complete
/// together (`p2p_communication` with `batch_isend_irecv` waited on at once); neighbouring ranks
/// issue a combined send+recv in opposite order by rank parity, as Megatron does to avoid
/// deadlock. The result is the time of the slowest rank.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/core/units.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// Per-rank durations of one micro-batch.
struct stage_timing {
  seconds forward{};
  seconds backward{};
  seconds p2p{};  ///< one activation (or gradient) transfer to or from a neighbour
};

namespace detail {
enum class step_kind : std::uint8_t { forward, backward, send, recv };
struct pipeline_step {
  step_kind kind = step_kind::forward;
  std::int64_t tag = 0;   ///< message id: micro-batch * 4 + direction * 2 ... unique per (dir, mb, src, dst)
  std::int32_t peer = -1;  ///< neighbour rank for send/recv
  double duration = 0;
};

constexpr std::int64_t message_tag(bool backward_direction, std::int64_t micro_batch, std::int64_t from, std::int64_t to) {
  return ((micro_batch * 2 + (backward_direction ? 1 : 0)) * 65536 + from) * 65536 + to;
}

/// Writes the queue of steps rank `r` executes into `q` from `at`; returns the new end.
/// (A plain cursor, not push_back: this loop is most of an estimate's time.)
constexpr std::size_t rank_program(std::vector<pipeline_step>& steps, std::size_t at, std::int64_t r, std::int64_t p, std::int64_t m, const stage_timing& t) {
  struct cursor {
    std::vector<pipeline_step>& v;
    std::size_t i;
    constexpr void push_back(const pipeline_step& s) { v[i++] = s; }
  } q{steps, at};
  const double f = t.forward.value, b = t.backward.value, x = t.p2p.value;
  const bool has_prev = r > 0, has_next = r < p - 1;  // transfers order the stages even when free
  const std::int64_t warmup = (p - r - 1) < m ? (p - r - 1) : m;
  const std::int64_t steady = m - warmup;
  std::int64_t fwd_mb = 0, bwd_mb = 0;
  auto recv_prev_fwd = [&](std::int64_t mb) { if (has_prev) q.push_back({step_kind::recv, message_tag(false, mb, r - 1, r), static_cast<std::int32_t>(r - 1), x}); };
  auto send_next_fwd = [&](std::int64_t mb) { if (has_next) q.push_back({step_kind::send, message_tag(false, mb, r, r + 1), static_cast<std::int32_t>(r + 1), x}); };
  auto recv_next_bwd = [&](std::int64_t mb) { if (has_next) q.push_back({step_kind::recv, message_tag(true, mb, r + 1, r), static_cast<std::int32_t>(r + 1), x}); };
  auto send_prev_bwd = [&](std::int64_t mb) { if (has_prev) q.push_back({step_kind::send, message_tag(true, mb, r, r - 1), static_cast<std::int32_t>(r - 1), x}); };
  const bool odd = (r % 2) == 1;
  for (std::int64_t i = 0; i < warmup; ++i) {
    recv_prev_fwd(fwd_mb);
    q.push_back({step_kind::forward, 0, -1, f});
    send_next_fwd(fwd_mb);
    ++fwd_mb;
  }
  if (steady > 0) recv_prev_fwd(fwd_mb);
  for (std::int64_t i = 0; i < steady; ++i) {
    const bool last = i == steady - 1;
    q.push_back({step_kind::forward, 0, -1, f});
    // send_forward_recv_backward: odd ranks send first, even ranks receive first.
    if (odd) { send_next_fwd(fwd_mb); recv_next_bwd(bwd_mb); }
    else { recv_next_bwd(bwd_mb); send_next_fwd(fwd_mb); }
    ++fwd_mb;
    q.push_back({step_kind::backward, 0, -1, b});
    if (last) {
      send_prev_bwd(bwd_mb);
    } else {
      // send_backward_recv_forward, same parity rule.
      if (odd) { send_prev_bwd(bwd_mb); recv_prev_fwd(fwd_mb); }
      else { recv_prev_fwd(fwd_mb); send_prev_bwd(bwd_mb); }
    }
    ++bwd_mb;
  }
  for (std::int64_t i = 0; i < warmup; ++i) {
    recv_next_bwd(bwd_mb);
    q.push_back({step_kind::backward, 0, -1, b});
    send_prev_bwd(bwd_mb);
    ++bwd_mb;
  }
  return q.i;
}
}  // namespace detail

/// Result of the pipeline simulation.
struct pipeline_result {
  seconds total{};                      ///< until the slowest rank finishes its last backward
  std::vector<seconds> finish = {};     ///< per rank
};

/// Simulates 1F1B over `timings.size()` ranks and `micro_batches` micro-batches.
constexpr pipeline_result simulate_1f1b(const std::vector<stage_timing>& timings, std::int64_t micro_batches) {
  const auto p = static_cast<std::int64_t>(timings.size());
  pipeline_result out;
  out.finish.resize(timings.size());
  if (p == 0 || micro_batches <= 0) return out;
  // All ranks' queues in one buffer: rank r owns [begin[r], end[r]). At most 6 steps per micro-batch.
  std::vector<detail::pipeline_step> steps(static_cast<std::size_t>(p * (6 * micro_batches + 4)));
  std::vector<std::size_t> head(timings.size(), 0), end(timings.size(), 0);
  std::size_t used = 0;
  for (std::int64_t r = 0; r < p; ++r) {
    head[static_cast<std::size_t>(r)] = used;
    used = detail::rank_program(steps, used, r, p, micro_batches, timings[static_cast<std::size_t>(r)]);
    end[static_cast<std::size_t>(r)] = used;
  }
  std::vector<double> clock(timings.size(), 0.0);
  auto pending = [&](std::size_t r) { return head[r] < end[r]; };
  while (true) {
    bool progress = false, any_left = false;
    for (std::size_t r = 0; r < timings.size(); ++r) {
      while (pending(r)) {
        const auto& s = steps[head[r]];
        if (s.kind != detail::step_kind::forward && s.kind != detail::step_kind::backward) break;
        clock[r] += s.duration;
        ++head[r];
        progress = true;
      }
      any_left = any_left || pending(r);
    }
    if (!any_left) break;
    for (std::size_t r = 0; r < timings.size(); ++r) {
      if (!pending(r)) continue;
      const auto& a = steps[head[r]];
      if (a.kind != detail::step_kind::send && a.kind != detail::step_kind::recv) continue;
      const auto peer = static_cast<std::size_t>(a.peer);
      if (!pending(peer)) continue;
      const auto& b = steps[head[peer]];
      if (b.tag != a.tag || b.kind == a.kind || (b.kind != detail::step_kind::send && b.kind != detail::step_kind::recv)) continue;
      const double start = clock[r] > clock[peer] ? clock[r] : clock[peer];
      const double finish = start + (a.duration > b.duration ? a.duration : b.duration);
      clock[r] = clock[peer] = finish;
      ++head[r];
      ++head[peer];
      progress = true;
    }
    if (!progress) detail::report_error("llmsim::schedule", "", "the 1F1B simulation deadlocked with {} stages and {} micro-batches", p, micro_batches);
  }
  double total = 0;
  for (std::size_t r = 0; r < timings.size(); ++r) {
    out.finish[r] = seconds{clock[r]};
    if (clock[r] > total) total = clock[r];
  }
  out.total = seconds{total};
  return out;
}

LLMSIM_END_NAMESPACE
