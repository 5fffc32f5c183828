// Strategy settings that used to be accepted and ignored, each modelled and checked against
// bytes and times derived by hand in the comments.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>

using namespace llmsim;
using namespace llmsim::literals;

namespace {
/// Llama 3 8B on tp2 (sequence parallel), one micro-batch of 4096 tokens, one pipeline stage.
strategy_spec tp2(bool sequence_parallel = true) {
  return {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2, .enable_sequence_parallel = sequence_parallel};
}
double held(const estimate_result& r) { return static_cast<double>(r.stages[0].fwd_activation_cache_per_micro_batch.value); }
std::string error_of(const model_spec& m, const strategy_spec& s) {
  try {
    (void)estimate(m, s, catalogue::h100_sxm);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ModelledInputs, DropoutKeepsOneByteMasks) {
  // Hidden dropout: two bias-dropout-adds per layer and one after the embedding, each keeping a
  // one-byte mask per element of the sequence-parallel local stream: 4096 / 2 tokens x 4096.
  auto s = tp2();
  const auto off = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.enable_dropout = true;
  const auto on = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const double mask = 2048.0 * 4096.0;
  EXPECT_EQ(held(on) - held(off), (32 * 2 + 1) * mask);
  EXPECT_GT(on.stages[0].fwd_compute_time, off.stages[0].fwd_compute_time);  // the masks are written
}

TEST(ModelledInputs, MathAttentionKeepsTheScoreMatrix) {
  // Unfused attention keeps the softmax output, b x heads x s x s = 1 x 16 x 4096^2 elements of 2
  // bytes, instead of flash attention's log-sum-exp (b x s x heads = 65536 elements of 2 bytes).
  auto s = tp2();
  const auto flash = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  const auto math = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const double P = 16.0 * 4096 * 4096;
  EXPECT_EQ(held(math) - held(flash), 32 * (2 * P - 2 * 65536.0));
  // The scores and the probabilities are alive together in forward: at least 2 x 2P bytes.
  EXPECT_GE(static_cast<double>(math.stages[0].peak_activation_mem_in_1F1B.value), 4 * P);
  // With dropout the probabilities' mask (1 byte) and dropped output (2 bytes) are kept too,
  // besides the 65 hidden-dropout masks of the test above.
  s.enable_dropout = true;
  const auto both = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(held(both) - held(math), 32 * 3 * P + 65 * 2048.0 * 4096.0);
}

TEST(ModelledInputs, MathAttentionWithMlaIsRefused) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  EXPECT_NE(error_of(catalogue::deepseek_v2_lite, s).find("strategy.use_flash_sdp"), std::string::npos);
}

TEST(ModelledInputs, EmbeddingAndLossCountAsLayersOfTheSplit) {
  // Megatron get_num_layers_to_build: (32 + 1) / 3 = 11 per stage, the first builds one fewer.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 3, .pp_size = 3,
                  .account_for_embedding_in_pipeline_split = true};
  auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  ASSERT_EQ(r.stage_count, 3U);
  EXPECT_EQ(r.stages[0].layers, 10);
  EXPECT_EQ(r.stages[1].layers, 11);
  EXPECT_EQ(r.stages[2].layers, 11);
  // Both slots over pp2: (32 + 2) / 2 = 17, each end builds 16.
  s.pp_size = s.world_size = 2;
  s.account_for_loss_in_pipeline_split = true;
  r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(r.stages[0].layers, 16);
  EXPECT_EQ(r.stages[1].layers, 16);
  // 32 + 2 = 34 does not split over 3 stages; and Megatron refuses the slots with uneven stages.
  s.pp_size = s.world_size = 3;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("strategy.pp_size=3 must divide model.layer_num=32 plus the 2 embedding/loss slot(s)"), std::string::npos);
  s.pp_size = s.world_size = 2;
  s.num_layers_in_first_pipeline_stage = 15;
  s.num_layers_in_last_pipeline_stage = 17;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("cannot be combined"), std::string::npos);
}

TEST(ModelledInputs, ScatterGatherSendsOneTpShareAndGathersIt) {
  // A system whose NVLink tier moves 100e9 B/s at efficiency 1 with 5 us per step, nothing fixed.
  system_spec sys = catalogue::h100_sxm;
  for (std::size_t i = 0; i < sys.network_count; ++i) {
    sys.networks[i].bandwidth.gbps = 100e9 / 1073741824.0;
    sys.networks[i].bandwidth.efficient_factor = 1.0;
    sys.networks[i].bandwidth.latency_us = 5;
    sys.networks[i].bandwidth.fixed_latency = 0;
  }
  // tp2 x pp2 without sequence parallelism: the activation between stages is 4096 x 4096 x 2 B.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 4, .tp_size = 2, .pp_size = 2,
                  .enable_sequence_parallel = false};
  const auto plain = estimate(catalogue::llama3_8b, s, sys);
  s.scatter_gather_tensors_in_pipeline = true;
  const auto split = estimate(catalogue::llama3_8b, s, sys);
  const double full = 4096.0 * 4096 * 2;
  EXPECT_NEAR(plain.cost.comm_result.p2p_time_per_transfer.value, full / 100e9 + 5e-6, 1e-12);
  EXPECT_NEAR(split.cost.comm_result.p2p_time_per_transfer.value, full / 2 / 100e9 + 5e-6, 1e-12);
  // The receiver all-gathers over tp2: (2 - 1) / 2 of the full activation and one 5 us step;
  // rank 1 receives activations in forward, rank 0 gradients in backward.
  const double gather = full / 2 / 100e9 + 5e-6;
  EXPECT_NEAR((split.stages[1].fwd_tp_comm_time - plain.stages[1].fwd_tp_comm_time).value, gather, 1e-12);
  EXPECT_NEAR((split.stages[0].bwd_tp_comm_time - plain.stages[0].bwd_tp_comm_time).value, gather, 1e-12);
  // With sequence parallelism the activation is already split: nothing changes.
  s.enable_sequence_parallel = true;
  const auto sp = estimate(catalogue::llama3_8b, s, sys);
  s.scatter_gather_tensors_in_pipeline = false;
  EXPECT_EQ(sp.cost.duration_time_per_iter, estimate(catalogue::llama3_8b, s, sys).cost.duration_time_per_iter);
}
