// Pipeline schedules against the papers' exact bubble formulas and timelines drawn by hand.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_schedules {

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
  // m = p as any other m (Megatron-LM since 4295be1a6c): (p - r - 1)·2 + (v - 1)·g capped at m·v:
  // p = 4, v = 2, g = 4: the last rank 0 + 4 = 4 of 8, the first 6 + 4 = 10 -> 8.
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 3), 4);
  EXPECT_EQ(interleaved_warmup(4, 2, 4, 4, 0), 8);
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

namespace {
/// p ranks of one chunk with forward f, input-gradient backward b and weight-gradient backward w.
schedule_setup uniform_setup(std::int64_t p, double f, double b, double w, double x = 0) {
  schedule_setup in;
  in.ranks = p;
  for (std::int64_t r = 0; r < p; ++r) {
    in.durations.push_back({f, b, w, 0, 0});
    in.p2p.push_back(x);
  }
  return in;
}
}  // namespace

TEST(Schedules, ZbH1FollowsTheDrawnTimeline) {
  // p = 4, m = 8, F = B = W = 1, free transfers (Qi et al. 2024, Figure 3 top). Rank r: p - r - 1
  // warm-up forwards, then per micro-batch k: F (while any remain), B_k, and W_{k-r} from k = r.
  // Drawn by hand: F of stage r runs after F of stage r - 1; B of stage r after B of r + 1 (rank 3
  // right after its F); each rank one pass at a time.
  //   t:  0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26
  //   r0: F0 F1 F2 F3 .  .  .  B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7
  //   r1: .  F0 F1 F2 .  .  B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7
  //   r2: .  .  F0 F1 .  B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7
  //   r3: .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7
  const char* drawn[4] = {"F0 F1 F2 F3 .  .  .  B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7",
                          ".  F0 F1 F2 .  .  B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7",
                          ".  .  F0 F1 .  B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7",
                          ".  .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7"};
  std::vector<pipeline_event> events;
  const auto r = simulate_zb_h1(uniform_setup(4, 1, 1, 1), 8, &events);
  EXPECT_EQ(events.size(), 4U * 8 * 3);
  for (const pipeline_event& e : events) {
    const char letter = e.what == pipeline_event::kind::forward          ? 'F'
                        : e.what == pipeline_event::kind::backward_input ? 'B'
                                                                         : 'W';
    const auto slot = static_cast<std::size_t>(e.start) * 3;
    ASSERT_LT(slot + 1, std::string_view(drawn[e.rank]).size());
    EXPECT_EQ(drawn[e.rank][slot], letter) << "rank " << e.rank << " at " << e.start;
    EXPECT_EQ(drawn[e.rank][slot + 1], static_cast<char>('0' + e.micro_batch))
        << "rank " << e.rank << " at " << e.start;
    EXPECT_DOUBLE_EQ(e.end, e.start + 1);
  }
  EXPECT_DOUBLE_EQ(r.pipe.total.value, 27);
}

TEST(Schedules, ZbH1BubbleIsAThirdOf1F1BsOnEqualStages) {
  // Qi et al. 2024 §2.1: with T_F = T_B = T_W the ZB-H1 bubble is (p - 1)(T_F + T_B - T_W), 1F1B's
  // (p - 1)(T_F + T_B + T_W) with the whole backward B + W; every rank computes m(T_F + T_B + T_W).
  for (std::int64_t p : {2, 4, 8}) {
    for (std::int64_t m : {p, 2 * p, 5 * p}) {
      for (const double t : {1.0, 0.25}) {
        const schedule_setup in = uniform_setup(p, t, t, t);
        const double work = static_cast<double>(m) * 3 * t;
        const auto zb = simulate_zb_h1(in, m);
        EXPECT_NEAR(zb.pipe.total.value, work + static_cast<double>(p - 1) * t, 1e-12) << "p=" << p << " m=" << m;
        const auto plain = detail::simulate_passes(in, one_f_one_b_passes(p, m), m);
        EXPECT_NEAR(plain.pipe.total.value, work + static_cast<double>(p - 1) * 3 * t, 1e-12)
            << "p=" << p << " m=" << m;
      }
    }
  }
}

TEST(Schedules, ZbH1HoldsAsManyActivationsAs1F1BsFirstRank) {
  // Activations are held until W (the weight gradients need the layers' inputs): ZB-H1's rank r
  // holds its p - r - 1 warm-up forwards plus one, plus the r micro-batches whose W it postpones
  // = p on every rank (§2.1: "the same number of in-flight micro-batches" on all stages), which is
  // 1F1B's peak, on its first rank (1F1B's rank r holds p - r).
  const std::int64_t p = 6, m = 24;
  const schedule_setup in = uniform_setup(p, 1, 1, 1);
  const auto zb = simulate_zb_h1(in, m);
  const auto plain = detail::simulate_passes(in, one_f_one_b_passes(p, m), m);
  for (std::int64_t r = 0; r < p; ++r) {
    EXPECT_DOUBLE_EQ(zb.peak_held[static_cast<std::size_t>(r)], static_cast<double>(p)) << r;
    EXPECT_DOUBLE_EQ(plain.peak_held[static_cast<std::size_t>(r)], static_cast<double>(p - r)) << r;
  }
  // Weighted: each rank's set counts its own bytes.
  schedule_setup weighted = in;
  weighted.activation.assign(static_cast<std::size_t>(p), 2.5);
  EXPECT_DOUBLE_EQ(simulate_zb_h1(weighted, m).peak_held[0], 2.5 * static_cast<double>(p));
}

TEST(Schedules, SteadyPeriodExtensionEqualsTheFullSimulation) {
  // Random uneven stages and transfers: the extended result equals simulating every micro-batch,
  // for ZB-H1 and interleaved 1F1B (async and blocking senders).
  std::uint64_t state = 7;
  auto uniform = [&](double lo, double hi) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int trial = 0; trial < 24; ++trial) {
    const std::int64_t p = 2 + trial % 7;
    schedule_setup in = uniform_setup(p, 1, 1, 1, uniform(0, 0.3));
    std::vector<stage_timing> t;
    for (auto& d : in.durations) {
      d = {uniform(0.5, 3), uniform(0.5, 3), uniform(0.2, 2), 0, 0};
      t.push_back({seconds{d.forward}, seconds{d.backward_input + d.backward_weight}, seconds{in.p2p[0]}});
    }
    in.async_p2p = trial % 3 != 0;
    for (std::int64_t m : {64 * p, 256 * p}) {
      const double fast = simulate_zb_h1(in, m).pipe.total.value;
      const double full = detail::simulate_passes(in, zb_h1_passes(p, m), m).pipe.total.value;
      EXPECT_NEAR(fast, full, 1e-11 * full) << "zb p=" << p << " m=" << m << " trial=" << trial;
      const std::int64_t v = 2 + trial % 2;
      const double ifast = simulate_interleaved(t, v, m, p, in.async_p2p).total.value;
      std::vector<pipeline_event> events;  // with events: every micro-batch simulated
      const double ifull = simulate_interleaved(t, v, m, p, in.async_p2p, &events).total.value;
      EXPECT_NEAR(ifast, ifull, 1e-11 * ifull) << "interleaved p=" << p << " m=" << m << " trial=" << trial;
    }
  }
}

TEST(Schedules, EngineRunsOverlappedPairsAsDualPipeDoes) {
  // One rank, two chunks in a V (stages 0 and 1 on rank 0): F0 c0, F0 c1, then the pair
  // (F1 c0 | B0 c1) overlapped, then B0 c0, F1 c1, B1 c1, B1 c0. A forward takes 4 of which 1 is
  // all-to-all, a backward 6 of which 2: the pair takes max(3 + 4, 1 + 2) = 7 (DeepSeek-V3 §3.2.1).
  schedule_setup in;
  in.ranks = 1;
  in.chunks = 2;
  in.placement = chunk_placement::v_shape;
  in.durations.assign(2, chunk_durations{4, 6, 0, 1, 2});
  in.p2p = {0.5};
  pass_lists l;
  l.passes = {{pass_type::forward, 0, 0, false},  {pass_type::forward, 0, 1, false},  {pass_type::forward, 1, 0, true},
              {pass_type::backward, 0, 1, false}, {pass_type::backward, 0, 0, false}, {pass_type::forward, 1, 1, false},
              {pass_type::backward, 1, 1, false}, {pass_type::backward, 1, 0, false}};
  l.begin = {0, l.passes.size()};
  std::vector<pipeline_event> events;
  const auto r = detail::simulate_passes(in, l, 2, nullptr, &events);
  // 0-4 F0c0, 4-8 F0c1, 8-15 pair, 15-21 B0c0, 21-25 F1c1, 25-31 B1c1, 31-37 B1c0 (same rank: no transfer).
  EXPECT_DOUBLE_EQ(r.pipe.total.value, 37);
  ASSERT_EQ(events.size(), 8U);
  EXPECT_DOUBLE_EQ(events[2].start, 8);
  EXPECT_DOUBLE_EQ(events[3].start, 8);
  EXPECT_DOUBLE_EQ(events[3].end, 15);
  EXPECT_DOUBLE_EQ(r.peak_held[0], 3);  // F0c0, F0c1, F1c0 before the first backward frees one
}

namespace {
strategy_spec llama70b_tp8_pp4(std::int64_t m) {
  return {.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = m, .world_size = 32, .tp_size = 8, .pp_size = 4};
}
std::string refusal(const strategy_spec& s) {
  try {
    (void)estimate(catalogue::llama3_70b, s, catalogue::h100_sxm);
  } catch (const config_error& e) { return e.what(); }
  return "";
}
}  // namespace

TEST(Schedules, EstimateRunsZbH1OnTheStagesSplitBackward) {
  // The same stages under 1F1B and ZB-H1: B = backward - weight-gradient pass (+ recompute, the
  // input-gradient collectives), W = the weight-gradient GEMMs and, under sequence parallelism, the
  // re-gather of linear_qkv's and linear_fc1's input their weight gradients need (one all-gather
  // of the layer input each, the same two all-gathers the forward runs before those GEMMs). ZB-H1 shortens the pipeline (W fills
  // the cool-down), holds p micro-batches on every rank (until W) and computes the same work.
  strategy_spec s = llama70b_tp8_pp4(16);
  const auto plain = estimate(catalogue::llama3_70b, s, catalogue::h100_sxm);
  s.pipeline_schedule = pipeline_schedule_kind::zb_h1;
  const auto zb = estimate(catalogue::llama3_70b, s, catalogue::h100_sxm);
  EXPECT_LT(zb.cost.pipeline_time.value, plain.cost.pipeline_time.value);
  ASSERT_EQ(zb.stage_count, plain.stage_count);
  for (std::size_t i = 0; i < zb.stage_count; ++i) {
    const stage_result& st = zb.stages[i];
    EXPECT_GT(st.bwd_weight_time.value, 0.25 * st.bwd_compute_time.value);  // about half of the GEMMs' backward
    EXPECT_LT(st.bwd_weight_time.value, 0.75 * st.bwd_compute_time.value);
    EXPECT_EQ(st.bwd_weight_time, plain.stages[i].bwd_weight_time);
    // Forward collectives per layer: 2 all-gathers (qkv, fc1) + 2 reduce-scatters (proj, fc2) of
    // the same bytes; W re-runs the 2 all-gathers, so it holds a share of the forward's comm.
    EXPECT_GT(st.bwd_weight_comm_time.value, 0.25 * st.fwd_tp_comm_time.value);
    EXPECT_LT(st.bwd_weight_comm_time.value, 0.75 * st.fwd_tp_comm_time.value);
    EXPECT_EQ(st.micro_batches_in_flight, 4);
    EXPECT_EQ(plain.stages[i].micro_batches_in_flight, 4 - plain.stages[i].rank);
  }
  // Its schedule is the engine's on the stages' own times.
  schedule_setup in;
  in.ranks = 4;
  in.p2p.assign(4, zb.cost.comm_result.p2p_time_per_transfer.value);
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const auto& st = rank == 0 ? zb.stages[0] : rank == 3 ? zb.stages[zb.stage_count - 1] : zb.stages[1];
    in.durations.push_back({(st.fwd_compute_time + st.fwd_tp_comm_time).value,
                            (st.bwd_compute_time - st.bwd_weight_time + st.recompute_time + st.bwd_tp_comm_time -
                             st.bwd_weight_comm_time + st.recompute_tp_comm_time)
                                .value,
                            (st.bwd_weight_time + st.bwd_weight_comm_time).value, 0, 0});
  }
  const double sim = simulate_zb_h1(in, 16).pipe.total.value;
  EXPECT_NEAR(zb.cost.pipeline_time.value - zb.cost.breakdown_result.straggler_time.value, sim, 1e-12);
  // The trace shows the split backward: m B and m W spans on every rank.
  const auto t = trace_iteration(catalogue::llama3_70b, s, catalogue::h100_sxm);
  std::int64_t w = 0, b = 0;
  for (const auto& sp : t.spans) {
    w += sp.name == "backward weight" ? 1 : 0;
    b += sp.name == "backward input" ? 1 : 0;
  }
  EXPECT_EQ(w, 4 * 16);
  EXPECT_EQ(b, 4 * 16);
}

TEST(Schedules, PipelineScheduleIsCheckedAgainstInterleaving) {
  strategy_spec s = llama70b_tp8_pp4(16);
  s.pipeline_schedule = pipeline_schedule_kind::zb_h1;
  s.interleaving_size = 2;
  EXPECT_EQ(refusal(s),
            "llmsim::strategy: strategy.pipeline_schedule=\"zb_h1\" cannot run with strategy.interleaving_size=2 (it "
            "places its own model chunks; use interleaving_size=1)");
  s.pipeline_schedule = pipeline_schedule_kind::dualpipev;
  EXPECT_NE(refusal(s).find("strategy.pipeline_schedule=\"dualpipev\" cannot run with"), std::string::npos);
  s.interleaving_size = 1;
  s.pipeline_schedule = pipeline_schedule_kind::interleaved_1f1b;
  EXPECT_EQ(refusal(s),
            "llmsim::strategy: strategy.pipeline_schedule=\"interleaved_1f1b\" needs strategy.interleaving_size > 1, "
            "got 1");
  s.pipeline_schedule = pipeline_schedule_kind::dualpipev;  // 80 layers over 2·4 virtual stages, 16 >= 2·4
  EXPECT_EQ(refusal(s), "");
  // Absent: interleaving decides; named explicitly the same schedule gives the same result.
  s.pipeline_schedule = {};
  s.interleaving_size = 2;
  EXPECT_EQ(pipeline_schedule_of(s), pipeline_schedule_kind::interleaved_1f1b);
  const auto implied = estimate(catalogue::llama3_70b, s, catalogue::h100_sxm);
  s.pipeline_schedule = pipeline_schedule_kind::interleaved_1f1b;
  EXPECT_EQ(estimate(catalogue::llama3_70b, s, catalogue::h100_sxm).cost.duration_time_per_iter,
            implied.cost.duration_time_per_iter);
  // Strategy names.
  strategy_spec named{};
  ASSERT_TRUE(catalogue::parse_strategy_name("tp8_pp4_mbc16_zbh1", named));
  EXPECT_EQ(named.pipeline_schedule, pipeline_schedule_kind::zb_h1);
  ASSERT_TRUE(catalogue::parse_strategy_name("pp4_dualpipev", named));
  EXPECT_EQ(named.pipeline_schedule, pipeline_schedule_kind::dualpipev);
}

TEST(Schedules, OneFOneBFollowsTheDrawnTimeline) {
  // Plain 1F1B, p = 4, m = 8, F = 1, B = 2, free transfers, walked by hand in Megatron's order
  // (rank r: p - r - 1 warm-up forwards, then F/B alternately, then the remaining backwards):
  //   r3: F0 3-4 B0 4-6 F1 6-7 B1 7-9 F2 9-10 B2 10-12 ...            period 3: F_k 3+3k, B_k 4+3k
  //   r2: F0 2-3 F1 3-4 (wait) B0 6-8 F2 8-9 B1 9-11 F3 11-12 ...     F_k 2+3k (k >= 2), B_k 6+3k
  //   r1: F0 1-2 F1 2-3 F2 3-4 (wait) B0 8-10 F3 10-11 B1 11-13 ...   F_k 1+3k (k >= 3), B_k 8+3k
  //   r0: F0 0 F1 1 F2 2 F3 3 (wait) B0 10-12 F4 12-13 B1 13-15 ...   F_k 3k (k >= 4), B_k 10+3k
  // So F_k starts at r + k while k < p - r (warm-up and the first steady forward), else at
  // r + 3k; B_k at 4 + 2(p - 1 - r) + 3k; the last, r0's B7, ends at 31 + 2 = 33 = (m + p - 1)(F + B).
  const std::vector<stage_timing> t(4, stage_timing{1_s, 2_s, {}});
  std::vector<pipeline_event> events;
  EXPECT_EQ(simulate_1f1b_exhaustive(t, 8, &events).total, 33_s);
  int checked = 0;
  for (const pipeline_event& e : events) {
    const std::int64_t r = e.rank, k = e.micro_batch;
    if (e.what == pipeline_event::kind::forward) {
      EXPECT_DOUBLE_EQ(e.start, static_cast<double>(k < 4 - r ? r + k : r + 3 * k)) << "F" << k << " rank " << r;
      ++checked;
    } else if (e.what == pipeline_event::kind::backward) {
      EXPECT_DOUBLE_EQ(e.start, static_cast<double>(4 + 2 * (3 - r) + 3 * k)) << "B" << k << " rank " << r;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 8 * 2);
}

}  // namespace llmsim_test_schedules
