// Megatron-LM's --pipeline-model-parallel-layout (megatron/core/transformer/
// pipeline_parallel_layer_layout.py): parsing, Megatron's rules, and the stages the estimate
// builds from it. Per-stage layer counts are derived by hand in the comments.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_pipeline_layout {

using namespace llmsim;

namespace {
// Compile time: the parser is constexpr (its vector lives only during the evaluation).
constexpr bool deepseek_layout_parses() {
  const auto l = parse_pipeline_layout("Et*3|(tt|)*29,m|L");
  return l.size() == 32 && l[0].layers == 3 && l[0].embeddings == 1 && l[1].first_layer == 3 && l[29].layers == 2 &&
         l[29].first_layer == 59 && l[30].mtp == 1 && l[30].layers == 0 && l[31].losses == 1 && l[31].layers == 0;
}
static_assert(deepseek_layout_parses());

std::string error_of(const model_spec& m, const strategy_spec& s) {
  try {
    (void)estimate(m, s, catalogue::h200);
  } catch (const config_error& e) { return e.what(); }
  return {};
}

strategy_spec with_layout(strategy_spec s, std::string_view layout) {
  s.pipeline_model_parallel_layout = fixed_string<256>(layout);
  return s;
}

/// DeepSeek-V3 with one MTP layer over pp16, tp2, ep8.
strategy_spec deepseek_pp16(std::int64_t v = 1) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 32,
          .world_size = 256,
          .tp_size = 2,
          .pp_size = 16,
          .ep_size = 8,
          .interleaving_size = v};
}
model_spec deepseek_mtp() {
  model_spec m = catalogue::deepseek_v3;
  m.mtp_num_layers = 1;
  return m;
}
}  // namespace

TEST(PipelineLayout, ParsesMegatronsSyntax) {
  // "Et*3|(tt|)*29,m|L": [E t t t] then 29 stages [t t], then [m], then [L]; commas are cosmetic.
  const auto l = parse_pipeline_layout("Et*3|(tt|)*29,m|L");
  ASSERT_EQ(l.size(), 32U);
  std::int64_t layers = 0;
  for (std::size_t k = 1; k <= 29; ++k) {
    EXPECT_EQ(l[k].layers, 2);
    EXPECT_EQ(l[k].first_layer, 3 + 2 * static_cast<std::int64_t>(k - 1));
  }
  for (const auto& st : l) layers += st.layers;
  EXPECT_EQ(layers, 61);
  // A repeated separator and a group holding repeats: "E|*2t" is [E] [] [t]; "(t*2|)*2L" is [t t] [t t L].
  const auto sep = parse_pipeline_layout("E|*2t");
  ASSERT_EQ(sep.size(), 3U);
  EXPECT_EQ(sep[1].layers, 0);
  EXPECT_EQ(sep[2].layers, 1);
  const auto grouped = parse_pipeline_layout("(t*2|)*2L");
  ASSERT_EQ(grouped.size(), 3U);
  EXPECT_EQ(grouped[0].layers, 2);
  EXPECT_EQ(grouped[1].layers, 2);
  EXPECT_EQ(grouped[2].losses, 1);
}

TEST(PipelineLayout, SyntaxErrorsNameThePositionAndTheRule) {
  const auto message = [](std::string_view text) {
    try {
      (void)parse_pipeline_layout(text);
    } catch (const config_error& e) { return std::string(e.what()); }
    return std::string();
  };
  EXPECT_NE(message("Etx|L").find("'x' at position 2 is not a layout symbol"), std::string::npos);
  EXPECT_NE(message("E(tt|L").find("the group opened at position 1 is not closed"), std::string::npos);
  EXPECT_NE(message("E((t)*2)*2|L").find("groups do not nest"), std::string::npos);
  EXPECT_NE(message("E(tt)|L").find("must be followed by *N"), std::string::npos);
  EXPECT_NE(message("Et*|L").find("'*' at position 2 must be followed by a count"), std::string::npos);
  EXPECT_NE(message("Et*").find("strategy.pipeline_model_parallel_layout"), std::string::npos);
}

TEST(PipelineLayout, MegatronsRulesAreChecked) {
  const model_spec m = deepseek_mtp();
  const auto rule = [&](std::string_view layout, std::int64_t v = 1) {
    return error_of(m, with_layout(deepseek_pp16(v), layout));
  };
  // 17 stages for pp16 x vp1.
  EXPECT_NE(rule("Et*4|(t*4|)*15,tmL").find("has 17 stages; it needs strategy.pp_size * interleaving_size"),
            std::string::npos);
  EXPECT_NE(rule("Et*4|(t*4|)*14,ttmL").find("places 62 decoder layers"), std::string::npos);
  EXPECT_NE(rule("t*4|(t*4|)*14,EtmL").find("must start with the embedding 'E'"), std::string::npos);
  EXPECT_NE(rule("Et*4|(t*4|)*14,tL").find("places 0 MTP layers"), std::string::npos);
  EXPECT_NE(rule("Et*4|(t*4|)*14,mtL").find("decoder layers ('t') must come before the MTP layers"), std::string::npos);
  // pp16 vp2: stage 30 is chunk 1 of rank 14 (allowed), stage 14 chunk 0 of rank 14 (refused).
  EXPECT_EQ(rule("Et*3|(tt|)*29,m|L", 2), "");
  // "...tm|*16L": [t m] is stage 15, chunk 0 of rank 15.
  EXPECT_NE(rule("Et*4|(t*4|)*14,tm|*16L", 2).find("must be in the last model chunk"), std::string::npos);
  strategy_spec both = with_layout(deepseek_pp16(), "Et*4|(t*4|)*14,tmL");
  both.num_layers_in_first_pipeline_stage = 4;
  EXPECT_NE(error_of(m, both).find("cannot be combined with strategy.num_layers_in_first/last_pipeline_stage"),
            std::string::npos);
}

TEST(PipelineLayout, DeepSeekV3InterleavedStagesHoldTheirChunks) {
  // "Et*3|(tt|)*29,m|L" on pp16 vp2: rank r runs stages r (chunk 0) and 16 + r (chunk 1).
  // Rank 0: [E t t t] (layers 0-2, the 3 dense ones) + [t t] (stage 16: layers 33, 34) = 5 layers.
  // Ranks 1-13: [t t] + [t t] = 4 MoE layers. Rank 14: [t t] + [m]. Rank 15: [t t] + [L].
  const model_spec m = deepseek_mtp();
  const strategy_spec s = with_layout(deepseek_pp16(2), "Et*3|(tt|)*29,m|L");
  const auto stages = parse_pipeline_layout(s.pipeline_model_parallel_layout.view());
  const rank_layout r0 = layout_rank(m, s, stages, 0);
  EXPECT_EQ(r0.layers, 5);
  EXPECT_EQ(r0.dense_layers, 3);
  EXPECT_EQ(r0.chunks[0].layers, 3);
  EXPECT_TRUE(r0.chunks[0].embedding);
  EXPECT_EQ(r0.chunks[1].layers, 2);
  EXPECT_EQ(r0.chunks[1].first_layer, 33);
  const rank_layout r14 = layout_rank(m, s, stages, 14);
  EXPECT_EQ(r14.layers, 2);
  EXPECT_EQ(r14.mtp_layers, 1);
  EXPECT_EQ(r14.chunks[1].mtp_layers, 1);
  EXPECT_FALSE(r14.head);
  const rank_layout r15 = layout_rank(m, s, stages, 15);
  EXPECT_EQ(r15.layers, 2);
  EXPECT_TRUE(r15.head);
  EXPECT_EQ(r15.chunks[1].layers, 0);
  const auto r = estimate(m, s, catalogue::h200);
  ASSERT_EQ(r.stage_count, 4U);
  EXPECT_EQ(r.stages[1].rank, 1);
  EXPECT_EQ(r.stages[1].rank_count, 13);
  EXPECT_EQ(r.stages[2].rank, 14);
  EXPECT_EQ(r.stages[2].layout.mtp_layers, 1);
  // Rank 14's chunk 1 is the MTP depth without the head: besides its two MoE layers (half of rank
  // 1's four) it holds the MTP layer (a quarter of rank 1), its own copies of the embedding and the
  // output layer (129280 / 2 x 7168 each), enorm, hnorm and the final norm (7168 each) and eh_proj
  // (2 x 7168 x 7168 / 2).
  const double moe_layer = r.stages[1].params / 4;
  EXPECT_EQ(r.stages[2].params, 3 * moe_layer + 2 * 64640.0 * 7168 + 3 * 7168.0 + 2 * 7168.0 * 3584);
  // Each chunk is priced on its own: their times add up to the rank's (up to rounding).
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const auto& st = r.stages[i];
    const double fwd = st.layout_chunks[0].forward + st.layout_chunks[1].forward;
    EXPECT_NEAR(fwd, (st.fwd_compute_time + st.fwd_tp_comm_time).value, 1e-12 * fwd) << i;
  }
  // Rank 15's chunk 1 is the loss alone: its forward is the final norm, output layer and cross
  // entropy, nothing else.
  const build_context c = make_build_context(m, s, catalogue::h200, r.padded_vocab);
  const job_blocks blocks = build_blocks(c);
  double head = 0;
  for (const leaf& l : blocks.head) head += (l.fwd + l.fwd_comm).value;
  EXPECT_NEAR(r.stages[3].layout_chunks[1].forward, head, 1e-12 * head);
}

TEST(PipelineLayout, Llama405bLayoutOverEightRanksAndEightChunks) {
  // "Et|(tt|)*62,tL": 64 stages for pp8 x vp8: [E t], 62 x [t t], [t L] = 1 + 124 + 1 = 126 layers.
  // Rank 0 runs stages 0, 8, ..., 56: 1 + 7 x 2 = 15 layers; rank 7 stages 7, ..., 63: 7 x 2 + 1 = 15;
  // ranks 1-6 16 each (15 + 6 x 16 + 15 = 126).
  strategy_spec s{.seq_len = 8192,
                  .micro_batch_size = 1,
                  .micro_batch_num = 64,
                  .world_size = 512,
                  .tp_size = 8,
                  .pp_size = 8,
                  .interleaving_size = 8};
  s.pipeline_model_parallel_layout = "Et|(tt|)*62,tL";
  const auto r = estimate(catalogue::llama3_405b, s, catalogue::h100_sxm);
  ASSERT_EQ(r.stage_count, 3U);
  EXPECT_EQ(r.stages[0].layers, 15);
  EXPECT_EQ(r.stages[0].layout.chunks[0].layers, 1);
  EXPECT_EQ(r.stages[1].layers, 16);
  EXPECT_EQ(r.stages[1].rank_count, 6);
  EXPECT_EQ(r.stages[2].layers, 15);
  EXPECT_EQ(r.stages[2].layout.chunks[7].layers, 1);
  EXPECT_TRUE(r.stages[2].layout.chunks[7].head);
  // Megatron interleaved warm-up on rank 1 of 8 (m = 64, g = p = 8): (8 - 1 - 1) x 2 + 7 x 8 = 68
  // chunk-forwards, plus the one running: 69 chunks over 8 chunks per micro-batch -> 9 micro-batches.
  EXPECT_EQ(r.stages[1].micro_batches_in_flight, 9);
  EXPECT_GT(r.cost.duration_time_per_iter.value, 0);
}

TEST(PipelineLayout, EmbeddingAndLossSlotsWithInterleavingAreThatLayout) {
  // Megatron get_num_layers_to_build with account_for_embedding/loss_in_pipeline_split and vp 8 on
  // pp8: (126 + 2) / 64 = 2 slots per virtual stage, the first and the last building one layer
  // fewer: exactly "Et|(tt|)*62,tL".
  strategy_spec s{.seq_len = 8192,
                  .micro_batch_size = 1,
                  .micro_batch_num = 64,
                  .world_size = 512,
                  .tp_size = 8,
                  .pp_size = 8,
                  .interleaving_size = 8};
  strategy_spec slots = s;
  slots.account_for_embedding_in_pipeline_split = true;
  slots.account_for_loss_in_pipeline_split = true;
  s.pipeline_model_parallel_layout = "Et|(tt|)*62,tL";
  const auto a = estimate(catalogue::llama3_405b, s, catalogue::h100_sxm);
  const auto b = estimate(catalogue::llama3_405b, slots, catalogue::h100_sxm);
  EXPECT_EQ(a.cost.duration_time_per_iter.value, b.cost.duration_time_per_iter.value);
  EXPECT_EQ(a.mem.peak_mem.value, b.mem.peak_mem.value);
  ASSERT_EQ(b.stage_count, 3U);
  EXPECT_EQ(b.stages[0].layout.chunks[0].layers, 1);
  EXPECT_EQ(b.stages[0].layout.chunks[1].layers, 2);
  EXPECT_EQ(b.stages[0].layout.chunks[1].first_layer, 15);  // virtual stage 8: 8 x 2 - 1
  EXPECT_EQ(b.stages[2].layout.chunks[7].layers, 1);
  // 126 + 2 = 128 slots do not split over pp8 x vp 3 = 24 virtual stages.
  slots.interleaving_size = 3;
  slots.micro_batch_num = 64;
  try {
    (void)estimate(catalogue::llama3_405b, slots, catalogue::h100_sxm);
    FAIL() << "expected a refusal";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.pp_size * interleaving_size = 24 must divide"), std::string::npos);
  }
}

TEST(PipelineLayout, SlotsWithMoreChunksThanARankDescribesAreRefused) {
  // The embedding/loss slots describe every model chunk of a rank, and a rank describes at most
  // max_rank_chunks = 16 (without the refusal the 17th chunk was written past the array).
  // llama3-8b with 32 + 2 = 34 slots over pp2 x vp17 = 34 virtual stages: one slot each.
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 68,
                  .world_size = 8,
                  .pp_size = 2,
                  .account_for_embedding_in_pipeline_split = true,
                  .account_for_loss_in_pipeline_split = true,
                  .interleaving_size = 17};
  try {
    (void)estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
    FAIL() << "expected a refusal";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "strategy.interleaving_size");
    EXPECT_NE(std::string(e.what()).find("at most 16 model chunks per rank"), std::string::npos);
  }
  s.interleaving_size = 16;  // 34 slots over 32 virtual stages do not split: the usual refusal, no more
  s.micro_batch_num = 64;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("must divide"), std::string::npos);
}

TEST(PipelineLayout, WithoutInterleavingALayoutIsTheFirstLastSplit) {
  // "Et*15|(t*16|)*6,t*15L" on pp8 is num_layers_in_first/last_pipeline_stage = 15: the same
  // programs, the same schedule, bit for bit.
  strategy_spec s{
      .seq_len = 8192, .micro_batch_size = 1, .micro_batch_num = 64, .world_size = 512, .tp_size = 8, .pp_size = 8};
  strategy_spec split = s;
  split.num_layers_in_first_pipeline_stage = 15;
  split.num_layers_in_last_pipeline_stage = 15;
  s.pipeline_model_parallel_layout = "Et*15|(t*16|)*6,t*15L";
  const auto a = estimate(catalogue::llama3_405b, s, catalogue::h100_sxm);
  const auto b = estimate(catalogue::llama3_405b, split, catalogue::h100_sxm);
  EXPECT_EQ(a.cost.duration_time_per_iter.value, b.cost.duration_time_per_iter.value);
  EXPECT_EQ(a.mem.peak_mem.value, b.mem.peak_mem.value);
  ASSERT_EQ(a.stage_count, b.stage_count);
  for (std::size_t i = 0; i < a.stage_count; ++i) EXPECT_EQ(a.stages[i].params, b.stages[i].params);
}

TEST(PipelineLayout, ReadFromJson) {
  const auto s = llmsim::json::parse_strategy(llmsim::json::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1,
      "micro_batch_num": 32, "world_size": 256, "tp_size": 2, "pp_size": 16, "ep_size": 8,
      "pipeline_model_parallel_layout": "Et*4|(t*4|)*14,tmL"})"));
  EXPECT_EQ(s.pipeline_model_parallel_layout.view(), "Et*4|(t*4|)*14,tmL");
  const auto r = estimate(deepseek_mtp(), s, catalogue::h200);
  EXPECT_EQ(r.stages[r.stage_count - 1].layers, 1);
  EXPECT_EQ(r.stages[r.stage_count - 1].layout.mtp_layers, 1);
}

}  // namespace llmsim_test_pipeline_layout
