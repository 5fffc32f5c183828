/// \file llmsim/estimate/trace.hpp
/// The timeline of one simulated iteration (run time only): every forward and backward of every
/// micro-batch (and model chunk) on every pipeline rank, the transfers between ranks, the
/// straggler wait, the exposed data-parallel sync and the optimizer step, and each rank's
/// allocated memory over time. The same simulation as the estimate, with every micro-batch run.
///
/// ```cpp
/// const auto t = llmsim::trace_iteration(model, strategy, system);   // t.spans, t.memory
/// ```
#pragma once

#include <llmsim/estimate/estimate.hpp>

#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// The streams a rank's spans run on.
enum class trace_stream : std::uint8_t { compute, pipeline, data_parallel };
inline constexpr std::array<std::string_view, 3> trace_stream_names{"compute", "pipeline p2p", "data-parallel"};

/// One span of the timeline (times in seconds from the start of the iteration).
struct trace_span {
  std::int64_t rank = 0;
  trace_stream stream = trace_stream::compute;
  std::string_view
      name{};  ///< forward, backward (input, weight), send, recv, straggler wait, gradient sync, optimizer step
  std::int64_t micro_batch = -1;  ///< -1 for the iteration tail
  std::int64_t chunk = -1;        ///< model chunk (interleaved), else 0; -1 for the tail
  double start = 0, end = 0;
};

/// A rank's allocated bytes from `time` on.
struct trace_sample {
  std::int64_t rank = 0;
  double time = 0;
  double bytes = 0;
};

struct iteration_trace {
  std::vector<trace_span> spans;
  std::vector<trace_sample> memory;
  estimate_result estimate{};           ///< the estimate the timeline belongs to
  std::vector<std::size_t> rank_stage;  ///< index into estimate.stages of every rank
};

namespace detail {
/// Which stage of `r` every pipeline rank runs (the ranks a stage stands for).
inline std::vector<std::size_t> stages_of_ranks(const estimate_result& r, const model_spec& m, const strategy_spec& s) {
  const stage_layers split = split_layers(m, s);
  std::vector<std::size_t> out(static_cast<std::size_t>(s.pp_size), 0);
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank) {
    out[static_cast<std::size_t>(rank)] =
        find_stage(r, stage_kind_of(rank, s.pp_size), layout_of_rank(m, s, split, rank));
  }
  return out;
}

/// A rank's memory at each edge of its forwards and backwards: model memory, the micro-batches
/// (chunks) it holds, and the running one's own transient peak.
inline void sample_memory(iteration_trace& t, const stage_result& st, const strategy_spec& s, std::int64_t rank) {
  const double model = static_cast<double>(st.model_mem.value);
  const double unit =
      static_cast<double>(st.fwd_activation_cache_per_micro_batch.value) / static_cast<double>(s.interleaving_size);
  double held = 0;
  t.memory.push_back({rank, 0.0, model});
  for (const trace_span& sp : t.spans) {
    if (sp.rank != rank || sp.stream != trace_stream::compute || sp.micro_batch < 0) continue;
    const bool forward = sp.name == "forward";
    const double frees = sp.name == "backward input" ? 0 : 1;  // zero bubble: the activations stay until W
    const double transient = static_cast<double>(forward ? st.fwd_transient_mem.value : st.bwd_transient_mem.value);
    t.memory.push_back({rank, sp.start, model + (forward ? held : held - frees) * unit + transient});
    held += forward ? 1 : -frees;
    t.memory.push_back({rank, sp.end, model + held * unit});
  }
}
}  // namespace detail

/// Simulates one iteration of the job with every micro-batch and returns its timeline.
inline iteration_trace trace_iteration(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  iteration_trace t;
  t.estimate = estimate(m, s, sys);
  const estimate_result& r = t.estimate;
  t.rank_stage = detail::stages_of_ranks(r, m, s);
  std::vector<std::uint8_t> rank_stage(t.rank_stage.begin(), t.rank_stage.end());
  std::vector<pipeline_event> events;
  const pipeline_result pipe =
      detail::run_pipeline(r, s, rank_stage, r.cost.comm_result.p2p_time_per_transfer, &events);
  for (const pipeline_event& e : events) {
    const bool compute = e.what != pipeline_event::kind::send && e.what != pipeline_event::kind::recv;
    constexpr std::array<std::string_view, 6> names{"forward", "backward",       "send",
                                                    "recv",    "backward input", "backward weight"};
    t.spans.push_back({e.rank, compute ? trace_stream::compute : trace_stream::pipeline,
                       names[static_cast<std::size_t>(e.what)], e.micro_batch, e.chunk, e.start, e.end});
  }
  // The tail after the pipeline, as the estimate prices it: straggler wait, exposed sync, optimizer.
  const double pipeline_end = pipe.total.value, tail_start = r.cost.pipeline_time.value;
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank) {
    const stage_result& st = r.stages[t.rank_stage[static_cast<std::size_t>(rank)]];
    if (tail_start > pipeline_end)
      t.spans.push_back({rank, trace_stream::compute, "straggler wait", -1, -1, pipeline_end, tail_start});
    const double sync_end = tail_start + st.dp_exposed_time.value;
    if (sync_end > tail_start)
      t.spans.push_back({rank, trace_stream::data_parallel, "gradient sync", -1, -1, tail_start, sync_end});
    if (st.optim_time.value > 0)
      t.spans.push_back(
          {rank, trace_stream::compute, "optimizer step", -1, -1, sync_end, sync_end + st.optim_time.value});
  }
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank)
    detail::sample_memory(t, r.stages[t.rank_stage[static_cast<std::size_t>(rank)]], s, rank);
  return t;
}

LLMSIM_END_NAMESPACE
