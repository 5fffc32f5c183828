// Pipeline schedules against the papers' exact bubble formulas and timelines drawn by hand.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace llmsim;

TEST(Schedules, InterleavedMatchesNarayananBubbleOnUniformStages) {
  // Narayanan et al. 2021 §2.2.2: with v chunks per rank the iteration of m micro-batches on
  // uniform stages (forward f, backward b per micro-batch, free transfers) takes
  // m (f + b) + (p - 1)(f + b) / v.
  for (std::int64_t p : {2, 4, 8}) {
    for (std::int64_t v : {2, 3, 4}) {
      for (std::int64_t m : {p, 2 * p, 4 * p}) {
        const std::vector<stage_timing> t(static_cast<std::size_t>(p),
                                          stage_timing{seconds{1.0}, seconds{2.0}, seconds{}});
        const auto r = simulate_interleaved(t, v, m, p, true);
        EXPECT_NEAR(r.total.value,
                    static_cast<double>(m) * 3.0 + static_cast<double>(p - 1) * 3.0 / static_cast<double>(v), 1e-12)
            << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

TEST(Schedules, InterleavedFollowsMegatronsOrderOnADrawnTimeline) {
  // p = 2 ranks, v = 2 chunks, m = 4 micro-batches, g = 2; a chunk-forward takes 0.5, a
  // chunk-backward 1.0; virtual stage 0 = r0 c0, 1 = r1 c0, 2 = r0 c1, 3 = r1 c1. Schedule
  // table: (mb 0, c0) (1, c0) (0, c1) (1, c1) (2, c0) (3, c0) (2, c1) (3, c1). Warm-up: r0 4
  // forwards, r1 2. F(mb, vs) / B(mb, vs):
  //   r0: F0.0 0-.5  F1.0 .5-1  F0.2 1-1.5  F1.2 1.5-2  F2.0 2-2.5  B0.2 3-4  F3.0 4-4.5  B1.2 4.5-5.5
  //       F2.2 5.5-6  B0.0 6-7  F3.2 7-7.5  B1.0 7.5-8.5  B2.2 9-10  B3.2 10.5-11.5  B2.0 11.5-12.5  B3.0 12.5-13.5
  //   r1: F0.1 .5-1  F1.1 1-1.5  F0.3 1.5-2  B0.3 2-3  F1.3 3-3.5  B1.3 3.5-4.5  F2.1 4.5-5  B0.1 5-6
  //       F3.1 6-6.5  B1.1 6.5-7.5  F2.3 7.5-8  B2.3 8-9  F3.3 9-9.5  B3.3 9.5-10.5  B2.1 10.5-11.5  B3.1 11.5-12.5
  const std::vector<stage_timing> t(2, stage_timing{seconds{1.0}, seconds{2.0}, seconds{}});
  EXPECT_EQ(schedule_table_entry(5, 2, 4, 2).micro_batch, 3);
  EXPECT_EQ(schedule_table_entry(6, 2, 4, 2).chunk, 1);
  EXPECT_EQ(interleaved_warmup(2, 2, 4, 2, 0), 4);
  EXPECT_EQ(interleaved_warmup(2, 2, 4, 2, 1), 2);
  const auto r = simulate_interleaved(t, 2, 4, 2, true);
  EXPECT_DOUBLE_EQ(r.finish[0].value, 13.5);
  EXPECT_DOUBLE_EQ(r.finish[1].value, 12.5);
  EXPECT_DOUBLE_EQ(r.total.value, 13.5);
  // Megatron warms up everything when m = p.
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 3), 8);
}

TEST(Schedules, InterleavedTransfersCostLessWhenOverlapped) {
  // The same timeline with a transfer of 0.25 between ranks: every cross-rank dependency waits
  // 0.25 more; a blocking sender also loses 0.25 per send. Overlapped is never slower.
  const std::vector<stage_timing> t(2, stage_timing{seconds{1.0}, seconds{2.0}, seconds{0.25}});
  const auto async = simulate_interleaved(t, 2, 4, 2, true);
  const auto sync = simulate_interleaved(t, 2, 4, 2, false);
  EXPECT_GT(async.total.value, 13.5);
  EXPECT_GE(sync.total.value, async.total.value);
  // Rank 1 sends after 12 of its 16 chunk-passes (4 chunk-0 forwards to stage 2, 4 chunk-1 and 4
  // chunk-0 backwards to stages 2 and 0; chunk-1 forwards end the pipeline): a blocking sender is
  // busy 4 x 0.5 + 4 x 0.5 + 8 x 1.0 = 12 computing plus 12 x 0.25 sending.
  EXPECT_GE(sync.finish[1].value, 12 + 12 * 0.25);
}

TEST(Schedules, EstimateUsesTheSimulatedInterleavedSchedule) {
  // Llama 3 8B, tp4 pp4 v2, 16 micro-batches: the pipeline time is the simulation's over the
  // stages' own timings (first stage with the embedding, last with the LM head).
  strategy_spec s{.seq_len = 4096,
                  .micro_batch_size = 1,
                  .micro_batch_num = 16,
                  .world_size = 16,
                  .tp_size = 4,
                  .pp_size = 4,
                  .interleaving_size = 2};
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  std::vector<stage_timing> t;
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const auto& st = rank == 0 ? r.stages[0] : rank == 3 ? r.stages[2] : r.stages[1];
    t.push_back({st.fwd_compute_time + st.fwd_tp_comm_time, st.bwd_compute_time + st.bwd_tp_comm_time,
                 r.cost.comm_result.p2p_time_per_transfer});
  }
  const auto sim = simulate_interleaved(t, 2, 16, 4, true);
  EXPECT_EQ(r.cost.pipeline_time.value / sim.total.value > 1.0, r.cost.breakdown_result.straggler_time.value > 0);
  EXPECT_NEAR(r.cost.pipeline_time.value - r.cost.breakdown_result.straggler_time.value, sim.total.value, 1e-12);
}
