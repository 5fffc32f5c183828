// Multi-token prediction (DeepSeek-V3 report §2.2; Megatron-LM --mtp-num-layers,
// megatron/core/transformer/multi_token_prediction.py): each depth embeds the tokens shifted once
// more, norms them (enorm) and the previous hidden states (hnorm), projects their concatenation
// 2h -> h (eh_proj), runs one decoder layer of the last layer's kind and its own final norm, and a
// second loss through the shared output layer; by default on the last pipeline stage. Expected
// numbers are derived by hand from DeepSeek-V3's config.json.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_mtp {

using namespace llmsim;

namespace {
constexpr double h = 7168;
// One DeepSeek-V3 MoE layer, whole: MLA projections, its four norms, router, shared expert, 256 experts.
constexpr double attn = h * 1536 + 1536.0 * 128 * 192 + h * 576 + 512.0 * 128 * 256 + 128.0 * 128 * h;
constexpr double norms = 2 * h + 1536 + 512;
constexpr double expert = 3 * h * 2048;
constexpr double router = h * 256;

model_spec with_mtp(model_spec m, std::int64_t depths = 1) {
  m.mtp_num_layers = depths;
  return m;
}
}  // namespace

TEST(Mtp, ParametersOfOneDepth) {
  // enorm + hnorm + the depth's final norm (3h), eh_proj (2h x h), one MoE layer; the embedding
  // and output layer are the model's (Megatron shares them). DeepSeek's 685B on its model card
  // also counts the MTP module's own embedding and head copies (2 x 129280 x 7168 = 1.85B).
  const double depth = 3 * h + 2 * h * h + attn + norms + router + expert + 256 * expert;
  EXPECT_EQ(parameter_count(with_mtp(catalogue::deepseek_v3), 129280), 671026404352.0 + depth);
  EXPECT_NEAR(parameter_count(with_mtp(catalogue::deepseek_v3), 129280) + 2 * 129280 * h, 685e9, 1e9);
  const double active = 3 * h + 2 * h * h + attn + norms + router + expert + 8 * expert;
  EXPECT_EQ(active_parameter_count(with_mtp(catalogue::deepseek_v3), 129280), 37552282624.0 + active);
  // Zero depths: the model as before.
  EXPECT_EQ(parameter_count(with_mtp(catalogue::deepseek_v3, 0), 129280), 671026404352.0);
}

TEST(Mtp, ModelFlopsCountEachDepthAsMegatronDoes) {
  // Megatron training.py num_floating_point_operations: one more layer of the last layer's kind
  // (MoE: top-8 experts), eh_proj 2h x h, one more logits GEMM; attention over s = 4096 with
  // 128 heads of 192 + 128 dims. 6 = 3 (fwd + bwd) x 2 (multiply-add).
  const double layer = attn + router + expert + 8 * expert;
  const double extra = 6 * (layer + 2 * h * h) + 6.0 * 4096 * 128 * (192 + 128) + 6 * h * 129280;
  const double base = flops_per_token(catalogue::deepseek_v3, 129280, 4096);
  EXPECT_NEAR(flops_per_token(with_mtp(catalogue::deepseek_v3), 129280, 4096), base + extra, 1e-6 * extra);
}

TEST(Mtp, LastStageHoldsTheDepth) {
  // pp16 with Megatron-Bridge's DeepSeek-V3 layout: the last stage runs one decoder layer, the MTP
  // depth and the loss. tp2, ep8: the depth adds the embedding's tp shard (129280 / 2 x 7168),
  // enorm, hnorm, the final norm, eh_proj's shard (2h x h / 2) and one MoE layer as the middle
  // ranks hold it (a quarter of their four); the output layer is the stage's own.
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 32,
                        .world_size = 256,
                        .tp_size = 2,
                        .pp_size = 16,
                        .ep_size = 8,
                        .pipeline_model_parallel_layout = "Et*4|(t*4|)*14,tmL"};
  strategy_spec plain = s;
  plain.pipeline_model_parallel_layout = "Et*4|(t*4|)*14,tL";
  const auto with = estimate(with_mtp(catalogue::deepseek_v3), s, catalogue::h200);
  const auto without = estimate(catalogue::deepseek_v3, plain, catalogue::h200);
  const stage_result& last = with.stages[with.stage_count - 1];
  const stage_result& last0 = without.stages[without.stage_count - 1];
  const double moe_layer = with.stages[1].params / 4;
  EXPECT_EQ(last.params - last0.params, 64640.0 * h + 3 * h + 2 * h * h / 2 + moe_layer);
  EXPECT_EQ(last.layout.mtp_layers, 1);
  // Time: the depth's leaves run on the last stage only; the other stages are unchanged.
  EXPECT_GT(last.fwd_compute_time.value, last0.fwd_compute_time.value + with.stages[1].fwd_compute_time.value / 4);
  EXPECT_EQ(with.stages[1].fwd_compute_time.value, without.stages[1].fwd_compute_time.value);
  // More time and a second loss: the iteration is longer.
  EXPECT_GT(with.cost.duration_time_per_iter.value, without.cost.duration_time_per_iter.value);
}

TEST(Mtp, OneStageSharesTheEmbedding) {
  // pp1 (ep8, four layers, the first dense): the stage holds the embedding, so the depth adds no
  // second copy: 3h norms, eh_proj 2h x h, one MoE layer with 256 / 8 = 32 local experts.
  model_spec m = catalogue::deepseek_v3;
  m.layer_num = 4;
  m.dense_layers = 1;
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  const auto without = estimate(m, s, catalogue::h200);
  const auto with = estimate(with_mtp(m), s, catalogue::h200);
  EXPECT_EQ(with.stages[0].params - without.stages[0].params,
            3 * h + 2 * h * h + attn + norms + router + expert + 32 * expert);
  EXPECT_EQ(with.stages[0].expert_params - without.stages[0].expert_params, 32 * expert);
}

TEST(Mtp, InterleavedTheDepthSitsInTheLastChunk) {
  // 64 layers (DeepSeek-V3 dims) on pp4 vp2: chunks of 8 layers; the MTP depth and the loss sit in
  // chunk 1 of rank 3, which is priced on its own and is the longer one.
  model_spec m = with_mtp(catalogue::deepseek_v3);
  m.layer_num = 64;
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 8,
                        .world_size = 32,
                        .pp_size = 4,
                        .ep_size = 8,
                        .interleaving_size = 2};
  const auto r = estimate(m, s, catalogue::h200);
  const stage_result& last = r.stages[r.stage_count - 1];
  EXPECT_EQ(last.rank, 3);
  EXPECT_EQ(last.layout.chunks[1].mtp_layers, 1);
  EXPECT_EQ(last.layout.chunks[0].mtp_layers, 0);
  EXPECT_GT(last.layout_chunks[1].forward, last.layout_chunks[0].forward);
}

TEST(Mtp, RefusedWithDualPipeV) {
  model_spec m = with_mtp(catalogue::deepseek_v3);
  m.layer_num = 64;
  strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 16, .world_size = 32, .pp_size = 4, .ep_size = 8};
  s.pipeline_schedule = pipeline_schedule_kind::dualpipev;
  try {
    (void)estimate(m, s, catalogue::h200);
    FAIL() << "expected a refusal";
  } catch (const config_error& e) { EXPECT_NE(std::string(e.what()).find("model.mtp_num_layers"), std::string::npos); }
}

}  // namespace llmsim_test_mtp
