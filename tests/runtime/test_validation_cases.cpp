// The dense real-run figures of issue "dense training estimate": measured Megatron-LM runs in
// ../shared/validation/training_cases.json, predicted through the same perf_llm path as the CLI.
#include "shared_dir.hpp"

#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_validation_cases {

namespace lj = llmsim::json;

namespace {
struct figures {
  double time_mean, time_max, mem_mean, mem_max;
  int n, mem_n;
};
figures run_cases(bool moe) {
  const auto file = llmsim_test::shared_dir() / "validation" / "training_cases.json";
  const auto doc = lj::read_file(file);
  const auto root = file.parent_path() / doc["config_root"].get<std::string>();
  double time_sum = 0, time_max = 0, mem_sum = 0, mem_max = 0;
  int n = 0, mem_n = 0;
  for (const auto& c : doc["cases"]) {
    const auto name = c["name"].get<std::string>();
    if ((name.find("deepseek") != std::string::npos) != moe) continue;
    lj::perf_llm perf;
    perf.configure(root / c["strategy"].get<std::string>(), root / c["model"].get<std::string>(),
                   root / c["system"].get<std::string>(), {}, c.value("strategy_overrides", lj::value::object()),
                   c.value("model_overrides", lj::value::object()));
    perf.run_estimate();
    const double t = perf.analysis_cost().duration_time_per_iter.ms();
    const double err = std::fabs(t - c["real"]["iter_time_ms"].get<double>()) / c["real"]["iter_time_ms"].get<double>();
    time_sum += err;
    time_max = std::max(time_max, err);
    ++n;
    if (c["real"].value("memory_verified", false)) {
      const double m = perf.analysis_mem().peak_mem.gib();
      const double merr =
          std::fabs(m - c["real"]["peak_alloc_gib"].get<double>()) / c["real"]["peak_alloc_gib"].get<double>();
      mem_sum += merr;
      mem_max = std::max(mem_max, merr);
      ++mem_n;
    }
    // Every GEMM and attention shape of the dense runs is in the system's table (the A100 table lacks the MoE router's).
    if (!moe) {
      EXPECT_EQ(perf.analysis_cost().efficiency_misses, 0)
          << name << ": every shape of these runs is in the system's table";
    }
  }
  return {n ? time_sum / n : 0, time_max, mem_n ? mem_sum / mem_n : 0, mem_max, n, mem_n};
}
}  // namespace

TEST(ValidationCases, MoeRunsWithinTheAgreedErrors) {
  const auto file = llmsim_test::shared_dir() / "validation" / "training_cases.json";
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << "no validation cases at " << file << " (tests that read ../shared skip when it is absent)";
  const figures f = run_cases(true);
  ASSERT_EQ(f.n, 12);
  ASSERT_EQ(f.mem_n, 6);
  // The goals were 5 % / 10 % time and 0.6 % / 1 % memory; the gates hold the figures
  // reached (4.40 % / 9.43 %, 0.27 % / 0.38 %) so that no change makes them worse unnoticed. (4.39 %
  // / 9.42 % before the dispatched probabilities' all-to-all was sized as Megatron sends it, one
  // value per routed copy instead of the [tokens, experts] map: these dispatch_probs runs were
  // priced with a larger exchange that happened to hide other error.)
  EXPECT_LE(f.time_mean, 0.04405) << "time mean |err|";
  EXPECT_LE(f.time_max, 0.09435) << "time max |err|";
  EXPECT_LE(f.mem_mean, 0.00275) << "memory mean |err|";
  EXPECT_LE(f.mem_max, 0.00385) << "memory max |err|";
  std::printf("MoE cases: time mean %.2f%% max %.2f%%; memory mean %.2f%% max %.2f%%\n", 100 * f.time_mean,
              100 * f.time_max, 100 * f.mem_mean, 100 * f.mem_max);
}

TEST(ValidationCases, DenseRunsWithinTheAgreedErrors) {
  const auto file = llmsim_test::shared_dir() / "validation" / "training_cases.json";
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << "no validation cases at " << file << " (tests that read ../shared skip when it is absent)";
  const figures f = run_cases(false);
  ASSERT_EQ(f.n, 36);
  ASSERT_EQ(f.mem_n, 12);
  // Goals were 3 % / 8 % time and 0.5 % / 1 % memory; the gates hold the figures reached
  // (2.37 % / 7.08 %, 0.23 % / 0.33 %) so that no change makes them worse unnoticed.
  EXPECT_LE(f.time_mean, 0.02375) << "time mean |err|";
  EXPECT_LE(f.time_max, 0.07085) << "time max |err|";
  EXPECT_LE(f.mem_mean, 0.00235) << "memory mean |err|";
  EXPECT_LE(f.mem_max, 0.00335) << "memory max |err|";
  std::printf("dense cases: time mean %.2f%% max %.2f%%; memory mean %.2f%% max %.2f%%\n", 100 * f.time_mean,
              100 * f.time_max, 100 * f.mem_mean, 100 * f.mem_max);
}

}  // namespace llmsim_test_validation_cases
