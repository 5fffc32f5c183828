// Multi-head latent attention under tensor parallelism, as Megatron-LM's MLASelfAttention
// (megatron/core/transformer/multi_latent_attention.py) with the TE layer spec runs it: the down
// projections duplicated on every tp rank (TELinear parallel_mode="duplicated") over the rank's own
// tokens, the up projections column-parallel over heads, the output projection row-parallel, and with
// sequence parallelism the k_pos_emb gather and the tp all-reduce of the duplicated weights'
// gradients (finalize_model_grads.py). Expected numbers are derived by hand from DeepSeek-V3's
// config.json dims: h 7168, 128 heads, q_lora 1536, kv_lora 512, qk 128 + rope 64, v 128.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <map>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_mla_tp {

using namespace llmsim;

namespace {
/// Forward FLOPs, forward collectives' bytes, and parameters of each leaf of one MLA attention half.
struct leaf_sums {
  double flops = 0, fwd_comm_bytes = 0, params = 0;
  bool duplicated = false;
  int fwd_collectives = 0;
};

std::map<leaf_id, leaf_sums> mla_leaves(const strategy_spec& s) {
  const model_spec& m = catalogue::deepseek_v3;
  build_context c = make_build_context(m, s, catalogue::h200, 129280);
  op_record rec;
  c.pricing = &record_op;
  c.record = &rec;
  leaf_block b;
  push_mla_attention(b, c);
  std::map<leaf_id, leaf_sums> out;
  for (const leaf& l : b) {
    leaf_sums& sum = out[l.id];
    sum.params = l.params;
    sum.duplicated = l.tp_duplicated;
    for (const priced_op& p : rec.ops) {
      if (p.leaf_id != l.record_id || p.o.pass != pass_kind::forward) continue;
      if (p.o.kind == op_kind::collective) {
        sum.fwd_comm_bytes += p.o.bytes;
        ++sum.fwd_collectives;
      } else {
        sum.flops += p.o.flops;
      }
    }
  }
  return out;
}

strategy_spec tp4(bool sp) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 8,
          .world_size = 32,
          .tp_size = 4,
          .ep_size = 8,
          .enable_sequence_parallel = sp};
}
}  // namespace

TEST(MlaTensorParallel, FlopsAndParamsPerRankWithSequenceParallelism) {
  const auto l = mla_leaves(tp4(true));
  // s = 4096, t = 4: s/t = 1024 local tokens, 128/4 = 32 heads per rank.
  EXPECT_EQ(l.at(leaf_id::linear_q_down_proj).flops, 2.0 * 1024 * 7168 * 1536);  // own tokens, whole weight
  EXPECT_EQ(l.at(leaf_id::linear_q_down_proj).params, 7168.0 * 1536);
  EXPECT_TRUE(l.at(leaf_id::linear_q_down_proj).duplicated);
  EXPECT_EQ(l.at(leaf_id::linear_q_down_proj).fwd_collectives, 0);
  EXPECT_EQ(l.at(leaf_id::linear_q_up_proj).flops, 2.0 * 4096 * 1536 * (32 * 192));  // gathered sequence, 32 heads
  EXPECT_EQ(l.at(leaf_id::linear_q_up_proj).params, 1536.0 * 32 * 192);
  EXPECT_EQ(l.at(leaf_id::linear_q_up_proj).fwd_comm_bytes, 4096.0 * 1536 * 2);  // SP all-gather of q_compressed
  EXPECT_EQ(l.at(leaf_id::linear_kv_down_proj).flops, 2.0 * 1024 * 7168 * 576);
  EXPECT_EQ(l.at(leaf_id::linear_kv_down_proj).params, 7168.0 * 576);
  EXPECT_TRUE(l.at(leaf_id::linear_kv_down_proj).duplicated);
  EXPECT_EQ(l.at(leaf_id::linear_kv_down_proj).fwd_comm_bytes, 4096.0 * 64 * 2);  // k_pos_emb gathered
  EXPECT_EQ(l.at(leaf_id::linear_kv_up_proj).flops, 2.0 * 4096 * 512 * (32 * 256));
  EXPECT_EQ(l.at(leaf_id::linear_kv_up_proj).params, 512.0 * 32 * 256);
  EXPECT_EQ(l.at(leaf_id::linear_kv_up_proj).fwd_comm_bytes, 4096.0 * 512 * 2);
  // Flash attention over 32 heads: 2·s²·heads·(192 + 128), all pairs as SimuMax counts them.
  EXPECT_EQ(l.at(leaf_id::core_attention).flops, 2.0 * 4096 * 4096 * 32 * (192 + 128));
  EXPECT_EQ(l.at(leaf_id::linear_proj).flops, 2.0 * 4096 * (32 * 128) * 7168);
  EXPECT_EQ(l.at(leaf_id::linear_proj).params, 32.0 * 128 * 7168);
  EXPECT_EQ(l.at(leaf_id::linear_proj).fwd_comm_bytes, 4096.0 * 7168 * 2);  // reduce-scatter
  EXPECT_FALSE(l.at(leaf_id::linear_proj).duplicated);
  // The latent norms run on the local tokens with whole weights.
  EXPECT_EQ(l.at(leaf_id::q_layernorm).params, 1536.0);
  EXPECT_EQ(l.at(leaf_id::kv_layernorm).params, 512.0);
  // With SP every GEMM of the attention does a quarter of tp = 1's work.
  const auto one =
      mla_leaves({.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .ep_size = 8});
  double sum4 = 0, sum1 = 0;
  for (const auto& [id, v] : l) sum4 += v.flops;
  for (const auto& [id, v] : one) sum1 += v.flops;
  EXPECT_EQ(sum4 * 4, sum1);
}

TEST(MlaTensorParallel, WithoutSequenceParallelismTheDownProjectionsRunOnEveryToken) {
  const auto l = mla_leaves(tp4(false));
  // Every tp rank holds all 4096 tokens and repeats the down projections; no collective around them,
  // and their gradients need no tp sum (each rank computed the whole one).
  EXPECT_EQ(l.at(leaf_id::linear_q_down_proj).flops, 2.0 * 4096 * 7168 * 1536);
  EXPECT_EQ(l.at(leaf_id::linear_kv_down_proj).flops, 2.0 * 4096 * 7168 * 576);
  EXPECT_EQ(l.at(leaf_id::linear_kv_down_proj).fwd_collectives, 0);
  EXPECT_FALSE(l.at(leaf_id::linear_q_down_proj).duplicated);
  EXPECT_EQ(l.at(leaf_id::linear_q_up_proj).fwd_collectives, 0);            // its input is already whole
  EXPECT_EQ(l.at(leaf_id::linear_proj).fwd_comm_bytes, 4096.0 * 7168 * 2);  // all-reduce
}

TEST(MlaTensorParallel, DuplicatedGradientsAreSummedOverTensorParallelRanks) {
  model_spec m = catalogue::deepseek_v3;
  m.layer_num = 4;
  m.dense_layers = 1;
  const strategy_spec with_sp = tp4(true);
  const auto sp = estimate(m, with_sp, catalogue::h200);
  const auto& st = sp.stages[0];
  // Whole on every tp rank under SP: four layers of q_down + kv_down, 7168 · (1536 + 576) each; the
  // norms, 7168 (input) + 7168 (pre-MLP) + 1536 (q) + 512 (kv latent) per layer and the final 7168;
  // the three MoE layers' routers, 7168 x 256 each (Megatron marks them all sequence_parallel).
  const double duplicated = 4 * 7168.0 * (1536 + 576) + 4 * (7168.0 + 7168 + 1536 + 512) + 7168 + 3 * 7168.0 * 256;
  EXPECT_EQ(st.tp_duplicated_params, duplicated);
  // One all-reduce over the 4 tp ranks of their fp32 main gradients (a ring: 2 (t-1)/t of the bytes).
  const build_context c = make_build_context(m, with_sp, catalogue::h200, sp.padded_vocab);
  const seconds expected = group_collective_time(c, comm_group::tp, collective_kind::all_reduce, duplicated * 4);
  EXPECT_EQ(st.tp_grad_allreduce_time.value, expected.value);
  EXPECT_GT(expected.value, 0);
  EXPECT_EQ(st.dp_time.value, (st.grad_reduce_time + st.param_gather_time + expected).value);
  const auto no_sp = estimate(m, tp4(false), catalogue::h200);
  EXPECT_EQ(no_sp.stages[0].tp_duplicated_params, 0);
  EXPECT_EQ(no_sp.stages[0].tp_grad_allreduce_time.value, 0);
  // Per-rank parameters: the tp = 4 rank holds the duplicated down projections and norms whole and a
  // quarter of the up and output projections (MoE and embedding parts aside: compare attention only).
  const double whole = 7168.0 * 1536 + 7168.0 * 576;
  const double split = 1536.0 * 128 * 192 + 512.0 * 128 * 256 + 128.0 * 128 * 7168;
  const auto l = mla_leaves(tp4(true));
  double attention = 0;
  for (const auto& [id, v] : l) attention += v.params;
  EXPECT_EQ(attention, whole + split / 4 + 7168 + 1536 + 512);
}

TEST(MlaTensorParallel, UnfusedAttentionCountsEveryPairAndKeepsTheProbabilities) {
  strategy_spec s = tp4(true);
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  const auto l = mla_leaves(s);
  // Q·Kᵀ over 192 dims and P·V over 128, 32 heads, 4096² pairs: the flash count, as unkeyed GEMMs.
  EXPECT_EQ(l.at(leaf_id::core_attention).flops, 2.0 * 4096 * 4096 * 32 * (192 + 128));
  model_spec m = catalogue::deepseek_v3;
  m.layer_num = 2;
  m.dense_layers = 2;
  const auto flash = estimate(m, tp4(true), catalogue::h200);
  const auto math = estimate(m, s, catalogue::h200);
  // Kept besides flash's: the bf16 probabilities (32 heads · 4096²) minus flash's log-sum-exp
  // (32 · 4096 bf16 values), per layer; q, k, v are kept by both.
  const double P = 32.0 * 4096 * 4096 * 2, lse = 32.0 * 4096 * 2;
  EXPECT_EQ(static_cast<double>(math.stages[0].fwd_activation_cache_per_micro_batch.value -
                                flash.stages[0].fwd_activation_cache_per_micro_batch.value),
            2 * (P - lse));
}

}  // namespace llmsim_test_mla_tp
