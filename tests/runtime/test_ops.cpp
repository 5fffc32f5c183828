// Programs emit unpriced ops; cost/op_cost.hpp prices them. Each check derives the expected time
// from the op's shape and the system's figures by hand.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_ops {

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
  const leaf l = linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336);
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
  const system_spec flat = llmsim_test::flat_h100_sxm();
  const build_context c = make_build_context(catalogue::llama3_8b, s, flat, 128256);
  const leaf l = linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336);
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
  EXPECT_THROW((void)linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336), config_error);
}

namespace {
/// The ops of one attention leaf of Llama 3 8B on one rank (32 heads, 8 KV heads, head dim 128).
std::vector<op> attention_ops(const attention_lengths& len) {
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  std::vector<op> ops;
  recorded = &ops;
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  c.pricing = &record;
  (void)attention_leaf(c, len);
  recorded = nullptr;
  return ops;
}
}  // namespace

TEST(Ops, TrainingAttentionCountsEveryPairAndKeysAsSimuMax) {
  // Causal self-attention in training is counted over all s x s pairs (SimuMax's convention):
  // forward 4·s²·heads·d = 4 · 4096² · 32 · 128 = 2^38 (FlashAttention-2 §4.1, unmasked count);
  // backward 2.5x (five matmuls against two).
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  std::vector<op> ops;
  recorded = &ops;
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  c.pricing = &record;
  (void)attention_leaf(c);
  recorded = nullptr;
  ASSERT_EQ(ops.size(), 2U);
  EXPECT_EQ(ops[0].flops, 274877906944.0);
  EXPECT_EQ(ops[1].flops, 2.5 * 274877906944.0);
  EXPECT_EQ(ops[0].attention.q_len, 4096);
  EXPECT_EQ(ops[0].attention.kv_len, 4096);
  // The efficiency-table key is SimuMax's, seq_len being the query (= key) length.
  EXPECT_EQ(ops[0].attention.key().view(),
            "batch=1, seq_len=4096, head_num=32, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True");
}

TEST(Ops, DecodeAttentionOverAKvCache) {
  // One query token (the newest position) over a cache of N = 4096 keys: causal or not it sees all
  // 4096, so forward is 2 · 4096 · 32 · (128 + 128) = 4·N·heads·d = 67108864.
  for (const attention_pairs pairs : {attention_pairs::causal, attention_pairs::all}) {
    const auto ops = attention_ops({1, 4096, pairs});
    ASSERT_EQ(ops.size(), 2U);
    EXPECT_EQ(ops[0].flops, 67108864.0);
    EXPECT_EQ(ops[1].flops, 2.5 * 67108864.0);
    // Traffic: Q and the output are one token (32·128 each), K and V the whole cache (4096·8·128
    // each), the log-sum-exp 32 floats: (4096 + 2·4194304 + 4096 + 32) bf16 elements.
    EXPECT_EQ(ops[0].bytes, 2.0 * (4096 + 2 * 4194304 + 4096 + 32));
    // No self-attention table holds this shape: the key says so and misses.
    EXPECT_EQ(ops[0].attention.key().view(),
              "batch=1, seq_len=1, kv_seq_len=4096, head_num=32, kv_head_num=8, "
              "qk_head_dim=128, v_head_dim=128, qkv_contiguous=True");
  }
}

TEST(Ops, ChunkedPrefillCountsTheCausalPairs) {
  // 512 queries over 4096 keys, causal: the queries are the last 512 positions (3584 … 4095,
  // 0-based), as in chunked prefill; the query at position p sees p + 1 keys, so
  // pairs = 3585 + … + 4096 = (3585 + 4096) · 512 / 2 = 1966336, and forward FLOPs are
  // 2 · 32 heads · 1966336 · (128 + 128) = 32216449024.
  const auto causal = attention_ops({512, 4096, attention_pairs::causal});
  ASSERT_EQ(causal.size(), 2U);
  EXPECT_EQ(causal[0].flops, 32216449024.0);
  EXPECT_EQ(causal[1].flops, 2.5 * 32216449024.0);
  // Without the mask every query sees all 4096 keys: 2 · 32 · 512 · 4096 · 256 = 2^35.
  EXPECT_EQ(attention_ops({512, 4096, attention_pairs::all})[0].flops, 34359738368.0);
  // Causal over equal lengths is the triangle with its diagonal: s(s+1)/2 pairs.
  const attention_shape square{.q_len = 4096, .kv_len = 4096, .pairs = attention_pairs::causal};
  EXPECT_EQ(square.score_pairs(), 4096.0 * 4097 / 2);
}

}  // namespace llmsim_test_ops
