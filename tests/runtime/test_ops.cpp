// Programs emit unpriced ops; cost/op_cost.hpp prices them. Each check derives the expected time
// from the op's shape and the system's figures by hand.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace llmsim;

namespace {
/// Records every op a builder emits, without pricing.
std::vector<op>* recorded = nullptr;
seconds record(const build_context&, leaf&, const op& o) {
  recorded->push_back(o);
  return {};
}
}  // namespace

TEST(Ops, ALinearEmitsThreeGemmsWithTheirPassesAndCollectives) {
  // Llama 3 8B fc1 on tp2 with sequence parallelism: local weight 4096 x 14336.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  std::vector<op> ops;
  recorded = &ops;
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  c.pricing = &record;
  const leaf l = linear_leaf(c, "linear_fc1", true, 4096, 14336);
  ASSERT_EQ(ops.size(), 6U);
  // Each pass in Megatron's order: SP all-gathers the input before the forward GEMM, reduce-scatters
  // the input gradient after the dgrad GEMM, and re-gathers the input before the wgrad GEMM.
  EXPECT_EQ(ops[0].collective, collective_kind::all_gather);
  EXPECT_EQ(ops[0].kind, op_kind::collective);
  EXPECT_EQ(ops[0].pass, pass_kind::forward);
  EXPECT_EQ(ops[0].bytes, 4096.0 * 4096 * 2);
  EXPECT_EQ(ops[1].pass, pass_kind::forward);
  EXPECT_EQ(ops[1].gemm.layout, gemm_layout::tn);
  EXPECT_EQ(ops[2].pass, pass_kind::backward_input);
  EXPECT_EQ(ops[2].gemm.layout, gemm_layout::nn);
  EXPECT_EQ(ops[3].collective, collective_kind::reduce_scatter);
  EXPECT_EQ(ops[3].pass, pass_kind::backward_input);
  EXPECT_EQ(ops[4].collective, collective_kind::all_gather);
  EXPECT_EQ(ops[4].pass, pass_kind::backward_weight);
  EXPECT_EQ(ops[5].pass, pass_kind::backward_weight);
  EXPECT_TRUE(ops[5].gemm.accumulate);
  EXPECT_EQ(ops[5].flops, 2.0 * 14336 * 4096 * 4096);
  EXPECT_EQ(l.fwd.value, 0.0);  // the recorder priced nothing
  recorded = nullptr;
}

TEST(Ops, WeightGradientTimeIsKeptApart) {
  // The wgrad GEMM of that fc1 is compute-bound on the catalogue H100 (989 TFLOPS x 0.7):
  // 2 x 14336 x 4096 x 4096 flops = 4.81e11 -> 695 us, against ~503 MB of traffic at
  // 3350 GB/s x 0.8 -> 188 us.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  const build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  const leaf l = linear_leaf(c, "linear_fc1", true, 4096, 14336);
  const double wgrad = 2.0 * 14336 * 4096 * 4096 / (989e12 * 0.7);
  EXPECT_NEAR(l.bwd_weight.value, wgrad, 1e-15);
  EXPECT_GT(l.bwd.value, l.bwd_weight.value);  // plus the input gradient
  EXPECT_EQ(l.efficiency_lookups, 3);
  EXPECT_EQ(l.efficiency_misses, 3);  // the catalogue has no measured table
}

TEST(Ops, AContextWithoutPricingIsAnError) {
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  c.pricing = nullptr;
  EXPECT_THROW((void)linear_leaf(c, "linear_fc1", true, 4096, 14336), config_error);
}
