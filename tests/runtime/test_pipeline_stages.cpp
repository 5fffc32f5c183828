// Every distinct pipeline rank is sized, the iteration's breakdown is the bounding stage's, the
// verdict against device memory, one MLP shape, and the compute capability TE's workspace needs.
// Expected values are derived in the comments, never read back from the estimate.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_pipeline_stages {

using namespace llmsim;
using namespace llmsim::literals;

namespace {
/// DeepSeek-V3 (61 layers, the first 3 dense) over pp16 with one layer on the first stage: the
/// other 60 layers split 4 per stage. Rank 1 holds layers 1-4 (1, 2 dense; 3, 4 MoE), ranks 2-14
/// four MoE layers each, rank 15 four MoE layers and the LM head.
strategy_spec deepseek_pp16(std::int64_t pp = 16, std::optional<std::int64_t> first = 1) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 32,
          .world_size = pp * 8,
          .pp_size = pp,
          .ep_size = 8,
          .num_layers_in_first_pipeline_stage = first};
}
}  // namespace

TEST(PipelineStages, EveryDistinctRankProgramIsAStage) {
  const auto r = estimate(catalogue::deepseek_v3, deepseek_pp16(), catalogue::h200);
  ASSERT_EQ(r.stage_count, 4U);
  const auto& first = r.stages[0];
  EXPECT_EQ(first.kind, stage_kind::first);
  EXPECT_EQ(first.layers, 1);
  EXPECT_EQ(first.layout.dense_layers, 1);
  const auto& mixed = r.stages[1];
  EXPECT_EQ(mixed.rank, 1);
  EXPECT_EQ(mixed.rank_count, 1);
  EXPECT_EQ(mixed.layout.dense_layers, 2);
  const auto& moe = r.stages[2];
  EXPECT_EQ(moe.rank, 2);
  EXPECT_EQ(moe.last_rank, 14);
  EXPECT_EQ(moe.rank_count, 13);
  EXPECT_EQ(moe.layout.dense_layers, 0);
  EXPECT_EQ(moe.micro_batches_in_flight, 14);  // 1F1B: rank 2 of 16 holds 16 - 2
  const auto& last = r.stages[3];
  EXPECT_EQ(last.rank, 15);
  EXPECT_TRUE(last.layout.head);
  EXPECT_EQ(stage_name(r, 1), "middle_stage[1]");
  EXPECT_EQ(stage_name(r, 2), "middle_stage[2-14]");
}

TEST(PipelineStages, PeakIsTheWorstRankNotARepresentative) {
  // Rank 2 of the pp16 job (four MoE layers, 14 micro-batches in flight, dp 8, edp 1) is, byte for
  // byte, rank 1 of a pp15 job whose first stage takes the 3 dense layers and 2 MoE layers
  // (56 = 14 x 4 left): the same layers, parameters, shards and in-flight count.
  const auto pp16 = estimate(catalogue::deepseek_v3, deepseek_pp16(), catalogue::h200);
  const auto pp15 = estimate(catalogue::deepseek_v3, deepseek_pp16(15, 5), catalogue::h200);
  const stage_result* twin = pp15.stage(stage_kind::middle);
  ASSERT_NE(twin, nullptr);
  ASSERT_EQ(twin->rank, 1);
  ASSERT_EQ(twin->layout.dense_layers, 0);
  EXPECT_EQ(pp16.stages[2].peak_mem, twin->peak_mem);
  EXPECT_EQ(pp16.mem.peak_mem, twin->peak_mem);
  EXPECT_EQ(pp16.mem.peak_stage, 2);
  EXPECT_GT(pp16.mem.peak_mem, pp16.stages[1].peak_mem);  // the mixed rank holds fewer expert weights
}

TEST(PipelineStages, ParametersOfAllRanksAddUpToTheModel) {
  // Each parameter lives on exactly one pipeline rank (untied embeddings), so the stages' parameters
  // times the ranks running them add up to parameter_count, for SwiGLU and GeLU MLPs alike.
  for (const auto& named : catalogue::models) {
    if (named.spec->experimental_attention_variant) continue;  // DeepSeek-V4: the estimate refuses it
    for (const bool swiglu : {true, false}) {
      model_spec m = *named.spec;
      m.use_swiglu = swiglu;
      if (!swiglu) {  // gpt-oss's clamped quick-GEGLU is a gated activation
        m.use_quick_geglu = false;
        m.activation_func_clamp_value.reset();
      }
      if (m.tie_word_embeddings) continue;  // pp > 1 keeps a second copy of a tied table on the last stage
      for (const std::int64_t pp : {1, 2, 4}) {
        if (m.layer_num % pp != 0 || (is_hybrid(m) && pp > 1)) continue;  // hybrid: one stage only
        strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 8,
                        .world_size = pp * 8,
                        .pp_size = pp,
                        .ep_size = is_moe(m) ? 8 : 1};
        if (m.attention_type != attention_kind::mla) s.tp_size = 1;
        const auto r = estimate(m, s, catalogue::h100_sxm);
        double total = 0;
        for (std::size_t i = 0; i < r.stage_count; ++i)
          total += r.stages[i].params * static_cast<double>(r.stages[i].rank_count);
        // Experts are sharded over ep = 8 on each rank: a rank holds 1/8 of each layer's experts.
        double experts_per_rank = 0;
        for (std::size_t i = 0; i < r.stage_count; ++i)
          experts_per_rank += r.stages[i].expert_params * static_cast<double>(r.stages[i].rank_count);
        const double all_experts = experts_per_rank * static_cast<double>(s.ep_size);
        EXPECT_DOUBLE_EQ(total - experts_per_rank + all_experts, r.param_count)
            << named.name << " swiglu=" << swiglu << " pp=" << pp;
      }
    }
  }
}

TEST(PipelineStages, SharedExpertsFollowTheModelsActivation) {
  // DeepSeek-V2-Lite MoE MLP, hidden 2048, 64 experts of 1408, shared experts 2816:
  //   router 2048*64 = 131072
  //   GeLU:   shared 2048*(2816+2816) = 11534336,  routed 64*2048*(1408+1408) = 369098752
  //   SwiGLU: shared 2048*(5632+2816) = 17301504,  routed 64*2048*(2816+1408) = 553648128
  model_spec m = catalogue::deepseek_v2_lite;
  EXPECT_EQ(detail::moe_mlp_params(m, 64), 131072.0 + 17301504.0 + 553648128.0);
  m.use_swiglu = false;
  EXPECT_EQ(detail::moe_mlp_params(m, 64), 131072.0 + 11534336.0 + 369098752.0);
  // One MoE layer on one rank (ep 1): the stage holds exactly the counted MLP (plus attention etc.).
  m.layer_num = 2;
  m.dense_layers = 1;
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 2, .world_size = 1};
  const auto r = estimate(m, s, catalogue::h100_sxm);
  EXPECT_DOUBLE_EQ(r.stages[0].params, r.param_count);
  EXPECT_DOUBLE_EQ(r.stages[0].expert_params, 369098752.0);
}

TEST(PipelineStages, BreakdownOfEveryStageAddsUpAndTheBusiestBounds) {
  // Llama 3 8B over pp4 with 14 layers on the last stage and 6 on each other: the last stage has
  // more than twice the layers of any other, so it is the busiest and bounds the iteration.
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 16,
                        .world_size = 8,
                        .pp_size = 4,
                        .num_layers_in_last_pipeline_stage = 14};
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  ASSERT_EQ(r.stage_count, 3U);
  EXPECT_EQ(r.stages[static_cast<std::size_t>(r.cost.bounding_stage)].kind, stage_kind::last);
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const auto& b = r.stages[i].breakdown;
    const seconds sum = b.fwd_compute_time + b.bwd_compute_time + b.recompute_time + b.intra_exposed_time +
                        b.inter_exposed_time + b.bubble_time + b.dp_exposed_time + b.optim_time + b.straggler_time;
    EXPECT_NEAR(sum.value, r.cost.duration_time_per_iter.value, 1e-9 * r.cost.duration_time_per_iter.value)
        << stage_name(r, i);
    EXPECT_GE(b.bubble_time.value, 0.0);
    // Busy time: 16 micro-batches of the stage's own chunk.
    EXPECT_NEAR((b.fwd_compute_time + b.bwd_compute_time).value,
                16 * (r.stages[i].fwd_compute_time + r.stages[i].bwd_compute_time).value, 1e-12);
  }
  const auto& bound = r.stages[static_cast<std::size_t>(r.cost.bounding_stage)].breakdown;
  EXPECT_EQ(r.cost.breakdown_result.bubble_time, bound.bubble_time);
  EXPECT_LT(bound.bubble_time, r.stages[0].breakdown.bubble_time);
}

TEST(PipelineStages, InterleavedEndRanksMakeTwoTransfersFewer) {
  // llama3-8b on pp 4 with 2 model chunks per rank: each micro-batch crosses every chunk boundary
  // forward and backward, a receive and a send each way: 4 x 2 = 8 transfers on a middle rank. The
  // model's first virtual stage (rank 0's chunk 0) receives no activation and sends no gradient,
  // its last (rank 3's chunk 1) sends no activation and receives no gradient: 6 on the end ranks.
  const strategy_spec s{.seq_len = 4096,
                        .micro_batch_size = 1,
                        .micro_batch_num = 8,
                        .world_size = 4,
                        .pp_size = 4,
                        .interleaving_size = 2};
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const double one = r.cost.comm_result.p2p_time_per_transfer.value;
  ASSERT_GT(one, 0);
  EXPECT_DOUBLE_EQ(r.stage(stage_kind::first)->p2p_time.value, 6 * one);
  EXPECT_DOUBLE_EQ(r.stage(stage_kind::middle)->p2p_time.value, 8 * one);
  EXPECT_DOUBLE_EQ(r.stage(stage_kind::last)->p2p_time.value, 6 * one);
}

TEST(PipelineStages, VerdictAgainstDeviceMemory) {
  // Llama 3 70B without any model parallelism: bf16 weights + fp32 grads alone are 6 bytes x 70.6e9
  // = 423 GB, far above an 80 GiB H100 (85899345920 bytes).
  const strategy_spec dp8{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8};
  const auto r = estimate(catalogue::llama3_70b, dp8, catalogue::h100_sxm);
  EXPECT_EQ(r.mem.device_mem.value, 85899345920);
  EXPECT_FALSE(r.mem.fits);
  EXPECT_GT(r.mem.peak_mem.value, 6 * 70000000000LL);
  EXPECT_EQ(r.mem.over_by, r.mem.peak_mem - r.mem.device_mem);
  EXPECT_NE(memory_verdict(r).find("does not fit"), std::string::npos);
  // tp8: weights and grads 6 x 70.6e9 / 8 = 53 GB plus 12 x 70.6e9 / 8 = 106 GB of Adam state over dp 1 -> does not fit either;
  // Llama 3 8B on tp2 x dp4 holds 6 x 8.03e9 / 2 = 24 GB + 12 x 8.03e9 / 8 = 12 GB + activations: fits.
  const strategy_spec tp2{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
  const auto small = estimate(catalogue::llama3_8b, tp2, catalogue::h100_sxm);
  EXPECT_TRUE(small.mem.fits);
  EXPECT_EQ(small.mem.over_by.value, 0);
  EXPECT_EQ(memory_verdict(small).rfind("fits: peak", 0), 0U);
}

TEST(PipelineStages, ComputeCapabilityFromTheNameSizesTheWorkspace) {
  EXPECT_EQ(compute_capability_from_name("a100_pcie_bf16"), 8.0);
  EXPECT_EQ(compute_capability_from_name("A10G"), 8.6);
  EXPECT_EQ(compute_capability_from_name("b200_bf16_ceperm"), 10.0);
  EXPECT_EQ(compute_capability_from_name("h20"), 9.0);
  EXPECT_EQ(compute_capability_from_name("mi300x"), 0.0);
  const strategy_spec tp2{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
  // TransformerEngine's cuBLAS workspace: 4 MiB before Hopper, 32 MiB + 1 KiB from Hopper on.
  system_spec a100 = catalogue::a100_sxm;
  a100.accelerator.compute_capability = 0;  // as in SimuMax's files
  const auto r = estimate(catalogue::llama3_8b, tp2, a100);
  EXPECT_EQ(r.compute_capability, 8.0);
  EXPECT_TRUE(r.has(estimate_note::compute_capability_from_name));
  EXPECT_EQ(r.stages[0].workspace_mem.value, 4 * 1024 * 1024);
  system_spec unknown = a100;
  unknown.sys_name.assign("cluster_x");
  const auto u = estimate(catalogue::llama3_8b, tp2, unknown);
  EXPECT_TRUE(u.has(estimate_note::compute_capability_assumed));
  EXPECT_EQ(u.stages[0].workspace_mem.value, 32 * 1024 * 1024 + 1024);
  EXPECT_EQ(notes_of(u).size(), 1U);
}

TEST(PipelineStages, OverlappedGradientSyncLeavesOnlyTheLastBucketExposed) {
  // Llama 3 8B on dp2 (tp1, pp1) over a link of 1e12 B/s, efficiency 1, 5 us per ring step.
  // DDP buckets of max(40M, 1M x 2) = 40M elements: 200 full and one of 8030261248 - 8e9 =
  // 30261248. With the distributed optimizer a bucket is reduce-scattered (fp32 grads, half of
  // them cross: 40e6 x 4 / 2 / 1e12 + 5 us = 85 us) and all-gathered (bf16: 45 us).
  // --overlap-grad-reduce: buckets fill at an even rate over the last backward (~0.19 s, one
  // bucket per ~0.95 ms > 85 us), so the stream keeps up and only the last bucket — the partial
  // one, ready when backward ends — is exposed: 30261248 x 4 / 2 / 1e12 + 5 us.
  // --overlap-param-gather: the forward (~63 ms, a bucket per ~0.3 ms > 45 us) waits only for the
  // first bucket it needs, the partial one holding the first layers: 30261248 x 2 / 2 / 1e12 + 5 us.
  system_spec sys = catalogue::h100_sxm;
  for (std::size_t i = 0; i < sys.network_count; ++i) {
    sys.networks[i].bandwidth.gbps = 1e12 / 1073741824.0;
    sys.networks[i].bandwidth.efficient_factor = 1.0;
    sys.networks[i].bandwidth.latency_us = 5;
    sys.networks[i].nccl_link = nccl_link_kind::none;  // the ring model with these fitted figures
  }
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2};
  const auto plain = estimate(catalogue::llama3_8b, s, sys);
  const auto& st = plain.stages[0];
  ASSERT_EQ(st.dp_buckets, 201);
  ASSERT_GT(st.bwd_compute_time.value / 201, 85e-6);  // the premise: the stream keeps up
  ASSERT_GT(st.fwd_compute_time.value / 201, 45e-6);
  EXPECT_EQ(st.dp_exposed_time, st.dp_time);  // without overlap everything is exposed
  s.overlap_grad_reduce = true;
  s.overlap_param_gather = true;
  const auto overlapped = estimate(catalogue::llama3_8b, s, sys);
  const double reduce_last = 30261248.0 * 4 / 2 / 1e12 + 5e-6, gather_first = 30261248.0 * 2 / 2 / 1e12 + 5e-6;
  EXPECT_NEAR(overlapped.stages[0].dp_exposed_time.value, reduce_last + gather_first, 1e-15);
  EXPECT_NEAR(overlapped.cost.breakdown_result.dp_exposed_time.value, reduce_last + gather_first, 1e-15);
  EXPECT_NEAR((plain.cost.duration_time_per_iter - overlapped.cost.duration_time_per_iter).value,
              (st.dp_time - overlapped.stages[0].dp_exposed_time).value, 1e-12);
  EXPECT_EQ(overlapped.notes, 0U);
  // Megatron-LM gathers parameters only with the distributed optimizer.
  s.zero_state = 0;
  EXPECT_THROW(validate(s), config_error);
}

}  // namespace llmsim_test_pipeline_stages
