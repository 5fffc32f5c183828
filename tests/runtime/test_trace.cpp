// The timeline of an iteration (library and `llmsim perf --trace`): every micro-batch's forward
// and backward on every rank, no overlapping spans on one stream, the last span ending at the
// reported iteration time, and the memory track peaking at the reported peak; the op spans of
// each pass (one per op, collectives on their own threads) tiling it; the critical path.
#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_trace {

using namespace llmsim;

namespace {
struct job {
  const char* what;
  model_spec model;
  strategy_spec strategy;
};

std::vector<job> jobs() {
  return {
      {"1F1B pp4",
       catalogue::llama3_8b,
       {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2, .pp_size = 4}},
      {"interleaved pp4 v2",
       catalogue::llama3_8b,
       {.seq_len = 4096,
        .micro_batch_size = 1,
        .micro_batch_num = 8,
        .world_size = 8,
        .tp_size = 2,
        .pp_size = 4,
        .interleaving_size = 2}},
      {"one stage, straggler",
       catalogue::llama3_8b,
       {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 32, .tp_size = 8}},
      {"MoE pp16 uneven",
       catalogue::deepseek_v3,
       {.seq_len = 4096,
        .micro_batch_size = 1,
        .micro_batch_num = 32,
        .world_size = 128,
        .pp_size = 16,
        .ep_size = 8,
        .num_layers_in_first_pipeline_stage = 1}},
  };
}
}  // namespace

TEST(Trace, EveryPassOnceNoOverlapEndsAtTheIterationPeaksAtThePeak) {
  for (const auto& j : jobs()) {
    SCOPED_TRACE(j.what);
    const auto t = trace_iteration(j.model, j.strategy, catalogue::h200);
    const auto& r = t.estimate;
    const double duration = r.cost.duration_time_per_iter.value;
    // One forward and one backward of every (rank, micro-batch, chunk).
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string_view>, int> passes;
    for (const auto& sp : t.spans)
      if (sp.stream == trace_stream::passes) ++passes[{sp.rank, sp.micro_batch, sp.chunk, sp.name}];
    const std::int64_t p = j.strategy.pp_size, m = j.strategy.micro_batch_num, v = j.strategy.interleaving_size;
    EXPECT_EQ(passes.size(), static_cast<std::size_t>(p * m * v * 2));
    for (const auto& [key, count] : passes) EXPECT_EQ(count, 1);
    // No two spans overlap on one stream of one rank.
    std::map<std::pair<std::int64_t, trace_stream>, std::vector<std::pair<double, double>>> streams;
    for (const auto& sp : t.spans) streams[{sp.rank, sp.stream}].push_back({sp.start, sp.end});
    for (auto& [key, spans] : streams) {
      std::sort(spans.begin(), spans.end());
      for (std::size_t i = 1; i < spans.size(); ++i) EXPECT_GE(spans[i].first, spans[i - 1].second - 1e-12 * duration);
    }
    // The last span ends at the reported iteration time.
    double last = 0;
    for (const auto& sp : t.spans) last = std::max(last, sp.end);
    EXPECT_NEAR(last, duration, 1e-9 * duration);
    // Memory: each rank's track peaks at its stage's reported peak when it is the stage's worst
    // rank, and never above it; the largest is the reported peak.
    std::map<std::int64_t, double> rank_peak;
    for (const auto& s : t.memory) rank_peak[s.rank] = std::max(rank_peak[s.rank], s.bytes);
    for (const auto& [rank, peak] : rank_peak) {
      const auto& st = r.stages[t.rank_stage[static_cast<std::size_t>(rank)]];
      if (rank == st.rank) { EXPECT_NEAR(peak, static_cast<double>(st.peak_mem.value), 16.0) << "rank " << rank; }
      EXPECT_LE(peak, static_cast<double>(st.peak_mem.value) + 16.0) << "rank " << rank;
    }
    double overall = 0;
    for (const auto& [rank, peak] : rank_peak) overall = std::max(overall, peak);
    EXPECT_NEAR(overall, static_cast<double>(r.mem.peak_mem.value), 16.0);
  }
}

TEST(Trace, ChromeTraceFileFromTheCommandLine) {
  const std::string cli = LLMSIM_CLI_PATH;
  if (cli.empty()) GTEST_SKIP() << "the CLI is not built";
  const auto file = std::filesystem::temp_directory_path() / "llmsim_trace_test.json";
  const std::string cmd = cli +
                          " perf --model llama3-8b --system h100-sxm --strategy tp2_pp4_mbc8 --format json --trace " +
                          file.string() + " > " + file.string() + ".out";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream trace_in(file), out_in(file.string() + ".out");
  const auto trace = json::value::parse(trace_in);
  const auto out = json::value::parse(out_in);
  std::int64_t forwards = 0;
  double last = 0, memory = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") {
      forwards += e.at("name") == "forward" ? 1 : 0;
      last = std::max(last, e.at("ts").get<double>() + e.at("dur").get<double>());
    }
    if (e.at("ph") == "C") memory = std::max(memory, e.at("args").at("GiB").get<double>());
  }
  EXPECT_EQ(forwards, 4 * 8);  // 4 ranks x 8 micro-batches
  EXPECT_NEAR(last / 1e3, out.at("cost_result").at("duration_time_per_iter").get<double>(), 1e-6);
  EXPECT_NEAR(memory, out.at("mem_result").at("peak_mem").get<double>(), 1e-6);
  // Op spans carry what they run; the critical path is in the estimate's JSON.
  std::int64_t gemms = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.contains("args") && e.at("args").value("kind", "") == "gemm") {
      ++gemms;
      EXPECT_TRUE(e.at("args").contains("shape"));
      EXPECT_GT(e.at("args").at("flops").get<double>(), 0);
      EXPECT_TRUE(e.at("args").contains("layer"));
    }
  EXPECT_GT(gemms, 0);
  EXPECT_EQ(out.at("cost_result").at("critical_rank").get<std::int64_t>(),
            trace.at("otherData").at("critical_rank").get<std::int64_t>());
  EXPECT_TRUE(out.at("cost_result").at("critical_stream").is_string());
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".out");
}

namespace {
using pass_key = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>;  // rank, micro-batch, chunk, forward
/// The op spans of every pass: same rank, micro-batch and chunk, forward ops for a forward; by start.
std::map<pass_key, std::vector<trace_span>> ops_by_pass(const iteration_trace& t) {
  std::map<pass_key, std::vector<trace_span>> out;
  for (const auto& sp : t.spans)
    if (sp.op >= 0) out[{sp.rank, sp.micro_batch, sp.chunk, sp.pass == 0}].push_back(sp);
  for (auto& [key, ops] : out)
    std::sort(ops.begin(), ops.end(), [](const trace_span& a, const trace_span& b) { return a.start < b.start; });
  return out;
}
std::vector<trace_span> ops_of(const std::map<pass_key, std::vector<trace_span>>& by_pass, const trace_span& pass) {
  const auto it = by_pass.find({pass.rank, pass.micro_batch, pass.chunk, pass.name == "forward"});
  return it == by_pass.end() ? std::vector<trace_span>{} : it->second;
}
}  // namespace

TEST(Trace, OpSpansTileEveryPassAcrossTheComputeAndCommThreads) {
  for (const auto& j : jobs()) {
    SCOPED_TRACE(j.what);
    const auto t = trace_iteration(j.model, j.strategy, catalogue::h200);
    if (j.strategy.interleaving_size == 1) { EXPECT_EQ(t.max_time_rescale, 0.0); }
    std::size_t checked = 0;
    const auto by_pass = ops_by_pass(t);
    for (const auto& pass : t.spans) {
      if (pass.stream != trace_stream::passes) continue;
      const auto& ops = by_pass.at({pass.rank, pass.micro_batch, pass.chunk, pass.name == "forward"});
      ASSERT_FALSE(ops.empty());
      const double d = pass.end - pass.start;
      double sum = 0;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        sum += ops[i].end - ops[i].start;
        // Only compute kernels on the compute thread, collectives on a comm thread.
        const bool collective = t.ops[static_cast<std::size_t>(ops[i].op)].o.kind == op_kind::collective;
        EXPECT_EQ(collective, ops[i].stream != trace_stream::compute);
        // Back to back: a collective blocks the compute stream (Megatron waits for it).
        if (i > 0) { EXPECT_NEAR(ops[i].start, ops[i - 1].end, 1e-12 * d); }
      }
      EXPECT_NEAR(sum, d, 1e-9 * d);
      EXPECT_NEAR(ops.front().start, pass.start, 1e-9 * d);
      EXPECT_NEAR(ops.back().end, pass.end, 1e-9 * d);
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<std::size_t>(j.strategy.pp_size * j.strategy.micro_batch_num *
                                                j.strategy.interleaving_size * 2));
    // Per rank, no op span overlaps another on any thread: while a collective runs, the compute
    // thread is idle.
    std::map<std::int64_t, std::vector<std::pair<double, double>>> rank_ops;
    for (const auto& sp : t.spans)
      if (sp.op >= 0) rank_ops[sp.rank].push_back({sp.start, sp.end});
    for (auto& [rank, spans] : rank_ops) {
      std::sort(spans.begin(), spans.end());
      for (std::size_t i = 1; i < spans.size(); ++i) EXPECT_GE(spans[i].first, spans[i - 1].second - 1e-12);
    }
  }
}

TEST(Trace, AMiddleRanksPassesRunEachLayersModulesInOrder) {
  // Llama 3 8B, tp2 (SP) pp4: rank 1 holds layers 8..15. One layer's forward, as Megatron-LM +
  // TE run it: input_layernorm; linear_qkv (all-gather, GEMM); rotary_pos_emb (q and k kernels);
  // core_attention; linear_proj (GEMM, reduce-scatter); attention_residual_add; pre_mlp_layernorm;
  // linear_fc1 (all-gather, GEMM); swiglu; linear_fc2 (GEMM, reduce-scatter); mlp_residual_add
  // = 12 kernels + 4 collectives. Its backward: each norm input and weight gradient (2 x 2),
  // a column linear dgrad GEMM, reduce-scatter, all-gather, wgrad GEMM (2 x 4), a row linear
  // all-gather, dgrad, wgrad (2 x 3), rotary 2, attention 1, swiglu 1, residuals 2 = 24.
  const auto all = jobs();
  const auto& j = all[0];
  const auto t = trace_iteration(j.model, j.strategy, catalogue::h200);
  const auto by_pass = ops_by_pass(t);
  const trace_span* fwd = nullptr;
  const trace_span* bwd = nullptr;
  for (const auto& sp : t.spans)
    if (sp.stream == trace_stream::passes && sp.rank == 1 && sp.micro_batch == 0)
      (sp.name == "forward" ? fwd : bwd) = &sp;
  ASSERT_TRUE(fwd != nullptr && bwd != nullptr);
  const auto f = ops_of(by_pass, *fwd), b = ops_of(by_pass, *bwd);
  ASSERT_EQ(f.size(), 8U * 16);
  ASSERT_EQ(b.size(), 8U * 24);
  const std::vector<std::string_view> layer_fwd{"input_layernorm",
                                                "linear_qkv",
                                                "linear_qkv",
                                                "rotary_pos_emb",
                                                "rotary_pos_emb",
                                                "core_attention",
                                                "linear_proj",
                                                "linear_proj",
                                                "attention_residual_add",
                                                "pre_mlp_layernorm",
                                                "linear_fc1",
                                                "linear_fc1",
                                                "swiglu",
                                                "linear_fc2",
                                                "linear_fc2",
                                                "mlp_residual_add"};
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(f[i].name, layer_fwd[i % 16]) << i;
    EXPECT_EQ(f[i].layer, 8 + static_cast<std::int32_t>(i / 16)) << i;
  }
  EXPECT_EQ(f[1].stream, trace_stream::tensor_parallel);  // the qkv input all-gather before its GEMM
  EXPECT_EQ(t.ops[static_cast<std::size_t>(f[1].op)].o.collective, collective_kind::all_gather);
  EXPECT_EQ(t.ops[static_cast<std::size_t>(f[2].op)].shape.empty(), false);  // the GEMM carries its shape key
  // Backward: layers from 15 down to 8, each from its last module (mlp_residual_add) to its first.
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i].layer, 15 - static_cast<std::int32_t>(i / 24)) << i;
  EXPECT_EQ(b.front().name, "mlp_residual_add");
  EXPECT_EQ(b.back().name, "input_layernorm");
  EXPECT_EQ(b.back().pass, 2);  // its weight gradient last
}

TEST(Trace, ARecomputedLayerReplaysItsForwardBeforeItsBackward) {
  // Full-block recompute of every layer: each layer's backward starts by replaying its forward
  // (the replayed ops add up to the stage's recompute time per micro-batch), layers in reverse.
  strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .tp_size = 4, .pp_size = 2};
  s.recompute_granularity = recompute_kind::full_block;
  s.recompute_layer_num = 16;
  const auto t = trace_iteration(catalogue::llama3_8b, s, catalogue::h200);
  const auto by_pass = ops_by_pass(t);
  std::size_t checked = 0;
  for (const auto& pass : t.spans) {
    if (pass.stream != trace_stream::passes || pass.name != "backward") continue;
    ++checked;
    const auto ops = ops_of(by_pass, pass);
    const auto& st = t.estimate.stages[t.rank_stage[static_cast<std::size_t>(pass.rank)]];
    double replay = 0;
    std::int32_t layer = 1000;
    bool in_backward = false;
    for (const auto& o : ops) {
      if (o.layer < 0) continue;  // embedding / head
      if (o.layer != layer) {     // a new layer: below the last, starting with its replay
        EXPECT_LT(o.layer, layer);
        EXPECT_EQ(o.pass, 3);
        layer = o.layer;
        in_backward = false;
      }
      if (o.pass == 3) {
        EXPECT_FALSE(in_backward);
        replay += o.end - o.start;
      } else {
        in_backward = true;
      }
    }
    const double expected = (st.recompute_time + st.recompute_tp_comm_time).value;
    EXPECT_GT(expected, 0);
    EXPECT_NEAR(replay, expected, 1e-9 * expected);
  }
  EXPECT_EQ(checked, 2U * 4);  // every backward of both ranks
}

TEST(Trace, ExpertCollectivesRunOnTheExpertParallelThread) {
  const auto all = jobs();
  const auto& j = all[3];  // DeepSeek-V3 ep8
  const auto t = trace_iteration(j.model, j.strategy, catalogue::h200);
  std::set<std::string_view> expert;
  for (const auto& sp : t.spans) {
    if (sp.op < 0) continue;
    const op& o = t.ops[static_cast<std::size_t>(sp.op)].o;
    if (o.kind == op_kind::collective && o.group == comm_group::ep) {
      EXPECT_EQ(sp.stream, trace_stream::expert_parallel);
      expert.insert(sp.name);
    }
  }
  EXPECT_EQ(expert, (std::set<std::string_view>{"permutation", "unpermutation"}));  // dispatch and combine
}

namespace {
struct critical_case {
  const char* what;
  strategy_spec strategy;
  std::int64_t rank;
  critical_stream_kind stream;
};
}  // namespace

TEST(Trace, TheCriticalPathNamesTheRankAndStreamTheIterationEndsOn) {
  // Llama 3 8B (32 layers) on H200. Every rank starts its tail (exposed sync, optimizer) when the
  // pipeline ends, so the last rank to finish is the one with the longest tail: the most
  // parameters. In 1F1B rank 0 runs the pipeline's last backward (it waits for the gradient from
  // every later rank).
  // Without sequence parallelism: with it, the tp all-reduce of the norms' gradients always sits
  // between the last backward and the optimizer step (a data-parallel-stream tail, checked below).
  const strategy_spec base{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .enable_sequence_parallel = false};
  std::vector<critical_case> cases;
  {  // One rank, no data parallelism: its own last backward, then its optimizer step.
    strategy_spec s = base;
    s.tp_size = 8;
    cases.push_back({"tp8", s, 0, critical_stream_kind::compute});
  }
  {  // ... with SP: the norms' gradient all-reduce over tp ends right before the optimizer step.
    strategy_spec s = base;
    s.tp_size = 8;
    s.enable_sequence_parallel = true;
    cases.push_back({"tp8 sp", s, 0, critical_stream_kind::data_parallel});
  }
  {  // dp4 without overlap: the optimizer waits for the whole gradient reduction.
    strategy_spec s = base;
    s.tp_size = 2;
    cases.push_back({"tp2 dp4", s, 0, critical_stream_kind::data_parallel});
  }
  {  // pp4, the last stage with 11 layers (+ head) holds the most parameters; its last backward
     // ends before rank 0's, so it is last only by its optimizer step.
    strategy_spec s = base;
    s.tp_size = 2;
    s.pp_size = 4;
    s.num_layers_in_last_pipeline_stage = 11;
    cases.push_back({"pp4 heavy last", s, 3, critical_stream_kind::optimizer});
  }
  {  // pp4, the first stage with 11 layers (+ embedding): most parameters and the pipeline's last backward.
    strategy_spec s = base;
    s.tp_size = 2;
    s.pp_size = 4;
    s.num_layers_in_first_pipeline_stage = 11;
    cases.push_back({"pp4 heavy first", s, 0, critical_stream_kind::compute});
  }
  {  // pp4 dp2 without overlap, heavy last stage: its longer reduction, then its optimizer step.
    strategy_spec s = base;
    s.world_size = 16;
    s.tp_size = 2;
    s.pp_size = 4;
    s.num_layers_in_last_pipeline_stage = 11;
    cases.push_back({"pp4 dp2 heavy last", s, 3, critical_stream_kind::data_parallel});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto t = trace_iteration(catalogue::llama3_8b, c.strategy, catalogue::h200);
    const auto& cost = t.estimate.cost;
    EXPECT_EQ(cost.critical_rank, c.rank);
    EXPECT_EQ(cost.critical_stream, c.stream);
    // ... as the text and JSON reports say it.
    const std::string stream(critical_stream_names[static_cast<std::size_t>(c.stream)]);
    const std::string text = to_text(t.estimate, catalogue::llama3_8b, c.strategy, catalogue::h200);
    EXPECT_NE(text.find("ends on pipeline rank " + std::to_string(c.rank) + ", " + stream), std::string::npos) << text;
    const auto js = json::to_json(t.estimate);
    EXPECT_EQ(js.at("cost_result").at("critical_rank").get<std::int64_t>(), c.rank);
    EXPECT_EQ(js.at("cost_result").at("critical_stream").get<std::string>(), stream);
    // The timeline agrees: the critical rank's optimizer step ends at the iteration time, after a
    // gradient sync (data_parallel), right after its own last backward (compute), or after idling.
    const double duration = cost.duration_time_per_iter.value;
    double optimizer_start = -1, sync_end = -1, last_backward = -1;
    for (const auto& sp : t.spans) {
      if (sp.rank != cost.critical_rank) continue;
      if (sp.name == "optimizer step") {
        EXPECT_NEAR(sp.end, duration, 1e-9 * duration);
        optimizer_start = sp.start;
      }
      if (sp.name == "gradient sync") sync_end = sp.end;
      if (sp.stream == trace_stream::passes) last_backward = std::max(last_backward, sp.end);
    }
    const double tol = 1e-9 * duration;
    if (c.stream == critical_stream_kind::data_parallel) { EXPECT_NEAR(sync_end, optimizer_start, tol); }
    if (c.stream == critical_stream_kind::compute) { EXPECT_NEAR(last_backward, optimizer_start, tol); }
    if (c.stream == critical_stream_kind::optimizer) { EXPECT_LT(last_backward, optimizer_start - tol); }
  }
}

TEST(Trace, ZeroBubbleInputAndWeightPassesAreTiledByTheirOwnOps) {
  // ZB-H1 splits each backward: the "backward input" span holds the input-gradient ops (pass label
  // 1: data-gradient GEMMs, attention backward, their collectives, recompute replays), the
  // "backward weight" span the weight-gradient GEMMs and, under sequence parallelism, the input
  // re-gather they need (label 2). Each pass's ops add up to the pass.
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 8,
                        .world_size = 8,
                        .tp_size = 2,
                        .pp_size = 4,
                        .pipeline_schedule = pipeline_schedule_kind::zb_h1};
  const auto t = trace_iteration(catalogue::llama3_8b, s, catalogue::h200);
  std::map<std::tuple<std::int64_t, std::int64_t, int>, double> op_sum;
  for (const auto& sp : t.spans)
    if (sp.op >= 0 && sp.pass > 0) op_sum[{sp.rank, sp.micro_batch, static_cast<int>(sp.pass)}] += sp.end - sp.start;
  std::size_t inputs = 0, weights = 0;
  for (const auto& sp : t.spans) {
    if (sp.stream != trace_stream::passes || sp.name == "forward") continue;
    const bool weight = sp.name == "backward weight";
    ASSERT_TRUE(weight || sp.name == "backward input") << sp.name;
    (weight ? weights : inputs) += 1;
    const double d = sp.end - sp.start;
    EXPECT_NEAR((op_sum[{sp.rank, sp.micro_batch, weight ? 2 : 1}]), d, 1e-9 * d);
  }
  EXPECT_EQ(inputs, 4U * 8U);
  EXPECT_EQ(weights, 4U * 8U);
}

}  // namespace llmsim_test_trace
