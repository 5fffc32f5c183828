// What a user reads: the JSON and text reports name every distinct stage, the bounding stage, the
// memory verdict and the estimate's notes, with the same numbers as the library result.
#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_report_output {

using namespace llmsim;

namespace {
/// DeepSeek-V3 over pp16 with one layer on the first stage (see test_pipeline_stages.cpp).
strategy_spec deepseek_pp16() {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 32,
          .world_size = 128,
          .pp_size = 16,
          .ep_size = 8,
          .num_layers_in_first_pipeline_stage = 1};
}
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST(ReportOutput, JsonNamesEveryStageAndTheBoundingOne) {
  const auto r = estimate(catalogue::deepseek_v3, deepseek_pp16(), catalogue::h200);
  const auto j = json::to_json(r);
  const auto& mem = j.at("mem_result");
  for (const char* name : {"first_stage", "middle_stage[1]", "middle_stage[2-14]", "last_stage"})
    ASSERT_TRUE(mem.contains(name)) << name;
  EXPECT_EQ(mem.at("middle_stage[2-14]").at("rank_count"), 13);
  EXPECT_EQ(mem.at("middle_stage[2-14]").at("micro_batches_in_flight"), 14);
  EXPECT_EQ(mem.at("middle_stage[1]").at("dense_layers"), 2);
  EXPECT_EQ(mem.at("peak_stage"), "middle_stage[2-14]");
  EXPECT_DOUBLE_EQ(mem.at("peak_mem").get<double>(), mem.at("middle_stage[2-14]").at("peak_mem").get<double>());
  // H200: 141 GiB of device memory; the verdict's excess is the peak less that.
  EXPECT_EQ(mem.at("device_mem"), 141.0);
  EXPECT_FALSE(mem.at("fits").get<bool>());
  EXPECT_NEAR(mem.at("over_by").get<double>(), mem.at("peak_mem").get<double>() - 141.0, 1e-9);
  const auto& cost = j.at("cost_result");
  EXPECT_EQ(cost.at("bounding_stage"), "last_stage");
  EXPECT_EQ(cost.at("breakdown_result"), cost.at("chunk_time").at("last_stage").at("breakdown_result"));
  // Every stage's breakdown adds up to the iteration (ms).
  for (const auto& item : cost.at("chunk_time").items()) {
    double sum = 0;
    for (const auto& part : item.value().at("breakdown_result").items()) sum += part.value().get<double>();
    EXPECT_NEAR(sum, cost.at("duration_time_per_iter").get<double>(), 1e-6) << item.key();
  }
  EXPECT_DOUBLE_EQ(j.at("active_param_count").get<double>(),
                   active_parameter_count(catalogue::deepseek_v3, r.padded_vocab));
  EXPECT_TRUE(j.at("notes").empty());  // the catalogue H200 states its compute capability
}

TEST(ReportOutput, TextShowsStagesVerdictActiveParametersAndNotes) {
  const auto r = estimate(catalogue::deepseek_v3, deepseek_pp16(), catalogue::h200);
  const std::string text = to_text(r, catalogue::deepseek_v3, deepseek_pp16(), catalogue::h200);
  // DeepSeek-V3: 671.03B parameters, 37.55B active (DeepSeek-AI 2024 reports 671B / 37B).
  EXPECT_TRUE(contains(text, "671.03B parameters, 37.55B active per token")) << text;
  EXPECT_TRUE(contains(text, "breakdown of the bounding stage, last_stage, rank 15")) << text;
  EXPECT_TRUE(contains(text, "middle_stage[2-14]: ranks 2-14, 4 layers (0 dense, 4 MoE)")) << text;
  EXPECT_TRUE(contains(text, "micro-batches in flight at rank 2: 14")) << text;
  EXPECT_TRUE(contains(text, "does not fit: peak")) << text;
  EXPECT_TRUE(contains(text, "on middle_stage[2-14] exceeds 141.00 GiB device memory by")) << text;
  EXPECT_TRUE(contains(text, "pipeline schedule: 1f1b\n")) << text;  // pp16, nothing asked: Megatron's 1F1B
  EXPECT_FALSE(contains(text, "straggler")) << text;  // edp = 128 / (8 x 16) = 1: no synchronised group spans nodes
  // tp8 x dp4 over 4 nodes: the data-parallel group spans 4 nodes, so the slowdown is shown and explained.
  const strategy_spec dp4{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 32, .tp_size = 8};
  const std::string spread =
      to_text(estimate(catalogue::llama3_8b, dp4, catalogue::h100_sxm), catalogue::llama3_8b, dp4, catalogue::h100_sxm);
  EXPECT_FALSE(contains(spread, "pipeline schedule")) << spread;  // no pipeline
  EXPECT_TRUE(contains(spread, "straggler")) << spread;
  EXPECT_TRUE(contains(spread, "SimuMax v1.2's straggler model")) << spread;
  // A system whose name implies no GPU: the assumed compute capability is a note.
  system_spec sys = catalogue::h100_sxm;
  sys.accelerator.compute_capability = 0;
  sys.sys_name.assign("cluster_x");
  const strategy_spec tp8{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 8};
  const auto u = estimate(catalogue::llama3_8b, tp8, sys);
  const std::string note_text = to_text(u, catalogue::llama3_8b, tp8, sys);
  EXPECT_TRUE(contains(
      note_text,
      "notes\n  - system.accelerator.compute_capability is not given and sys_name names no known GPU; assumed 9.0"))
      << note_text;
  EXPECT_TRUE(contains(note_text, "fits: peak")) << note_text;
  EXPECT_EQ(json::to_json(u).at("notes").size(), 1U);
}

TEST(ReportOutput, TextNamesThePipelineSchedule) {
  strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 16, .world_size = 32, .tp_size = 8, .pp_size = 4};
  const auto text = [&] {
    return to_text(estimate(catalogue::llama3_70b, s, catalogue::h100_sxm), catalogue::llama3_70b, s,
                   catalogue::h100_sxm);
  };
  s.interleaving_size = 2;
  EXPECT_TRUE(contains(text(), "pipeline schedule: interleaved_1f1b (2 model chunks per rank)\n"));
  s.interleaving_size = 1;
  s.pipeline_schedule = pipeline_schedule_kind::zb_h1;
  EXPECT_TRUE(contains(text(), "pipeline schedule: zb_h1\n"));
  s.pipeline_schedule = pipeline_schedule_kind::dualpipev;
  EXPECT_TRUE(contains(text(), "pipeline schedule: dualpipev\n"));
}

}  // namespace llmsim_test_report_output
