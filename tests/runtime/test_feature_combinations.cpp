// Features built apart must compose: context parallelism cuts every GEMM's token dimension, also
// in FP8 layers and in MLA's duplicated down projections; FP8, ZeRO-3 and MTP jobs with context
// parallelism estimate. Expected shapes are worked by hand in the comments.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_feature_combinations {

using namespace llmsim;

namespace {
std::vector<op>* recorded = nullptr;
seconds record(const build_context&, leaf&, const op& o) {
  recorded->push_back(o);
  return {};
}

/// The GEMMs one leaf builder emits for `m` and `s` on the catalogue B200, unpriced.
template <class Build>
std::vector<op> gemms_of(const model_spec& m, const strategy_spec& s, Build build) {
  std::vector<op> ops;
  recorded = &ops;
  build_context c = make_build_context(m, s, catalogue::b200, padded_vocab(m, s.tp_size));
  c.pricing = &record;
  c.quantized = s.fp8;
  build(c);
  recorded = nullptr;
  std::vector<op> out;
  for (const op& o : ops)
    if (o.kind == op_kind::gemm) out.push_back(o);
  return out;
}
}  // namespace

TEST(FeatureCombinations, Fp8LinearUnderContextParallelismSeesItsShareOfTheSequence) {
  // Llama 3 8B fc1 (4096 -> 2 x 14336 / tp 2) on cp 2: each cp rank holds 8192 / 2 = 4096 tokens,
  // the forward GEMM is m = 4096 (sequence parallelism gathers the tp shards back to them), not 8192.
  const strategy_spec s{.seq_len = 8192,
                        .micro_batch_size = 1,
                        .micro_batch_num = 4,
                        .fp8 = true,
                        .world_size = 4,
                        .tp_size = 2,
                        .cp_size = 2,
                        .cp_comm_type = cp_comm_kind::p2p};
  const auto g = gemms_of(catalogue::llama3_8b, s, [](const build_context& c) {
    linear_leaf(c, leaf_id::linear_fc1, true, 4096, 2 * 14336 / 2);
  });
  ASSERT_EQ(g.size(), 3U);
  EXPECT_EQ(g[0].gemm.m, 4096);
  EXPECT_EQ(g[0].flops, 2.0 * 4096 * 4096 * 14336);
  EXPECT_NE(g[0].compute, compute_kind::matmul);  // the recipe's FP8 GEMM
}

TEST(FeatureCombinations, MlaDuplicatedDownProjectionUnderContextParallelism) {
  // DeepSeek-V3's q down projection (7168 -> 1536) is duplicated on each tp rank over its own
  // tokens: 8192 / cp 2 / tp 2 (sequence parallel) = 2048 rows.
  const strategy_spec s{.seq_len = 8192,
                        .micro_batch_size = 1,
                        .micro_batch_num = 4,
                        .world_size = 64,
                        .tp_size = 2,
                        .cp_size = 2,
                        .ep_size = 16,
                        .cp_comm_type = cp_comm_kind::p2p};
  const auto g = gemms_of(catalogue::deepseek_v3, s, [](const build_context& c) {
    duplicated_linear_leaf(c, leaf_id::linear_q_down_proj, 7168, 1536);
  });
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(g[0].gemm.m, 2048);
  EXPECT_EQ(g[0].flops, 2.0 * 2048 * 7168 * 1536);
}

TEST(FeatureCombinations, ContextParallelJobsWithFp8ZeroAndMtpEstimate) {
  // A cp job's iteration with FP8 is shorter than in bf16 on the same GPUs (every GEMM at the FP8
  // rate), and ZeRO-3 over dp x cp holds fewer weight bytes than ZeRO-1.
  strategy_spec s{.seq_len = 16384,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 16,
                  .tp_size = 2,
                  .cp_size = 2,
                  .cp_comm_type = cp_comm_kind::p2p};
  const estimate_result bf16 = estimate(catalogue::llama3_8b, s, catalogue::b200);
  s.fp8 = true;
  const estimate_result fp8 = estimate(catalogue::llama3_8b, s, catalogue::b200);
  EXPECT_LT(fp8.cost.duration_time_per_iter.value, bf16.cost.duration_time_per_iter.value);
  s.fp8 = false;
  s.zero_state = 3;
  const estimate_result zero3 = estimate(catalogue::llama3_8b, s, catalogue::b200);
  EXPECT_LT(zero3.stages[0].weight_mem.value, bf16.stages[0].weight_mem.value);
  model_spec mtp = catalogue::deepseek_v2_lite;
  mtp.mtp_num_layers = 1;
  const strategy_spec moe{.seq_len = 8192,
                          .micro_batch_size = 1,
                          .micro_batch_num = 4,
                          .world_size = 8,
                          .cp_size = 2,
                          .ep_size = 4,
                          .cp_comm_type = cp_comm_kind::p2p};
  EXPECT_NO_THROW(estimate(mtp, moe, catalogue::b200));
}

}  // namespace llmsim_test_feature_combinations
