// Mechanisms of the dense estimate, each against numbers derived by hand.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_estimate {

using namespace llmsim;
using namespace llmsim::literals;

namespace {
strategy_spec tp2_dp4(std::int64_t micro_batches = 8) {
  return {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = micro_batches, .world_size = 8, .tp_size = 2};
}
}  // namespace

TEST(Estimate, Llama3_8bParameterCountAnd6NDFlops) {
  const auto& m = catalogue::llama3_8b;
  // Per layer: QKV 4096 x (32 + 2*8) * 128, proj 4096 x 4096, SwiGLU 3 x 4096 x 14336, two norms.
  const double layer = 4096.0 * 48 * 128 + 4096.0 * 4096 + 3 * 4096.0 * 14336 + 2 * 4096.0;
  EXPECT_EQ(layer, 218112000.0);
  EXPECT_EQ(parameter_count(m, 128256), 32 * layer + 2 * 128256.0 * 4096 + 4096);
  EXPECT_EQ(parameter_count(m, 128256), 8030261248.0);
  // 6 FLOPs per GEMM parameter per token, plus 12*L*s*H*d for attention scores, plus the LM head.
  const double gemm = 32 * (layer - 2 * 4096.0);
  const double expected = 6 * gemm + 12.0 * 32 * 4096 * 32 * 128 + 6.0 * 4096 * 128256;
  EXPECT_EQ(flops_per_token(m, 128256, 4096), expected);
  EXPECT_EQ(expected, 51470401536.0);
  // MFU is those FLOPs over time and peak.
  const auto r = estimate(m, tp2_dp4(), catalogue::h100_sxm);
  const double tokens = 4096.0 * 8 * 4;
  EXPECT_DOUBLE_EQ(r.cost.all_tokens_per_iter, tokens);
  EXPECT_NEAR(r.cost.mfu, expected * tokens / 8 / r.cost.duration_time_per_iter.value / 989e12, 1e-12);
}

TEST(Estimate, Zero1DividesOptimizerStateByDataParallelSize) {
  auto s = tp2_dp4();
  s.zero_state = 0;
  const auto plain = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.zero_state = 1;
  const auto zero1 = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto& a = plain.stages[0];
  const auto& b = zero1.stages[0];
  // fp32 master weights + Adam m and v: 12 bytes per local parameter, split over dp = 4.
  EXPECT_EQ(a.optimizer_state_mem.value, static_cast<std::int64_t>(a.params * 12));
  EXPECT_NEAR(static_cast<double>(b.optimizer_state_mem.value), a.params * 12 / 4, 1);
  EXPECT_EQ(a.weight_mem, b.weight_mem);
  EXPECT_EQ(a.grad_mem, b.grad_mem);
  EXPECT_EQ(a.grad_mem.value, static_cast<std::int64_t>(a.params * 4));  // fp32 main gradients
}

TEST(Estimate, FullRecomputeAddsOneForwardPerRecomputedLayer) {
  auto s = tp2_dp4();
  const auto base = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::full_block;
  s.recompute_layer_num = 10;
  const auto full = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto& a = base.stages[0];
  const auto& b = full.stages[0];
  // One layer's forward: (first stage forward - embedding - head) / 32 layers, compute and TP comm.
  const build_context c =
      make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, padded_vocab(catalogue::llama3_8b, 2));
  const leaf_block layer = decoder_layer_leaves(c, false, false);
  seconds layer_fwd{}, layer_fwd_comm{};
  for (const leaf& l : layer) {
    layer_fwd += l.fwd;
    if (l.kind == leaf_kind::linear_column || l.kind == leaf_kind::linear_row) layer_fwd_comm += l.fwd_comm;
  }
  EXPECT_NEAR(b.recompute_time.value, 10 * layer_fwd.value, 1e-12);
  EXPECT_NEAR(b.recompute_tp_comm_time.value, 10 * layer_fwd_comm.value, 1e-12);
  EXPECT_DOUBLE_EQ(a.fwd_compute_time.value, b.fwd_compute_time.value);
  EXPECT_DOUBLE_EQ(a.bwd_compute_time.value, b.bwd_compute_time.value);
  EXPECT_NEAR((b.chunk_time - a.chunk_time).value, 10 * (layer_fwd + layer_fwd_comm).value, 1e-12);
  // Recomputed layers keep only their input: less activation memory.
  EXPECT_LT(b.fwd_activation_cache_per_micro_batch, a.fwd_activation_cache_per_micro_batch);
  const double layer_input = 4096.0 / 2 * 4096 * 2;  // b * s/t * h * 2 bytes (sequence parallel)
  double layer_cache = 0;
  for (const leaf& l : layer) layer_cache += l.held();
  EXPECT_NEAR(
      static_cast<double>((a.fwd_activation_cache_per_micro_batch - b.fwd_activation_cache_per_micro_batch).value),
      10 * (layer_cache - layer_input), 1);
}

TEST(Estimate, DoublingMicroBatchesDoublesComputeButNotDataParallelSync) {
  const auto r8 = estimate(catalogue::llama3_8b, tp2_dp4(8), catalogue::h100_sxm);
  const auto r16 = estimate(catalogue::llama3_8b, tp2_dp4(16), catalogue::h100_sxm);
  EXPECT_DOUBLE_EQ(r16.cost.breakdown_result.fwd_compute_time.value,
                   2 * r8.cost.breakdown_result.fwd_compute_time.value);
  EXPECT_DOUBLE_EQ(r16.cost.breakdown_result.bwd_compute_time.value,
                   2 * r8.cost.breakdown_result.bwd_compute_time.value);
  EXPECT_DOUBLE_EQ(r16.cost.breakdown_result.dp_exposed_time.value, r8.cost.breakdown_result.dp_exposed_time.value);
  EXPECT_DOUBLE_EQ(r16.cost.breakdown_result.optim_time.value, r8.cost.breakdown_result.optim_time.value);
  EXPECT_GT(r8.cost.breakdown_result.dp_exposed_time.value, 0);
  // Without pipeline parallelism the iteration is m chunks + sync + optimizer.
  const auto& st = r16.stages[0];
  EXPECT_NEAR(r16.cost.duration_time_per_iter.value, 16 * st.chunk_time.value + st.dp_time.value + st.optim_time.value,
              1e-9);
}

TEST(Estimate, OneFOneBBubbleIsPMinusOneChunks) {
  for (std::int64_t p : {2, 4, 8}) {
    for (std::int64_t m : {1, 4, 8, 32}) {
      std::vector<stage_timing> t(static_cast<std::size_t>(p), stage_timing{1_ms, 2_ms, {}});
      const auto r = simulate_1f1b(t, m);
      EXPECT_NEAR(r.total.value, static_cast<double>(m + p - 1) * 3e-3, 1e-12) << "p=" << p << " m=" << m;
    }
  }
  // A p2p transfer of x per hop adds 2x per extra stage on the critical path of the fill and drain.
  std::vector<stage_timing> t(4, stage_timing{1_ms, 2_ms, 0.1_ms});
  const auto r = simulate_1f1b(t, 8);
  EXPECT_GT(r.total.value, 11 * 3e-3);
  // Micro-batches in flight: 1F1B rank k holds p - k at its peak.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .pp_size = 4};
  const auto e = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  ASSERT_EQ(e.stage_count, 3U);
  EXPECT_EQ(e.stage(stage_kind::first)->micro_batches_in_flight, 4);
  EXPECT_EQ(e.stage(stage_kind::middle)->micro_batches_in_flight, 3);
  EXPECT_EQ(e.stage(stage_kind::last)->micro_batches_in_flight, 1);
}

TEST(Estimate, EfficiencyLookupHitsTheExactKeyAndFallsBack) {
  static constexpr shape_efficiency table[] = {
      {"b=1, m=4096, k=4096, n=3072, layout=TN, accumulate=False, out_dtype=bf16", 0.5},
  };
  system_spec sys = catalogue::h100_sxm;
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].accurate_efficient_factor = {table, 1};
  const gemm_shape hit{1, 4096, 4096, 3072, gemm_layout::tn, false, dtype_kind::bf16};
  EXPECT_EQ(hit.key().view(), table[0].shape);
  const auto a = compute_cost(sys, compute_kind::matmul, hit.flop_count(), hit.key().view());
  EXPECT_TRUE(a.measured);
  EXPECT_DOUBLE_EQ(a.efficiency, 0.5);
  EXPECT_DOUBLE_EQ(a.compute.value, 2.0 * 4096 * 4096 * 3072 / (989e12 * 0.5));
  const gemm_shape miss{1, 4096, 4096, 3072, gemm_layout::nn, false, dtype_kind::bf16};
  const auto b = compute_cost(sys, compute_kind::matmul, miss.flop_count(), miss.key().view());
  EXPECT_FALSE(b.measured);
  EXPECT_DOUBLE_EQ(b.efficiency, catalogue::assumptions::gemm_efficiency);
  // A kind without its own entry uses `default`.
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::sdp_fwd)].present = false;
  const auto c = compute_cost(sys, compute_kind::sdp_fwd, 1e12, "x");
  EXPECT_DOUBLE_EQ(c.efficiency, catalogue::assumptions::other_compute_efficiency);
}

TEST(Estimate, CatalogueCollectivesFollowNcclsModel) {
  const auto& sys = catalogue::h100_sxm;
  strategy_spec s = tp2_dp4();
  const network_tier& tier = resolve_tier(sys, s, comm_group::tp);
  EXPECT_EQ(tier.name.view(), "high_intra_node");
  EXPECT_EQ(tier.nccl_link, nccl_link_kind::nvlink);
  const double bw = tier.bandwidth.gbps * 1073741824.0 * tier.bandwidth.efficient_factor;
  // NCCL's tuning model (tuning.cc): latency = base + steps x per-step latency, the protocol of least
  // time. 1 GB is bandwidth-bound, so Simple (the whole bandwidth; base 8.4 us, 3.4 us a step on
  // NVLink): all-gather over 2 ranks moves half the buffer in 1 step ...
  const auto ag = collective_time(sys, s, tier, {collective_kind::all_gather, 1e9, 2, comm_group::tp});
  EXPECT_NEAR(ag.value, 0.5e9 / bw + (8.4 + 1 * 3.4) * 1e-6, 1e-12);
  // ... all-reduce over 8 moves 2 x 7/8 in 2 x 7 steps.
  const auto ar = collective_time(sys, s, tier, {collective_kind::all_reduce, 1e9, 8, comm_group::tp});
  EXPECT_NEAR(ar.value, 2 * 7.0 / 8 * 1e9 / bw + (8.4 + 14 * 3.4) * 1e-6, 1e-12);
  // 8 KiB over 8 (a decode step's all-reduce) is latency-bound: LL (base 3.6 us, 0.47 us a step, a
  // quarter of the bandwidth) beats LL128 (10 + 14 x 1.9 = 36.6 us) and Simple (56 us).
  const auto small = collective_time(sys, s, tier, {collective_kind::all_reduce, 8192, 8, comm_group::tp});
  EXPECT_NEAR(small.value, 2 * 7.0 / 8 * 8192 / (bw / 4) + (3.6 + 14 * 0.47) * 1e-6, 1e-12);
  EXPECT_EQ(collective_time(sys, s, tier, {collective_kind::all_reduce, 1e9, 1, comm_group::tp}).value, 0);
  // 8 KiB all-reduced over tp 16 on 2 nodes: NCCL's LL tree, 4.4 us + 2 x (7 NVLink hops x 0.52 us
  // x 1.8 (LL across nodes) + log2(2) network hops x 5 us) = 27.504 us, at 0.9 / 3.8 of the bus
  // bandwidth and half of it as algorithm bandwidth; the LL ring would take 3.6 + 28 x 0.47 x 1.8 +
  // 2 x 2.7 = 32.688 us.
  strategy_spec tp16{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 16, .tp_size = 16};
  const network_tier& net = resolve_tier(sys, tp16, comm_group::tp);
  ASSERT_EQ(net.name.view(), "inter_node");
  const double net_bw = net.bandwidth.gbps * 1073741824.0 * net.bandwidth.efficient_factor;
  const auto tree = collective_time(sys, tp16, net, {collective_kind::all_reduce, 8192, 16, comm_group::tp});
  EXPECT_NEAR(tree.value, 27.504e-6 + 8192 / (net_bw * 0.9 / 3.8 * 0.5), 1e-12);
  // A data-parallel group spanning nodes uses the inter-node tier.
  strategy_spec wide{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 32, .tp_size = 2};
  EXPECT_EQ(resolve_tier(sys, wide, comm_group::dp).name.view(), "inter_node");
  EXPECT_EQ(resolve_tier(sys, wide, comm_group::tp).name.view(), "high_intra_node");
}

TEST(Estimate, PeakPathNamesTheLeafAndPass) {
  const auto r = estimate(catalogue::llama3_8b, tp2_dp4(), catalogue::h100_sxm);
  const std::string path = format_peak_path(r, 0);
  EXPECT_EQ(path.rfind("first_stage/", 0), 0U) << path;
  EXPECT_NE(path.find(", stage="), std::string::npos) << path;
  EXPECT_EQ(r.mem.peak_mem, r.stages[0].peak_mem);
  EXPECT_NEAR(static_cast<double>(r.mem.peak_mem_with_reserved.value), static_cast<double>(r.mem.peak_mem.value) / 0.94,
              1);
}

TEST(Estimate, UnsupportedFeaturesAreRefusedClearly) {
  auto s = tp2_dp4();
  s.cp_size = 2;
  s.world_size = 16;
  s.use_flash_sdp = false;
  s.use_math_sdp = true;
  try {
    (void)estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
    FAIL() << "cp with unfused attention is not modelled";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "llmsim::estimate: strategy.cp_size=2 with strategy.use_flash_sdp=false is not modelled "
                 "(TransformerEngine's context parallelism runs fused / flash attention only)");
  }
}

TEST(Estimate, LongPipelinesExtendTheSteadyPeriodExactly) {
  // The shortcut (simulate until every rank repeats with a common period, then extend) agrees
  // with simulating every micro-batch, for uneven first/last stages and random timings.
  std::uint64_t state = 12345;
  auto uniform = [&](double lo, double hi) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t p = 2 + static_cast<std::size_t>(trial % 10);
    std::vector<stage_timing> t(p);
    const double x = uniform(0, 0.3);
    for (auto& s : t) s = {seconds{uniform(0.5, 3)}, seconds{uniform(1, 6)}, seconds{x}};
    if (trial % 2 == 0)
      for (std::size_t r = 2; r + 1 < p; ++r) t[r] = t[1];
    for (std::int64_t m : {64, 200, 1024}) {
      const double fast = simulate_1f1b(t, m).total.value;
      const double full = simulate_1f1b_exhaustive(t, m).total.value;
      EXPECT_NEAR(fast, full, 1e-11 * full) << "p=" << p << " m=" << m << " trial=" << trial;
    }
  }
}

TEST(EstimateMoe, DeepSeekV3ParameterCounts) {
  const auto& m = catalogue::deepseek_v3;
  // MLA projections: q_down 7168x1536, q_up 1536x128x(128+64), kv_down 7168x(512+64), kv_up 512x128x(128+128), proj 128x128x7168.
  const double attn = 7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 7168;
  const double norms = 2 * 7168.0 + 1536 + 512;
  const double dense_mlp = 3 * 7168.0 * 18432;
  const double router = 7168.0 * 256, expert = 3 * 7168.0 * 2048, shared = expert;
  const double embeddings = 2 * 129280.0 * 7168;
  const double total =
      3 * (attn + norms + dense_mlp) + 58 * (attn + norms + router + shared + 256 * expert) + embeddings + 7168;
  const double active =
      3 * (attn + norms + dense_mlp) + 58 * (attn + norms + router + shared + 8 * expert) + embeddings + 7168;
  EXPECT_EQ(parameter_count(m, 129280), total);
  EXPECT_EQ(active_parameter_count(m, 129280), active);
  EXPECT_EQ(total, 671026404352.0);  // the published 671B
  EXPECT_EQ(active, 37552282624.0);  // the published 37B activated
}

TEST(EstimateMoe, FlopsPerTokenCountTopKExperts) {
  const auto& m = catalogue::mixtral_8x7b;
  const double attn = 4096.0 * 48 * 128 + 4096.0 * 4096;
  const double per_layer = attn + 2 * 3 * 4096.0 * 14336 + 4096.0 * 8;  // two experts a token visits, plus the router
  const double expected = 6 * 32 * per_layer + 6.0 * 32 * 4096 * 32 * (128 + 128) + 6.0 * 4096 * 32000;
  EXPECT_EQ(flops_per_token(m, 32000, 4096), expected);
  // A dense model of the same shape with one expert's width does a quarter of the MLP work... per expert.
  EXPECT_GT(flops_per_token(m, 32000, 4096), flops_per_token(catalogue::llama3_8b, 32000, 4096));
}

TEST(EstimateMoe, AllToAllMovesTopKTokenCopiesPerRank) {
  model_spec m = catalogue::mixtral_8x7b;
  m.moe_pad_expert_input_to_capacity = false;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .ep_size = 8};
  const auto& sys = catalogue::h100_sxm;
  const build_context c = make_build_context(m, s, sys, 32000);
  const moe_tokens t = moe_token_counts(c);
  EXPECT_EQ(t.local, 4096.0);
  EXPECT_EQ(t.dispatched, 2 * 4096.0);  // top-2 copies of every token
  EXPECT_EQ(t.local_experts, 1);
  // Per token: top-k copies of h bf16 values; 7/8 of them leave the rank.
  const double payload = 2 * 4096.0 * 4096 * 2;
  const network_tier& tier = *c.ep_tier;
  const double bw = tier.bandwidth.gbps * 1073741824.0 * tier.bandwidth.efficient_factor;
  const auto a2a = collective_time(sys, s, tier, {collective_kind::all2all, payload, 8, comm_group::ep});
  // NCCL's Simple protocol (67 MB is bandwidth-bound): 8.4 us + 7 steps of 3.4 us on NVLink.
  EXPECT_NEAR(a2a.value, payload * 7 / 8 / bw + (8.4 + 7 * 3.4) * 1e-6, 1e-12);
  // The permutation leaf carries dispatch forward and backward; unpermutation the combine.
  leaf_block b;
  push_moe_mlp(b, c);
  const leaf* perm = nullptr;
  for (const leaf& l : b)
    if (l.id == leaf_id::permutation) perm = &l;
  ASSERT_NE(perm, nullptr);
  EXPECT_NEAR(perm->fwd_comm.value, a2a.value, 1e-15);
  // With padding to capacity every expert receives ceil(topk * T / E) tokens from each rank.
  m.moe_pad_expert_input_to_capacity = true;
  m.capacity = 1.25;
  const moe_tokens padded = moe_token_counts(c);
  EXPECT_EQ(padded.dispatched, 1024.0 * 8 * 1.25);
}

TEST(EstimateMoe, ExpertMemoryShardsOverEpEtpAndExpertDataParallel) {
  const auto& m = catalogue::mixtral_8x7b;
  // 16 GPUs: tp 2, ep 4, etp 2 -> edp = 16 / (4 * 2) = 2; dense dp = 16 / 2 = 8.
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 16,
                  .tp_size = 2,
                  .ep_size = 4,
                  .etp_size = 2};
  ASSERT_EQ(edp_size(s), 2);
  ASSERT_EQ(dp_size(s), 8);
  const auto r = estimate(m, s, catalogue::h100_sxm);
  const auto& st = r.stages[0];
  // Each GPU holds 8 / 4 = 2 experts, each split over etp = 2: fc1 4096 x 2*14336/2, fc2 14336/2 x 4096.
  const double per_layer = 2 * (4096.0 * 14336 + 7168.0 * 4096);
  EXPECT_EQ(st.expert_params, 32 * per_layer);
  const double dense = st.params - st.expert_params;
  EXPECT_NEAR(static_cast<double>(st.optimizer_state_mem.value), dense * 12 / 8 + st.expert_params * 12 / 2, 2);
  EXPECT_EQ(st.weight_mem.value, static_cast<std::int64_t>(st.params * 2));
}

TEST(EstimateMoe, DeepSeekLayersFollowMlaAndMoe) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .ep_size = 8};
  model_spec m = catalogue::deepseek_v2;
  m.layer_num = 4;
  const auto r = estimate(m, s, catalogue::b200);
  EXPECT_GT(r.cost.duration_time_per_iter.value, 0);
  EXPECT_EQ(r.stages[0].layers, 4);
  // 1 dense + 3 MoE layers: expert parameters are 3 layers x 20 local experts x 3 x 5120 x 1536.
  EXPECT_EQ(r.stages[0].expert_params, 3 * 20 * 3 * 5120.0 * 1536);
  s.tp_size = 2;
  s.world_size = 16;
  // tp = 2 (test_mla_tp.cpp): the experts stay whole per ep rank, the rank holds half the heads.
  const auto tp2 = estimate(m, s, catalogue::b200);
  EXPECT_EQ(tp2.stages[0].expert_params, 3 * 20 * 3 * 5120.0 * 1536);
  EXPECT_LT(tp2.stages[0].params, r.stages[0].params);
}

TEST(Estimate, InterleavingShrinksTheBubbleByTheChunkCount) {
  strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 16, .world_size = 16, .tp_size = 4, .pp_size = 4};
  const auto plain = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.interleaving_size = 2;
  const auto vp2 = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  // The schedule itself is checked in test_schedules.cpp; here: fewer idle chunks than plain 1F1B.
  EXPECT_LT(vp2.cost.breakdown_result.bubble_time.value, plain.cost.breakdown_result.bubble_time.value);
  // The first stage holds (p - 1) * 2 + (v - 1) * p + 1 = 11 chunks of half a micro-batch.
  EXPECT_EQ(vp2.stages[0].micro_batches_in_flight, 6);
  EXPECT_GT(vp2.stages[0].peak_mem, plain.stages[0].peak_mem);
}

TEST(Estimate, InterleavedLastRankHoldsTheLossOnlyInItsLastChunk) {
  // llama3-8b, tp2 pp4 vp4, 8 micro-batches: 32 layers = 16 virtual stages of 2 layers; the output
  // layer and loss are built on the last virtual stage only (Megatron get_model: post_process on
  // the last chunk of the last rank). Rank 3 warms up with (p - r - 1)·2 + (v - 1)·p = 0 + 3·4 = 12
  // chunk-forwards of chunks 0-2 (two layers each, no loss), then runs chunk 3's forward (its two
  // layers, the final norm, the output layer and cross entropy). So its peak is model memory + 12
  // sets of two layers + chunk 3's forward peak; a middle rank's 8 layers give the per-layer bytes.
  // (Before: every held chunk carried a quarter of the loss's logits, 3 x 0.98 GiB too much, and the
  // last stage was named the peak.)
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 8,
                  .world_size = 8,
                  .tp_size = 2,
                  .pp_size = 4,
                  .interleaving_size = 4};
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto* last = r.stage(stage_kind::last);
  const auto* middle = r.stage(stage_kind::middle);
  ASSERT_NE(last, nullptr);
  ASSERT_NE(middle, nullptr);
  const double layer = static_cast<double>(middle->fwd_activation_cache_per_micro_batch.value) / 8;
  ASSERT_EQ(last->held_chunk_count, 4);
  EXPECT_NEAR(last->chunk_held[0], 2 * layer, 1.0);
  EXPECT_NEAR(static_cast<double>((last->peak_mem - last->model_mem).value), 12 * 2 * layer + last->chunk_fwd_peak[3],
              16.0);
  // Chunk 3 holds the loss's fp32 logits on top of its two layers: s·V/t·4 B = 4096 x 128256 / 2 x
  // 4 = 1,050,673,152 B, plus the final norm's and the output layer's inputs (sbh·2/t each, 16 MiB).
  const double logits = 4096.0 * 128256 / 2 * 4;
  EXPECT_GT(last->chunk_held[3] - last->chunk_held[0], logits);
  EXPECT_LT(last->chunk_held[3] - last->chunk_held[0], logits + 2 * 4096.0 * 4096 * 2 / 2 + 1.0);
  // The first stage is the peak: it holds 11 + 1 chunk sets (two of them with the embedding's input).
  EXPECT_EQ(r.mem.peak_mem, r.stage(stage_kind::first)->peak_mem);
  // The same chunks written as a layout (test_pipeline_layout.cpp) price the same memory.
  strategy_spec described = s;
  described.pipeline_model_parallel_layout = "Ett|(tt|)*14,ttL";
  const auto d = estimate(catalogue::llama3_8b, described, catalogue::h100_sxm);
  EXPECT_EQ(d.stage(stage_kind::last)->peak_mem, last->peak_mem);
  EXPECT_EQ(d.stage(stage_kind::first)->peak_mem, r.stage(stage_kind::first)->peak_mem);
}

TEST(Estimate, TiedEmbeddingGradientsAreSummedBetweenFirstAndLastStage) {
  // llama3-8b with a tied LM head on tp 1, pp 2, dp 8 (16 H100s, two nodes): the first stage's
  // embedding and the last stage's copy of it each get gradients; finalize_model_grads all-reduces
  // the whole fp32 main gradient between the two, 128256 (already a multiple of 128) x 4096 x 4 B
  // = 2,101,346,304 B. The pair is 8 ranks apart: different nodes. A two-rank ring all-reduce moves
  // 2 (n - 1) / n = 1 buffer per rank, and the 8 first-stage ranks of a node do it at once, each
  // over one 50 GB/s NIC at the tier's efficiency: ~2.1e9 / (50e9 x eff), NCCL's latency aside.
  model_spec m = catalogue::llama3_8b;
  m.tie_word_embeddings = true;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 16, .pp_size = 2};
  const auto& sys = catalogue::h100_sxm;
  const auto r = estimate(m, s, sys);
  const network_tier* net = sys.network("inter_node");
  ASSERT_NE(net, nullptr);
  const double per_gpu = 50e9 * net->bandwidth.efficient_factor;
  const double bytes = 128256.0 * 4096 * 4;
  for (const auto kind : {stage_kind::first, stage_kind::last}) {
    const auto* st = r.stage(kind);
    ASSERT_NE(st, nullptr);
    EXPECT_NEAR(st->embedding_grad_allreduce_time.value, bytes / per_gpu, 0.02 * bytes / per_gpu);
    EXPECT_GE(st->dp_time.value, st->embedding_grad_allreduce_time.value);
  }
  // Untied: each stage has its own weight, nothing to sum; one stage holds both: one weight.
  m.tie_word_embeddings = false;
  EXPECT_EQ(estimate(m, s, sys).stage(stage_kind::first)->embedding_grad_allreduce_time.value, 0);
  m.tie_word_embeddings = true;
  s.pp_size = 1;
  EXPECT_EQ(estimate(m, s, sys).stages[0].embedding_grad_allreduce_time.value, 0);
  // pp 2 on 8 GPUs: the pair shares the node's NVLink, far faster than the NIC.
  s.pp_size = 2;
  s.world_size = 8;
  const auto one_node = estimate(m, s, sys);
  EXPECT_GT(one_node.stage(stage_kind::first)->embedding_grad_allreduce_time.value, 0);
  EXPECT_LT(one_node.stage(stage_kind::first)->embedding_grad_allreduce_time.value, 0.25 * bytes / per_gpu);
  // pp 16, dp 1 on 16 GPUs: rank 0 and rank 15 sit on different nodes, one rank per node in the
  // group: still one NIC each (not the node's eight).
  s.pp_size = 16;
  s.world_size = 16;
  EXPECT_NEAR(estimate(m, s, sys).stage(stage_kind::first)->embedding_grad_allreduce_time.value, bytes / per_gpu,
              0.02 * bytes / per_gpu);
  // Megatron FSDP sharding the optimizer (zero 1, "optim") on pp 2 dp 8: each rank's main gradient
  // is its 1/8 shard, and that is what the pair sums.
  s = {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 16, .pp_size = 2};
  s.data_parallel_sharding_strategy = dp_sharding_kind::optim;
  EXPECT_NEAR(estimate(m, s, sys).stage(stage_kind::first)->embedding_grad_allreduce_time.value, bytes / 8 / per_gpu,
              0.02 * bytes / 8 / per_gpu);
}

TEST(Estimate, MtpEmbeddingGradientsAreSummedBetweenFirstAndLastStage) {
  // Untied llama3-8b with one MTP layer on pp 2: the last stage embeds the shifted tokens with its
  // own copy of the word embedding (Megatron GPTModel builds it where mtp_process), so the same
  // all-reduce runs; a middle stage (pp 4) has no copy.
  model_spec m = catalogue::llama3_8b;
  m.mtp_num_layers = 1;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 32, .pp_size = 4};
  const auto r = estimate(m, s, catalogue::h100_sxm);
  const double first = r.stage(stage_kind::first)->embedding_grad_allreduce_time.value;
  EXPECT_GT(first, 0);
  EXPECT_EQ(r.stage(stage_kind::last)->embedding_grad_allreduce_time.value, first);
  EXPECT_EQ(r.stage(stage_kind::middle)->embedding_grad_allreduce_time.value, 0);
}

TEST(Estimate, SequenceParallelNormGradientsAreSummedOverTensorParallelRanks) {
  // llama3-8b on tp 2 with SP: each rank normalises its half of the tokens with the whole weights,
  // so finalize_model_grads all-reduces the norms' gradients over tp: 32 layers x 2 RMSNorms x 4096
  // + the final 4096 = 266,240 parameters, fp32 main gradients, one all-reduce after the DP sync.
  strategy_spec s = tp2_dp4();
  const auto sp = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto& st = sp.stages[0];
  EXPECT_EQ(st.tp_duplicated_params, 32 * 2 * 4096.0 + 4096);
  const build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, sp.padded_vocab);
  const seconds expected = group_collective_time(c, comm_group::tp, collective_kind::all_reduce, 266240.0 * 4);
  EXPECT_EQ(st.tp_grad_allreduce_time.value, expected.value);
  // Without SP every rank normalises every token: nothing to sum.
  s.enable_sequence_parallel = false;
  EXPECT_EQ(estimate(catalogue::llama3_8b, s, catalogue::h100_sxm).stages[0].tp_duplicated_params, 0);
}

TEST(Estimate, ConstexprMathHelpersMatchTheLibrary) {
  for (double x : {1.0, 2.0, 3.0, 5.0, 7.0, 12.0, 100.0, 1e6}) {
    EXPECT_NEAR(detail::log2_of(x), std::log2(x), 1e-12) << x;
    EXPECT_NEAR(detail::sqrt_of(x), std::sqrt(x), 1e-12 * std::sqrt(x)) << x;
  }
  // SimuMax straggler model: 1 + log2(n)/(log2(n)+1) * 0.09 * sqrt(log2(n)) for n = min(nodes, dp, edp).
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 24, .tp_size = 8};
  const auto with = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.enable_straggler_model = false;
  const auto without = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const double l2 = std::log2(3.0);
  EXPECT_NEAR(with.cost.pipeline_time.value / without.cost.pipeline_time.value,
              1 + l2 / (l2 + 1) * 0.09 * std::sqrt(l2), 1e-12);
}

}  // namespace llmsim_test_estimate
