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
  constexpr bool operator==(const stage_timing&) const = default;
};

namespace detail {
enum class step_kind : std::uint8_t { forward, backward, send, recv };
struct pipeline_step {
  step_kind kind = step_kind::forward;
  std::int64_t tag = 0;    ///< message id: micro-batch * 4 + direction * 2 ... unique per (dir, mb, src, dst)
  std::int32_t peer = -1;  ///< neighbour rank for send/recv
  double duration = 0;
  std::int32_t micro_batch = -1;
};

constexpr std::int64_t message_tag(bool backward_direction, std::int64_t micro_batch, std::int64_t from,
                                   std::int64_t to) {
  return ((micro_batch * 2 + (backward_direction ? 1 : 0)) * 65536 + from) * 65536 + to;
}

/// Writes the queue of steps rank `r` executes into `q` from `at`; returns the new end.
/// (A plain cursor, not push_back: this loop is most of an estimate's time.)
constexpr std::size_t rank_program(std::vector<pipeline_step>& steps, std::size_t at, std::int64_t r, std::int64_t p,
                                   std::int64_t m, const stage_timing& t) {
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
  auto recv_prev_fwd = [&](std::int64_t mb) {
    if (has_prev)
      q.push_back({step_kind::recv, message_tag(false, mb, r - 1, r), static_cast<std::int32_t>(r - 1), x,
                   static_cast<std::int32_t>(mb)});
  };
  auto send_next_fwd = [&](std::int64_t mb) {
    if (has_next)
      q.push_back({step_kind::send, message_tag(false, mb, r, r + 1), static_cast<std::int32_t>(r + 1), x,
                   static_cast<std::int32_t>(mb)});
  };
  auto recv_next_bwd = [&](std::int64_t mb) {
    if (has_next)
      q.push_back({step_kind::recv, message_tag(true, mb, r + 1, r), static_cast<std::int32_t>(r + 1), x,
                   static_cast<std::int32_t>(mb)});
  };
  auto send_prev_bwd = [&](std::int64_t mb) {
    if (has_prev)
      q.push_back({step_kind::send, message_tag(true, mb, r, r - 1), static_cast<std::int32_t>(r - 1), x,
                   static_cast<std::int32_t>(mb)});
  };
  const bool odd = (r % 2) == 1;
  for (std::int64_t i = 0; i < warmup; ++i) {
    recv_prev_fwd(fwd_mb);
    q.push_back({step_kind::forward, 0, -1, f, static_cast<std::int32_t>(fwd_mb)});
    send_next_fwd(fwd_mb);
    ++fwd_mb;
  }
  if (steady > 0) recv_prev_fwd(fwd_mb);
  for (std::int64_t i = 0; i < steady; ++i) {
    const bool last = i == steady - 1;
    q.push_back({step_kind::forward, i + 1, -1, f,
                 static_cast<std::int32_t>(fwd_mb)});  // tag: steady iteration i (for the steady-state check)
    // send_forward_recv_backward: odd ranks send first, even ranks receive first.
    if (odd) {
      send_next_fwd(fwd_mb);
      recv_next_bwd(bwd_mb);
    } else {
      recv_next_bwd(bwd_mb);
      send_next_fwd(fwd_mb);
    }
    ++fwd_mb;
    q.push_back({step_kind::backward, 0, -1, b, static_cast<std::int32_t>(bwd_mb)});
    if (last) {
      send_prev_bwd(bwd_mb);
    } else {
      // send_backward_recv_forward, same parity rule.
      if (odd) {
        send_prev_bwd(bwd_mb);
        recv_prev_fwd(fwd_mb);
      } else {
        recv_prev_fwd(fwd_mb);
        send_prev_bwd(bwd_mb);
      }
    }
    ++bwd_mb;
  }
  for (std::int64_t i = 0; i < warmup; ++i) {
    recv_next_bwd(bwd_mb);
    q.push_back({step_kind::backward, 0, -1, b, static_cast<std::int32_t>(bwd_mb)});
    send_prev_bwd(bwd_mb);
    ++bwd_mb;
  }
  return q.i;
}
}  // namespace detail

/// One span of a simulated pipeline rank (what a trace shows): a forward or backward of a
/// micro-batch (model chunk `chunk` when interleaved), or a transfer to or from a neighbour;
/// zero-bubble schedules split the backward into its input-gradient and weight-gradient parts.
struct pipeline_event {
  enum class kind : std::uint8_t { forward, backward, send, recv, backward_input, backward_weight };
  std::int64_t rank = 0;
  kind what = kind::forward;
  std::int64_t micro_batch = 0;
  std::int64_t chunk = 0;
  double start = 0, end = 0;
};

/// Result of the pipeline simulation.
struct pipeline_result {
  seconds total{};                   ///< until the slowest rank finishes its last backward
  std::vector<seconds> finish = {};  ///< per rank
};

namespace detail {
/// The event simulation itself. When `steady_starts` is given, it receives for every rank the
/// clock at the start of each steady-phase iteration (rank r's k-th at [r * micro_batches + k]).
constexpr pipeline_result simulate_events(const std::vector<stage_timing>& timings, std::int64_t micro_batches,
                                          std::vector<double>* steady_starts,
                                          std::vector<pipeline_event>* events = nullptr) {
  const auto p = static_cast<std::int64_t>(timings.size());
  pipeline_result out;
  out.finish.resize(timings.size());
  // All ranks' queues in one buffer: rank r owns [head[r], end[r]). At most 6 steps per micro-batch.
  std::vector<pipeline_step> steps(static_cast<std::size_t>(p * (6 * micro_batches + 4)));
  std::vector<std::size_t> head(timings.size(), 0), end(timings.size(), 0);
  std::size_t used = 0;
  for (std::int64_t r = 0; r < p; ++r) {
    head[static_cast<std::size_t>(r)] = used;
    used = rank_program(steps, used, r, p, micro_batches, timings[static_cast<std::size_t>(r)]);
    end[static_cast<std::size_t>(r)] = used;
  }
  if (steady_starts != nullptr) steady_starts->assign(static_cast<std::size_t>(p * micro_batches), 0.0);
  std::vector<double> clock(timings.size(), 0.0);
  auto pending = [&](std::size_t r) { return head[r] < end[r]; };
  auto is_compute = [&](std::size_t r) {
    const auto k = steps[head[r]].kind;
    return k == step_kind::forward || k == step_kind::backward;
  };
  auto run_compute = [&](std::size_t r) {
    while (pending(r) && is_compute(r)) {
      const auto& st = steps[head[r]++];
      if (steady_starts != nullptr && st.kind == step_kind::forward && st.tag > 0)
        (*steady_starts)[r * static_cast<std::size_t>(micro_batches) + static_cast<std::size_t>(st.tag - 1)] = clock[r];
      if (events != nullptr)
        events->push_back(
            {static_cast<std::int64_t>(r),
             st.kind == step_kind::forward ? pipeline_event::kind::forward : pipeline_event::kind::backward,
             st.micro_batch, 0, clock[r], clock[r] + st.duration});
      clock[r] += st.duration;
    }
  };
  // Follow dependencies instead of sweeping: run a rank until it waits on a neighbour, complete
  // the pair if the neighbour is there, else go advance the neighbour. Every step is visited once.
  std::size_t r = 0;
  std::size_t next_scan = 0;
  std::int64_t hops_without_progress = 0;
  while (true) {
    run_compute(r);
    if (!pending(r)) {
      while (next_scan < timings.size() && !pending(next_scan)) ++next_scan;
      if (next_scan == timings.size()) break;
      r = next_scan;
      continue;
    }
    const auto& a = steps[head[r]];
    const auto q = static_cast<std::size_t>(a.peer);
    run_compute(q);
    if (pending(q)) {
      const auto& b = steps[head[q]];
      if (b.tag == a.tag && b.kind != a.kind) {
        const double start = clock[r] > clock[q] ? clock[r] : clock[q];
        const double finish = start + (a.duration > b.duration ? a.duration : b.duration);
        clock[r] = clock[q] = finish;
        if (events != nullptr && finish > start) {
          auto transfer = [](step_kind k) {
            return k == step_kind::send ? pipeline_event::kind::send : pipeline_event::kind::recv;
          };
          events->push_back({static_cast<std::int64_t>(r), transfer(a.kind), a.micro_batch, 0, start, finish});
          events->push_back({static_cast<std::int64_t>(q), transfer(b.kind), b.micro_batch, 0, start, finish});
        }
        ++head[r];
        ++head[q];
        hops_without_progress = 0;
        continue;
      }
    }
    if (++hops_without_progress > 2 * p + 2)
      report_error("llmsim::schedule", "", "the 1F1B simulation deadlocked with {} stages and {} micro-batches", p,
                   micro_batches);
    r = q;
  }
  double total = 0;
  for (std::size_t i = 0; i < timings.size(); ++i) {
    out.finish[i] = seconds{clock[i]};
    if (clock[i] > total) total = clock[i];
  }
  out.total = seconds{total};
  return out;
}

/// The common period of every rank's steady phase, if the simulation reached it: the last
/// p + 2 steady iterations before the final two advance every rank's clock by the same amount.
/// Once all ranks shift uniformly, the max-plus dynamics of the schedule repeat that shift for
/// every further micro-batch (Baccelli et al., "Synchronization and Linearity", ch. 3).
constexpr bool steady_period(const std::vector<double>& starts, std::int64_t p, std::int64_t micro_batches,
                             double& period) {
  const std::int64_t window = p + 2;
  bool have = false;
  for (std::int64_t r = 0; r < p; ++r) {
    const std::int64_t warmup = (p - r - 1) < micro_batches ? (p - r - 1) : micro_batches;
    const std::int64_t steady = micro_batches - warmup;
    const std::int64_t last = steady - 3;  // difference index k: starts[k + 1] - starts[k]
    if (last - window < 0) return false;
    for (std::int64_t k = last - window; k <= last; ++k) {
      const auto base = static_cast<std::size_t>(r * micro_batches);
      const double d = starts[base + static_cast<std::size_t>(k + 1)] - starts[base + static_cast<std::size_t>(k)];
      if (!have) {
        period = d;
        have = true;
        continue;
      }
      const double scale = starts[base + static_cast<std::size_t>(k + 1)];
      const double diff = d > period ? d - period : period - d;
      if (diff > 1e-12 * (scale > 1.0 ? scale : 1.0)) return false;
    }
  }
  return have && period > 0;
}
}  // namespace detail

/// Simulates 1F1B over `timings.size()` ranks and `micro_batches` micro-batches.
/// Long runs are simulated until every rank's steady phase repeats with a common period, then
/// extended by that period for the remaining micro-batches — the same answer as simulating them
/// all (tested), at a cost independent of the micro-batch count (1000+ micro-batches stay within
/// the compilers' default constant-evaluation limits).
constexpr pipeline_result simulate_1f1b(const std::vector<stage_timing>& timings, std::int64_t micro_batches) {
  const auto p = static_cast<std::int64_t>(timings.size());
  if (p == 0 || micro_batches <= 0) {
    pipeline_result none;
    none.finish.resize(timings.size());
    return none;
  }
  std::int64_t trial = 4 * p + 16;
  std::vector<double> starts;
  while (trial + 8 < micro_batches) {
    pipeline_result part = detail::simulate_events(timings, trial, &starts);
    double period = 0;
    if (detail::steady_period(starts, p, trial, period)) {
      const double extra = period * static_cast<double>(micro_batches - trial);
      for (auto& f : part.finish) f = f + seconds{extra};
      part.total = part.total + seconds{extra};
      return part;
    }
    trial *= 2;
  }
  return detail::simulate_events(timings, micro_batches, nullptr);
}

/// The full event simulation of every micro-batch (reference for `simulate_1f1b`'s shortcut).
constexpr pipeline_result simulate_1f1b_exhaustive(const std::vector<stage_timing>& timings, std::int64_t micro_batches,
                                                   std::vector<pipeline_event>* events = nullptr) {
  if (timings.empty() || micro_batches <= 0) {
    pipeline_result none;
    none.finish.resize(timings.size());
    return none;
  }
  return detail::simulate_events(timings, micro_batches, nullptr, events);
}

LLMSIM_END_NAMESPACE
