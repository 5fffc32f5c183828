// A training run's cost (llmsim/estimate/training_cost.hpp): steps of the global batch, wall-clock
// days, GPU-hours and dollars, each derived by hand below from the estimated iteration time.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace llmsim_test_training_cost {

using llmsim::training_cost;

namespace {
/// Llama 3 8B on 8 H100s, tp2 x dp4, 8 micro-batches of 1 x 4096: 32 sequences, 131,072 tokens a step.
llmsim::strategy_spec tp2_dp4() {
  llmsim::strategy_spec s{};
  EXPECT_TRUE(llmsim::catalogue::parse_strategy_name("tp2_pp1_dp4_mbs1_mbc8", s));
  s.seq_len = 4096;
  return s;
}

std::string refused_field(double tokens, std::optional<double> usd) {
  try {
    (void)training_cost(1.0, 8, 131072.0, tokens, usd);
  } catch (const llmsim::config_error& e) { return e.field(); }
  return "accepted";
}
}  // namespace

TEST(TrainingCost, StepsDaysGpuHoursAndDollarsByHand) {
  const auto s = tp2_dp4();
  const auto r = llmsim::estimate(llmsim::catalogue::llama3_8b, s, llmsim::catalogue::h100_sxm);
  const double t = r.cost.duration_time_per_iter.value;
  ASSERT_GT(t, 0.0);
  // 1e9 tokens / 131,072 per step = 7,629.39: 7,630 steps, the last one partial but run whole.
  const auto c = training_cost(r, s, 1e9, 2.5);
  EXPECT_EQ(c.tokens_per_step, 131072.0);
  EXPECT_EQ(c.steps, 7630.0);
  EXPECT_DOUBLE_EQ(c.seconds, 7630.0 * t);
  EXPECT_DOUBLE_EQ(c.days, 7630.0 * t / 86400.0);
  EXPECT_DOUBLE_EQ(c.gpu_hours, 7630.0 * t * 8.0 / 3600.0);
  ASSERT_TRUE(c.usd.has_value());
  EXPECT_DOUBLE_EQ(*c.usd, 7630.0 * t * 8.0 / 3600.0 * 2.5);
  EXPECT_EQ(c.usd_per_gpu_hour, 2.5);
  // Exactly 1,000 steps' worth: no extra step.
  EXPECT_EQ(training_cost(r, s, 131072.0 * 1000, std::nullopt).steps, 1000.0);
  EXPECT_EQ(training_cost(r, s, 131072.0 * 1000 + 1, std::nullopt).steps, 1001.0);
  // No price, no dollars (there is no default price).
  EXPECT_FALSE(training_cost(r, s, 1e9).usd.has_value());
}

TEST(TrainingCost, FifteenTrillionTokensOnAThousandGpusStaysExact) {
  // 15e12 tokens in steps of 1,024 x 8,192 = 8,388,608 tokens: 1,788,139.77 -> 1,788,140 steps;
  // at 5 s a step on 1,024 GPUs: 8,940,700 s = 103.48 days, x 1,024 / 3,600 = 2,543,132.44 GPU-hours,
  // $5,086,264.89 at $2.
  const auto c = training_cost(5.0, 1024, 8388608.0, 15e12, 2.0);
  EXPECT_EQ(c.steps, 1788140.0);
  EXPECT_DOUBLE_EQ(c.seconds, 8940700.0);
  EXPECT_NEAR(c.days, 103.480324, 1e-6);
  EXPECT_NEAR(c.gpu_hours, 2543132.444, 1e-3);
  EXPECT_NEAR(*c.usd, 5086264.889, 1e-3);
}

TEST(TrainingCost, RefusesTokensAndPricesNoRunCanHave) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const double tokens : {0.0, -1.0, nan, inf, 1.1e18}) EXPECT_EQ(refused_field(tokens, 1.0), "tokens") << tokens;
  for (const double usd : {-0.01, nan, inf, 1e4 + 1}) EXPECT_EQ(refused_field(1e9, usd), "usd_per_gpu_hour") << usd;
  EXPECT_EQ(refused_field(1e18, 1e4), "accepted");
  EXPECT_EQ(refused_field(1.0, 0.0), "accepted");
}

}  // namespace llmsim_test_training_cost
