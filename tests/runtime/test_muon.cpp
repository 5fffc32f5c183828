// The Muon optimizer (Megatron --optimizer muon / dist_muon) against numbers derived by hand: the
// Newton-Schulz FLOPs of one matrix, which parameters Muon manages and which fall back to Adam, the
// optimizer state bytes, the layer-wise distributed optimizer's sharding and its gradient all-reduce.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include <cstdint>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_muon {

using namespace llmsim;

namespace {
strategy_spec one_rank(optimizer_kind opt) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1, .tp_size = 1};
  s.zero_state = 0;
  s.optimizer = opt;
  return s;
}

// Llama 3 8B (hidden 4096, 32 query / 8 KV heads of 128, SwiGLU 14336, vocabulary 128256, untied):
// per layer the 2-D weights QKV 6144 x 4096, proj 4096 x 4096, fc1 28672 x 4096, fc2 4096 x 14336:
// 25165824 + 16777216 + 117440512 + 58720256 = 218103808, x 32 layers.
constexpr double llama_matrices = 32 * 218103808.0;
// Adam keeps the embedding and the output layer (Megatron layer_wise_optimizer.py: embedding /
// output parameters are excluded from Muon) and the norms (1-D): 2 x 128256 x 4096 + 2 x 4096 x 32
// (two norms per layer) + 4096 (final norm).
constexpr double llama_adam = 2 * 128256.0 * 4096 + 2 * 4096.0 * 32 + 4096;
}  // namespace

// One Newton-Schulz iteration on m x n (m <= n): X·Xᵀ 2m²n, the polynomial A·A 2m³, B·X 2m²n.
// 4096 x 7168 (a Kimi K2 expert's fused fc1): 4·4096²·7168 = 481036337152, 2·4096³ = 137438953472.
TEST(Muon, NewtonSchulzFlopsPerMatrixByHand) {
  EXPECT_EQ(muon_ns_iteration_flops(4096, 7168), 481036337152.0 + 137438953472.0);
  // Megatron transposes a tall matrix so the short side comes first: the same count.
  EXPECT_EQ(muon_ns_iteration_flops(7168, 4096), 618475290624.0);
  // Square 1024: 4·2^30 + 2·2^30 = 6·2^30.
  EXPECT_EQ(muon_ns_iteration_flops(1024, 1024), 6.0 * 1073741824.0);
  static_assert(muon_ns_iteration_flops(2, 3) == 4.0 * 4 * 3 + 2.0 * 8);
}

// A large square matrix is compute-bound: 5 iterations of 6·8192³ FLOPs at the matmul entry's peak
// and efficiency, plus the two memory passes around them (fp32 momentum in, bf16 X out; back).
TEST(Muon, NewtonSchulzTimeIsTheGemmsOnTheMatmulEntry) {
  const system_spec sys = llmsim_test::flat_h100_sxm();
  const auto& mm = compute_entry(sys, compute_kind::matmul);
  const double n = 8192;
  const double gemms = 5 * 6 * n * n * n / (mm.tflops * 1e12 * mm.efficient_factor);
  const double passes = 2 * memory_time(sys, memory_kind::default_kind, n * n * 6).value;
  EXPECT_NEAR(muon_ns_time(sys, 8192, 8192, 5).value, gemms + passes, 1e-12);
  EXPECT_NEAR(muon_ns_time(sys, 8192, 8192, 10).value - muon_ns_time(sys, 8192, 8192, 5).value, gemms, 1e-12);
}

// Which parameters are Muon's: every decoder matrix; the embedding, the output layer and the norms
// stay with Adam. State: 8 bytes per Muon parameter (fp32 master + momentum), 12 per Adam one.
TEST(Muon, ParametersAndStateBytesPerParameter) {
  const auto muon = estimate(catalogue::llama3_8b, one_rank(optimizer_kind::muon), catalogue::h100_sxm);
  const auto adam = estimate(catalogue::llama3_8b, one_rank(optimizer_kind::adam), catalogue::h100_sxm);
  ASSERT_EQ(muon.stage_count, 1U);
  const stage_result& st = muon.stages[0];
  EXPECT_EQ(st.params, llama_matrices + llama_adam);  // 8030261248
  EXPECT_EQ(st.muon_params, llama_matrices);
  EXPECT_EQ(st.muon_expert_params, 0.0);
  EXPECT_EQ(static_cast<double>(st.optimizer_state_mem.value), 8 * llama_matrices + 12 * llama_adam);
  EXPECT_EQ(static_cast<double>(adam.stages[0].optimizer_state_mem.value), 12 * (llama_matrices + llama_adam));
  EXPECT_EQ(adam.stages[0].muon_params, 0.0);
  // Weights and gradients do not change with the optimizer.
  EXPECT_EQ(st.weight_mem, adam.stages[0].weight_mem);
  EXPECT_EQ(st.grad_mem, adam.stages[0].grad_mem);
  EXPECT_GT(st.muon_ns_time.value, 0.0);
  EXPECT_GT(st.optim_time.value, st.muon_ns_time.value);
}

// --muon-split-qkv: linear_qkv is orthogonalised as Q (4096 x 4096), K and V (1024 x 4096 each).
TEST(Muon, SplitQkvOrthogonalisesThreeMatrices) {
  const auto& sys = catalogue::h100_sxm;
  auto nosplit = one_rank(optimizer_kind::muon);
  nosplit.muon_split_qkv = false;
  const auto a = estimate(catalogue::llama3_8b, one_rank(optimizer_kind::muon), sys);
  const auto b = estimate(catalogue::llama3_8b, nosplit, sys);
  const double per_layer = muon_ns_time(sys, 4096, 4096, 5).value + 2 * muon_ns_time(sys, 1024, 4096, 5).value -
                           muon_ns_time(sys, 6144, 4096, 5).value;
  EXPECT_NEAR(a.stages[0].muon_ns_time.value - b.stages[0].muon_ns_time.value, 32 * per_layer, 1e-9);
  EXPECT_EQ(a.stages[0].muon_params, b.stages[0].muon_params);
}

// Layer-wise distributed optimizer (zero_state 1): each of the dp ranks owns whole parameters, so
// it keeps 1/dp of the state and runs 1/dp of the Newton-Schulz work; gradients are all-reduced,
// not reduce-scattered, and the parameters are all-gathered after the step.
TEST(Muon, LayerWiseOptimizerShardsStateAndWorkOverDataParallelRanks) {
  const auto& sys = catalogue::h100_sxm;
  auto dp4 = one_rank(optimizer_kind::muon);
  dp4.world_size = 4;
  dp4.zero_state = 1;
  const auto plain = estimate(catalogue::llama3_8b, one_rank(optimizer_kind::muon), sys);
  const auto sharded = estimate(catalogue::llama3_8b, dp4, sys);
  const stage_result& st = sharded.stages[0];
  EXPECT_NEAR(static_cast<double>(st.optimizer_state_mem.value), (8 * llama_matrices + 12 * llama_adam) / 4, 1);
  EXPECT_NEAR(st.muon_ns_time.value, plain.stages[0].muon_ns_time.value / 4, 1e-12);
  auto adam = dp4;
  adam.optimizer = optimizer_kind::adam;
  const auto distopt = estimate(catalogue::llama3_8b, adam, sys);
  // A ring all-reduce moves twice a reduce-scatter's bytes; the gather is the same in both.
  EXPECT_GT(st.grad_reduce_time.value, 1.5 * distopt.stages[0].grad_reduce_time.value);
  EXPECT_EQ(st.param_gather_time, distopt.stages[0].param_gather_time);
}

// Routed experts: each expert's weights are separate matrices (TE GroupedLinear weight per expert),
// all Muon's; with ep the expert ones shard over the expert-data-parallel group.
TEST(Muon, ExpertWeightsAreMuonMatrices) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .tp_size = 1};
  s.ep_size = 8;
  s.zero_state = 1;
  s.optimizer = optimizer_kind::muon;
  const auto r = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h100_sxm);
  const stage_result& st = r.stages[0];
  EXPECT_GT(st.expert_params, 0.0);
  EXPECT_EQ(st.muon_expert_params, st.expert_params);
  // Dense Adam parameters: embedding + output (2 x 151936 x 2048), two norms of 2048 per layer (48)
  // and the final norm; the router's gate (128 x 2048) is a 2-D weight, Muon's. (llmsim's model has
  // no Qwen3 q/k norms; Megatron would give them to Adam.)
  const double adam_dense = st.params - st.expert_params - (st.muon_params - st.muon_expert_params);
  EXPECT_EQ(adam_dense, 2 * 151936.0 * 2048 + 48 * 2 * 2048.0 + 2048);
}

}  // namespace llmsim_test_muon
