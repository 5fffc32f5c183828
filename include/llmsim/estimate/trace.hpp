/// \file llmsim/estimate/trace.hpp
/// The timeline of one simulated iteration (run time only): every forward and backward of every
/// micro-batch (and model chunk) on every pipeline rank broken into the ops it runs, the transfers
/// between ranks, the straggler wait, the exposed data-parallel sync and the optimizer step, and
/// each rank's allocated memory over time. The same simulation as the estimate, with every
/// micro-batch run.
///
/// Streams (a thread per stream in the Chrome trace):
/// - `passes`: one span per forward / backward of a micro-batch (chunk), as the schedule runs it;
/// - `compute`: its GEMMs, attention and memory-bound kernels, one span per op, then the
///   optimizer step (and the straggler wait);
/// - `tensor_parallel`, `expert_parallel`: its tensor-parallel collectives and its expert
///   all-to-all / all-gather / reduce-scatter. Megatron-LM issues them on the compute stream and
///   waits for them, so the compute thread is idle while one runs: the op spans of a pass follow
///   each other across the three threads and tile the pass span. Except with tp_comm_overlap: a
///   userbuffers collective (`op::userbuffers`) starts with the GEMM it runs beside and its span
///   (its op's recorded time) is the pair's, that GEMM's time plus what the overlap leaves exposed;
/// - `pipeline`: sends and receives between neighbouring ranks;
/// - `data_parallel`: the exposed gradient sync after the pipeline;
/// - `context_parallel`: context parallelism's all-to-all, all-gather and KV ring exchanges; a
///   ring exchange (`op::beside_previous`) starts with the attention step it runs beside, and the
///   pass waits only for what outlasts that step.
///
/// ```cpp
/// const auto t = llmsim::trace_iteration(model, strategy, system);   // t.spans, t.ops, t.memory
/// ```
#pragma once

#include <llmsim/estimate/estimate.hpp>

#include <string>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// The streams a rank's spans run on.
enum class trace_stream : std::uint8_t {
  passes,
  compute,
  tensor_parallel,
  expert_parallel,
  pipeline,
  data_parallel,
  context_parallel
};
inline constexpr std::array<std::string_view, 7> trace_stream_names{"micro-batch passes",   "compute",
                                                                    "tensor-parallel comm", "expert-parallel comm",
                                                                    "pipeline p2p",         "data-parallel comm",
                                                                    "context-parallel comm"};

/// Labels of an op span's pass: the forward, the input- and weight-gradient halves of the
/// backward, and the forward a recompute segment replays before its backward.
inline constexpr std::array<std::string_view, 4> trace_pass_names{"forward", "backward_input", "backward_weight",
                                                                  "recompute_forward"};

/// One priced op of the job's programs (op spans point at these).
struct trace_op {
  op o{};
  seconds time{};
  std::string shape{};  ///< the shape key a compute op is priced by ("" for others)
};

/// One span of the timeline (times in seconds from the start of the iteration).
struct trace_span {
  std::int64_t rank = 0;
  trace_stream stream = trace_stream::compute;
  /// passes: forward / backward; ops: the leaf (Megatron module) name; pipeline: send / recv;
  /// tail: straggler wait, gradient sync, optimizer step
  std::string_view name{};
  std::int64_t micro_batch = -1;  ///< -1 for the iteration tail
  std::int64_t chunk = -1;        ///< model chunk (interleaved), else 0; -1 for the tail
  double start = 0, end = 0;
  std::int32_t op = -1;     ///< op spans: index into iteration_trace::ops
  std::int32_t layer = -1;  ///< op spans: decoder layer in the model (-1: embedding, head, transfer gather)
  std::uint8_t pass = 0;    ///< op spans: index into trace_pass_names
};

/// A rank's allocated bytes from `time` on.
struct trace_sample {
  std::int64_t rank = 0;
  double time = 0;
  double bytes = 0;
};

struct iteration_trace {
  std::vector<trace_span> spans;
  std::vector<trace_op> ops;  ///< every distinct op the stage programs emit, priced
  std::vector<trace_sample> memory;
  estimate_result estimate{};           ///< the estimate the timeline belongs to
  std::vector<std::size_t> rank_stage;  ///< index into estimate.stages of every rank
  /// Interleaved 1F1B gives every model chunk 1/v of its rank's time (schedule/interleaved.hpp);
  /// a chunk's op spans are its own ops scaled to that share. Largest |scale - 1| over all passes
  /// (0 without interleaving: op spans are their priced times).
  double max_time_rescale = 0;
};

/// The stream an op runs on.
constexpr trace_stream stream_of(const op& o) {
  if (o.kind != op_kind::collective) return trace_stream::compute;
  if (o.group == comm_group::cp || o.group == comm_group::cp_a2a || o.group == comm_group::cp_ring)
    return trace_stream::context_parallel;
  return o.group == comm_group::ep || o.group == comm_group::etp ? trace_stream::expert_parallel
                                                                 : trace_stream::tensor_parallel;
}

/// An op's name after its leaf: the collective kind, else gemm, grouped_gemm, attention or memory.
constexpr std::string_view op_kind_name(const op& o) {
  constexpr std::array<std::string_view, 4> compute{"gemm", "grouped_gemm", "attention", "memory"};
  if (o.kind == op_kind::collective) return collective_kind_names[static_cast<std::size_t>(o.collective)];
  return compute[static_cast<std::size_t>(o.kind)];
}

/// Most op spans a trace records (about 100 MB of spans): a pass of a deep MoE stage holds
/// thousands of ops, so fewer passes can still be too many spans (a fuzzer found Qwen3-30B-A3B at
/// pp 2 x 808 micro-batches: 3 M spans, seconds to lay out).
inline constexpr std::int64_t max_traced_spans = std::int64_t{1} << 20;

namespace detail {
/// Which stage of `r` every pipeline rank runs (the ranks a stage stands for).
inline std::vector<std::size_t> stages_of_ranks(const estimate_result& r, const model_spec& m, const strategy_spec& s) {
  const stage_layers split = split_layers(m, s);
  std::vector<std::size_t> out(static_cast<std::size_t>(s.pp_size), 0);
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank) {
    out[static_cast<std::size_t>(rank)] =
        find_stage(r, stage_kind_of(rank, s.pp_size), placed_layout(m, s, split, rank));
  }
  return out;
}

/// One op of a pass: the op, its decoder layer, its leaf, its pass label.
struct op_step {
  std::int32_t op = 0;
  std::int32_t layer = -1;
  std::string_view leaf{};
  std::uint8_t pass = 0;
};

/// The job's stage programs with every op recorded, and each leaf's ops by record id.
struct recorded_job {
  op_record record{};
  build_context context{};
  job_blocks blocks{};
  std::vector<std::vector<std::int32_t>> by_leaf{};
  std::int32_t gather_op = -1;  ///< scatter_gather_tensors_in_pipeline: the tp all-gather after a receive
};

/// Appends the ops of `l` of pass `pass` (label `label`) to `out`; a replay repeats only the
/// forward kernels it is charged for (leaf::replay, leaf::replay_comm).
inline void leaf_ops(const recorded_job& job, const leaf& l, pass_kind pass, std::uint8_t label, std::int32_t layer,
                     std::vector<op_step>& out) {
  if (l.record_id < 0) return;
  const bool replay = label == 3;
  if (replay && l.replay_free) return;
  const bool replay_comm =
      l.kind == leaf_kind::linear_column || l.kind == leaf_kind::linear_row || l.communicates_in_replay;
  for (const std::int32_t i : job.by_leaf[static_cast<std::size_t>(l.record_id)]) {
    const priced_op& p = job.record.ops[static_cast<std::size_t>(i)];
    if (p.o.pass != pass || p.time.value == 0) continue;
    if (replay && p.o.kind == op_kind::collective && !replay_comm) continue;
    out.push_back({i, layer, l.name(), label});
  }
}

/// Which ops of a stage a pipeline pass runs: the forward, the whole backward, or (zero-bubble
/// schedules) its input-gradient half with the recompute replays, or its weight-gradient half.
enum class pass_selection : std::uint8_t { forward, backward, backward_input, backward_weight };

/// A leaf's share of a backward selection: its input-gradient ops, then its weight-gradient ops.
inline void backward_ops(const recorded_job& job, const leaf& l, std::int32_t layer, pass_selection sel,
                         std::vector<op_step>& out) {
  if (sel != pass_selection::backward_weight) leaf_ops(job, l, pass_kind::backward_input, 1, layer, out);
  if (sel != pass_selection::backward_input) leaf_ops(job, l, pass_kind::backward_weight, 2, layer, out);
}

/// The backward of one repetition of a block in the order walk_memory describes: leaves in
/// reverse, each recompute segment replaying its forward before its backward.
inline void block_backward(const recorded_job& job, const leaf_block& b, std::int32_t layer, pass_selection sel,
                           std::vector<op_step>& out) {
  std::size_t i = b.count;
  while (i > 0) {
    const leaf& l = b.leaves[i - 1];
    if (!l.recompute) {
      backward_ops(job, l, layer, sel, out);
      --i;
      continue;
    }
    std::size_t start = i - 1;
    while (start > 0 && b.leaves[start].role != recompute_role::first && b.leaves[start - 1].recompute) --start;
    if (sel != pass_selection::backward_weight)
      for (std::size_t j = start; j < i; ++j) leaf_ops(job, b.leaves[j], pass_kind::forward, 3, layer, out);
    for (std::size_t j = i; j > start; --j) backward_ops(job, b.leaves[j - 1], layer, sel, out);
    i = start;
  }
}

/// The ops of one pass `sel` of `prog`, whose first decoder layer is model layer `base`;
/// `gather`: the pass starts with the all-gather of a received activation / gradient.
inline std::vector<op_step> pass_ops(const recorded_job& job, const stage_program& prog, std::int64_t base,
                                     pass_selection sel, bool gather) {
  std::vector<op_step> out;
  const bool forward = sel == pass_selection::forward;
  if (gather && job.gather_op >= 0 && sel != pass_selection::backward_weight)
    out.push_back({job.gather_op, -1, "pipeline_p2p", forward ? std::uint8_t{0} : std::uint8_t{1}});
  const auto layer_of = [&](const stage_block& sb, std::int64_t rep) {
    return static_cast<std::int32_t>(sb.first_layer < 0 ? -1 : base + sb.first_layer + rep);
  };
  if (forward) {
    for (std::size_t bi = 0; bi < prog.count; ++bi) {
      const stage_block& sb = prog.blocks[bi];
      for (std::int64_t rep = 0; rep < sb.repeat; ++rep)
        for (const leaf& l : *sb.block) leaf_ops(job, l, pass_kind::forward, 0, layer_of(sb, rep), out);
    }
    return out;
  }
  for (std::size_t bi = prog.count; bi > 0; --bi) {
    const stage_block& sb = prog.blocks[bi - 1];
    for (std::int64_t rep = sb.repeat; rep > 0; --rep) block_backward(job, *sb.block, layer_of(sb, rep - 1), sel, out);
  }
  return out;
}

/// Records the job's ops: its blocks built again with a recording context (the estimate's own
/// build records nothing), plus the pipeline's gather of a received tensor when there is one.
inline void record_job(recorded_job& job, const model_spec& m, const strategy_spec& s, const system_spec& sys,
                       std::int64_t vocab) {
  job.context = make_build_context(m, s, sys, vocab);
  job.context.record = &job.record;
  job.context.pricing = &record_op;
  job.blocks = build_blocks(job.context);
  job.by_leaf.assign(static_cast<std::size_t>(job.record.leaves), {});
  for (std::size_t i = 0; i < job.record.ops.size(); ++i)
    job.by_leaf[static_cast<std::size_t>(job.record.ops[i].leaf_id)].push_back(static_cast<std::int32_t>(i));
  const pipeline_transfer transfer = pipeline_transfer_of(job.context);
  if (transfer.gather.value > 0) {
    job.gather_op = static_cast<std::int32_t>(job.record.ops.size());
    job.record.ops.push_back(
        {-1, collective_op(pass_kind::forward, collective_kind::all_gather, comm_group::tp, transfer.gather_bytes),
         transfer.gather});
  }
}

/// The forward and backward op lists of model chunk `chunk` of pipeline rank `rank`.
struct chunk_ops {
  std::vector<op_step> forward, backward, backward_input, backward_weight;  ///< by pipeline_event::kind
  double forward_time = 0, backward_time = 0, backward_input_time = 0,
         backward_weight_time = 0;  ///< sums of their priced times
};

/// Where each op of a list of steps runs, from `origin` with times scaled by `scale`: one after
/// the other, except an op beside the previous compute op (`op::beside_previous`), which starts
/// with that op; the next op waits for both.
inline std::vector<std::pair<double, double>> lay_out_steps(const recorded_job& job, const std::vector<op_step>& steps,
                                                            double origin, double scale) {
  std::vector<std::pair<double, double>> out;
  out.reserve(steps.size());
  double at = origin, compute_start = origin;
  for (const op_step& st : steps) {
    const priced_op& p = job.record.ops[static_cast<std::size_t>(st.op)];
    if (p.o.beside_previous) {
      out.emplace_back(compute_start, compute_start + p.time.value * scale);
      at = at > out.back().second ? at : out.back().second;
      continue;
    }
    if (p.o.kind != op_kind::collective) compute_start = at;
    out.emplace_back(at, at + p.time.value * scale);
    at = out.back().second;
  }
  return out;
}

/// The time a list of op steps takes (lay_out_steps).
inline double steps_time(const recorded_job& job, const std::vector<op_step>& steps) {
  double end = 0;
  for (const auto& span : lay_out_steps(job, steps, 0, 1)) end = span.second > end ? span.second : end;
  return end;
}

/// The op lists of one chunk program whose first decoder layer is `base`; `gather_in` /
/// `gather_grad`: its forward input / backward gradient arrives from another rank.
inline chunk_ops chunk_ops_of(const recorded_job& job, const stage_program& prog, std::int64_t base, bool gather_in,
                              bool gather_grad) {
  chunk_ops out;
  out.forward = pass_ops(job, prog, base, pass_selection::forward, gather_in);
  out.backward = pass_ops(job, prog, base, pass_selection::backward, gather_grad);
  out.backward_input = pass_ops(job, prog, base, pass_selection::backward_input, gather_grad);
  out.backward_weight = pass_ops(job, prog, base, pass_selection::backward_weight, gather_grad);
  out.forward_time = steps_time(job, out.forward);
  out.backward_time = steps_time(job, out.backward);
  out.backward_input_time = steps_time(job, out.backward_input);
  out.backward_weight_time = steps_time(job, out.backward_weight);
  return out;
}

/// DualPipeV: chunk `chunk` of V-shaped rank `rank` (virtual stage r or 2p - 1 - r).
inline chunk_ops v_chunk_ops(const recorded_job& job, const rank_layout& lay, std::int64_t rank, std::int64_t p,
                             std::int64_t chunk) {
  const std::int64_t dense = chunk == 0 ? lay.chunk_dense_layers : lay.dense_layers - lay.chunk_dense_layers;
  const stage_program prog = build_stage(job.blocks, job.context, lay.chunk_layers, dense, chunk == 0 && lay.embedding,
                                         chunk == 1 && lay.head);
  const std::int64_t base = virtual_stage(chunk_placement::v_shape, p, rank, chunk) * lay.chunk_layers;
  return chunk_ops_of(job, prog, base, chunk == 0 ? rank > 0 : rank < p - 1, chunk == 0 ? rank < p - 1 : rank > 0);
}

inline chunk_ops ops_of_chunk(const recorded_job& job, const model_spec& m, const strategy_spec& s, std::int64_t rank,
                              std::int64_t chunk) {
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  const stage_layers split = split_layers(m, s);
  const rank_layout lay = placed_layout(m, s, split, rank);
  if (v_shaped(s)) return v_chunk_ops(job, lay, rank, p, chunk);
  if (lay.chunk_count > 0) {  // described chunks (a pipeline layout, MTP layers)
    const std::size_t c = v > 1 ? static_cast<std::size_t>(chunk) : 0;
    if (v > 1)
      return chunk_ops_of(job, described_chunk_program(job.blocks, job.context, lay, c), lay.chunks[c].first_layer,
                          rank != 0, rank != p - 1);
    return chunk_ops_of(job,
                        build_stage(job.blocks, job.context, lay.layers, lay.dense_layers, lay.embedding, lay.head,
                                    lay.mtp_layers, lay.bf16_head_layers, lay.bf16_tail_layers),
                        lay.chunks[0].first_layer, rank != 0, rank != p - 1);
  }
  const std::int64_t before = rank == 0 ? 0 : split.first + (rank - 1) * split.middle;
  // Megatron get_transformer_layer_offset: chunk c of rank r starts at c·L/v + (layers below r)/v.
  const std::int64_t base = v > 1 ? chunk * (m.layer_num / v) + before / v : before;
  std::int64_t layers = lay.layers, dense = lay.dense_layers;
  if (v > 1) {
    layers = lay.chunk_layers;
    dense = dense_layer_count(m) - base;
    dense = dense < 0 ? 0 : (dense > layers ? layers : dense);
  }
  const bool embedding = lay.embedding && chunk == 0, head = lay.head && chunk == v - 1;
  const std::int64_t bf16_head = v > 1 ? 0 : lay.bf16_head_layers, bf16_tail = v > 1 ? 0 : lay.bf16_tail_layers;
  return chunk_ops_of(job,
                      build_stage(job.blocks, job.context, layers, dense, embedding, head, 0, bf16_head, bf16_tail),
                      base, rank != 0, rank != p - 1);
}

/// DualPipeV: a forward and a backward that ran as one overlapped pair share one interval in the
/// schedule; the trace shows the forward first and the backward after it, the interval split in
/// proportion to their priced times (each pass's ops then scaled to its part).
inline void split_overlapped_pairs(std::vector<pipeline_event>& events, const std::vector<chunk_ops>& chunks,
                                   std::int64_t per_rank) {
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    pipeline_event& f = events[i];
    pipeline_event& b = events[i + 1];
    if (f.what != pipeline_event::kind::forward || b.what != pipeline_event::kind::backward || f.rank != b.rank ||
        f.start != b.start || f.end != b.end)
      continue;
    const double tf = chunks[static_cast<std::size_t>(f.rank * per_rank + f.chunk)].forward_time;
    const double tb = chunks[static_cast<std::size_t>(b.rank * per_rank + b.chunk)].backward_time;
    if (tf + tb > 0) f.end = b.start = f.start + (f.end - f.start) * tf / (tf + tb);
    ++i;
  }
}

/// Lays the op spans of one pass `e` out back to back from its start.
inline void add_op_spans(iteration_trace& t, const recorded_job& job, const pipeline_event& e,
                         const std::vector<op_step>& steps, double priced, bool rescale) {
  const double scale = rescale && priced > 0 ? (e.end - e.start) / priced : 1.0;
  const double off = scale > 1 ? scale - 1 : 1 - scale;
  t.max_time_rescale = off > t.max_time_rescale ? off : t.max_time_rescale;
  const std::vector<std::pair<double, double>> at = lay_out_steps(job, steps, e.start, scale);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const op_step& st = steps[i];
    const priced_op& p = job.record.ops[static_cast<std::size_t>(st.op)];
    t.spans.push_back(
        {e.rank, stream_of(p.o), st.leaf, e.micro_batch, e.chunk, at[i].first, at[i].second, st.op, st.layer, st.pass});
  }
}

/// The op steps pass `e` lays out, their priced time, and whether they are a whole forward or
/// backward (which an interleaved or DualPipeV schedule rescales); no steps for transfers.
struct pass_steps {
  const std::vector<op_step>* steps = nullptr;
  double time = 0;
  bool whole_pass = false;
};
inline pass_steps steps_of(const pipeline_event& e, const chunk_ops& c) {
  switch (e.what) {
    case pipeline_event::kind::forward:
      return {&c.forward, c.forward_time, true};
    case pipeline_event::kind::backward:
      return {&c.backward, c.backward_time, true};
    case pipeline_event::kind::backward_input:
      return {&c.backward_input, c.backward_input_time, false};
    case pipeline_event::kind::backward_weight:
      return {&c.backward_weight, c.backward_weight_time, false};
    default:
      return {};
  }
}

/// Refuses a trace of more than `max_traced_spans` op spans before laying any out.
inline void refuse_too_many_spans(const std::vector<pipeline_event>& events, const std::vector<chunk_ops>& chunks,
                                  std::int64_t per_rank) {
  std::int64_t spans = 0;
  for (const pipeline_event& e : events) {
    const pass_steps p = steps_of(e, chunks[static_cast<std::size_t>(e.rank * per_rank + e.chunk)]);
    spans += 1 + (p.steps != nullptr ? static_cast<std::int64_t>(p.steps->size()) : 0);
  }
  if (spans > max_traced_spans)
    report_error("llmsim::trace", "strategy.micro_batch_num",
                 "the trace would record {} op spans, more than {}; trace the job with fewer micro-batches", spans,
                 max_traced_spans);
}

/// The priced ops, with their shape keys, as the trace shows them.
inline std::vector<trace_op> trace_ops_of(const recorded_job& job) {
  std::vector<trace_op> out;
  out.reserve(job.record.ops.size());
  for (const priced_op& p : job.record.ops) out.push_back({p.o, p.time, std::string(key_of(p.o).view())});
  return out;
}

/// A rank's memory at each edge of its forwards and backwards: model memory, the micro-batches
/// (chunks) it holds, and the running one's own transient peak.
inline void sample_memory(iteration_trace& t, const stage_result& st, const strategy_spec& s, std::int64_t rank) {
  const double model = static_cast<double>(st.model_mem.value);
  const double whole = static_cast<double>(st.fwd_activation_cache_per_micro_batch.value);
  // Bytes of one chunk's activations: each chunk its own where the estimate walked them (interleaved
  // 1F1B, DualPipeV: the embedding and the loss sit in one chunk each), else an even share.
  const bool per_chunk = st.held_chunk_count > 0;
  const auto unit = [&](std::int64_t chunk) {
    return per_chunk ? st.chunk_held[static_cast<std::size_t>(chunk)]
                     : whole / static_cast<double>(s.interleaving_size);
  };
  double held = 0;
  t.memory.push_back({rank, 0.0, model});
  for (const trace_span& sp : t.spans) {
    if (sp.rank != rank || sp.stream != trace_stream::passes) continue;
    const bool forward = sp.name == "forward";
    const double set = unit(sp.chunk);
    const double frees = sp.name == "backward input" ? 0 : set;  // zero bubble: the activations stay until W
    double transient = static_cast<double>(forward ? st.fwd_transient_mem.value : st.bwd_transient_mem.value);
    if (per_chunk) transient = (forward ? st.chunk_fwd_peak : st.chunk_bwd_peak)[static_cast<std::size_t>(sp.chunk)];
    // A weight-gradient pass reads what is held and frees it at its end (as the estimate counts it).
    const bool weight = sp.name == "backward weight";
    double at_start = held;  // a weight-gradient pass
    if (forward) at_start = held + transient;
    if (!forward && !weight) at_start = held - set + transient;  // a backward's peak counts its own set
    t.memory.push_back({rank, sp.start, model + at_start});
    held += forward ? set : -frees;
    t.memory.push_back({rank, sp.end, model + held});
  }
}

/// The tail after the pipeline, as the estimate prices it: straggler wait, exposed sync, optimizer.
inline void add_tail(iteration_trace& t, const strategy_spec& s, double pipeline_end) {
  const estimate_result& r = t.estimate;
  const double tail_start = r.cost.pipeline_time.value;
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
}
}  // namespace detail

/// Most pipeline passes (stages x micro-batches x model chunks) a trace records: every pass is
/// simulated and becomes one span per op of its layers (about 20 per layer), so 4,096 passes of a
/// stage of 10 layers are already about 800,000 spans (pp 8 x 512 micro-batches of Llama 3 70B). The estimate itself has no such limit (its 1F1B simulation
/// stops at the steady phase); a trace of a larger job is refused (a fuzzer found
/// micro_batch_num=2147483647 asking for 480 GB).
inline constexpr std::int64_t max_traced_passes = 4096;

/// Simulates one iteration of the job with every micro-batch and returns its timeline.
inline iteration_trace trace_iteration(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  const double passes = static_cast<double>(s.pp_size) * static_cast<double>(s.micro_batch_num) *
                        static_cast<double>(s.interleaving_size > 1 ? s.interleaving_size : 1);
  if (passes > static_cast<double>(max_traced_passes))
    detail::report_error("llmsim::trace", "strategy.micro_batch_num",
                         "a trace records every micro-batch: strategy.pp_size*micro_batch_num*interleaving_size={} "
                         "exceeds {}; trace the job with fewer micro-batches",
                         passes, max_traced_passes);
  iteration_trace t;
  t.estimate = estimate(m, s, sys);
  const estimate_result& r = t.estimate;
  t.rank_stage = detail::stages_of_ranks(r, m, s);
  std::vector<std::uint8_t> rank_stage(t.rank_stage.begin(), t.rank_stage.end());
  std::vector<pipeline_event> events;
  const pipeline_result pipe =
      detail::run_pipeline(r, s, rank_stage, r.cost.comm_result.p2p_time_per_transfer, &events);
  detail::recorded_job job;
  detail::record_job(job, m, s, sys, r.padded_vocab);
  std::vector<detail::chunk_ops> chunks;
  const std::int64_t per_rank = v_shaped(s) ? 2 : s.interleaving_size;
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank)
    for (std::int64_t chunk = 0; chunk < per_rank; ++chunk)
      chunks.push_back(detail::ops_of_chunk(job, m, s, rank, chunk));
  detail::split_overlapped_pairs(events, chunks, per_rank);
  detail::refuse_too_many_spans(events, chunks, per_rank);
  for (const pipeline_event& e : events) {
    constexpr std::array<std::string_view, 6> names{"forward", "backward",       "send",
                                                    "recv",    "backward input", "backward weight"};
    if (e.what == pipeline_event::kind::send || e.what == pipeline_event::kind::recv) {
      t.spans.push_back({e.rank, trace_stream::pipeline, names[static_cast<std::size_t>(e.what)], e.micro_batch,
                         e.chunk, e.start, e.end});
      continue;
    }
    t.spans.push_back({e.rank, trace_stream::passes, names[static_cast<std::size_t>(e.what)], e.micro_batch, e.chunk,
                       e.start, e.end});
    const detail::pass_steps p = detail::steps_of(e, chunks[static_cast<std::size_t>(e.rank * per_rank + e.chunk)]);
    // chunk shares; overlapped pairs (DualPipeV, overlap_moe_expert_parallel_comm)
    const bool rescale = s.interleaving_size > 1 || v_shaped(s) || s.overlap_moe_expert_parallel_comm;
    detail::add_op_spans(t, job, e, *p.steps, p.time, rescale && p.whole_pass);
  }
  detail::add_tail(t, s, pipe.total.value);
  for (std::int64_t rank = 0; rank < s.pp_size; ++rank)
    detail::sample_memory(t, r.stages[t.rank_stage[static_cast<std::size_t>(rank)]], s, rank);
  t.ops = detail::trace_ops_of(job);
  return t;
}

LLMSIM_END_NAMESPACE
