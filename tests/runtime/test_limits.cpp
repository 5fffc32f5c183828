// Every field's range, and the arithmetic that could leave the representable range (issue 15):
// each input below was accepted before and printed a wrong figure with exit status 0, or hung.
#include <llmsim/estimate/trace.hpp>
#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_limits {

namespace lj = llmsim::json;

/// The message of the config_error that estimating catalogue model `model`, strategy name
/// `strategy` and catalogue system `system` with `--set` overrides gives; "estimated" if none.
std::string refusal(const std::string& model, const std::string& strategy, const std::string& system,
                    const lj::value& model_set, const lj::value& strategy_set, const lj::value& system_set) {
  try {
    lj::perf_llm perf;
    perf.configure(strategy, model, system, {}, strategy_set, model_set, system_set);
    perf.run_estimate();
  } catch (const llmsim::config_error& e) { return e.rule(); }
  return "estimated";
}

std::string system_refusal(const lj::value& set) {
  return refusal("llama3-8b", "tp2_pp1_dp4", "h100-sxm", lj::value::object(), lj::value::object(), set);
}
std::string strategy_refusal(const std::string& strategy, const lj::value& set,
                             const lj::value& model_set = lj::value::object()) {
  return refusal("llama3-8b", strategy, "h100-sxm", model_set, set, lj::value::object());
}

// Numbers print in the shortest form that reads back exactly (std::to_chars): 1e+09, 0.001.
TEST(Limits, SystemRatesAndLatenciesHaveRealRanges) {
  // 1e-300 TFLOP/s made every time infinite and the data-parallel overlap loop spin forever.
  EXPECT_EQ(system_refusal({{"accelerator.op.matmul.tflops", 1e-300}}),
            "system.accelerator.op.matmul.tflops=1e-300 must be in [0.001, 1e+06] TFLOP/s");
  EXPECT_EQ(system_refusal({{"accelerator.op.default.efficient_factor", 5}}),
            "system.accelerator.op.default.efficient_factor=5 must be in [0, 2]");
  EXPECT_EQ(system_refusal({{"accelerator.mem_gbs", 1e9}}),
            "system.accelerator.mem_gbs=1e+09 must be in (0, 1e+05] GiB");
  EXPECT_EQ(system_refusal({{"networks.high_intra_node.bandwidth.latency_us", 1e308}}),
            "system.networks.high_intra_node.bandwidth.latency_us=1e+308 must be in [0, 1e+06] us");
  EXPECT_EQ(system_refusal({{"networks.high_intra_node.bandwidth.fixed_latency", -1}}),
            "system.networks.high_intra_node.bandwidth.fixed_latency=-1 must be in [0, 1e+06] us");
  EXPECT_EQ(system_refusal({{"accelerator.bandwidth.default.gbps", 1e7}}),
            "system.accelerator.bandwidth.default.gbps=1e+07 must be in [0.001, 1e+06] GB/s");
  // The edges themselves are accepted (a per-step latency in range is still refused on a tier NCCL's
  // model prices: the catalogue's tiers are such tiers).
  EXPECT_EQ(system_refusal({{"accelerator.op.default.efficient_factor", 2}}), "estimated");
  EXPECT_EQ(system_refusal({{"networks.high_intra_node.bandwidth.fixed_latency", 1e6}}), "estimated");
  EXPECT_EQ(system_refusal({{"networks.high_intra_node.bandwidth.latency_us", 1e6}}),
            "system.networks.high_intra_node.bandwidth.latency_us=1e+06 is not used with nccl_link=\"nvlink\" "
            "(NCCL's model prices the latencies): set it to 0 or remove nccl_link");
}

TEST(Limits, MemFactorIsAnAllocatorRatio) {
  // 1e-9 turned the reserved memory (peak / mem_factor) into a negative number.
  EXPECT_EQ(strategy_refusal("tp2_pp1_dp4", {{"mem_factor", 1e-9}}),
            "strategy.mem_factor=1e-09 must be in [0.5, 1] (allocated / reserved)");
  EXPECT_EQ(strategy_refusal("tp2_pp1_dp4", {{"mem_factor", 0.5}}), "estimated");
}

TEST(Limits, PipelineSimulationIsBounded) {
  // pp 10,000 x 100,000 micro-batches ended in std::bad_alloc.
  EXPECT_EQ(strategy_refusal("tp8_pp10000_dp1_mbc100000", lj::value::object(), {{"layer_num", 10000}}),
            "strategy.pp_size=10000 exceeds 128 pipeline stages (the schedule simulation grows with the square of "
            "the stage count)");
  // ZB-H1 is simulated pass by pass: 128 x 200,000 = 25,600,000 passes > 2^24 = 16,777,216.
  EXPECT_EQ(strategy_refusal("tp8_pp128_dp1_mbc200000", {{"pipeline_schedule", "zb_h1"}}, {{"layer_num", 1024}}),
            "strategy.pp_size*micro_batch_num*interleaving_size=25600000 exceeds 16777216: the interleaved, ZB-H1 "
            "and DualPipeV schedules are simulated pass by pass");
}

// Found by tests/fuzz (scripts/fuzz.sh): micro_batch_num=2147483647 made the trace allocate 480 GB.
// The estimate stops its 1F1B simulation at the steady phase; the trace simulates every pass.
TEST(Limits, TraceRecordsABoundedNumberOfPasses) {
  auto model = *llmsim::catalogue::find_model("llama3-8b");
  model.layer_num = 2;  // one layer per stage: the trace at the limit stays small
  llmsim::strategy_spec s{};
  ASSERT_TRUE(llmsim::catalogue::parse_strategy_name("tp8_pp2_dp1_mbc2049", s));
  try {
    (void)llmsim::trace_iteration(model, s, *llmsim::catalogue::find_system("h100-sxm"));
    ADD_FAILURE() << "a trace of 2 x 2,049 = 4,098 passes was accepted";
  } catch (const llmsim::config_error& e) {
    EXPECT_EQ(e.rule(),
              "a trace records every micro-batch: strategy.pp_size*micro_batch_num*interleaving_size=4098 exceeds "
              "4096; trace the job with fewer micro-batches");
  }
  s.micro_batch_num = 2048;  // 4,096 passes: the limit itself is traced
  EXPECT_GT(llmsim::trace_iteration(model, s, *llmsim::catalogue::find_system("h100-sxm")).spans.size(), 0U);
}

// Found by tests/fuzz: 1,616 passes (within the pass limit) of a Qwen3-30B-A3B stage of 24 MoE
// layers, each pass about a thousand op spans: over 3 M spans, seconds to lay out under ASan.
TEST(Limits, TraceRecordsABoundedNumberOfSpans) {
  llmsim::strategy_spec s{};
  ASSERT_TRUE(llmsim::catalogue::parse_strategy_name("pp2_dp4_ep4_mbs9_mbc808_seq4096", s));
  const auto& model = *llmsim::catalogue::find_model("qwen3-30b-a3b");
  const auto& sys = *llmsim::catalogue::find_system("a100-pcie");
  try {
    (void)llmsim::trace_iteration(model, s, sys);
    ADD_FAILURE() << "a trace of 2 x 808 passes of 24 MoE layers was accepted";
  } catch (const llmsim::config_error& e) {
    EXPECT_EQ(e.field(), "strategy.micro_batch_num");
    EXPECT_NE(e.rule().find(" op spans, more than 1048576; trace the job with fewer micro-batches"), std::string::npos)
        << e.rule();
  }
  s.micro_batch_num = 100;  // an eighth of the passes: well under the limit
  const auto spans = llmsim::trace_iteration(model, s, sys).spans.size();
  EXPECT_GT(spans, 200U * 24U);  // more than one span per layer and pass
  EXPECT_LE(spans, 1048576U);
}

TEST(Limits, ByteCountsBeyondInt64AreRefusedNotWrapped) {
  // hidden 2,147,483,520 x vocab 2,147,483,647: the embedding alone is 4.6e18 parameters, its fp32
  // gradient 1.8e19 bytes > 2^63 = 9.2e18. The cast used to print -8192 PiB with exit status 0.
  const std::string rule =
      refusal("llama3-8b", "tp1", "h100-sxm", {{"hidden_size", 2147483520}, {"vocab_size", 2147483647}},
              lj::value::object(), lj::value::object());
  EXPECT_NE(rule.find("is beyond 8 EiB: the job is larger than llmsim represents"), std::string::npos) << rule;
}

// Found by tests/fuzz: hidden_size 2^30 put about 1e19 parameters on one stage, and the overlap
// simulation of the gradient sync walked its 1e11 DDP buckets one by one (minutes under ASan).
TEST(Limits, DataParallelBucketsAreBounded) {
  // tp2 dp4: buckets of max(40M, 1M x 4) = 40,000,000 elements. intermediate_size 2^31 - 2 puts
  // 32 layers x 3 x 4096 x 2.1e9 / 2 (tp) = 4.2e14 parameters on the stage: 1.1e7 buckets > 2^20.
  const std::string rule = strategy_refusal("tp2_pp1_dp4", lj::value::object(), {{"intermediate_size", 2147483646}});
  EXPECT_NE(rule.find("parameters in 40000000-element DDP buckets: more than the 1048576 buckets the gradient-sync "
                      "simulation walks (use more pipeline stages)"),
            std::string::npos)
      << rule;
  // intermediate_size 1e8: 32 x 3 x 4096 x 1e8 / 2 = 2.0e13 parameters, about 490,000 buckets.
  EXPECT_EQ(strategy_refusal("tp2_pp1_dp4", lj::value::object(), {{"intermediate_size", 100000000}}), "estimated");
}

TEST(Limits, ScaleListFinishesWithFiniteFigures) {
  // issue 15's scale list: 1,048,576 GPUs; 10 M-token sequences; 100,000 micro-batches; 10,000 layers.
  struct job {
    const char* strategy;
    lj::value strategy_set, model_set;
  };
  const job jobs[] = {
      {"tp8_pp4_dp32768_mbc16", lj::value::object(), lj::value::object()},
      {"tp8_dp1", {{"seq_len", 10000000}}, {{"max_position_embeddings", nullptr}}},
      {"tp8_pp4_dp1_mbc100000", lj::value::object(), lj::value::object()},
      {"tp8_pp100_dp1_mbc1000", lj::value::object(), {{"layer_num", 10000}}},
  };
  for (const auto& j : jobs) {
    SCOPED_TRACE(j.strategy);
    lj::perf_llm perf;
    perf.configure(j.strategy, "llama3-8b", "h100-sxm", {}, j.strategy_set, j.model_set);
    const auto t0 = std::chrono::steady_clock::now();
    perf.run_estimate();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& cost = perf.analysis_cost();
    EXPECT_TRUE(std::isfinite(cost.duration_time_per_iter.value) && cost.duration_time_per_iter.value > 0);
    // MFU counts attention over every (query, key) pair, as SimuMax does; a causal kernel does half
    // that work, so a job of 10 M-token sequences, nearly all attention, may pass 1 but not 2.
    EXPECT_TRUE(cost.mfu > 0 && cost.mfu < 2) << cost.mfu;
    EXPECT_GT(perf.analysis_mem().peak_mem.value, 0);
    EXPECT_LT(seconds, 5.0);  // a hang guard only; the speed itself is in the README's performance section
  }
}

}  // namespace llmsim_test_limits
