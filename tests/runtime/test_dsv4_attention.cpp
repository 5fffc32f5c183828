// DeepSeek-V4's layer as program/dsv4.hpp emits it: forward / backward FLOPs and bytes of one layer
// of a small config derived by hand from the shapes of Megatron-Core's DSv4HybridSelfAttention,
// CompressedSparseAttention, Compressor, CSAIndexer and HyperConnectionModule (see the file comment
// of program/dsv4.hpp), the layer's parameters against model_counts.hpp, the forward FLOPs against
// Megatron-Bridge's dsv4_hybrid formula where both count the same work, and the estimate's refusals.
#include <llmsim/llmsim.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>

#include <gtest/gtest.h>

#include "sanitized_build.hpp"

#include <map>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_dsv4_attention {

using namespace llmsim;

namespace {
/// h 256; 4 heads of v 64 (qk 48 + rope 16) through q_lora 128; o 2 groups x 32; window 16;
/// indexer 2 heads x 32, top-8; 2 residual streams; a dense SwiGLU MLP of 512; layers of ratio
/// 0, 4 and 128.
constexpr compress_ratio_list tiny_ratios() {
  compress_ratio_list r;
  r.push_back(0);
  r.push_back(4);
  r.push_back(128);
  return r;
}
constexpr model_spec tiny{
    .model_type = model_kind::dense,
    .model_name = "tiny_dsv4",
    .hidden_size = 256,
    .head_num = 4,
    .kv_head_num = 1,
    .head_size = 64,
    .intermediate_size = 512,
    .layer_num = 3,
    .vocab_size = 1024,
    .use_swiglu = true,
    .attention_type = attention_kind::mla,
    .v_head_dim = 64,
    .qk_head_dim = 48,
    .qk_pos_emb_head_dim = 16,
    .q_lora_rank = 128,
    .kv_lora_rank = 64,
    .experimental_attention_variant = experimental_attention_kind::dsv4_hybrid,
    .csa_compress_ratios = tiny_ratios(),
    .csa_window_size = 16,
    .dsa_indexer_n_heads = 2,
    .dsa_indexer_head_dim = 32,
    .dsa_indexer_topk = 8,
    .o_groups = 2,
    .o_lora_rank = 32,
    .num_residual_streams = 2,
};

/// One sequence of 256 tokens on one GPU, bf16.
constexpr strategy_spec one_gpu{.seq_len = 256, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 1};

struct sums {
  double fwd = 0, bwd_input = 0, bwd_weight = 0;  // FLOPs per pass
  double fwd_memory = 0, fwd_compute_bytes = 0;   // forward bytes of memory-bound and compute ops
  double params = 0, cache = 0;
};

std::map<leaf_id, sums> layer(std::int64_t ratio) {
  build_context c = make_build_context(tiny, one_gpu, catalogue::h100_sxm, 1024);
  op_record rec;
  c.pricing = &record_op;
  c.record = &rec;
  const leaf_block b = dsv4_layer_leaves(c, ratio, false, false);
  std::map<leaf_id, sums> out;
  for (const leaf& l : b) {
    sums& s = out[l.id];
    s.params += l.params;
    s.cache += l.cache;
    for (const priced_op& p : rec.ops) {
      if (p.leaf_id != l.record_id || p.o.kind == op_kind::collective) continue;
      if (p.o.pass == pass_kind::forward) {
        s.fwd += p.o.flops;
        (p.o.kind == op_kind::memory ? s.fwd_memory : s.fwd_compute_bytes) += p.o.bytes;
      } else if (p.o.pass == pass_kind::backward_input) {
        s.bwd_input += p.o.flops;
      } else {
        s.bwd_weight += p.o.flops;
      }
    }
  }
  return out;
}
}  // namespace

// T = 256 tokens. Forward FLOPs of a linear: 2 T in out; backward: the same for the input gradient
// and for the weight gradient.
TEST(DeepSeekV4Attention, Ratio4LayerFlopsByHand) {
  auto l = layer(4);
  using enum leaf_id;
  EXPECT_DOUBLE_EQ(l[linear_q_down_proj].fwd, 2.0 * 256 * 256 * 128);  // h -> q_lora: 16,777,216
  EXPECT_DOUBLE_EQ(l[linear_q_up_proj].fwd, 2.0 * 256 * 128 * 256);    // q_lora -> 4 x 64
  EXPECT_DOUBLE_EQ(l[linear_q_up_proj].bwd_input, 2.0 * 256 * 128 * 256);
  EXPECT_DOUBLE_EQ(l[linear_q_up_proj].bwd_weight, 2.0 * 256 * 128 * 256);
  EXPECT_DOUBLE_EQ(l[linear_kv_proj].fwd, 2.0 * 256 * 256 * 64);  // h -> v: 8,388,608
  // Compressor of ratio 4: wkv and wgate, h -> 2 x 64 (overlapping windows) each: 33,554,432.
  EXPECT_DOUBLE_EQ(l[compressor].fwd, 2 * (2.0 * 256 * 256 * 128));
  EXPECT_DOUBLE_EQ(l[compressor].bwd_input, 2 * (2.0 * 256 * 256 * 128));
  // The indexer runs on detached inputs: weight gradients only.
  EXPECT_DOUBLE_EQ(l[indexer_linear_wq_b].fwd, 2.0 * 256 * 128 * 64);  // q_lora -> 2 x 32: 4,194,304
  EXPECT_DOUBLE_EQ(l[indexer_linear_wq_b].bwd_input, 0.0);
  EXPECT_DOUBLE_EQ(l[indexer_linear_wq_b].bwd_weight, 2.0 * 256 * 128 * 64);
  EXPECT_DOUBLE_EQ(l[indexer_weights_proj].fwd, 2.0 * 256 * 256 * 2);       // h -> 2 heads: 262,144
  EXPECT_DOUBLE_EQ(l[indexer_compressor].fwd, 2 * (2.0 * 256 * 256 * 64));  // h -> 2 x 32, twice
  EXPECT_DOUBLE_EQ(l[indexer_compressor].bwd_input, 0.0);
  // Scores: 256 queries x 64 compressed keys x 2 heads x 32: 2,097,152; the KL target over the
  // k' = min(8, 64) = 8 selected keys: main logits 2 x 256 x 4 x 64 x 8 = 1,048,576 and the indexer's
  // 2 x 256 x 2 x 32 x 8 = 262,144; backward dq, dk over the selected: 2 x 262,144.
  EXPECT_DOUBLE_EQ(l[indexer_topk].fwd, 2097152.0 + 1048576.0 + 262144.0);
  EXPECT_DOUBLE_EQ(l[indexer_topk].bwd_input, 524288.0);
  // Sparse attention over 16 window + 8 selected keys, q and k 64 wide, v 64: 2 T n K (64 + 64)
  // = 6,291,456 forward, 2.5 x backward (FlashAttention-2 §4.1).
  EXPECT_DOUBLE_EQ(l[core_attention].fwd, 2.0 * 256 * 4 * 24 * 128);
  EXPECT_DOUBLE_EQ(l[core_attention].bwd_input, 2.5 * 2.0 * 256 * 4 * 24 * 128);
  EXPECT_DOUBLE_EQ(l[linear_o_group_proj].fwd, 2.0 * 256 * 256 * 32);  // 4 x 64 -> 2 x 32 per group
  EXPECT_DOUBLE_EQ(l[linear_o_group_proj].bwd_input + l[linear_o_group_proj].bwd_weight, 2 * 2.0 * 256 * 256 * 32);
  EXPECT_DOUBLE_EQ(l[linear_proj].fwd, 2.0 * 256 * 64 * 256);  // 2 x 32 -> h
  // mHC mapping: 2 x 256 streams -> 2^2 + 2 x 2 = 8 mixes: 2 x 256 x 512 x 8 = 2,097,152 a pass.
  EXPECT_DOUBLE_EQ(l[hc_attn_pre].fwd, 2.0 * 256 * 512 * 8);
  EXPECT_DOUBLE_EQ(l[hc_attn_pre].bwd_input, 2.0 * 256 * 512 * 8);
  EXPECT_DOUBLE_EQ(l[hc_attn_post].fwd, 0.0);
}

TEST(DeepSeekV4Attention, WindowAndHcaKeyCounts) {
  // Ratio 0: the 16-key window; ratio 128: the window and all 256 / 128 = 2 compressed keys.
  EXPECT_DOUBLE_EQ(layer(0)[leaf_id::core_attention].fwd, 2.0 * 256 * 4 * 16 * 128);
  EXPECT_DOUBLE_EQ(layer(128)[leaf_id::core_attention].fwd, 2.0 * 256 * 4 * 18 * 128);
  // Ratio 0 has no compressor or indexer; ratio 128 a compressor of width 64 (h -> 64, twice).
  auto l0 = layer(0);
  EXPECT_EQ(l0.count(leaf_id::compressor), 0U);
  EXPECT_EQ(l0.count(leaf_id::indexer_topk), 0U);
  auto l128 = layer(128);
  EXPECT_DOUBLE_EQ(l128[leaf_id::compressor].fwd, 2 * (2.0 * 256 * 256 * 64));
  EXPECT_EQ(l128.count(leaf_id::indexer_topk), 0U);
}

TEST(DeepSeekV4Attention, BytesAndSavedTensorsByHand) {
  auto l = layer(4);
  using enum leaf_id;
  // h_post_bda reads the 2 x 256 streams and the 256-wide output, writes the streams: bf16,
  // (2 x 512 + 256) x 256 tokens x 2 bytes = 655,360; it keeps the output, 256 x 256 x 2 = 131,072.
  EXPECT_DOUBLE_EQ(l[hc_attn_post].fwd_memory, 655360.0);
  EXPECT_DOUBLE_EQ(l[hc_attn_post].cache, 131072.0);
  // Aggregation: reads the streams (262,144), writes the input (131,072), and the fp32 mixes
  // (256 x 8 x 4 = 8,192); the mapping GEMM reads the streams and writes the mixes.
  EXPECT_DOUBLE_EQ(l[hc_attn_pre].fwd_memory, 262144.0 + 131072.0 + 8192.0);
  EXPECT_DOUBLE_EQ(l[hc_attn_pre].fwd_compute_bytes, 262144.0 + 8192.0);
  EXPECT_DOUBLE_EQ(l[hc_attn_pre].cache, 262144.0 + 8192.0);
  // The attention keeps q (256 x 4 x 64 x 2 = 131,072), the raw kv (256 x 64 x 2 = 32,768), the 64
  // compressed rows (64 x 64 x 2 = 8,192) and the fp32 log-sum-exp (256 x 4 x 4 = 4,096).
  EXPECT_DOUBLE_EQ(l[core_attention].cache, 131072.0 + 32768.0 + 8192.0 + 4096.0);
  // The grouped projection keeps its input, the attention output: 131,072.
  EXPECT_DOUBLE_EQ(l[linear_o_group_proj].cache, 131072.0);
  // The indexer keeps q (256 x 64 x 2 = 32,768), its 64 compressed keys (64 x 32 x 2 = 4,096), the
  // fp32 head weights (256 x 2 x 4 = 2,048), the int32 top-8 indices and the fp32 KL target
  // (2 x 256 x 8 x 4 = 16,384).
  EXPECT_DOUBLE_EQ(l[indexer_topk].cache, 32768.0 + 4096.0 + 2048.0 + 16384.0);
}

TEST(DeepSeekV4Attention, LayerParametersMatchTheModelCount) {
  for (const std::int64_t ratio : {0, 4, 128}) {
    double params = 0;
    for (const auto& [id, s] : layer(ratio)) params += s.params;
    const double h = 256;
    const double expected = detail::dsv4_attention_params(tiny, ratio) + 2 * h + detail::dense_mlp_params(tiny) +
                            2 * detail::hyper_connection_params(tiny);
    EXPECT_DOUBLE_EQ(params, expected) << "ratio " << ratio;
  }
}

// Megatron-Bridge's dsv4_hybrid formula counts the same projections, compressors, indexer
// projections and dense indexer scoring; it also counts the q and kv norms' weights as GEMM
// parameters (2 (q_lora + v) a layer), averages the attended keys over the causal queries
// (dsv4_causal_keys) where the kernel runs fixed-length index lists (dsv4_attended_keys), and
// leaves out the indexer's KL loss and the hyper-connections. Corrected for those, the forward
// FLOPs of the three layers agree.
TEST(DeepSeekV4Attention, ForwardFlopsAgreeWithMegatronBridgeAttention) {
  double emitted = 0;
  const double T = 256;
  for (const std::int64_t ratio : {0, 4, 128}) {
    auto l = layer(ratio);
    for (const auto& [id, s] : l)
      if (id != leaf_id::core_attention && id != leaf_id::indexer_topk && id != leaf_id::hc_attn_pre &&
          id != leaf_id::hc_mlp_pre && id != leaf_id::linear_fc1 && id != leaf_id::linear_fc2)
        emitted += s.fwd;
    if (ratio == 4) emitted += 2.0 * 256 * 64 * 2 * 32;  // the dense scoring, without the KL loss
    emitted += 2.0 * T * 4 * dsv4_causal_keys(tiny, ratio, 256) * 128;
    emitted += 2.0 * T * (128 + 64);  // the norms Megatron-Bridge counts
  }
  const double bridge = megatron_bridge::detail::dsv4_attention(tiny, 3, 256) / 3 * T;  // forward of 256 tokens
  EXPECT_NEAR(emitted, bridge, 1e-9 * bridge);
}

// The model FLOPs behind the MFU figure. Weights a layer's tokens pass through: attention 106,692 at
// ratio 0 (q down 32,768, q norm 128, q up 32,768, kv 16,384, kv norm 64, o groups 8,192, o proj
// 16,384, sinks 4), + 41,024 at ratio 128 (compressor 32,768 + ape 8,192 + norm 64), + 107,872 at
// ratio 4 (compressor 66,112; indexer q 8,192, weights 512, compressor 33,056); MLP 3 x 256 x 512 =
// 393,216 each: 1,648,620 x 6 = 9,891,720. Attention over 16 + 24 + 18 keys: 6 x 2 x 4 x 64 x 58 =
// 178,176; indexer scoring over 64 keys: 6 x 64 x 64 = 24,576; LM head 6 x 256 x 1024 = 1,572,864.
TEST(DeepSeekV4Attention, ModelFlopsPerTokenByHand) {
  EXPECT_DOUBLE_EQ(flops_per_token(tiny, 1024, 256), 9891720.0 + 178176.0 + 24576.0 + 1572864.0);
}

#ifndef LLMSIM_SANITIZED_BUILD
// The layer program and the FLOP count are constant expressions: a ratio-4 layer has 17 attention
// leaves (mHC, input norm, q down, q norm, compressor, indexer q / weights / compressor / top-k,
// q up, kv, kv norm, q norm + RoPE, attention, o groups, o proj, mHC) and 6 MLP leaves.
static_assert(dsv4_layer_leaves(make_build_context(tiny, one_gpu, catalogue::h100_sxm, 1024), 4, false, false).count ==
              23);
static_assert(flops_per_token(tiny, 1024, 256) == 9891720.0 + 178176.0 + 24576.0 + 1572864.0);
#endif

TEST(DeepSeekV4Attention, FlashRecipeIsEstimatedAndRefusalsNameTheirField) {
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 16,
                        .world_size = 128,
                        .ep_size = 64,
                        .moe_dispatcher_policy = dispatcher_kind::flex};
  model_spec m = catalogue::deepseek_v4_flash;
  m.moe_pad_expert_input_to_capacity = false;
  const auto r = estimate(m, s, catalogue::gb200_nvl72);
  EXPECT_GT(r.cost.throughput_per_accelerator, 0.0);
  const auto refused = [&](strategy_spec bad) {
    try {
      (void)estimate(m, bad, catalogue::gb200_nvl72);
    } catch (const config_error& e) { return std::string(e.field()); }
    return std::string("estimated");
  };
  strategy_spec tp = s;
  tp.tp_size = 2;
  tp.ep_size = 32;
  tp.enable_sequence_parallel = true;
  EXPECT_EQ(refused(tp), "strategy.tp_size");
  strategy_spec pp = s;
  pp.pp_size = 2;
  pp.ep_size = 32;
  EXPECT_EQ(refused(pp), "strategy.pp_size");
  strategy_spec full = s;
  full.enable_recompute = true;
  full.recompute_granularity = recompute_kind::full_block;
  full.recompute_layer_num = 43;
  EXPECT_EQ(refused(full), "strategy.recompute_granularity");
}

}  // namespace llmsim_test_dsv4_attention
