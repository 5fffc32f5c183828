// Recompute in hybrid (Mamba-2 / attention / MLP / MoE) models as Megatron-LM's hybrid stack runs
// it: full recompute checkpoints whole layers (models/hybrid/hybrid_block.py `checkpointed_forward`);
// selective recompute acts per layer through TransformerLayer's `--recompute-modules`, where the
// hybrid spec (models/hybrid/hybrid_layer_specs.py) fuses the Mamba, attention and MLP layers' norms
// into their first linear (TELayerNormColumnParallelLinear) and keeps a separate norm only in the MoE
// layer. Expected numbers are derived by hand in the comments from the mixer's shapes. Also FP8
// hybrids with their first / last layers in bf16: each layer takes its quantization context by its
// number (hybrid_block.py; fp8_utils.py / fp4_utils.py: bf16 when layer_no <
// num_layers_at_start_in_bf16 or >= num_layers - num_layers_at_end_in_bf16).
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "sanitized_build.hpp"

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_hybrid_recompute {

using namespace llmsim;

namespace {
/// The small hybrid of test_mamba.cpp: h 256, Mamba 8 heads of 32 (d_inner 256), 2 groups of
/// state 16; attention 4 heads of 64 (2 KV heads); dense MLP 512; MoE 8 experts of 128, top-2.
constexpr model_spec tiny{
    .model_type = model_kind::moe,
    .model_name = "tiny_hybrid",
    .hidden_size = 256,
    .head_num = 4,
    .kv_head_num = 2,
    .head_size = 64,
    .intermediate_size = 512,
    .layer_num = 5,
    .vocab_size = 1024,
    .expert_num = 8,
    .topk = 2,
    .moe_ffn_hidden_size = 128,
    .position_embedding_type = position_kind::none,
    .hybrid_override_pattern = "ME*E-",
    .mamba_state_dim = 16,
    .mamba_head_dim = 32,
    .mamba_num_heads = 8,
    .mamba_num_groups = 2,
};

constexpr strategy_spec base() {
  return {.seq_len = 1024, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .tp_size = 1, .ep_size = 8};
}
constexpr strategy_spec full(std::int64_t layers) {
  strategy_spec s = base();
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::full_block;
  s.recompute_layer_num = layers;
  return s;
}
constexpr strategy_spec modules(std::initializer_list<recompute_module> mods) {
  strategy_spec s = base();
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::selective_recompute;
  s.recompute_layer_num = 5;
  s.megatron_recompute = true;
  for (auto m : mods) s.megatron_recompute_modules.insert(m);
  return s;
}

struct built {
  leaf_block block;
  op_record rec;
  /// Forward FLOPs of the leaves whose forward is replayed in backward.
  [[nodiscard]] double replayed_flops() const {
    double sum = 0;
    for (const leaf& l : block)
      if (l.recompute && !l.replay_free)
        for (const priced_op& p : rec.ops)
          if (p.leaf_id == l.record_id && p.o.pass == pass_kind::forward) sum += p.o.flops;
    return sum;
  }
  [[nodiscard]] const leaf& at(leaf_id id) const {
    for (const leaf& l : block)
      if (l.id == id) return l;
    throw std::runtime_error("no such leaf");
  }
};
built layer(const strategy_spec& s, char symbol, bool recomputed) {
  built b;
  build_context c = make_build_context(tiny, s, catalogue::h100_sxm, 1024);
  c.pricing = &record_op;
  c.record = &b.rec;
  b.block = hybrid_layer_leaves(c, symbol, recomputed);
  return b;
}
/// `tiny` cut to "MEME": two Mamba and two MoE layers.
model_spec meme() {
  model_spec m = tiny;
  m.hybrid_override_pattern = "MEME";
  m.layer_num = 4;
  return m;
}
/// FP8 (current scaling) on 8 H100s with ep 8, the first `start` and last `end` layers in bf16.
strategy_spec fp8_job(std::int64_t start, std::int64_t end) {
  strategy_spec s{.seq_len = 1024, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  s.fp8 = true;
  s.fp8_recipe = fp8_recipe_kind::tensorwise;
  s.fp8_first_last_layers_bf16 = true;
  s.fp8_layers_at_start_in_bf16 = start;
  s.fp8_layers_at_end_in_bf16 = end;
  return s;
}
const stage_result& stage_of(const estimate_result& r) { return r.stages[0]; }
bool any_recomputed(const leaf_block& b) {
  for (const leaf& l : b)
    if (l.recompute) return true;
  return false;
}
}  // namespace

TEST(HybridRecompute, FullRecomputeOfAMambaLayerKeepsItsInputAndReplaysItsForward) {
  const built b = layer(full(5), 'M', true);
  for (const leaf& l : b.block) EXPECT_TRUE(l.recompute) << leaf_name(l.id);
  // Saved: only the layer's input, T·h bf16 = 1024·256·2 bytes (the checkpoint's input).
  EXPECT_EQ(walk_memory(b.block).held, 1024.0 * 256 * 2);
  // Replayed forward: in_proj 2·T·h·584 (z, x: 2·256; B, C: 2·2·16; dt: 8), the SSD forward
  // 2·T·(G·Q·N + H·P·(Q + 2N)) = 2·1024·(2·128·16 + 8·32·(128 + 32)) and out_proj 2·T·256·h.
  const double T = 1024;
  const double expected = 2 * T * 256 * 584 + 2 * T * (2 * 128 * 16 + 8 * 32 * (128 + 32)) + 2 * T * 256 * 256;
  EXPECT_EQ(b.replayed_flops(), expected);
  // Without recompute the layer keeps much more (zxBCdt, the scan output, norm and linear inputs).
  EXPECT_GT(walk_memory(layer(base(), 'M', false).block).held, 4 * 1024.0 * 256 * 2);
}

TEST(HybridRecompute, LayernormModuleReachesOnlyTheMoeLayersSeparateNorm) {
  const strategy_spec s = modules({recompute_module::layernorm});
  // Mamba, attention and MLP layers fuse their norm into in_proj / linear_qkv / linear_fc1: nothing
  // is recomputed and they keep what they keep without recompute.
  for (const char symbol : {'M', '*', '-'}) {
    const built rc = layer(s, symbol, true);
    EXPECT_FALSE(any_recomputed(rc.block)) << symbol;
    EXPECT_EQ(walk_memory(rc.block).held, walk_memory(layer(base(), symbol, false).block).held) << symbol;
  }
  // The MoE layer's pre_mlp_layernorm (TENorm) is recomputed; the router reads its re-created
  // output, keeps no input and costs no replay of its own.
  const built moe = layer(s, 'E', true);
  EXPECT_TRUE(moe.at(leaf_id::pre_mlp_layernorm).recompute);
  EXPECT_TRUE(moe.at(leaf_id::router).recompute);
  EXPECT_TRUE(moe.at(leaf_id::router).replay_free);
  EXPECT_EQ(moe.at(leaf_id::router).cache, 0.0);
  EXPECT_FALSE(moe.at(leaf_id::experts_linear_fc1).recompute);
  // The norm keeps its input (T·h bf16) instead of its output and statistics: less is held.
  EXPECT_LT(walk_memory(moe.block).held, walk_memory(layer(base(), 'E', false).block).held);
}

TEST(HybridRecompute, MlpModuleCheckpointsTheMlpLayerWithItsFusedNorm) {
  const built b = layer(modules({recompute_module::mlp}), '-', true);
  for (auto id : {leaf_id::pre_mlp_layernorm, leaf_id::linear_fc1, leaf_id::linear_fc2})
    EXPECT_TRUE(b.at(id).recompute) << leaf_name(id);
  EXPECT_FALSE(b.at(leaf_id::mlp_residual_add).recompute);
  // Held: the checkpoint's input, T·h bf16, plus whatever the residual add keeps.
  EXPECT_EQ(walk_memory(b.block).held, 1024.0 * 256 * 2 + b.at(leaf_id::mlp_residual_add).cache);
  // Replayed: fc1 2·T·h·512 and fc2 2·T·512·h (GeLU: not gated).
  EXPECT_EQ(b.replayed_flops(), 2 * 2.0 * 1024 * 256 * 512);
  // "mlp" does not reach MoE layers (Megatron recomputes them under "moe").
  EXPECT_FALSE(any_recomputed(layer(modules({recompute_module::mlp}), 'E', true).block));
}

TEST(HybridRecompute, CoreAttnModuleReplaysTheAttentionKernelAlone) {
  // Megatron's core_attn checkpoints the core attention of the attention layer by itself
  // (attention.py `_checkpointed_attention_forward`): q, k, v are its kept inputs, T (4 + 2 x 2)
  // heads of 64 in bf16 = 1024 x 512 x 2 = 1,048,576 B, where without recompute flash attention
  // also keeps its log-sum-exp, T x 4 heads, counted at the activations' 2 bytes by llmsim's
  // attention leaf (FlashAttention keeps it in fp32, 8 KiB more): 8,192 B. Its forward is replayed: QK^T and PV,
  // 2 x 2 T^2 x 64 FLOPs a head over 4 heads (every (query, key) pair counted, the kernel tables'
  // convention) = 1,073,741,824. The projections around it are not recomputed.
  const built b = layer(modules({recompute_module::core_attn}), '*', true);
  EXPECT_TRUE(b.at(leaf_id::core_attention).recompute);
  EXPECT_FALSE(b.at(leaf_id::core_attention).replay_free);
  for (auto id : {leaf_id::linear_qkv, leaf_id::linear_proj, leaf_id::attention_residual_add})
    EXPECT_FALSE(b.at(id).recompute) << leaf_name(id);
  EXPECT_EQ(b.replayed_flops(), 4 * 2 * 2 * 1024.0 * 1024 * 64);
  const double kept = walk_memory(layer(base(), '*', false).block).held;
  EXPECT_EQ(walk_memory(b.block).held, kept - 1024.0 * 4 * 2);
  // With layernorm too (fused into linear_qkv here: no norm of its own) the same.
  const built with_norm = layer(modules({recompute_module::core_attn, recompute_module::layernorm}), '*', true);
  EXPECT_EQ(walk_memory(with_norm.block).held, kept - 1024.0 * 4 * 2);
  // It reaches no Mamba, MLP or MoE layer.
  for (const char symbol : {'M', '-', 'E'})
    EXPECT_FALSE(any_recomputed(layer(modules({recompute_module::core_attn}), symbol, true).block)) << symbol;
}

TEST(HybridRecompute, FullRecomputeCoversTheFirstLayersOfThePattern) {
  // Pattern "ME*E-": recompute_layer_num 2 replays the first Mamba and the first MoE layer; 5
  // replays all. More replayed layers, more recompute time; none without recompute.
  const auto none = estimate(tiny, base(), catalogue::h100_sxm);
  const auto two = estimate(tiny, full(2), catalogue::h100_sxm);
  const auto all = estimate(tiny, full(5), catalogue::h100_sxm);
  EXPECT_EQ(none.stages[0].breakdown.recompute_time.value, 0.0);
  EXPECT_GT(two.stages[0].breakdown.recompute_time.value, 0.0);
  EXPECT_GT(all.stages[0].breakdown.recompute_time.value, two.stages[0].breakdown.recompute_time.value);
  EXPECT_LT(all.mem.peak_mem, none.mem.peak_mem);
}

TEST(HybridRecompute, SimuMaxOnlyGranularitiesAreRefused) {
  const auto error = [](const strategy_spec& s) {
    try {
      (void)estimate(tiny, s, catalogue::h100_sxm);
    } catch (const config_error& e) { return std::string(e.what()); }
    return std::string();
  };
  strategy_spec s = full(5);
  s.recompute_granularity = recompute_kind::attn_only;
  EXPECT_NE(error(s).find("strategy.recompute_granularity \"attn_only\" is not modelled"), std::string::npos)
      << error(s);
  s = base();
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::selective_recompute;
  s.recompute_layer_num = 5;
  s.mlp_recompute = true;
  EXPECT_NE(error(s).find("with SimuMax's selective flags is not modelled"), std::string::npos) << error(s);
}

#ifndef LLMSIM_SANITIZED_BUILD  // GCC cannot constant-evaluate the estimate under AddressSanitizer
TEST(HybridRecompute, RecomputedHybridEstimateIsAConstantExpression) {
  static constexpr auto r = estimate(tiny, modules({recompute_module::layernorm}), catalogue::h100_sxm);
  const auto run = estimate(tiny, modules({recompute_module::layernorm}), catalogue::h100_sxm);
  EXPECT_EQ(r.cost.duration_time_per_iter, run.cost.duration_time_per_iter);
  EXPECT_EQ(r.mem.peak_mem, run.mem.peak_mem);
}
#endif

TEST(HybridFp8, LastLayersRunInBf16) {
  // "MEME" with its last 2 layers ("ME") in bf16: one Mamba and one MoE layer quantized, one of each
  // in bf16, so the passes take half the all-quantized time plus half the all-bf16 time (the
  // embedding and head are bf16 in all three), and half the quantized weight copies remain.
  const auto q = estimate(meme(), fp8_job(0, 0), catalogue::h100_sxm);
  const auto b = estimate(meme(), fp8_job(0, 4), catalogue::h100_sxm);
  const auto t = estimate(meme(), fp8_job(0, 2), catalogue::h100_sxm);
  const stage_result &sq = stage_of(q), &sb = stage_of(b), &st = stage_of(t);
  // (At this size the casts FP8 adds outweigh its faster GEMMs: the all-bf16 passes are shorter.)
  EXPECT_NE(sb.fwd_compute_time.value, sq.fwd_compute_time.value);
  EXPECT_NEAR(st.fwd_compute_time.value, (sq.fwd_compute_time.value + sb.fwd_compute_time.value) / 2,
              1e-12 * sb.fwd_compute_time.value);
  EXPECT_NEAR(st.bwd_compute_time.value, (sq.bwd_compute_time.value + sb.bwd_compute_time.value) / 2,
              1e-12 * sb.bwd_compute_time.value);
  EXPECT_EQ(sb.quantized_params, 0);
  EXPECT_GT(sq.quantized_params, 0);
  EXPECT_DOUBLE_EQ(st.quantized_params, sq.quantized_params / 2);
  EXPECT_EQ(st.params, sq.params);
}

TEST(HybridFp8, FirstAndLastLayersAreCountedOverThePattern) {
  // One bf16 layer at each end ("M" first, "E" last) prices as two at the end ("ME"): the same
  // kinds leave FP8. Counts past the pattern are refused (validate: start + end <= layer_num).
  const auto ends = estimate(meme(), fp8_job(1, 1), catalogue::h100_sxm);
  const auto tail = estimate(meme(), fp8_job(0, 2), catalogue::h100_sxm);
  EXPECT_NEAR(stage_of(ends).fwd_compute_time.value, stage_of(tail).fwd_compute_time.value,
              1e-12 * stage_of(tail).fwd_compute_time.value);
  EXPECT_THROW((void)estimate(meme(), fp8_job(2, 3), catalogue::h100_sxm), config_error);
  // "MMEE": the first two layers are the Mamba ones, the last two the MoE ones; the two jobs
  // together leave every layer in bf16 once and quantized once, and differ from each other.
  model_spec mmee = meme();
  mmee.hybrid_override_pattern = "MMEE";
  const double q = stage_of(estimate(mmee, fp8_job(0, 0), catalogue::h100_sxm)).fwd_compute_time.value;
  const double b = stage_of(estimate(mmee, fp8_job(0, 4), catalogue::h100_sxm)).fwd_compute_time.value;
  const double mamba_bf16 = stage_of(estimate(mmee, fp8_job(2, 0), catalogue::h100_sxm)).fwd_compute_time.value;
  const double moe_bf16 = stage_of(estimate(mmee, fp8_job(0, 2), catalogue::h100_sxm)).fwd_compute_time.value;
  EXPECT_NE(mamba_bf16, moe_bf16);
  EXPECT_NEAR(mamba_bf16 + moe_bf16, q + b, 1e-12 * b);
}

}  // namespace llmsim_test_hybrid_recompute
