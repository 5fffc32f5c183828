// The timeline of an iteration (library and `llmsim perf --trace`): every micro-batch's forward
// and backward on every rank, no overlapping spans on one stream, the last span ending at the
// reported iteration time, and the memory track peaking at the reported peak.
#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

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
      if (sp.stream == trace_stream::compute && sp.micro_batch >= 0)
        ++passes[{sp.rank, sp.micro_batch, sp.chunk, sp.name}];
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
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".out");
}
