// Strategy settings that used to be accepted and ignored, each modelled and checked against
// bytes and times derived by hand in the comments.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_modelled_inputs {

using namespace llmsim;
using namespace llmsim::literals;

namespace {
/// Llama 3 8B on tp2 (sequence parallel), one micro-batch of 4096 tokens, one pipeline stage.
strategy_spec tp2(bool sequence_parallel = true) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 4,
          .world_size = 2,
          .tp_size = 2,
          .enable_sequence_parallel = sequence_parallel};
}
double held(const estimate_result& r) {
  return static_cast<double>(r.stages[0].fwd_activation_cache_per_micro_batch.value);
}
std::string error_of(const model_spec& m, const strategy_spec& s) {
  try {
    (void)estimate(m, s, catalogue::h100_sxm);
  } catch (const config_error& e) { return e.what(); }
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
  // bytes, instead of flash attention's log-sum-exp (b x s x heads = 65536 elements of 2 bytes),
  // and K and V repeated from 4 to 16 heads per rank: 2 x (16 - 4) x 128 x 4096 elements of 2 bytes.
  auto s = tp2();
  const auto flash = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  const auto math = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(math.notes, 0U);
  // Both on: flash runs, as PyTorch's SDPA prefers it, and the estimate says so.
  auto both_on = tp2();
  both_on.use_math_sdp = true;
  const auto shadowed = estimate(catalogue::llama3_8b, both_on, catalogue::h100_sxm);
  EXPECT_TRUE(shadowed.has(estimate_note::math_sdp_shadowed_by_flash));
  EXPECT_EQ(held(shadowed), held(flash));
  const double P = 16.0 * 4096 * 4096;
  EXPECT_EQ(held(math) - held(flash), 32 * (2 * P - 2 * 65536.0 + 2 * 2 * 12 * 128 * 4096.0));
  // The scores and the probabilities are alive together in forward: at least 2 x 2P bytes.
  EXPECT_GE(static_cast<double>(math.stages[0].peak_activation_mem_in_1F1B.value), 4 * P);
  // With dropout the probabilities' mask (1 byte) and dropped output (2 bytes) are kept too,
  // besides the 65 hidden-dropout masks of the test above.
  s.enable_dropout = true;
  const auto both = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(held(both) - held(math), 32 * 3 * P + 65 * 2048.0 * 4096.0);
}

TEST(ModelledInputs, MathAttentionWithMlaIsModelled) {
  // Unfused MLA attention (test_mla_tp.cpp checks its FLOPs and kept bytes) is slower than flash.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  const auto flash = estimate(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm);
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  const auto math = estimate(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm);
  EXPECT_GT(math.cost.duration_time_per_iter.value, flash.cost.duration_time_per_iter.value);
}

TEST(ModelledInputs, EmbeddingAndLossCountAsLayersOfTheSplit) {
  // Megatron get_num_layers_to_build: (32 + 1) / 3 = 11 per stage, the first builds one fewer.
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 3,
                  .pp_size = 3,
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
  EXPECT_NE(error_of(catalogue::llama3_8b, s)
                .find("strategy.pp_size=3 must divide model.layer_num=32 plus the 2 embedding/loss slot(s)"),
            std::string::npos);
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
    sys.networks[i].nccl_link = nccl_link_kind::none;  // the ring model with these fitted figures
  }
  // tp2 x pp2 without sequence parallelism: the activation between stages is 4096 x 4096 x 2 B.
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 4,
                  .tp_size = 2,
                  .pp_size = 2,
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

TEST(ModelledInputs, UnfusedSwigluKeepsTheSiluOutput) {
  // Unfused SwiGLU keeps the gate half, the up half and the SiLU output: one more tp-local
  // intermediate, 4096 tokens x 14336 / 2 x 2 bytes, per layer.
  auto s = tp2();
  const auto fused = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.use_fused_swiglu = false;
  const auto unfused = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(held(unfused) - held(fused), 32 * 4096.0 * 7168 * 2);
  EXPECT_GT(unfused.stages[0].fwd_compute_time, fused.stages[0].fwd_compute_time);  // two kernels, more traffic
}

TEST(ModelledInputs, UnfusedGradientAccumulationAddsIntoTheMainGrad) {
  // Without TE's fused accumulation each weight gradient is written in bf16 (2 B) and added into
  // the fp32 main grad (read 2 + 4, write 4 bytes per element): 10 bytes per local weight element
  // in one more memory pass (H100 catalogue: 3350e9 B/s x 0.8, 30 us per kernel). The wgrad GEMMs
  // stay compute-bound, so their time does not change. Local weights on tp2, per layer:
  // QKV 4096 x 3072, proj 2048 x 4096, fc1 4096 x 14336, fc2 7168 x 4096 = 109051904; LM head
  // 4096 x 128256 / 2 = 262668288. 32 x 4 + 1 = 129 linears.
  auto s = tp2();
  const auto fused = estimate(catalogue::llama3_8b, s, llmsim_test::flat_h100_sxm());
  s.use_fused_grad_accumulation = false;
  const auto unfused = estimate(catalogue::llama3_8b, s, llmsim_test::flat_h100_sxm());
  const double w = 32 * 109051904.0 + 262668288.0;
  const double expected = 10 * w / (3350e9 * 0.8) + 129 * 30e-6;
  EXPECT_NEAR((unfused.stages[0].bwd_compute_time - fused.stages[0].bwd_compute_time).value, expected, 1e-9 * expected);
}

TEST(ModelledInputs, MicrobatchGroupSizeSetsTheChunksInFlight) {
  // Interleaved 1F1B, p = 4, v = 2, 8 micro-batches (16 chunks): rank 0 runs (4 - 1) x 2 + (2 - 1) x g
  // warm-up chunks and holds one more. g = 4 (Megatron's default, p): 11 chunks = 6 micro-batches;
  // g = 8: 15 chunks = 8 micro-batches.
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 4,
                  .pp_size = 4,
                  .interleaving_size = 2};
  EXPECT_EQ(estimate(catalogue::llama3_8b, s, catalogue::h100_sxm).stages[0].micro_batches_in_flight, 6);
  s.microbatch_group_size_per_vp_stage = 8;
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_EQ(r.stages[0].micro_batches_in_flight, 8);
  EXPECT_EQ(r.notes, 0U);  // modelled in time as well (schedule/interleaved.hpp)
}

TEST(ModelledInputs, SharedPlusRoutedSumHasNoDropout) {
  // DeepSeek-V2-Lite, tp1 (no SP): hidden dropout after attention and after the MLP of each of the
  // 27 layers and after the embedding, 4096 x 2048 one-byte masks; the shared + routed sum has none.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  const auto off = estimate(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm);
  s.enable_dropout = true;
  const auto on = estimate(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm);
  EXPECT_EQ(held(on) - held(off), (27 * 2 + 1) * 4096.0 * 2048);
}

TEST(ModelledInputs, WhatIsNotModelledIsRefusedByName) {
  auto s = tp2();
  s.use_fused_norm = false;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("strategy.use_fused_norm=false is not modelled"), std::string::npos);
  s = tp2();
  s.use_accm_weight = false;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("strategy.use_accm_weight=false is not modelled"),
            std::string::npos);
  s = tp2();
  s.dtype = dtype_kind::fp32;
  EXPECT_NE(error_of(catalogue::llama3_8b, s).find("strategy.dtype=\"fp32\" is not modelled"), std::string::npos);
  strategy_spec moe{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  moe.offload_groupgemm_col_inputs = true;  // modelled (test_activation_offload.cpp), but not with mlp_only recompute
  moe.recompute_granularity = recompute_kind::mlp_only;
  moe.recompute_layer_num = 1;
  EXPECT_NE(error_of(catalogue::mixtral_8x7b, moe).find("strategy.offload_groupgemm_col_inputs=true with"),
            std::string::npos);
  moe.offload_groupgemm_col_inputs = false;
  moe.recompute_granularity = recompute_kind::none;
  moe.recompute_layer_num = 0;
  model_spec sequential = catalogue::mixtral_8x7b;
  sequential.group_linear_mode = group_linear_kind::sequential;
  EXPECT_NE(error_of(sequential, moe).find("model.group_linear_mode=\"sequential\""), std::string::npos);
}

TEST(ModelledInputs, ProcessorUsageIsRangeCheckedAndNoted) {
  system_spec sys = catalogue::h100_sxm;
  sys.networks[0].processor_usage = 0.3;
  const auto r = estimate(catalogue::llama3_8b, tp2(), sys);
  EXPECT_TRUE(r.has(estimate_note::processor_usage_not_modelled));
  sys.networks[0].processor_usage = 1.5;
  try {
    validate(sys);
    ADD_FAILURE() << "processor_usage=1.5 accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("system.networks.high_intra_node.processor_usage=1.5 must be in [0, 1]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace llmsim_test_modelled_inputs
