// Megatron-LM's --overlap-moe-expert-parallel-comm (the combined 1F1B step): the pass order with
// its extra warm-up forward, the two-stream layer step against hand timelines, the iteration
// against the 1F1B it replaces, the layer split of the priced leaves, the memory of a combined
// step (one layer more than 1F1B's), and Megatron's refusals.
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

/// Qwen3-30B-A3B on one H200 node over `pp` stages of `vp` chunks and ep `ep`, m micro-batches:
/// the estimate without the overlap, then with it.
std::pair<estimate_result, estimate_result> without_and_with(std::int64_t m, std::int64_t pp, std::int64_t vp,
                                                             std::int64_t ep) {
  strategy_spec s = combined_job(m, false);
  s.pp_size = pp;
  s.interleaving_size = vp;
  s.ep_size = ep;
  auto off = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  s.overlap_moe_expert_parallel_comm = s.delay_wgrad_compute = true;
  return {std::move(off), estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200)};
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
  // m = p: today's Megatron caps the warm-up at the total (no "all warm-up" rule): p = 4, v = 2,
  // m = g = 4 gives 11, 9, 7, 5 capped at 8, so ranks 2 and 3 run 1 and 3 combined steps.
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 0, true), 8);
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 2, true), 7);
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 3, true), 5);
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

namespace {
/// The makespan of `n` combined steps of the same layers from idle streams.
double steps(const layer_steps& f, const layer_steps& b, int n) {
  detail::combined_streams t;
  for (int i = 0; i < n; ++i) detail::combined_layer_step(t, f, b);
  return t.end();
}
}  // namespace

TEST(ExpertCommOverlap, LayerStepFollowsTheTwoStreams) {
  // f: attention 4, dispatch 1, MLP 3, combine 1; b: combine 2, MLP input grads 5, weight grads 2,
  // dispatch 3, attention 6. By hand:
  //   comp: attn_f 0-4 | mlp_b 4-9, wgrad 9-11, mlp_f 11-14 | attn_b 14-20
  //   comm: comb_b 0-2 | disp_f 4-5, disp_b 9-12 | comb_f 14-15     -> 20 (the computation)
  layer_steps f{.attn_fwd = 4, .dispatch_fwd = 1, .mlp_fwd = 3, .combine_fwd = 1};
  layer_steps b{.combine_bwd = 2, .mlp_bwd = 5, .mlp_wgrad = 2, .dispatch_bwd = 3, .attn_bwd = 6};
  EXPECT_DOUBLE_EQ(steps(f, b, 1), 20);
  // A dispatch of 10: disp_f 4-14, mlp_f 14-17 after it, disp_b 14-17, attn_b 17-23 -> 23.
  f.dispatch_fwd = 10;
  EXPECT_DOUBLE_EQ(steps(f, b, 1), 23);
  // The combine node's computation (unpermutation, residual: post_f 2, post_b 1) shares the
  // computation stream's SMs: comp post_b 0-1, attn_f 1-5, mlp_b 5-10, wgrad 10-12, mlp_f 15-18
  // (after disp_f 5-15), attn_b 18-24, post_f 24-26; comm comb_b 1-3, disp_b 15-18, comb_f
  // 18-19 -> 26: the 39 of both passes in turn less 13, at most the 16 of exchanges.
  f.post_fwd = 2;
  b.post_bwd = 1;
  EXPECT_DOUBLE_EQ(steps(f, b, 1), 26);
  EXPECT_DOUBLE_EQ(f.forward() + b.backward(), 39);
}

TEST(ExpertCommOverlap, NextCombineBackwardRunsBesideTheAttentionWeightGradients) {
  // f: attention 1, dispatch 1, MLP 3, combine 1; b: combine 4, MLP 5, dispatch 1, attention
  // input grads 2, attention weight grads 3. One layer: comb_b 0-4, attn_f 0-1, mlp_b 4-9,
  // disp_f 4-5, disp_b 9-10, mlp_f 9-12, comb_f 12-13, attn_b 12-14, attn_w 14-17 -> 17.
  // The second layer's combine backward waits for the first's input gradients only (14-18, beside
  // attn_w), its attention forward for the stream (17-18): mlp_b 18-23, disp_f 18-19, disp_b
  // 23-24, mlp_f 23-26, comb_f 26-27, attn_b 26-28, attn_w 28-31 -> 31, not 2 x 17.
  const layer_steps f{.attn_fwd = 1, .dispatch_fwd = 1, .mlp_fwd = 3, .combine_fwd = 1};
  const layer_steps b{.combine_bwd = 4, .mlp_bwd = 5, .dispatch_bwd = 1, .attn_bwd = 2, .attn_wgrad = 3};
  EXPECT_DOUBLE_EQ(steps(f, b, 1), 17);
  EXPECT_DOUBLE_EQ(steps(f, b, 2), 31);
  // Third: comb_b 28-32, attn_f 31-32, mlp_b 32-37, disp_f 32-33, disp_b 37-38, mlp_f 37-40,
  // comb_f 40-41, attn_b 40-42, attn_w 42-45 -> 45. Two chunks of 3 such layers and 0.5 s of
  // other work each: the steps, then the rest in turn.
  EXPECT_DOUBLE_EQ(steps(f, b, 3), 45);
  // Attention input gradients of 0.5: attn_b 12-12.5 ends before comb_f (12-13), so 0.5 of the
  // weight gradients fill the wait, post_f ends at 13 and 2.5 stay pending -> 15.5.
  layer_steps quick = b;
  quick.attn_bwd = 0.5;
  EXPECT_DOUBLE_EQ(steps(f, quick, 1), 15.5);
  chunk_durations cf{.forward = 3 * f.forward() + 0.5, .layers = {{{f, 3}}}, .layer_run_count = 1};
  chunk_durations cb{.backward_input = 3 * b.backward() + 0.5, .layers = {{{b, 3}}}, .layer_run_count = 1};
  EXPECT_DOUBLE_EQ(detail::overlapped_pair_time(cf, pass_type::forward, cb, pass_type::backward), 46);
  // A backward chunk without layers (say, the loss alone) hides nothing: each forward layer's
  // exchanges stay exposed (6 each), then the backward: 18 + 0.5 + 7.
  const chunk_durations loss{.backward_input = 7, .backward_comm = 2};
  EXPECT_DOUBLE_EQ(detail::overlapped_pair_time(cf, pass_type::forward, loss, pass_type::backward), 25.5);
}

TEST(ExpertCommOverlap, FractionalLayersRunAsScaledSteps) {
  // 2.5 layers a side (a stage split evenly): two whole steps of the first hand timeline (20 each:
  // the second from 20 to 40), then half a layer each: comb_b 40-41, attn_f 40-42, mlp_b
  // 42-44.5, disp_f 42-42.5, disp_b 44.5-46, wgrad 44.5-45.5, mlp_f 45.5-47, comb_f 47-47.5,
  // attn_b 47-50 -> 50.
  const layer_steps f{.attn_fwd = 4, .dispatch_fwd = 1, .mlp_fwd = 3, .combine_fwd = 1};
  const layer_steps b{.combine_bwd = 2, .mlp_bwd = 5, .mlp_wgrad = 2, .dispatch_bwd = 3, .attn_bwd = 6};
  const chunk_durations cf{.forward = 2.5 * f.forward(), .layers = {{{f, 2.5}}}, .layer_run_count = 1};
  const chunk_durations cb{.backward_input = 2.5 * b.backward(), .layers = {{{b, 2.5}}}, .layer_run_count = 1};
  EXPECT_DOUBLE_EQ(detail::overlapped_pair_time(cf, pass_type::forward, cb, pass_type::backward), 50);
}

TEST(ExpertCommOverlap, PipelineOfOneStageIsFirstForwardPairsLastBackward) {
  // One rank, one chunk of one layer: F = 9 and B = 18 (the first hand timeline), so a combined
  // step takes 20; m = 3: 9 + 2 x 20 + 18 = 67 against 3 x 27 = 81 in turn.
  const layer_steps layer{.attn_fwd = 4,
                          .dispatch_fwd = 1,
                          .mlp_fwd = 3,
                          .combine_fwd = 1,
                          .combine_bwd = 2,
                          .mlp_bwd = 5,
                          .mlp_wgrad = 2,
                          .dispatch_bwd = 3,
                          .attn_bwd = 6};
  schedule_setup in;
  in.ranks = 1;
  in.chunks = 1;
  in.durations = {{.forward = 9, .backward_input = 18, .layers = {{{layer, 1}}}, .layer_run_count = 1}};
  in.p2p = {0.0};
  EXPECT_DOUBLE_EQ(simulate_interleaved_setup(in, 3, 1, nullptr, true).total.value, 67);
  EXPECT_DOUBLE_EQ(simulate_interleaved_setup(in, 3, 1, nullptr, false).total.value, 81);
}

TEST(ExpertCommOverlap, SteadyPeriodExtensionEqualsTheFullSimulation) {
  // Long runs stop at a repeating steady phase; with combined steps the answer must still be the
  // full simulation's (uneven chunks, transfers).
  const layer_steps layer{.attn_fwd = 0.4,
                          .dispatch_fwd = 0.3,
                          .mlp_fwd = 0.5,
                          .combine_fwd = 0.3,
                          .combine_bwd = 0.3,
                          .mlp_bwd = 0.6,
                          .mlp_wgrad = 0.4,
                          .dispatch_bwd = 0.3,
                          .attn_bwd = 0.5,
                          .attn_wgrad = 0.3};
  for (std::int64_t p : {1, 2, 4}) {
    const std::int64_t v = p == 1 ? 1 : 2, m = 96;
    schedule_setup in;
    in.ranks = p;
    in.chunks = v;
    for (std::int64_t k = 0; k < p * v; ++k) {
      const double n = 2.0 + static_cast<double>(k % 3);
      in.durations.push_back({.forward = n * layer.forward() + 0.1,
                              .backward_input = n * layer.backward() + 0.2,
                              .layers = {{{layer, n}}},
                              .layer_run_count = 1});
    }
    in.p2p.assign(static_cast<std::size_t>(p), 0.05);
    std::vector<pipeline_event> events;
    const double full = simulate_interleaved_setup(in, m, p, &events, true).total.value;
    EXPECT_NEAR(simulate_interleaved_setup(in, m, p, nullptr, true).total.value, full, 1e-9 * full) << p;
  }
}

TEST(ExpertCommOverlap, LayerSplitHoldsEveryLayersTime) {
  const auto r = estimate(catalogue::qwen3_30b_a3b, combined_job(4, true), catalogue::h200);
  ASSERT_EQ(r.stage_count, 1U);
  const stage_result& st = r.stages[0];
  double layers = 0, fwd = 0, bwd = 0, dispatch = 0, wgrad = 0;
  for (std::size_t i = 0; i < st.layer_run_count; ++i) {
    const layer_run& run = st.layer_runs[i];
    layers += run.count;
    fwd += run.count * run.steps.forward();
    bwd += run.count * run.steps.backward();
    dispatch += run.count * run.steps.dispatch_fwd;
    wgrad += run.count * (run.steps.mlp_wgrad + run.steps.attn_wgrad);
    EXPECT_GT(run.steps.mlp_fwd, 0.0);
  }
  EXPECT_DOUBLE_EQ(layers, 48);
  // The layers are all but the embedding, the head and the loss; the dispatch is part of the
  // exchange; the weight gradients set apart are the layers' (delay_wgrad_compute).
  const double stage_fwd = (st.fwd_compute_time + st.fwd_tp_comm_time).value;
  const double stage_bwd = (st.bwd_compute_time + st.bwd_tp_comm_time + st.recompute_time).value;
  EXPECT_LT(fwd, stage_fwd);
  EXPECT_GT(fwd, 0.8 * stage_fwd);
  EXPECT_LT(bwd, stage_bwd);
  EXPECT_GT(dispatch, 0.0);
  EXPECT_LT(dispatch, st.fwd_a2a_time.value);
  EXPECT_GT(wgrad, 0.0);
  EXPECT_LT(wgrad, st.bwd_weight_time.value);
  // Without delay_wgrad_compute the weight gradients stay in their backward pieces.
  strategy_spec s = combined_job(4, true);
  s.delay_wgrad_compute = false;
  const auto plain = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  EXPECT_EQ(plain.stages[0].layer_runs[0].steps.mlp_wgrad, 0.0);
  EXPECT_EQ(plain.stages[0].layer_runs[0].steps.attn_wgrad, 0.0);
  EXPECT_NEAR(plain.stages[0].layer_runs[0].steps.backward(), st.layer_runs[0].steps.backward(), 1e-15);
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
  // One layer more at the peak: the combined step's forward fills its layers as its backward frees
  // the other micro-batch's, one by one. One decoder layer's bytes: the stage of 48 (all MoE) layers
  // less the same stage of 47 (the embedding and the loss are not layers of the step).
  EXPECT_EQ(off.stages[0].micro_batches_in_flight, 1);
  EXPECT_EQ(on.stages[0].micro_batches_in_flight, 1);
  model_spec shorter = catalogue::qwen3_30b_a3b;
  shorter.layer_num = 47;
  const auto fewer = estimate(shorter, combined_job(4, true), catalogue::h200);
  const double layer = static_cast<double>(
      (on.stages[0].fwd_activation_cache_per_micro_batch - fewer.stages[0].fwd_activation_cache_per_micro_batch).value);
  EXPECT_NEAR(static_cast<double>((on.stages[0].fwd_peak_allocated_mem - off.stages[0].fwd_peak_allocated_mem).value),
              layer, 1.0);
}

TEST(ExpertCommOverlap, InterleavedStagesHideTheirExchange) {
  // Qwen3-30B over pp 2 (vp 2), ep 4: combined steps shorten the pipeline, and every stage's
  // breakdown still adds up to the iteration.
  const auto [off, on] = without_and_with(8, 2, 2, 4);
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

TEST(ExpertCommOverlap, MicroBatchesEqualToStagesStillCombine) {
  // p = 4, v = 2, m = 4 (g = 4): the last rank warms up (3 - 3)·2 + 4 = 4 chunk-forwards and holds
  // the 4 others while the fifth runs (3 micro-batches); combined, one more warm-up forward (5)
  // and 3 combined steps (8 - 5), holding the 4 others and, in a step, one more layer: the peak
  // grows by one decoder layer (Qwen3-30B-A3B, 48 layers over 4 stages: a middle stage's 12 layers
  // / 12; the last stage's loss is not a layer of the step).
  const auto [off, on] = without_and_with(4, 4, 2, 2);
  const auto last = [](const estimate_result& r) -> const stage_result& {
    for (std::size_t i = 0; i < r.stage_count; ++i)
      if (r.stages[i].rank == 3) return r.stages[i];
    return r.stages[0];
  };
  ASSERT_EQ(last(on).rank, 3);
  EXPECT_EQ(last(off).micro_batches_in_flight, 3);
  EXPECT_EQ(last(on).micro_batches_in_flight, 3);
  EXPECT_GT(last(on).hidden_comm_time.value, 0.0);
  const auto gb = [](bytes b) { return static_cast<double>(b.value) / 1e9; };
  const auto middle = [](const estimate_result& r) -> const stage_result& { return *r.stage(stage_kind::middle); };
  EXPECT_NEAR(gb(last(on).peak_mem) - gb(last(off).peak_mem), gb(middle(off).fwd_activation_cache_per_micro_batch) / 12,
              1e-6);
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
  s = combined_job(4, true);
  s.enable_recompute = true;
  s.recompute_granularity = recompute_kind::mlp_only;
  s.recompute_layer_num = 1;
  EXPECT_NE(refusal(s).find("\"mlp_only\""), std::string::npos);
  EXPECT_NE(refusal(combined_job(4, true), catalogue::nemotron_3_nano_30b_a3b).find("hybrid models"),
            std::string::npos);
  model_spec two_mtp = catalogue::qwen3_30b_a3b;
  two_mtp.mtp_num_layers = 2;
  EXPECT_NE(refusal(combined_job(4, true), two_mtp).find("at most one MTP layer"), std::string::npos);
}

}  // namespace llmsim_test_expert_comm_overlap
