// Megatron-LM's --overlap-moe-expert-parallel-comm (the combined 1F1B step): the pass order with
// its extra warm-up forward, the two-stream layer step against hand timelines, the iteration
// against the 1F1B it replaces, the layer split of the priced leaves, the memory of the extra
// micro-batch, and Megatron's refusals.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_expert_comm_overlap {

using namespace llmsim;

namespace {
// Qwen3-30B-A3B: 48 MoE layers, 128 experts top-8; one H200 node, ep 8, no pipeline.
strategy_spec combined_job(std::int64_t m, bool overlap) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = m,
          .world_size = 8,
          .ep_size = 8,
          .overlap_moe_expert_parallel_comm = overlap,
          .delay_wgrad_compute = overlap};
}

std::string refusal(strategy_spec s, const model_spec& m = catalogue::qwen3_30b_a3b) {
  try {
    (void)estimate(m, s, catalogue::h200);
  } catch (const config_error& e) { return e.what(); }
  return "accepted";
}
}  // namespace

TEST(ExpertCommOverlap, OrderIsMegatronsCombinedOneFOneB) {
  // pp = 1 (combined_1f1b_schedule_for_no_pipelining): F0, then (F1, B0), (F2, B1), then B2.
  const pass_lists one = interleaved_passes(1, 1, 3, 1, true);
  ASSERT_EQ(one.passes.size(), 6U);
  const std::array<std::tuple<pass_type, std::int64_t, bool>, 6> want{{{pass_type::forward, 0, false},
                                                                       {pass_type::forward, 1, true},
                                                                       {pass_type::backward, 0, false},
                                                                       {pass_type::forward, 2, true},
                                                                       {pass_type::backward, 1, false},
                                                                       {pass_type::backward, 2, false}}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(one.passes[i].type, std::get<0>(want[i])) << i;
    EXPECT_EQ(one.passes[i].micro_batch, std::get<1>(want[i])) << i;
    EXPECT_EQ(one.passes[i].overlapped_with_next, std::get<2>(want[i])) << i;
  }
  // Interleaved (get_pp_rank_microbatches): (p - r - 1)·2 + (v - 1)·g warm-up chunk-forwards, one
  // more when combined: p = 4, v = 2, g = 4, m = 8 gives 11 on rank 0 and 5 on rank 3; every
  // steady forward is paired, nothing else.
  EXPECT_EQ(interleaved_warmup(4, 2, 8, 4, 0, true), 11);
  EXPECT_EQ(interleaved_warmup(4, 2, 8, 4, 3, true), 5);
  EXPECT_EQ(interleaved_warmup(4, 2, 8, 4, 3, false), 4);
  const pass_lists four = interleaved_passes(4, 2, 8, 4, true);
  for (std::int64_t r = 0; r < 4; ++r) {
    const std::int64_t warmup = interleaved_warmup(4, 2, 8, 4, r, true);
    std::int64_t pairs = 0;
    for (std::size_t i = four.begin[static_cast<std::size_t>(r)]; i < four.begin[static_cast<std::size_t>(r) + 1];
         ++i) {
      const scheduled_pass& c = four.passes[i];
      if (!c.overlapped_with_next) continue;
      ++pairs;
      EXPECT_EQ(c.type, pass_type::forward);
      EXPECT_EQ(four.passes[i + 1].type, pass_type::backward);
    }
    EXPECT_EQ(pairs, 16 - warmup) << r;
  }
}

TEST(ExpertCommOverlap, LayerStepFollowsTheTwoStreams) {
  // f: attention 4, dispatch 1, MLP 3, combine 1; b: combine 2, MLP input grads 5, weight grads 2,
  // dispatch 3, attention 6. By hand:
  //   comp: attn_f 0-4 | mlp_b 4-9, wgrad 9-11, mlp_f 11-14 | attn_b 14-20
  //   comm: comb_b 0-2 | disp_f 4-5, disp_b 9-12 | comb_f 14-15     -> 20 (the computation)
  moe_layer_steps f{.attn_fwd = 4, .dispatch_fwd = 1, .mlp_fwd = 3, .combine_fwd = 1};
  moe_layer_steps b{.combine_bwd = 2, .mlp_bwd = 5, .mlp_wgrad = 2, .dispatch_bwd = 3, .attn_bwd = 6};
  EXPECT_DOUBLE_EQ(detail::combined_layer_time(f, b), 20);
  // A dispatch of 10: disp_f 4-14, mlp_f 14-17 after it, disp_b 14-17, attn_b 17-23 -> 23.
  f.dispatch_fwd = 10;
  EXPECT_DOUBLE_EQ(detail::combined_layer_time(f, b), 23);
  // Computation after the combine and before the backward combine stays on the computation
  // stream: post_b 1 delays everything by 1, post_f 2 follows the layer -> 23 + 1 + 2.
  f.post_fwd = 2;
  b.post_bwd = 1;
  EXPECT_DOUBLE_EQ(detail::combined_layer_time(f, b), 26);
  // Two chunks of 3 such layers plus 0.5 s of other work each: 3 combined steps and the rest in turn.
  chunk_durations cf{.forward = 3 * f.forward() + 0.5, .moe_layers = 3, .moe_layer = f};
  chunk_durations cb{.backward_input = 3 * b.backward() + 0.5, .moe_layers = 3, .moe_layer = b};
  EXPECT_DOUBLE_EQ(detail::overlapped_pair_time(cf, pass_type::forward, cb, pass_type::backward), 3 * 26 + 1.0);
}

TEST(ExpertCommOverlap, PipelineOfOneStageIsFirstForwardPairsLastBackward) {
  // One rank, one chunk: F = 9 (one MoE layer of the hand timeline above with dispatch 1), B = 18;
  // m = 3: 9 + 2 x 20 + 18 = 67 against 3 x 27 = 81 in turn.
  const moe_layer_steps f{.attn_fwd = 4, .dispatch_fwd = 1, .mlp_fwd = 3, .combine_fwd = 1};
  const moe_layer_steps b{.combine_bwd = 2, .mlp_bwd = 5, .mlp_wgrad = 2, .dispatch_bwd = 3, .attn_bwd = 6};
  moe_layer_steps both = f;
  both += b;
  schedule_setup in;
  in.ranks = 1;
  in.chunks = 1;
  in.durations = {{.forward = 9, .backward_input = 18, .moe_layers = 1, .moe_layer = both}};
  in.p2p = {0.0};
  EXPECT_DOUBLE_EQ(simulate_interleaved_setup(in, 3, 1, nullptr, true).total.value, 67);
  EXPECT_DOUBLE_EQ(simulate_interleaved_setup(in, 3, 1, nullptr, false).total.value, 81);
}

TEST(ExpertCommOverlap, LayerSplitHoldsEveryExchangeAndAllTheLayersTime) {
  const auto r = estimate(catalogue::qwen3_30b_a3b, combined_job(4, true), catalogue::h200);
  ASSERT_EQ(r.stage_count, 1U);
  const stage_result& st = r.stages[0];
  EXPECT_DOUBLE_EQ(st.moe_layers, 48);
  const moe_layer_steps& m = st.moe_steps;
  // The exchanges are the dispatch and the combine, nothing else.
  EXPECT_NEAR(m.dispatch_fwd + m.combine_fwd, st.fwd_a2a_time.value, 1e-12);
  EXPECT_NEAR(m.dispatch_bwd + m.combine_bwd, st.bwd_a2a_time.value, 1e-12);
  EXPECT_GT(m.dispatch_fwd, 0.0);
  EXPECT_GT(m.combine_fwd, 0.0);
  // The 48 layers are all but the embedding, the head and the loss: what the split holds is at
  // most the stage's pass times, and the weight gradients are the grouped MLP's only.
  const double fwd = (st.fwd_compute_time + st.fwd_tp_comm_time).value;
  const double bwd = (st.bwd_compute_time + st.bwd_tp_comm_time + st.recompute_time).value;
  EXPECT_LT(m.forward(), fwd);
  EXPECT_GT(m.forward(), 0.8 * fwd);
  EXPECT_LT(m.backward(), bwd);
  EXPECT_LT(m.mlp_wgrad, st.bwd_weight_time.value);
  EXPECT_GT(m.mlp_wgrad, 0.0);
}

TEST(ExpertCommOverlap, IterationGainsExactlyWhatTheCombinedStepsHide) {
  // pp = 1, m = 4: 1F1B runs 4 (F + B); the combined schedule F + 3 (F, B) steps + B. The
  // difference is the exchange the 3 steps hide, and the breakdown reports it hidden.
  const auto off = estimate(catalogue::qwen3_30b_a3b, combined_job(4, false), catalogue::h200);
  const auto on = estimate(catalogue::qwen3_30b_a3b, combined_job(4, true), catalogue::h200);
  const stage_result& st = on.stages[0];
  const double hidden = st.hidden_comm_time.value;
  EXPECT_GT(hidden, 0.0);
  EXPECT_LE(hidden, 3 * (st.fwd_a2a_time + st.bwd_a2a_time).value + 1e-12);
  EXPECT_NEAR(off.cost.duration_time_per_iter.value - on.cost.duration_time_per_iter.value, hidden, 1e-9);
  EXPECT_NEAR(off.cost.breakdown_result.intra_exposed_time.value - on.cost.breakdown_result.intra_exposed_time.value,
              hidden, 1e-9);
  // One more micro-batch's activations in flight: the forward of the next starts before the
  // backward of the last frees it.
  EXPECT_EQ(off.stages[0].micro_batches_in_flight, 1);
  EXPECT_EQ(on.stages[0].micro_batches_in_flight, 2);
  EXPECT_EQ((on.stages[0].fwd_peak_allocated_mem - off.stages[0].fwd_peak_allocated_mem).value,
            on.stages[0].fwd_activation_cache_per_micro_batch.value);
}

TEST(ExpertCommOverlap, InterleavedStagesHideTheirExchange) {
  // Qwen3-30B over pp 2 (vp 2), ep 4: combined steps shorten the pipeline, and every stage's
  // breakdown still adds up to the iteration.
  strategy_spec s = combined_job(8, false);
  s.pp_size = 2;
  s.interleaving_size = 2;
  s.ep_size = 4;
  const auto off = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  s.overlap_moe_expert_parallel_comm = s.delay_wgrad_compute = true;
  const auto on = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  EXPECT_LT(on.cost.duration_time_per_iter.value, off.cost.duration_time_per_iter.value);
  for (std::size_t i = 0; i < on.stage_count; ++i) {
    const time_breakdown& b = on.stages[i].breakdown;
    EXPECT_GT(on.stages[i].hidden_comm_time.value, 0.0) << i;
    const double sum = (b.fwd_compute_time + b.bwd_compute_time + b.recompute_time + b.intra_exposed_time +
                        b.inter_exposed_time + b.bubble_time + b.dp_exposed_time + b.optim_time + b.straggler_time)
                           .value;
    EXPECT_NEAR(sum, on.cost.duration_time_per_iter.value, 1e-9 * sum) << i;
  }
}

TEST(ExpertCommOverlap, TraceShowsEveryPassOnceWithoutOverlapOnAThread) {
  const auto t = trace_iteration(catalogue::qwen3_30b_a3b, combined_job(4, true), catalogue::h200);
  int forwards = 0, backwards = 0;
  std::vector<std::pair<double, double>> passes;
  for (const auto& sp : t.spans) {
    if (sp.stream != trace_stream::passes) continue;
    forwards += sp.name == "forward" ? 1 : 0;
    backwards += sp.name == "backward" ? 1 : 0;
    passes.push_back({sp.start, sp.end});
  }
  EXPECT_EQ(forwards, 4);
  EXPECT_EQ(backwards, 4);
  std::sort(passes.begin(), passes.end());
  for (std::size_t i = 1; i < passes.size(); ++i) EXPECT_GE(passes[i].first, passes[i - 1].second - 1e-12) << i;
  double last = 0;
  for (const auto& sp : t.spans) last = sp.end > last ? sp.end : last;
  EXPECT_NEAR(last, t.estimate.cost.duration_time_per_iter.value, 1e-9);
}

TEST(ExpertCommOverlap, RefusesWhatMegatronRefuses) {
  strategy_spec s = combined_job(4, true);
  s.ep_size = 1;
  EXPECT_NE(refusal(s).find("strategy.overlap_moe_expert_parallel_comm=true needs expert parallelism"),
            std::string::npos);
  s = combined_job(4, true);
  s.pp_size = 2;
  s.ep_size = 4;
  EXPECT_NE(refusal(s).find("needs the interleaved schedule"), std::string::npos);
  s = combined_job(4, true);
  s.moe_dispatcher_policy = dispatcher_kind::allgather;
  EXPECT_NE(refusal(s).find("\"all2all\" or \"flex\""), std::string::npos);
  s = combined_job(4, true);
  s.dtype = dtype_kind::fp32;
  EXPECT_NE(refusal(s).find("bf16 or fp16"), std::string::npos);
  s = combined_job(4, true);
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::full_block;
  s.recompute_layer_num = 48;
  EXPECT_NE(refusal(s).find("excludes full recompute"), std::string::npos);
  s = combined_job(4, false);
  s.delay_wgrad_compute = true;
  EXPECT_NE(refusal(s).find("strategy.delay_wgrad_compute=true needs"), std::string::npos);
  EXPECT_NE(refusal(combined_job(4, true), catalogue::llama3_8b).find("needs a MoE model"), std::string::npos);
  model_spec two_mtp = catalogue::qwen3_30b_a3b;
  two_mtp.mtp_num_layers = 2;
  EXPECT_NE(refusal(combined_job(4, true), two_mtp).find("at most one MTP layer"), std::string::npos);
}

}  // namespace llmsim_test_expert_comm_overlap
