/// \file llmsim/schedule/engine.hpp
/// One pipeline-schedule engine for every schedule written as pass lists (schedule/pass.hpp):
/// each rank runs its list in order; a pass starts when its rank is free and its inputs have
/// arrived:
/// - forward of virtual stage s, micro-batch b: after the forward of (s - 1, b);
/// - backward or input-gradient backward of (s, b): after the backward (input-gradient) of
///   (s + 1, b), the last stage's after its own forward;
/// - weight-gradient backward of (s, b): after the input-gradient backward of (s, b) (same rank);
/// each plus one transfer when the neighbouring stage sits on another rank. With `async_p2p`
/// (Megatron --overlap-p2p-communication) transfers run beside compute; without it the sender
/// also waits for its send. Two entries flagged `overlapped_with_next` run as one
/// forward-backward pair: Megatron's combined 1F1B step when the chunks list their layers
/// (`combined_pair_time`), else DualPipe's computation-communication overlap (DeepSeek-V3
/// technical report §3.2.1 and deepseek-ai/DualPipe README: the expert all-to-all of one
/// micro-batch hides behind the computation of the other), taking
/// max(compute_F + compute_B, comm_F + comm_B).
///
/// Activation memory is counted from the order: a forward adds its chunk's activation set, a
/// whole backward frees it, and with the backward split the set is held until the weight-gradient
/// pass. Zero-bubble W needs the inputs of every linear layer and the output gradients (Qi et al.,
/// "Zero Bubble Pipeline Parallelism", ICLR 2024, Table 1: W still holds M_W = 32sbh of the
/// 34sbh + 5as^2b a forward stores), which is most of the set; counting it whole until W is the
/// conservative reading.
///
/// `run_schedule` adds the steady-period extension: long runs are simulated until every pass of
/// a window of micro-batches starts exactly one common period after the same pass `unit`
/// micro-batches earlier, then the remaining micro-batches are added as whole periods (tested
/// equal to the full simulation).
#pragma once

#include <llmsim/core/constexpr_math.hpp>
#include <llmsim/core/error.hpp>
#include <llmsim/schedule/dualpipev.hpp>
#include <llmsim/schedule/one_f_one_b.hpp>
#include <llmsim/schedule/pass.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// One decoder layer split as Megatron-LM's combined 1F1B step runs it (TransformerLayerSchedulePlan,
/// core/models/common/model_chunk_schedule_plan.py; the nodes of models/gpt/fine_grained_callables.py):
/// the computation before the dispatch (attention, router, permutation; all of a dense layer), the
/// dispatch exchange, the expert MLP, the combine exchange and the combine node's computation
/// after it (unpermutation, shared-expert add, residual); forward and backward, the weight
/// gradients apart (delay_wgrad_compute: the MLP's and the pre-dispatch part's). Seconds; a piece
/// includes its exposed tensor-parallel collectives and recompute replays.
struct layer_steps {
  double attn_fwd = 0, dispatch_fwd = 0, mlp_fwd = 0, combine_fwd = 0, post_fwd = 0;
  double post_bwd = 0, combine_bwd = 0, mlp_bwd = 0, mlp_wgrad = 0, dispatch_bwd = 0, attn_bwd = 0, attn_wgrad = 0;
  [[nodiscard]] constexpr double forward() const { return attn_fwd + dispatch_fwd + mlp_fwd + combine_fwd + post_fwd; }
  [[nodiscard]] constexpr double backward() const {
    return post_bwd + combine_bwd + mlp_bwd + mlp_wgrad + dispatch_bwd + attn_bwd + attn_wgrad;
  }
  [[nodiscard]] constexpr double exchanges() const { return dispatch_fwd + combine_fwd + combine_bwd + dispatch_bwd; }
  [[nodiscard]] constexpr layer_steps scaled(double k) const {
    return {attn_fwd * k,    dispatch_fwd * k, mlp_fwd * k,   combine_fwd * k,  post_fwd * k, post_bwd * k,
            combine_bwd * k, mlp_bwd * k,      mlp_wgrad * k, dispatch_bwd * k, attn_bwd * k, attn_wgrad * k};
  }
  constexpr bool operator==(const layer_steps&) const = default;
};

/// `count` consecutive layers of the same steps (may be fractional: a stage split evenly).
struct layer_run {
  layer_steps steps{};
  double count = 0;
  constexpr bool operator==(const layer_run&) const = default;
};
/// Most runs of layers one chunk may have: a stage's decoder layers fall into at most five runs
/// (cut where dense layers turn MoE, where recomputed layers end, and at the bf16 first and last
/// layers) and its MTP layer one more.
inline constexpr std::size_t max_layer_runs = 6;

/// Durations of one model chunk's passes on its rank (seconds).
struct chunk_durations {
  double forward = 0;
  double backward_input = 0;  ///< a whole backward is backward_input + backward_weight
  double backward_weight = 0;
  double forward_comm = 0;   ///< of the forward, the expert all-to-all (DualPipe pairs)
  double backward_comm = 0;  ///< of the backward (input), the expert all-to-all (DualPipe pairs)
  /// Combined 1F1B steps: the chunk's decoder layers in forward order (none: DualPipe's rule).
  std::array<layer_run, max_layer_runs> layers{};
  std::size_t layer_run_count = 0;
  constexpr bool operator==(const chunk_durations&) const = default;
};

/// Every rank's ordered pass list, in one buffer: rank r runs passes[begin[r] .. begin[r + 1]).
struct pass_lists {
  std::vector<scheduled_pass> passes;
  std::vector<std::size_t> begin;  ///< ranks + 1 offsets
};

/// What the engine simulates besides the pass lists.
struct schedule_setup {
  std::int64_t ranks = 0;
  std::int64_t chunks = 1;  ///< model chunks per rank
  chunk_placement placement = chunk_placement::looped;
  std::vector<chunk_durations> durations;  ///< [rank * chunks + chunk]
  std::vector<double> p2p;                 ///< per rank: one transfer it sends or receives
  bool async_p2p = true;
  std::vector<double> activation;  ///< per [rank * chunks + chunk]: one activation set; empty = 1 each
  constexpr bool operator==(const schedule_setup&) const = default;
};

/// The engine's answer: the pipeline time, and per rank the peak of activation sets held.
struct schedule_result {
  pipeline_result pipe{};
  std::vector<double> peak_held;  ///< per rank, weighted by `activation` (a count when it is empty)
};

namespace detail {
constexpr std::size_t type_index(pass_type t) { return static_cast<std::size_t>(t); }

/// Mutable state of one simulation.
struct engine_state {
  std::vector<double> fwd, bwd;  ///< finish of (stage, micro-batch) forward and input-gradient backward; -1: not yet
  std::vector<double> clock, held;
  std::vector<std::size_t> next;
};

/// When pass `c` on rank `r` may start, or -1 if its input is not there yet (then `blocked_on`
/// is the rank that produces it).
constexpr double ready_time(const schedule_setup& in, const engine_state& st, std::int64_t r, const scheduled_pass& c,
                            std::int64_t& blocked_on) {
  const std::int64_t p = in.ranks, stages = p * in.chunks;
  const std::int64_t stage = virtual_stage(in.placement, p, r, c.chunk);
  auto at = [&](std::int64_t s) { return static_cast<std::size_t>(c.micro_batch * stages + s); };
  if (c.type == pass_type::backward_weight) {
    const double dep = st.bwd[at(stage)];
    if (dep < 0)
      report_error("llmsim::schedule", "", "rank {} runs the weight gradients of micro-batch {} before its backward", r,
                   c.micro_batch);
    return dep;
  }
  const bool forward = c.type == pass_type::forward;
  const std::int64_t from = forward ? stage - 1 : (stage == stages - 1 ? stage : stage + 1);
  if (from < 0) return 0;
  const double dep = forward || stage == stages - 1 ? st.fwd[at(from)] : st.bwd[at(from)];
  const std::int64_t owner = rank_of_stage(in.placement, p, from);
  if (dep < 0) {
    blocked_on = owner;
    return -1;
  }
  return dep + (owner != r ? in.p2p[static_cast<std::size_t>(owner)] : 0.0);
}

/// Whether pass `c` of rank `r` sends its result to another rank.
constexpr bool sends_to_other_rank(const schedule_setup& in, std::int64_t r, const scheduled_pass& c) {
  if (c.type == pass_type::backward_weight) return false;
  const std::int64_t p = in.ranks, stages = p * in.chunks;
  const std::int64_t stage = virtual_stage(in.placement, p, r, c.chunk);
  const std::int64_t to = c.type == pass_type::forward ? stage + 1 : stage - 1;
  return to >= 0 && to < stages && rank_of_stage(in.placement, p, to) != r;
}

/// Compute and communication time of pass `c` of rank `r`.
constexpr double pass_time(const chunk_durations& d, pass_type t) {
  if (t == pass_type::forward) return d.forward;
  if (t == pass_type::backward_input) return d.backward_input;
  if (t == pass_type::backward_weight) return d.backward_weight;
  return d.backward_input + d.backward_weight;
}
constexpr double pass_comm(const chunk_durations& d, pass_type t) {
  if (t == pass_type::forward) return d.forward_comm;
  return t == pass_type::backward_weight ? 0.0 : d.backward_comm;
}

/// Where a chain of combined steps stands: when the computation and the communication streams
/// are free, when the forward's input and the backward's gradient are there, and the attention
/// weight gradients still to run.
struct combined_streams {
  double computation = 0, communication = 0, forward_input = 0, backward_grad = 0, pending_wgrad = 0;
  [[nodiscard]] constexpr double end() const { return later(computation + pending_wgrad, communication); }
};

/// Forward layer `f` and backward layer `b` (either all zero when its side has run out) as one
/// combined step, in the order TransformerLayerSchedulePlan.run issues them:
///   communication stream:           combine_bwd | dispatch_fwd, dispatch_bwd | combine_fwd
///   computation stream:   post_bwd, [pending wgrad,] attn_fwd | mlp_bwd, mlp_wgrad, mlp_fwd |
///                         attn_bwd, post_fwd (attn_wgrad left pending)
/// The dispatch backward waits for the MLP's input gradients only, the forward MLP for the
/// dispatch, the attention backward for the dispatch backward; the next layer's combine backward
/// for this one's attention input gradients (weight gradients record no event), so it runs beside
/// the attention weight gradients, which are left pending for the next step (or fill a wait for
/// the combine). Megatron runs the combine node's computation on the communication stream; here
/// it shares the computation stream's SMs (a kernel beside a GEMM gets the SMs the GEMM frees),
/// so no computation hides behind computation and a step saves at most its exchanges.
constexpr void combined_layer_step(combined_streams& t, const layer_steps& f, const layer_steps& b) {
  const double post_bwd_end = later(t.computation, t.backward_grad) + b.post_bwd;
  const double combine_bwd_end = later(t.communication, post_bwd_end) + b.combine_bwd;
  const double attn_fwd_end = later(post_bwd_end + t.pending_wgrad, t.forward_input) + f.attn_fwd;
  const double mlp_bwd_end = later(attn_fwd_end, combine_bwd_end) + b.mlp_bwd;
  const double dispatch_fwd_end = later(combine_bwd_end, attn_fwd_end) + f.dispatch_fwd;
  const double dispatch_bwd_end = later(dispatch_fwd_end, mlp_bwd_end) + b.dispatch_bwd;
  const double mlp_fwd_end = later(mlp_bwd_end + b.mlp_wgrad, dispatch_fwd_end) + f.mlp_fwd;
  const double combine_fwd_end = later(dispatch_bwd_end, mlp_fwd_end) + f.combine_fwd;
  const double attn_bwd_end = later(mlp_fwd_end, dispatch_bwd_end) + b.attn_bwd;
  const double wait = combine_fwd_end > attn_bwd_end ? combine_fwd_end - attn_bwd_end : 0.0;
  const double early = wait < b.attn_wgrad ? wait : b.attn_wgrad;  // weight gradients filling the wait
  const double post_fwd_end = later(attn_bwd_end + early, combine_fwd_end) + f.post_fwd;
  t = {post_fwd_end, combine_fwd_end, post_fwd_end, attn_bwd_end, b.attn_wgrad - early};
}

/// Layers left in a run below which nothing is left: the rounding of an even split's count / v.
inline constexpr double layer_count_rounding = 1e-12;

/// Walks a chunk's layer runs one (whole or fractional) layer at a time, forward or backward order.
struct layer_cursor {
  const chunk_durations* d = nullptr;
  bool reverse = false;
  std::size_t run = 0;
  double done = 0;  ///< layers of the current run already taken
  /// The next layer's steps (a fractional layer's scaled), or false when none is left.
  constexpr bool next(layer_steps& out) {
    while (run < d->layer_run_count) {
      const layer_run& r = d->layers[reverse ? d->layer_run_count - 1 - run : run];
      const double left = r.count - done;
      if (left > layer_count_rounding) {
        const double take = left < 1 ? left : 1;
        out = take < 1 ? r.steps.scaled(take) : r.steps;
        done += take;
        return true;
      }
      ++run;
      done = 0;
    }
    return false;
  }
};

/// A forward chunk `da` and a backward chunk `db` as Megatron's combined step: forward layer i
/// runs with backward layer L_b - 1 - i (ModelChunkSchedulePlan.run pairs every decoder layer by
/// position), the longer side's other layers alone; then what is not a layer (embedding, output
/// layer and loss) of both, one after the other.
constexpr double combined_pair_time(const chunk_durations& da, const chunk_durations& db) {
  combined_streams t;
  layer_cursor fc{&da, false}, bc{&db, true};
  double f_layers = 0, b_layers = 0;
  while (true) {
    layer_steps f{}, b{};
    const bool has_f = fc.next(f), has_b = bc.next(b);
    if (!has_f && !has_b) break;
    f_layers += f.forward();
    b_layers += b.backward();
    combined_layer_step(t, f, b);
  }
  const double rest = pass_time(da, pass_type::forward) - f_layers + pass_time(db, pass_type::backward) - b_layers;
  return t.end() + rest;
}

/// An overlapped forward-backward pair. Chunks with decoder layers (Megatron's combined 1F1B):
/// `combined_pair_time`. Otherwise (DualPipe) each pass's exchange hides under the other's
/// compute, so the pair takes the longer of all compute and all exchange.
constexpr double overlapped_pair_time(const chunk_durations& da, pass_type ta, const chunk_durations& db,
                                      pass_type tb) {
  if (ta == pass_type::forward && tb == pass_type::backward && (da.layer_run_count > 0 || db.layer_run_count > 0))
    return combined_pair_time(da, db);
  const double comm = pass_comm(da, ta) + pass_comm(db, tb);
  const double compute = pass_time(da, ta) - pass_comm(da, ta) + pass_time(db, tb) - pass_comm(db, tb);
  return compute > comm ? compute : comm;
}

/// Records pass `c` of rank `r` as run from `start` to `end`.
constexpr void finish_pass(const schedule_setup& in, engine_state& st, std::int64_t m, std::int64_t r,
                           const scheduled_pass& c, double start, double end, std::vector<double>* starts,
                           std::vector<pipeline_event>* events) {
  const std::int64_t p = in.ranks, stages = p * in.chunks;
  const auto ri = static_cast<std::size_t>(r);
  const std::int64_t stage = virtual_stage(in.placement, p, r, c.chunk);
  const auto slot = static_cast<std::size_t>(c.micro_batch * stages + stage);
  if (c.type == pass_type::forward) st.fwd[slot] = end;
  if (c.type == pass_type::backward || c.type == pass_type::backward_input) st.bwd[slot] = end;
  if (starts != nullptr)
    (*starts)[((ri * 4 + type_index(c.type)) * static_cast<std::size_t>(in.chunks) +
               static_cast<std::size_t>(c.chunk)) *
                  static_cast<std::size_t>(m) +
              static_cast<std::size_t>(c.micro_batch)] = start;
  if (events != nullptr) {
    constexpr pipeline_event::kind kinds[4] = {pipeline_event::kind::forward, pipeline_event::kind::backward,
                                               pipeline_event::kind::backward_input,
                                               pipeline_event::kind::backward_weight};
    events->push_back({r, kinds[type_index(c.type)], c.micro_batch, c.chunk, start, end});
  }
}

/// The activation sets pass `c` of rank `r` allocates (+) or frees (-).
constexpr double held_change(const schedule_setup& in, std::int64_t r, const scheduled_pass& c) {
  const std::size_t unit = static_cast<std::size_t>(r * in.chunks + c.chunk);
  const double set = in.activation.empty() ? 1.0 : in.activation[unit];
  if (c.type == pass_type::forward) return set;
  return c.type == pass_type::backward_input ? 0.0 : -set;
}

/// Runs rank `r` until its next pass waits on another rank; returns that rank, or -1 when done.
constexpr std::int64_t advance_rank(const schedule_setup& in, const pass_lists& order, engine_state& st, std::int64_t m,
                                    std::int64_t r, std::vector<double>* starts, std::vector<pipeline_event>* events,
                                    std::vector<double>& peak) {
  const auto ri = static_cast<std::size_t>(r);
  const std::size_t end = order.begin[ri + 1];
  while (st.next[ri] < end) {
    const scheduled_pass& a = order.passes[st.next[ri]];
    const bool pair = a.overlapped_with_next && st.next[ri] + 1 < end;
    std::int64_t blocked_on = -1;
    double ready = ready_time(in, st, r, a, blocked_on);
    if (blocked_on >= 0) return blocked_on;
    const chunk_durations& da =
        in.durations[ri * static_cast<std::size_t>(in.chunks) + static_cast<std::size_t>(a.chunk)];
    double work = pass_time(da, a.type);
    bool sends = sends_to_other_rank(in, r, a);
    if (pair) {
      const scheduled_pass& b = order.passes[st.next[ri] + 1];
      const double ready_b = ready_time(in, st, r, b, blocked_on);
      if (blocked_on >= 0) return blocked_on;
      ready = ready_b > ready ? ready_b : ready;
      const chunk_durations& db =
          in.durations[ri * static_cast<std::size_t>(in.chunks) + static_cast<std::size_t>(b.chunk)];
      work = overlapped_pair_time(da, a.type, db, b.type);
      sends = sends || sends_to_other_rank(in, r, b);
    }
    const double start = st.clock[ri] > ready ? st.clock[ri] : ready;
    finish_pass(in, st, m, r, a, start, start + work, starts, events);
    // Memory: a pair's forward allocates before its backward frees (DualPipe's count; the estimate
    // sizes Megatron's combined steps layer by layer itself, estimate.hpp `held_by_others`).
    double grow = 0, shrink = 0;
    for (std::size_t k = 0; k < (pair ? 2U : 1U); ++k) {
      const scheduled_pass& c = order.passes[st.next[ri] + k];
      if (k == 1) finish_pass(in, st, m, r, c, start, start + work, starts, events);
      const double d = held_change(in, r, c);
      (d > 0 ? grow : shrink) += d;
    }
    st.held[ri] += grow;
    peak[ri] = st.held[ri] > peak[ri] ? st.held[ri] : peak[ri];
    st.held[ri] += shrink;
    st.clock[ri] = start + work + (!in.async_p2p && sends ? in.p2p[ri] : 0.0);
    st.next[ri] += pair ? 2 : 1;
  }
  return -1;
}

/// The simulation itself over `m` micro-batches. `starts` (if given) receives the start of every
/// pass at [((rank·4 + type)·chunks + chunk)·m + micro_batch] (-1 for passes not in the lists).
constexpr schedule_result simulate_passes(const schedule_setup& in, const pass_lists& order, std::int64_t m,
                                          std::vector<double>* starts = nullptr,
                                          std::vector<pipeline_event>* events = nullptr) {
  const std::int64_t p = in.ranks;
  const auto pn = static_cast<std::size_t>(p);
  schedule_result out;
  out.pipe.finish.assign(pn, seconds{});
  out.peak_held.assign(pn, 0.0);
  if (p == 0 || m <= 0) return out;
  engine_state st;
  const auto slots = static_cast<std::size_t>(p * in.chunks * m);
  st.fwd.assign(slots, -1.0);
  st.bwd.assign(slots, -1.0);
  st.clock.assign(pn, 0.0);
  st.held.assign(pn, 0.0);
  st.next.assign(order.begin.begin(), order.begin.end() - 1);
  if (starts != nullptr) starts->assign(pn * 4 * static_cast<std::size_t>(in.chunks * m), -1.0);
  // Follow dependencies instead of sweeping: run a rank until it waits, then go to the rank it
  // waits on. Every pass is visited once, plus at most p hops per stall.
  std::int64_t r = 0, next_scan = 0, hops = 0;
  while (true) {
    const std::size_t before = st.next[static_cast<std::size_t>(r)];
    const std::int64_t blocked_on = advance_rank(in, order, st, m, r, starts, events, out.peak_held);
    if (st.next[static_cast<std::size_t>(r)] != before) hops = 0;
    if (blocked_on < 0) {  // finished: continue with the first rank that is not
      while (next_scan < p &&
             st.next[static_cast<std::size_t>(next_scan)] == order.begin[static_cast<std::size_t>(next_scan) + 1])
        ++next_scan;
      if (next_scan == p) break;
      r = next_scan;
      continue;
    }
    if (++hops > p + 1)
      report_error("llmsim::schedule", "",
                   "the pipeline schedule deadlocked with {} ranks, {} chunks and {} micro-batches", p, in.chunks, m);
    r = blocked_on;
  }
  double total = 0;
  for (std::size_t k = 0; k < pn; ++k) {
    out.pipe.finish[k] = seconds{st.clock[k]};
    total = st.clock[k] > total ? st.clock[k] : total;
  }
  out.pipe.total = seconds{total};
  return out;
}

/// The common period by which every pass of micro-batches lo .. hi (on every rank) starts after
/// the same pass of micro-batch - unit, if there is one.
constexpr bool common_period(const std::vector<double>& starts, std::int64_t m, std::int64_t lo, std::int64_t hi,
                             std::int64_t unit, double& period) {
  bool have = false;
  const auto mn = static_cast<std::size_t>(m);
  for (std::size_t row = 0; row * mn < starts.size(); ++row) {
    for (std::int64_t b = lo; b <= hi; ++b) {
      const double now = starts[row * mn + static_cast<std::size_t>(b)];
      const double before = starts[row * mn + static_cast<std::size_t>(b - unit)];
      if ((now < 0) != (before < 0)) return false;
      if (now < 0) continue;
      const double d = now - before;
      if (!have) {
        period = d;
        have = true;
        continue;
      }
      const double diff = d > period ? d - period : period - d;
      if (diff > 1e-12 * (now > 1.0 ? now : 1.0)) return false;
    }
  }
  return have && period > 0;
}
}  // namespace detail

/// Runs the schedule `lists(k)` (the pass lists for k micro-batches) over `m` micro-batches.
/// `unit` is the schedule's repeat in micro-batches (1, or the interleaved group size) and `lag`
/// bounds how many micro-batches apart two passes that wait on each other can be (warm-up depth).
/// Long runs stop at a trial length whose steady phase repeats with a common period for a window
/// longer than `lag` (then every later window repeats it: the schedule is a max-plus linear
/// recurrence of memory `lag`, Baccelli et al., "Synchronization and Linearity", ch. 3), and add
/// that period once per further `unit` micro-batches.
template <class Lists>
constexpr schedule_result run_schedule(const schedule_setup& in, std::int64_t m, std::int64_t unit, std::int64_t lag,
                                       const Lists& lists) {
  const std::int64_t span = lag + unit + 2;  // warm-up to skip, window to compare, cool-down to leave
  std::int64_t trial = 3 * span + unit;
  trial += ((m - trial) % unit + unit) % unit;  // the same remainder as m: the same last group
  std::vector<double> starts;
  while (2 * trial <= m) {  // a trial costs at most half the full simulation
    schedule_result part = detail::simulate_passes(in, lists(trial), trial, &starts);
    double period = 0;
    const std::int64_t hi = trial - 1 - span, lo = hi - span;
    if (detail::common_period(starts, trial, lo, hi, unit, period)) {
      const double extra = period * static_cast<double>((m - trial) / unit);
      for (auto& f : part.pipe.finish) f = f + seconds{extra};
      part.pipe.total = part.pipe.total + seconds{extra};
      return part;
    }
    trial += (trial / unit) * unit;  // about double, same remainder
  }
  return detail::simulate_passes(in, lists(m), m);
}

// ---- pass-list generators ----------------------------------------------------------------------

/// Plain 1F1B (Megatron forward_backward_pipelining_without_interleaving): rank r runs
/// min(p - r - 1, m) warm-up forwards, then one forward and one whole backward alternately, then
/// the remaining backwards.
constexpr pass_lists one_f_one_b_passes(std::int64_t p, std::int64_t m) {
  pass_lists out;
  out.passes.reserve(static_cast<std::size_t>(2 * p * m));
  out.begin.push_back(0);
  for (std::int64_t r = 0; r < p; ++r) {
    const std::int64_t warmup = p - r - 1 < m ? p - r - 1 : m;
    for (std::int64_t b = 0; b < warmup; ++b) out.passes.push_back({pass_type::forward, b, 0, false});
    for (std::int64_t b = 0; b < m - warmup; ++b) {
      out.passes.push_back({pass_type::forward, b + warmup, 0, false});
      out.passes.push_back({pass_type::backward, b, 0, false});
    }
    for (std::int64_t b = m - warmup; b < m; ++b) out.passes.push_back({pass_type::backward, b, 0, false});
    out.begin.push_back(out.passes.size());
  }
  return out;
}

/// ZB-H1 (Qi et al., ICLR 2024, §2.1 and Figure 3 top), the passes of rank `r` appended to `out`:
/// 1F1B's min(p - r - 1, m) warm-up forwards, then for every micro-batch k a forward (while any
/// remain), the input-gradient backward B_k and, from k = r on, the weight-gradient backward
/// W_{k-r}: rank r postpones its first W by r steps, so the B passes of the ramp-up run as soon as
/// their gradients arrive and the postponed W passes fill the cool-down. Every rank then holds at
/// most p micro-batches' activations (until their W), as many as 1F1B's first rank.
constexpr std::size_t write_zb_h1_rank(std::vector<scheduled_pass>& out, std::size_t at, std::int64_t p, std::int64_t m,
                                       std::int64_t r) {
  // (indexed writes into a sized buffer, not push_back: this is most of a long schedule's cost)
  const std::int64_t warmup = p - r - 1 < m ? p - r - 1 : m;
  for (std::int64_t b = 0; b < warmup; ++b) out[at++] = {pass_type::forward, b, 0, false};
  std::int64_t next_w = 0;
  for (std::int64_t k = 0; k < m; ++k) {
    if (k + warmup < m) out[at++] = {pass_type::forward, k + warmup, 0, false};
    out[at++] = {pass_type::backward_input, k, 0, false};
    if (k >= r) out[at++] = {pass_type::backward_weight, next_w++, 0, false};
  }
  while (next_w < m) out[at++] = {pass_type::backward_weight, next_w++, 0, false};
  return at;
}

/// ZB-H1's pass lists of every rank.
constexpr pass_lists zb_h1_passes(std::int64_t p, std::int64_t m) {
  pass_lists out;
  // (sized by construction: Clang rejects libstdc++'s resize of trivial elements in constant evaluation)
  out.passes = std::vector<scheduled_pass>(static_cast<std::size_t>(3 * p * m));
  out.begin = std::vector<std::size_t>(static_cast<std::size_t>(p + 1), 0);
  for (std::int64_t r = 0; r < p; ++r)
    out.begin[static_cast<std::size_t>(r + 1)] =
        write_zb_h1_rank(out.passes, out.begin[static_cast<std::size_t>(r)], p, m, r);
  return out;
}

/// ZB-H1's passes of rank `r` alone.
constexpr std::vector<scheduled_pass> zb_h1_rank_passes(std::int64_t p, std::int64_t m, std::int64_t r) {
  std::vector<scheduled_pass> out(static_cast<std::size_t>(3 * m));
  write_zb_h1_rank(out, 0, p, m, r);
  return out;
}

/// The most activation sets (micro-batch chunks) one rank's order holds at once: a forward
/// allocates one, a whole backward or a weight-gradient pass frees it (an input-gradient pass keeps
/// it for its W).
constexpr std::int64_t peak_in_flight(const std::vector<scheduled_pass>& order) {
  std::int64_t held = 0, peak = 0;
  for (const scheduled_pass& c : order) {
    if (c.type == pass_type::forward) peak = ++held > peak ? held : peak;
    if (c.type == pass_type::backward || c.type == pass_type::backward_weight) --held;
  }
  return peak;
}

/// ZB-H1 over `m` micro-batches with the steady-period extension (every micro-batch when
/// `events` is given). A pass waits on passes at most p micro-batches apart (warm-up p - r - 1,
/// W postponed by r).
constexpr schedule_result simulate_zb_h1(const schedule_setup& in, std::int64_t m,
                                         std::vector<pipeline_event>* events = nullptr) {
  if (events != nullptr) return detail::simulate_passes(in, zb_h1_passes(in.ranks, m), m, nullptr, events);
  return run_schedule(in, m, 1, in.ranks + 1, [&](std::int64_t k) { return zb_h1_passes(in.ranks, k); });
}

/// DualPipeV's pass lists of every rank (`dualpipev_order`).
constexpr pass_lists dualpipev_passes(std::int64_t p, std::int64_t m) {
  pass_lists out;
  out.begin.push_back(0);
  for (std::int64_t r = 0; r < p; ++r) {
    for (const scheduled_pass& c : dualpipev_order(p, m, r)) out.passes.push_back(c);
    out.begin.push_back(out.passes.size());
  }
  return out;
}

/// DualPipeV over `m` micro-batches (`in`: two chunks per rank, V-shaped placement) with the
/// steady-period extension (every micro-batch when `events` is given). A pass waits on passes at
/// most 2p micro-batches apart (the first rank's warm-up reaches micro-batch 2p - 1).
constexpr schedule_result simulate_dualpipev(const schedule_setup& in, std::int64_t m,
                                             std::vector<pipeline_event>* events = nullptr) {
  if (events != nullptr) return detail::simulate_passes(in, dualpipev_passes(in.ranks, m), m, nullptr, events);
  return run_schedule(in, m, 1, 2 * in.ranks + 1, [&](std::int64_t k) { return dualpipev_passes(in.ranks, k); });
}

LLMSIM_END_NAMESPACE
