// LatentMoE (Megatron --moe-latent-size, megatron/core/transformer/moe/moe_layer.py and
// experts.py) and multi-token prediction in hybrid models (mtp_hybrid_override_pattern,
// multi_token_prediction.py with a HybridStack per depth, mtp_use_repeated_layer). Expected numbers
// are derived by hand in the comments from the module shapes, from the Nemotron 3 Super model card
// and from Megatron-Bridge flop_utils.py `hybrid_flops` / `moe_layer_flops`.
#include <llmsim/llmsim.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>

#include <gtest/gtest.h>

#include "sanitized_build.hpp"

#include <map>
#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_latent_moe {

using namespace llmsim;

namespace {
/// A small latent MoE: h 256, latent 64, 8 experts of 128 (GeLU, not gated), top-2, one shared
/// expert of 256; dropless (no capacity padding) so that each rank's experts get exactly topk x
/// its tokens.
constexpr model_spec tiny_latent{
    .model_type = model_kind::moe,
    .model_name = "tiny_latent",
    .hidden_size = 256,
    .head_num = 4,
    .kv_head_num = 2,
    .head_size = 64,
    .intermediate_size = 512,
    .layer_num = 2,
    .vocab_size = 1024,
    .expert_num = 8,
    .topk = 2,
    .moe_ffn_hidden_size = 128,
    .moe_shared_expert_intermediate_size = 256,
    .moe_pad_expert_input_to_capacity = false,
    .moe_latent_size = 64,
};

/// tp 2 with sequence parallelism, ep 4 over 8 GPUs, 1024 tokens per micro-batch.
constexpr strategy_spec tp2_ep4{.seq_len = 1024,
                                .micro_batch_size = 1,
                                .micro_batch_num = 4,
                                .world_size = 8,
                                .tp_size = 2,
                                .ep_size = 4,
                                .enable_sequence_parallel = true};

struct leaf_sums {
  double fwd_flops = 0, bwd_flops = 0, params = 0, fwd_a2a_bytes = 0, fwd_tp_comm_bytes = 0;
  bool tp_duplicated = false, expert_params = false;
};

std::map<leaf_id, leaf_sums> moe_leaves(const model_spec& m, const strategy_spec& s) {
  build_context c = make_build_context(m, s, catalogue::h100_sxm, 1024);
  op_record rec;
  c.pricing = &record_op;
  c.record = &rec;
  leaf_block b;
  push_moe_mlp(b, c);
  std::map<leaf_id, leaf_sums> out;
  for (const leaf& l : b) {
    leaf_sums& sum = out[l.id];
    sum.params = l.params;
    sum.tp_duplicated = l.tp_duplicated;
    sum.expert_params = l.expert_params;
    for (const priced_op& p : rec.ops) {
      if (p.leaf_id != l.record_id) continue;
      if (p.o.kind == op_kind::collective) {
        if (p.o.pass != pass_kind::forward) continue;
        if (p.o.collective == collective_kind::all2all) sum.fwd_a2a_bytes += p.o.bytes;
        if (p.o.group == comm_group::tp) sum.fwd_tp_comm_bytes += p.o.bytes;
      } else if (p.o.pass == pass_kind::forward) {
        sum.fwd_flops += p.o.flops;
      } else {
        sum.bwd_flops += p.o.flops;
      }
    }
  }
  return out;
}

/// A small hybrid with MTP: pattern "ME*E", one MTP layer "*E" per depth (test_mamba.cpp's tiny
/// sizes: Mamba 8 heads of 32, 2 groups of state 16; attention 4 heads of 64, 2 KV heads; 8
/// experts of 128, top-2).
constexpr model_spec tiny_hybrid_mtp(std::int64_t depths, bool repeated) {
  model_spec m{
      .model_type = model_kind::moe,
      .model_name = "tiny_hybrid_mtp",
      .hidden_size = 256,
      .head_num = 4,
      .kv_head_num = 2,
      .head_size = 64,
      .intermediate_size = 512,
      .layer_num = 4,
      .vocab_size = 1024,
      .expert_num = 8,
      .topk = 2,
      .moe_ffn_hidden_size = 128,
      .position_embedding_type = position_kind::none,
      .mtp_num_layers = depths,
      .hybrid_override_pattern = "ME*E",
      .mamba_state_dim = 16,
      .mamba_head_dim = 32,
      .mamba_num_heads = 8,
      .mamba_num_groups = 2,
      .mtp_hybrid_override_pattern = "*E",
      .mtp_use_repeated_layer = repeated,
  };
  return m;
}

constexpr strategy_spec ep8{
    .seq_len = 1024, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};

/// All parameters of a one-stage estimate: the non-expert ones plus the experts of all 8 ep ranks.
double stage_total_params(const model_spec& m) {
  const auto r = estimate(m, ep8, catalogue::h100_sxm);
  return r.stages[0].params - r.stages[0].expert_params + 8 * r.stages[0].expert_params;
}
}  // namespace

TEST(LatentMoe, LayerFlopsParamsAndDispatchAtTp2Ep4) {
  const auto l = moe_leaves(tiny_latent, tp2_ep4);
  // Sequence parallelism: 1024 / 2 = 512 tokens per rank reach the MoE layer.
  // fc1_latent_proj: duplicated TELinear h -> latent on the rank's own 512 tokens, the whole
  // 256 x 64 weight on each tp rank, no tp collective, gradient summed over tp (tp_duplicated).
  const auto& down = l.at(leaf_id::moe_fc1_latent_proj);
  EXPECT_EQ(down.fwd_flops, 2.0 * 512 * 256 * 64);
  EXPECT_EQ(down.bwd_flops, 2 * 2.0 * 512 * 256 * 64);  // dgrad + wgrad
  EXPECT_EQ(down.params, 256.0 * 64);
  EXPECT_TRUE(down.tp_duplicated);
  EXPECT_FALSE(down.expert_params);
  EXPECT_EQ(down.fwd_tp_comm_bytes, 0.0);
  // The dispatcher moves latent rows: 512 tokens x top-2 = 1024 copies of 64 bf16 values.
  EXPECT_EQ(l.at(leaf_id::permutation).fwd_a2a_bytes, 1024.0 * 64 * 2);
  EXPECT_EQ(l.at(leaf_id::unpermutation).fwd_a2a_bytes, 1024.0 * 64 * 2);
  // Experts (8 / ep 4 = 2 per rank) receive the 1024 balanced copies: fc1 latent 64 -> 128,
  // fc2 128 -> latent 64.
  EXPECT_EQ(l.at(leaf_id::experts_linear_fc1).fwd_flops, 2.0 * 1024 * 64 * 128);
  EXPECT_EQ(l.at(leaf_id::experts_linear_fc1).params, 2.0 * 64 * 128);
  EXPECT_EQ(l.at(leaf_id::experts_linear_fc2).fwd_flops, 2.0 * 1024 * 128 * 64);
  EXPECT_EQ(l.at(leaf_id::experts_linear_fc2).params, 2.0 * 128 * 64);
  EXPECT_TRUE(l.at(leaf_id::experts_linear_fc2).expert_params);
  // fc2_latent_proj: latent 64 -> h 256 on the 512 combined tokens, duplicated as fc1's.
  const auto& up = l.at(leaf_id::moe_fc2_latent_proj);
  EXPECT_EQ(up.fwd_flops, 2.0 * 512 * 64 * 256);
  EXPECT_EQ(up.params, 64.0 * 256);
  EXPECT_TRUE(up.tp_duplicated);
  // The router and the shared expert stay at h: router 256 -> 8 on the 512 tokens; the shared
  // expert's column-parallel fc1 256 -> 256 / 2 on the 1024 gathered tokens.
  EXPECT_EQ(l.at(leaf_id::shared_experts_linear_fc1).fwd_flops, 2.0 * 1024 * 256 * 128);
  EXPECT_EQ(l.at(leaf_id::shared_experts_linear_fc1).params, 256.0 * 128);
}

TEST(LatentMoe, WithoutTheLatentSizeTheLayerIsUnchanged) {
  model_spec plain = tiny_latent;
  plain.moe_latent_size.reset();
  const auto l = moe_leaves(plain, tp2_ep4);
  EXPECT_EQ(l.count(leaf_id::moe_fc1_latent_proj), 0U);
  EXPECT_EQ(l.count(leaf_id::moe_fc2_latent_proj), 0U);
  EXPECT_EQ(l.at(leaf_id::permutation).fwd_a2a_bytes, 1024.0 * 256 * 2);
  EXPECT_EQ(l.at(leaf_id::experts_linear_fc1).fwd_flops, 2.0 * 1024 * 256 * 128);
}

TEST(LatentMoe, ParameterCountByHand) {
  // Per layer: attention 256·(4 + 2·2)·64 + 4·64·256 = 196 608, two norms 512; MoE router 256·8 =
  // 2048, shared expert 2·256·256 = 131 072, latent projections 2·256·64 = 32 768, experts
  // 8·(64·128 + 128·64) = 131 072. Embedding and head 2·1024·256, final norm 256.
  const double layer = 196608 + 512 + 2048 + 131072 + 32768 + 131072;
  EXPECT_EQ(parameter_count(tiny_latent, 1024), 2 * layer + 2 * 1024.0 * 256 + 256);
  // Active: top-2 experts, 2·(64·128 + 128·64) = 32 768 instead of 131 072.
  EXPECT_EQ(active_parameter_count(tiny_latent, 1024), 2 * (layer - 131072 + 32768) + 2 * 1024.0 * 256 + 256);
}

TEST(HybridMtp, DepthParametersByHandAndTheRepeatedLayer) {
  // One MTP layer "*E": enorm, hnorm and final norm 3·256; eh_proj 2·256·256 = 131 072; the
  // attention layer 256 (norm) + 196 608; the MoE layer 256 (norm) + router 2048 + 8 experts
  // 2·256·128 = 526 336. Total 855 296.
  const double mtp_layer = 3 * 256.0 + 131072 + 256 + 196608 + 256 + 526336;
  EXPECT_EQ(mtp_layer, 855296.0);
  const double body = parameter_count(tiny_hybrid_mtp(0, false), 1024);
  EXPECT_EQ(parameter_count(tiny_hybrid_mtp(2, false), 1024), body + 2 * mtp_layer);
  // mtp_use_repeated_layer: one layer's parameters serve both depths.
  EXPECT_EQ(parameter_count(tiny_hybrid_mtp(2, true), 1024), body + mtp_layer);
  // The stage program holds the same parameters (the MTP embedding and output layer are the model's).
  EXPECT_DOUBLE_EQ(stage_total_params(tiny_hybrid_mtp(2, false)), body + 2 * mtp_layer);
  EXPECT_DOUBLE_EQ(stage_total_params(tiny_hybrid_mtp(2, true)), body + mtp_layer);
}

TEST(HybridMtp, EveryDepthIsComputedEvenWhenItsLayerIsRepeated) {
  const auto none = estimate(tiny_hybrid_mtp(0, false), ep8, catalogue::h100_sxm);
  const auto own = estimate(tiny_hybrid_mtp(2, false), ep8, catalogue::h100_sxm);
  const auto repeated = estimate(tiny_hybrid_mtp(2, true), ep8, catalogue::h100_sxm);
  EXPECT_GT(own.stages[0].fwd_compute_time.value, none.stages[0].fwd_compute_time.value);
  // Same kernels at both depths: the repeated layer changes the parameters, not the work.
  EXPECT_DOUBLE_EQ(repeated.stages[0].fwd_compute_time.value, own.stages[0].fwd_compute_time.value);
  EXPECT_LT(repeated.stages[0].params, own.stages[0].params);
  // flops_per_token: each depth adds 6 x (eh_proj 2·256² + attention 196 608 + router 2048 +
  // top-2 experts 2·65 536) = 6 x 460 800, the attention scores 6·1024·4·(64 + 64) and one more
  // LM head 6·256·1024.
  const double depth = 6.0 * (131072 + 196608 + 2048 + 131072) + 6.0 * 1024 * 4 * 128 + 6.0 * 256 * 1024;
  EXPECT_DOUBLE_EQ(flops_per_token(tiny_hybrid_mtp(2, true), 1024, 1024),
                   flops_per_token(tiny_hybrid_mtp(0, false), 1024, 1024) + 2 * depth);
}

TEST(HybridMtp, PatternRulesAreChecked) {
  const auto error = [](const model_spec& m) {
    try {
      validate(m);
    } catch (const config_error& e) { return std::string(e.what()); }
    return std::string("accepted");
  };
  model_spec m = tiny_hybrid_mtp(2, true);
  m.mtp_hybrid_override_pattern = {};
  EXPECT_NE(error(m).find("needs model.mtp_hybrid_override_pattern"), std::string::npos) << error(m);
  m = tiny_hybrid_mtp(1, false);
  m.mtp_hybrid_override_pattern.assign("*X");
  EXPECT_NE(error(m).find("symbol 'X' at position 1"), std::string::npos) << error(m);
  m = tiny_latent;
  m.mtp_hybrid_override_pattern.assign("*E");
  EXPECT_NE(error(m).find("needs model.hybrid_override_pattern"), std::string::npos) << error(m);
  m = tiny_latent;
  m.model_type = model_kind::dense;
  m.expert_num = 1;
  EXPECT_NE(error(m).find("model.moe_latent_size projects"), std::string::npos) << error(m);
}

TEST(NemotronSuper, MatchesItsModelCard) {
  const model_spec& m = catalogue::nemotron_3_super_120b_a12b;
  EXPECT_EQ(hybrid_layer_count(m, 'M'), 40);
  EXPECT_EQ(hybrid_layer_count(m, 'E'), 40);
  EXPECT_EQ(hybrid_layer_count(m, '*'), 8);
  // By hand (h 4096, d_inner 128·64 = 8192, G·N = 8·128 = 1024):
  // Mamba layer: in_proj 4096·(2·8192 + 2·1024 + 128) = 76 021 760, out_proj 8192·4096 =
  //   33 554 432, conv1d (8192 + 2048)·(4 + 1) = 51 200, dt_bias/A_log/D 3·128, gated norm 8192,
  //   layer norm 4096: 109 640 064.
  // Attention layer: 4096·(32 + 2·2)·128 + 32·128·4096 + 4096 = 35 655 680.
  // MoE layer: router 4096·512 = 2 097 152, shared expert 2·4096·5376 = 44 040 192, latent
  //   projections 2·4096·1024 = 8 388 608, 512 experts of 2·1024·2688 = 5 505 024, norm 4096:
  //   2 873 102 336 (top-22: 175 640 576).
  // Embedding and head 2·131072·4096, final norm 4096: 120 668 687 360 in total, 12 770 216 960
  // active. The MTP layer ("*E" + enorm/hnorm/final norm + eh_proj 2·4096²) adds 2 942 324 736.
  model_spec no_mtp = m;
  no_mtp.mtp_num_layers = 0;
  EXPECT_EQ(parameter_count(no_mtp, 131072), 120668687360.0);
  EXPECT_EQ(active_parameter_count(no_mtp, 131072), 12770216960.0);
  EXPECT_EQ(parameter_count(m, 131072), 120668687360.0 + 2942324736.0);
  // Model card (huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16): 120B total, 12B
  // active ("A12B", rounded down; the count includes the 1.07B embedding and head).
  EXPECT_NEAR(parameter_count(no_mtp, 131072) / 120e9, 1.0, 0.01);
  EXPECT_NEAR(active_parameter_count(no_mtp, 131072) / 12e9, 1.0, 0.07);
}

TEST(NemotronSuper, MegatronBridgeFlopsWithLatentMoeAndTwoMtpDepths) {
  // flop_utils.py hybrid_flops per token, h 4096, s 8192, vocab 131072, forward x 3:
  // attention 4·h·p·(h + h·2/32) + 2·h·p·s with p = 128·32/4096 = 1: 138 412 032;
  // Mamba 2·h·(2·8192 + 2·8·128 + 128) + 7·8192·128 + 2·8192·h = 226 492 416;
  // MoE 4·1024·2688·22 + 4·h·1024 + 4·h·5376 = 347 078 656; logits 2·h·131072 per head.
  // Two MTP depths of "*E": 10 attention and 42 MoE layers, 40 Mamba, 3 logits.
  const double attention = 138412032, mamba = 226492416, moe = 347078656, logits = 2.0 * 4096 * 131072;
  const double expected = 3 * (10 * attention + 40 * mamba + 42 * moe + 3 * logits);
  const megatron_bridge::flop_inputs in{
      .model = catalogue::nemotron_3_super_120b_a12b, .seq_len = 8192, .tp_size = 1, .mtp_num_layers = 2};
  EXPECT_DOUBLE_EQ(megatron_bridge::model_flops_per_token(in, megatron_bridge::flop_formula::current), expected);
  EXPECT_NEAR(expected, 84.727037952e9, 1.0);
  // The published 26.06 GB300 MXFP8 row: 817 TFLOP/s/GPU at 9652 tokens/s/GPU.
  EXPECT_NEAR(817e12 / 9652 / expected, 1.0, 0.002);
}

TEST(NemotronLightning, MegatronBridgeFlopsOfNanoWithTwoMtpDepths) {
  // test_mamba.cpp's Nano count 22 278 094 848 plus two depths of one attention and one MoE layer
  // and two logits GEMMs (h 2688): attention 4·2688·p·(2688 + 2688·2/32) + 2·2688·p·8192 with
  // p = 4096/2688, MoE 4·2688·1856·6 + 4·2688·3712, logits 2·2688·131072; times 3.
  const double p = 4096.0 / 2688;
  const double attention = 4 * 2688 * p * (2688 + 2688 * 2.0 / 32) + 2 * 2688 * p * 8192;
  const double moe = 4.0 * 2688 * 1856 * 6 + 4.0 * 2688 * 3712, logits = 2.0 * 2688 * 131072;
  const double expected = 22278094848.0 + 3 * 2 * (attention + moe + logits);
  const megatron_bridge::flop_inputs in{
      .model = catalogue::nemotron_3_5_lightning_30b_a3b, .seq_len = 8192, .tp_size = 1, .mtp_num_layers = 2};
  EXPECT_NEAR(megatron_bridge::model_flops_per_token(in, megatron_bridge::flop_formula::current), expected, 1e3);
  // The published 26.08 GB200 MXFP8 row: 807 TFLOP/s/GPU at 28672 tokens/s/GPU (a multiple of 512:
  // good to about 1 %).
  EXPECT_NEAR(807e12 / 28672 / expected, 1.0, 0.01);
}

TEST(LatentMoe, TypedApiLowersTheLatentSize) {
  using namespace llmsim::typed;
  constexpr auto typed_model = model(
      "tiny_latent", embedding{.vocab = 1024, .hidden = 256},
      repeated{decoder_layer{gqa_attention{.heads = 4, .kv_heads = 2, .head_dim = 64},
                             moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 128, .shared_ffn = 256, .latent = 64}},
               2},
      lm_head{});
  constexpr model_spec lowered = to_spec(typed_model);
  EXPECT_EQ(lowered.moe_latent_size, std::optional<std::int64_t>(64));
  EXPECT_EQ(routed_width(lowered), 64);
  // Without `latent` the experts stay at the hidden size.
  constexpr auto plain = model("tiny_plain", embedding{.vocab = 1024, .hidden = 256},
                               repeated{decoder_layer{gqa_attention{.heads = 4, .kv_heads = 2, .head_dim = 64},
                                                      moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 128}},
                                        2},
                               lm_head{});
  EXPECT_FALSE(to_spec(plain).moe_latent_size.has_value());
}

TEST(HybridMtp, EstimateIsAConstantExpression) {
#ifndef LLMSIM_SANITIZED_BUILD
  static constexpr auto r = estimate(tiny_hybrid_mtp(2, true), ep8, catalogue::h100_sxm);
  const auto run = estimate(tiny_hybrid_mtp(2, true), ep8, catalogue::h100_sxm);
  EXPECT_EQ(r.cost.duration_time_per_iter, run.cost.duration_time_per_iter);
  EXPECT_EQ(r.mem.peak_mem, run.mem.peak_mem);
#endif
}

}  // namespace llmsim_test_latent_moe
