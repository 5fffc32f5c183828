// DualPipeV in the estimate: the engine's bubble against the DualPipe README's formula, the
// V-shaped stages' chunk times, the expert exchange the overlapped pairs hide, the activation
// peak walked over the order, the validation rules, and the trace.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_dualpipev_estimate {

using namespace llmsim;

namespace {
// Qwen3-30B-A3B (48 MoE layers) over pp4 ep2: 48 / 8 = 6 layers per virtual stage.
strategy_spec moe_dualpipev(std::int64_t m) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = m,
          .world_size = 8,
          .pp_size = 4,
          .ep_size = 2,
          .pipeline_schedule = pipeline_schedule_kind::dualpipev};
}
}  // namespace

TEST(DualPipeVEstimate, BubbleIsTheReadmesFormulaOnEqualPasses) {
  // DualPipe README, table "Pipeline bubbles and memory usage": DualPipeV's bubble is
  // (PP/2 - 1)(F&B + B - 3W), PP counted in DualPipe stages (2p of them on p DualPipeV ranks),
  // B the whole backward, F&B an overlapped pair. With F = B_input = W = 1 and no exchange:
  // B = 2, F&B = 3, so the bubble is (p - 1)(3 + 2 - 3) = 2(p - 1) on top of each rank's work of
  // 2 chunks x m micro-batches x (F + B) = 6m.
  for (std::int64_t p : {2, 3, 4, 8}) {
    for (std::int64_t m : {2 * p, 3 * p + 1, std::int64_t{40}}) {
      schedule_setup in;
      in.ranks = p;
      in.chunks = 2;
      in.placement = chunk_placement::v_shape;
      in.async_p2p = false;
      in.durations.assign(static_cast<std::size_t>(2 * p), {1, 1, 1, 0, 0});
      in.p2p.assign(static_cast<std::size_t>(p), 0.0);
      const double total = detail::simulate_passes(in, dualpipev_passes(p, m), m).pipe.total.value;
      EXPECT_DOUBLE_EQ(total, static_cast<double>(6 * m + 2 * (p - 1))) << "p=" << p << " m=" << m;
      // The extension for long runs gives the same answer.
      const auto lists = [&](std::int64_t k) { return dualpipev_passes(p, k); };
      EXPECT_DOUBLE_EQ(run_schedule(in, m, 1, 2 * p + 1, lists).pipe.total.value, total);
    }
  }
}

TEST(DualPipeVEstimate, SteadyPeriodExtensionEqualsTheFullSimulation) {
  // Long runs (m >= 2·trial, trial = 3(2p + 4) + 1) stop at a repeating steady phase; the answer
  // must be the full simulation's, on uneven chunks, with transfers and an expert exchange.
  for (std::int64_t p : {2, 4}) {
    const std::int64_t m = 96;
    schedule_setup in;
    in.ranks = p;
    in.chunks = 2;
    in.placement = chunk_placement::v_shape;
    in.async_p2p = false;
    for (std::int64_t k = 0; k < 2 * p; ++k) {
      const double x = 1.0 + 0.125 * static_cast<double>(k % 3);
      in.durations.push_back({x, 1.5 * x, 0.75 * x, 0.4 * x, 0.5 * x});
    }
    in.p2p.assign(static_cast<std::size_t>(p), 0.05);
    const double full = detail::simulate_passes(in, dualpipev_passes(p, m), m).pipe.total.value;
    const auto lists = [&](std::int64_t k) { return dualpipev_passes(p, k); };
    EXPECT_NEAR(run_schedule(in, m, 1, 2 * p + 1, lists).pipe.total.value, full, 1e-12 * full) << p;
  }
}

TEST(DualPipeVEstimate, ChunkTimesAddUpToTheStageAndPairsHideTheExchange) {
  const strategy_spec s = moe_dualpipev(16);
  const auto r = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  ASSERT_EQ(r.stage_count, 3U);  // rank 0 (embedding + head), ranks 1-2, rank 3 (the V's turn)
  EXPECT_TRUE(r.stages[0].layout.embedding && r.stages[0].layout.head);
  double params = 0;
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const stage_result& st = r.stages[i];
    SCOPED_TRACE(i);
    // A rank holds 1/ep of the routed experts.
    params += (st.params + st.expert_params * (2 - 1)) * static_cast<double>(st.rank_count);
    const auto& c = st.v_chunks;
    const double fwd = (st.fwd_compute_time + st.fwd_tp_comm_time).value;
    const double bwd =
        (st.bwd_compute_time + st.recompute_time + st.bwd_tp_comm_time + st.recompute_tp_comm_time).value;
    EXPECT_NEAR(c[0].forward + c[1].forward, fwd, 1e-12 * fwd);
    EXPECT_NEAR(c[0].backward_input + c[0].backward_weight + c[1].backward_input + c[1].backward_weight, bwd,
                1e-12 * bwd);
    EXPECT_NEAR(c[0].forward_comm + c[1].forward_comm, st.fwd_a2a_time.value, 1e-12 * fwd);
    EXPECT_GT(st.fwd_a2a_time.value, 0.0);
  }
  EXPECT_NEAR(params, r.param_count, 1e-9 * r.param_count);
  // A middle rank's two chunks are the same 6 MoE layers, so every pair hides
  // min(exchange, compute) of one forward + one backward. Rank 1 of p = 4, m = 16 runs
  // 2(m - 2p + r + 1) + (p - r - 1) = 2·10 + 2 = 22 pairs (phases 4 and 5 of dualpipev_order).
  const stage_result& mid = r.stages[1];
  ASSERT_EQ(mid.rank, 1);
  const chunk_durations& d = mid.v_chunks[0];
  const double comm = d.forward_comm + d.backward_comm;
  const double compute = d.forward + d.backward_input + d.backward_weight - comm;
  EXPECT_NEAR(mid.hidden_comm_time.value, 22 * (comm < compute ? comm : compute), 1e-9 * mid.hidden_comm_time.value);
  // Every stage's breakdown adds up to the iteration, with a real (unclamped) bubble.
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const time_breakdown& b = r.stages[i].breakdown;
    const double sum = (b.fwd_compute_time + b.bwd_compute_time + b.recompute_time + b.intra_exposed_time +
                        b.inter_exposed_time + b.bubble_time + b.dp_exposed_time + b.optim_time + b.straggler_time)
                           .value;
    EXPECT_NEAR(sum, r.cost.duration_time_per_iter.value, 1e-9 * sum) << i;
    EXPECT_GT(b.bubble_time.value, 0.0) << i;
  }
  // The breakdown shows the exchange left exposed.
  const double exposed = (mid.fwd_tp_comm_time + mid.bwd_tp_comm_time).value * 16 - mid.hidden_comm_time.value;
  EXPECT_NEAR(mid.breakdown.intra_exposed_time.value, exposed, 1e-9 * exposed);
}

TEST(DualPipeVEstimate, ActivationPeakHoldsTwoPPlusOneChunkSets) {
  // DualPipe README: DualPipeV holds PP + 1 activation units per device, PP = 2p chunk sets:
  // 2p + 1 sets, reached at the first forward of the steady phase — 2p sets held and the
  // forward's own transient on top. A middle rank's chunks are equal (half the stage's cache each).
  const strategy_spec s = moe_dualpipev(16);
  const auto r = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  const stage_result& mid = r.stages[1];
  const double half = static_cast<double>(mid.fwd_activation_cache_per_micro_batch.value) / 2;
  EXPECT_DOUBLE_EQ(mid.chunk_held[0], mid.chunk_held[1]);
  EXPECT_NEAR(mid.chunk_held[0], half, 1.0);
  const double expected =
      static_cast<double>(mid.model_mem.value) + 8 * half + static_cast<double>(mid.fwd_transient_mem.value);
  EXPECT_NEAR(static_cast<double>(mid.fwd_peak_allocated_mem.value), expected, 8.0);
  EXPECT_EQ(mid.micro_batches_in_flight, 5);  // 9 half-micro-batch sets
}

TEST(DualPipeVEstimate, FasterThan1F1BOnTheSameJob) {
  strategy_spec s = moe_dualpipev(16);
  const auto v = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  s.pipeline_schedule = std::nullopt;
  const auto plain = estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  EXPECT_LT(v.cost.pipeline_time.value, plain.cost.pipeline_time.value);
  EXPECT_LT(v.cost.breakdown_result.bubble_time.value, plain.cost.breakdown_result.bubble_time.value);
}

TEST(DualPipeVEstimate, RefusesWhatItCannotPlace) {
  strategy_spec s = moe_dualpipev(6);  // m < 2p
  try {
    (void)estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200);
    FAIL() << "accepted micro_batch_num < 2 pp_size";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.micro_batch_num"), std::string::npos) << e.what();
  }
  s = moe_dualpipev(16);
  s.pp_size = 5;  // 48 layers over 10 virtual stages
  s.world_size = 10;
  EXPECT_THROW((void)estimate(catalogue::qwen3_30b_a3b, s, catalogue::h200), config_error);
}

TEST(DualPipeVEstimate, TraceShowsEveryPassOnceAndNoOverlapOnAThread) {
  const strategy_spec s = moe_dualpipev(8);
  const auto t = trace_iteration(catalogue::qwen3_30b_a3b, s, catalogue::h200);
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int> forwards, backwards;
  std::map<std::int64_t, std::vector<std::pair<double, double>>> passes;
  for (const auto& sp : t.spans) {
    if (sp.stream != trace_stream::passes) continue;
    if (sp.name == "forward") ++forwards[{sp.rank, sp.micro_batch, sp.chunk}];
    if (sp.name == "backward" || sp.name == "backward input") ++backwards[{sp.rank, sp.micro_batch, sp.chunk}];
    passes[sp.rank].push_back({sp.start, sp.end});
  }
  EXPECT_EQ(forwards.size(), 4U * 8U * 2U);
  EXPECT_EQ(backwards.size(), 4U * 8U * 2U);
  for (const auto& [k, n] : forwards) EXPECT_EQ(n, 1);
  for (const auto& [k, n] : backwards) EXPECT_EQ(n, 1);
  for (auto& [rank, v] : passes) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].first, v[i - 1].second - 1e-12) << rank;
  }
  // Each stage's memory track peaks at the reported peak of its lowest rank.
  std::map<std::int64_t, double> top;
  for (const auto& x : t.memory) top[x.rank] = x.bytes > top[x.rank] ? x.bytes : top[x.rank];
  for (std::size_t i = 0; i < t.estimate.stage_count; ++i) {
    const stage_result& st = t.estimate.stages[i];
    EXPECT_DOUBLE_EQ(top[st.rank], static_cast<double>(st.peak_mem.value)) << st.rank;
  }
  // The last span ends at the iteration time.
  double last = 0;
  for (const auto& sp : t.spans) last = sp.end > last ? sp.end : last;
  EXPECT_NEAR(last, t.estimate.cost.duration_time_per_iter.value, 1e-9);
}

}  // namespace llmsim_test_dualpipev_estimate
