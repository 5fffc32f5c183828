// DualPipeV (DeepSeek-V3 report section 3.2.1; github deepseek-ai/DualPipe dualpipe/dualpipev.py):
// each rank's pass order against one written out by hand from the eight phases, invariants of the
// order over many pipeline sizes (every pass once, dependencies over the V runnable without
// deadlock, the activation peak of the DualPipe README's table), and the V-shaped model placement.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_dualpipev {

using namespace llmsim;

namespace {
constexpr scheduled_pass F(std::int64_t mb, std::int64_t chunk) { return {pass_type::forward, mb, chunk, false}; }
/// A forward overlapped with the backward that follows it.
constexpr scheduled_pass Fo(std::int64_t mb, std::int64_t chunk) { return {pass_type::forward, mb, chunk, true}; }
constexpr scheduled_pass B(std::int64_t mb, std::int64_t chunk) { return {pass_type::backward, mb, chunk, false}; }
constexpr scheduled_pass Bi(std::int64_t mb, std::int64_t chunk) {
  return {pass_type::backward_input, mb, chunk, false};
}
constexpr scheduled_pass W(std::int64_t mb, std::int64_t chunk) {
  return {pass_type::backward_weight, mb, chunk, false};
}

std::string show(const scheduled_pass& s) {
  const char* names[] = {"F", "B", "Bi", "W"};
  return std::string(names[static_cast<int>(s.type)]) + "(" + std::to_string(s.micro_batch) + "," +
         std::to_string(s.chunk) + ")" + (s.overlapped_with_next ? "&" : "");
}

void expect_order(std::int64_t p, std::int64_t m, std::int64_t rank, const std::vector<scheduled_pass>& expected) {
  const auto got = dualpipev_order(p, m, rank);
  ASSERT_EQ(got.size(), expected.size()) << "rank " << rank;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "rank " << rank << " entry " << i << ": got " << show(got[i]) << ", expected "
                                   << show(expected[i]);
}
}  // namespace

// p = 4 ranks, m = 8 micro-batches. X(mb, chunk); Fo: forward overlapped with the next backward;
// Bi/W: a split backward's input part and, later, its weight part (W takes the oldest pending).
// Phase sizes for rank r (down = p-r-1, up = r+1): 1: 2·down F0; 2: up × (F0 F1); 3: down × (Bi1 W1 F1);
// 4: m-2p+up × (F0&B1, F1&B0), on rank 3 the first F0, B1 not overlapped; 5: down × (B1, F1&B0);
// 6: up × (B1 B0), the last up of these 2·up backwards split; 7: down × (W, Bi0); 8: up × W.
// Micro-batch numbers just count each (pass kind, chunk) on the rank from 0.
//
// rank 0 (down 3, up 1, steady 1):
//   1: F(0,0) F(1,0) F(2,0) F(3,0) F(4,0) F(5,0)    2: F(6,0) F(0,1)
//   3: Bi(0,1) W(0,1) F(1,1)  Bi(1,1) W(1,1) F(2,1)  Bi(2,1) W(2,1) F(3,1)
//   4: F(7,0)&B(3,1)  F(4,1)&B(0,0)
//   5: B(4,1) F(5,1)&B(1,0)  B(5,1) F(6,1)&B(2,0)  B(6,1) F(7,1)&B(3,0)
//   6: B(7,1) Bi(4,0)    7: W(4,0) Bi(5,0)  W(5,0) Bi(6,0)  W(6,0) Bi(7,0)    8: W(7,0)
// rank 1 (down 2, up 2, steady 2):
//   1: F(0,0) F(1,0) F(2,0) F(3,0)    2: F(4,0) F(0,1) F(5,0) F(1,1)
//   3: Bi(0,1) W(0,1) F(2,1)  Bi(1,1) W(1,1) F(3,1)
//   4: F(6,0)&B(2,1) F(4,1)&B(0,0)  F(7,0)&B(3,1) F(5,1)&B(1,0)
//   5: B(4,1) F(6,1)&B(2,0)  B(5,1) F(7,1)&B(3,0)
//   6: B(6,1) B(4,0) Bi(7,1) Bi(5,0)    7: W(7,1) Bi(6,0)  W(5,0) Bi(7,0)    8: W(6,0) W(7,0)
// rank 2 (down 1, up 3, steady 3):
//   1: F(0,0) F(1,0)    2: F(2,0) F(0,1) F(3,0) F(1,1) F(4,0) F(2,1)    3: Bi(0,1) W(0,1) F(3,1)
//   4: F(5,0)&B(1,1) F(4,1)&B(0,0)  F(6,0)&B(2,1) F(5,1)&B(1,0)  F(7,0)&B(3,1) F(6,1)&B(2,0)
//   5: B(4,1) F(7,1)&B(3,0)
//   6: B(5,1) B(4,0) B(6,1) Bi(5,0) Bi(7,1) Bi(6,0)    7: W(5,0) Bi(7,0)    8: W(7,1) W(6,0) W(7,0)
// rank 3 (down 0, up 4, steady 4):
//   2: F(0,0) F(0,1) F(1,0) F(1,1) F(2,0) F(2,1) F(3,0) F(3,1)
//   4: F(4,0) B(0,1) F(4,1)&B(0,0)  F(5,0)&B(1,1) F(5,1)&B(1,0)  F(6,0)&B(2,1) F(6,1)&B(2,0)
//      F(7,0)&B(3,1) F(7,1)&B(3,0)
//   6: B(4,1) B(4,0) B(5,1) B(5,0) Bi(6,1) Bi(6,0) Bi(7,1) Bi(7,0)    8: W(6,1) W(6,0) W(7,1) W(7,0)
TEST(DualPipeV, OrderOfFourRanksEightMicroBatchesByHand) {
  expect_order(4, 8, 0,
               {F(0, 0), F(1, 0),  F(2, 0),  F(3, 0),  F(4, 0),  F(5, 0),  F(6, 0), F(0, 1),  Bi(0, 1), W(0, 1),
                F(1, 1), Bi(1, 1), W(1, 1),  F(2, 1),  Bi(2, 1), W(2, 1),  F(3, 1), Fo(7, 0), B(3, 1),  Fo(4, 1),
                B(0, 0), B(4, 1),  Fo(5, 1), B(1, 0),  B(5, 1),  Fo(6, 1), B(2, 0), B(6, 1),  Fo(7, 1), B(3, 0),
                B(7, 1), Bi(4, 0), W(4, 0),  Bi(5, 0), W(5, 0),  Bi(6, 0), W(6, 0), Bi(7, 0), W(7, 0)});
  expect_order(4, 8, 1,
               {F(0, 0),  F(1, 0),  F(2, 0), F(3, 0),  F(4, 0),  F(0, 1),  F(5, 0),  F(1, 1), Bi(0, 1), W(0, 1),
                F(2, 1),  Bi(1, 1), W(1, 1), F(3, 1),  Fo(6, 0), B(2, 1),  Fo(4, 1), B(0, 0), Fo(7, 0), B(3, 1),
                Fo(5, 1), B(1, 0),  B(4, 1), Fo(6, 1), B(2, 0),  B(5, 1),  Fo(7, 1), B(3, 0), B(6, 1),  B(4, 0),
                Bi(7, 1), Bi(5, 0), W(7, 1), Bi(6, 0), W(5, 0),  Bi(7, 0), W(6, 0),  W(7, 0)});
  expect_order(4, 8, 2,
               {F(0, 0),  F(1, 0),  F(2, 0), F(0, 1),  F(3, 0),  F(1, 1),  F(4, 0), F(2, 1),  Bi(0, 1), W(0, 1),
                F(3, 1),  Fo(5, 0), B(1, 1), Fo(4, 1), B(0, 0),  Fo(6, 0), B(2, 1), Fo(5, 1), B(1, 0),  Fo(7, 0),
                B(3, 1),  Fo(6, 1), B(2, 0), B(4, 1),  Fo(7, 1), B(3, 0),  B(5, 1), B(4, 0),  B(6, 1),  Bi(5, 0),
                Bi(7, 1), Bi(6, 0), W(5, 0), Bi(7, 0), W(7, 1),  W(6, 0),  W(7, 0)});
  expect_order(4, 8, 3, {F(0, 0),  F(0, 1),  F(1, 0),  F(1, 1),  F(2, 0),  F(2, 1),  F(3, 0), F(3, 1),  F(4, 0),
                         B(0, 1),  Fo(4, 1), B(0, 0),  Fo(5, 0), B(1, 1),  Fo(5, 1), B(1, 0), Fo(6, 0), B(2, 1),
                         Fo(6, 1), B(2, 0),  Fo(7, 0), B(3, 1),  Fo(7, 1), B(3, 0),  B(4, 1), B(4, 0),  B(5, 1),
                         B(5, 0),  Bi(6, 1), Bi(6, 0), Bi(7, 1), Bi(7, 0), W(6, 1),  W(6, 0), W(7, 1),  W(7, 0)});
}

// The order is built in constant expressions too (rank 0 of 4 over 8: 32 forwards and backwards
// plus 2p - 1 = 7 weight passes).
static_assert(dualpipev_order(4, 8, 0).size() == 39);
static_assert(dualpipev_order(4, 8, 3).size() == 36);
static_assert(dualpipev_rule(4, 8).empty());
static_assert(!dualpipev_rule(4, 7).empty());
static_assert(!dualpipev_rule(1, 8).empty());

TEST(DualPipeV, RefusesTooFewMicroBatchesOrRanks) {
  // dualpipev.py asserts num_chunks >= num_ranks * 2.
  EXPECT_TRUE(dualpipev_rule(2, 4).empty());
  EXPECT_FALSE(dualpipev_rule(2, 3).empty());
  EXPECT_FALSE(dualpipev_rule(8, 15).empty());
  EXPECT_FALSE(dualpipev_rule(1, 100).empty());
  try {
    (void)dualpipev_order(4, 7, 0);
    ADD_FAILURE() << "m = 7 < 2p = 8 accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "strategy.micro_batch_num");
    EXPECT_NE(e.rule().find("micro_batch_num=7 >= 2 * strategy.pp_size=4"), std::string::npos) << e.rule();
  }
  EXPECT_THROW((void)dualpipev_order(4, 8, 4), config_error);
  EXPECT_THROW((void)dualpipev_order(1, 8, 0), config_error);
}

namespace {
struct order_facts {
  std::int64_t peak_until_backward = 0;  ///< activation sets held: forward done, (input) backward not
  std::int64_t peak_until_weight = 0;    ///< the same, a split backward's set held until its W
  std::int64_t overlapped_pairs = 0;
  std::int64_t split = 0;
  bool peak_mix_as_derived = true;  ///< at every moment of 2p + 1 sets: 2p - rank of chunk 0, rank + 1 of chunk 1
};

/// Checks one rank's order pass by pass and returns its counts.
order_facts check_rank(std::int64_t p, std::int64_t m, std::int64_t rank, const std::vector<scheduled_pass>& order) {
  const std::string where = "p=" + std::to_string(p) + " m=" + std::to_string(m) + " rank=" + std::to_string(rank);
  std::map<std::pair<std::int64_t, std::int64_t>, std::array<int, 4>> seen;  // (mb, chunk) -> count per type
  order_facts facts;
  std::int64_t held = 0, held_w = 0;
  std::array<std::int64_t, 2> held_of_chunk{};
  for (std::size_t i = 0; i < order.size(); ++i) {
    const scheduled_pass& s = order[i];
    EXPECT_TRUE(s.micro_batch >= 0 && s.micro_batch < m && (s.chunk == 0 || s.chunk == 1)) << where;
    auto& count = seen[{s.micro_batch, s.chunk}];
    const bool done_forward = count[0] == 1;
    switch (s.type) {
      case pass_type::forward:
        EXPECT_EQ(count[0], 0) << where << " second forward " << show(s);
        ++held;
        ++held_w;
        ++held_of_chunk[static_cast<std::size_t>(s.chunk)];
        break;
      case pass_type::backward:
        EXPECT_TRUE(done_forward) << where << " backward before forward " << show(s);
        --held;
        --held_w;
        --held_of_chunk[static_cast<std::size_t>(s.chunk)];
        break;
      case pass_type::backward_input:
        EXPECT_TRUE(done_forward) << where << " backward before forward " << show(s);
        --held;
        --held_of_chunk[static_cast<std::size_t>(s.chunk)];
        ++facts.split;
        break;
      case pass_type::backward_weight:
        EXPECT_EQ(count[2], 1) << where << " weight pass before its input pass " << show(s);
        --held_w;
        break;
    }
    ++count[static_cast<std::size_t>(s.type)];
    facts.peak_until_backward = held > facts.peak_until_backward ? held : facts.peak_until_backward;
    facts.peak_until_weight = held_w > facts.peak_until_weight ? held_w : facts.peak_until_weight;
    if (held == 2 * p + 1)
      facts.peak_mix_as_derived =
          facts.peak_mix_as_derived && held_of_chunk[0] == 2 * p - rank && held_of_chunk[1] == rank + 1;
    if (s.overlapped_with_next) {
      ++facts.overlapped_pairs;
      // A pair is a forward and the backward of another chunk, whole (dualpipev.py runs the pair's
      // backward without the zero-bubble split).
      EXPECT_EQ(s.type, pass_type::forward) << where;
      EXPECT_LT(i + 1, order.size()) << where;
      if (i + 1 < order.size()) {
        EXPECT_EQ(order[i + 1].type, pass_type::backward) << where << " " << show(s);
        EXPECT_NE(order[i + 1].chunk, s.chunk) << where << " " << show(s);
      }
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * m)) << where;
  for (const auto& [key, count] : seen) {
    EXPECT_EQ(count[0], 1) << where << " forwards of (" << key.first << "," << key.second << ")";
    const bool whole = count[1] == 1 && count[2] == 0 && count[3] == 0;
    const bool split = count[1] == 0 && count[2] == 1 && count[3] == 1;
    EXPECT_TRUE(whole || split) << where << " backwards of (" << key.first << "," << key.second << ")";
  }
  return facts;
}

/// Runs all ranks' orders against each other over the V: a forward of virtual stage s needs the
/// forward of stage s-1, a backward (or input backward) of stage s the input backward of stage s+1,
/// the last stage (2p-1, on rank 0) its own forward; a weight pass only its own rank's order. An
/// overlapped pair starts when both its passes may (dualpipev.py waits for both receives first).
/// Returns whether every pass ran.
bool runs_without_deadlock(std::int64_t p, std::int64_t m) {
  std::vector<std::vector<scheduled_pass>> orders;
  for (std::int64_t r = 0; r < p; ++r) orders.push_back(dualpipev_order(p, m, r));
  std::map<std::tuple<bool, std::int64_t, std::int64_t>, bool> done;  // (backward?, mb, stage)
  auto stage_of = [&](std::int64_t r, std::int64_t chunk) {
    return virtual_stage(chunk_placement::v_shape, p, r, chunk);
  };
  auto ready = [&](std::int64_t r, const scheduled_pass& s) {
    const std::int64_t stage = stage_of(r, s.chunk);
    switch (s.type) {
      case pass_type::forward:
        return stage == 0 || done.count({false, s.micro_batch, stage - 1}) > 0;
      case pass_type::backward:
      case pass_type::backward_input:
        return stage == 2 * p - 1 ? done.count({false, s.micro_batch, stage}) > 0
                                  : done.count({true, s.micro_batch, stage + 1}) > 0;
      case pass_type::backward_weight:
        return true;
    }
    return false;
  };
  auto run = [&](std::int64_t r, const scheduled_pass& s) {
    if (s.type != pass_type::backward_weight)
      done[{s.type != pass_type::forward, s.micro_batch, stage_of(r, s.chunk)}] = true;
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::int64_t r = 0; r < p; ++r) {
      const auto& order = orders[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      if (i == order.size()) continue;
      const std::size_t width = order[i].overlapped_with_next ? 2 : 1;
      bool can = true;
      for (std::size_t k = 0; k < width; ++k) can = can && ready(r, order[i + k]);
      if (!can) continue;
      for (std::size_t k = 0; k < width; ++k) run(r, order[i + k]);
      i += width;
      progress = true;
    }
  }
  for (std::int64_t r = 0; r < p; ++r)
    if (next[static_cast<std::size_t>(r)] != orders[static_cast<std::size_t>(r)].size()) return false;
  return true;
}
}  // namespace

TEST(DualPipeV, EveryPassOnceInDependencyOrderAndTheReadmesActivationPeak) {
  // DualPipe README, "Pipeline Bubbles and Memory Usage Comparison": DualPipeV holds PP + 1
  // activation sets per device, PP the number of pipeline stages (2p for p ranks), one set being
  // one chunk's activations of one micro-batch. Counted from the order: +1 at a forward, -1 at its
  // backward (an overlapped pair's forward allocates before its backward frees). The peak is the
  // same whether a split backward's set is freed at its input part or at its weight part.
  for (std::int64_t p = 2; p <= 9; ++p) {
    for (const std::int64_t m : {2 * p, 2 * p + 1, 3 * p, 4 * p + 3, std::int64_t{64}}) {
      for (std::int64_t r = 0; r < p; ++r) {
        const order_facts f = check_rank(p, m, r, dualpipev_order(p, m, r));
        EXPECT_EQ(f.peak_until_backward, 2 * p + 1) << "p=" << p << " m=" << m << " rank=" << r;
        EXPECT_EQ(f.peak_until_weight, 2 * p + 1) << "p=" << p << " m=" << m << " rank=" << r;
        // Which chunks the peak holds: reached in phase 4 at each forward, when rank r has run all
        // 2(p-r-1) + (r+1) + 1 = 2p - r chunk-0 forwards of phases 1, 2 and the pair and no chunk-0
        // backward, and (r+1) + (p-r-1) = p chunk-1 forwards against p-r-1 chunk-1 backwards: r + 1.
        // (Rank 0 holds the LM head's chunk for one micro-batch only.)
        EXPECT_TRUE(f.peak_mix_as_derived) << "p=" << p << " m=" << m << " rank=" << r;
        // Split backwards: down in phase 3, up in phase 6, down in phase 7 = 2p - r - 1.
        EXPECT_EQ(f.split, 2 * p - r - 1);
        // Overlapped pairs: 2 per steady step (m - 2p + r + 1 of them) and one per phase-5 step
        // (p - r - 1), less the last rank's first steady pair.
        EXPECT_EQ(f.overlapped_pairs, 2 * (m - 2 * p + r + 1) + (p - r - 1) - (r == p - 1 ? 1 : 0));
      }
      EXPECT_TRUE(runs_without_deadlock(p, m)) << "p=" << p << " m=" << m;
    }
  }
}

// ---- V-shaped placement ----------------------------------------------------------------------

namespace {
struct layout_params {
  double params = 0, expert_params = 0;
};
/// Parameters of one rank's layout, priced as the estimate prices a stage program.
layout_params params_of(const model_spec& m, const strategy_spec& s, const rank_layout& lay) {
  const build_context c = make_build_context(m, s, catalogue::h100_sxm, padded_vocab(m, s.tp_size));
  const job_blocks blocks = build_blocks(c);
  const detail::job_context j{&c, &blocks};
  stage_result r;
  (void)detail::price_program(r, build_stage(blocks, c, lay.layers, lay.dense_layers, lay.embedding, lay.head), j);
  return {r.params, r.expert_params};
}
}  // namespace

TEST(DualPipeV, VShapedRanksHoldTheWholeModelOnceWithBothEndsOnRankZero) {
  // Rank r holds virtual stages r and 2p-1-r of 2p equal stages: every layer once, the embedding
  // and the LM head both on rank 0 — so a tied embedding is one weight there (unlike the looped
  // layout, which keeps a second copy on the last stage), and the sum is parameter_count.
  int checked = 0;
  for (const auto& named : catalogue::models) {
    const model_spec& m = *named.spec;
    if (is_hybrid(m)) continue;  // hybrid models run on one pipeline stage (refuse_unmodelled_hybrid)
    for (const std::int64_t p : {2, 4, 8}) {
      if (m.layer_num % (2 * p) != 0) continue;
      // GPT-3's position table has 2048 rows: its sequence can be no longer (the counts do not depend on it).
      strategy_spec s{.seq_len = std::min<std::int64_t>(4096, m.max_position_embeddings.value_or(4096)),
                      .micro_batch_size = 1,
                      .micro_batch_num = 2 * p,
                      .world_size = p * 8,
                      .pp_size = p,
                      .ep_size = is_moe(m) ? 8 : 1};
      validate(m, s);
      detail::validate_v_shape_split(m, s);
      double total = 0, experts_per_rank = 0;
      for (std::int64_t r = 0; r < p; ++r) {
        const rank_layout lay = v_shape_layout_of_rank(m, s, r);
        EXPECT_EQ(lay.layers, m.layer_num / p) << named.name;
        EXPECT_EQ(lay.chunk_layers, m.layer_num / (2 * p)) << named.name;
        EXPECT_EQ(lay.embedding, r == 0) << named.name;
        EXPECT_EQ(lay.head, r == 0) << named.name;
        const layout_params lp = params_of(m, s, lay);
        total += lp.params;
        experts_per_rank += lp.expert_params;
      }
      // Routed experts are sharded over ep = 8 on each rank.
      const double whole = total - experts_per_rank + experts_per_rank * static_cast<double>(s.ep_size);
      EXPECT_DOUBLE_EQ(whole, parameter_count(m, padded_vocab(m, s.tp_size))) << named.name << " p=" << p;
      ++checked;
    }
  }
  // Layer counts 32, 40, 80, 32, 80, 96, 64, 60, 32, 56, 48, 36 divide by 4; all but 60 and 36
  // (gpt-oss-120b) by 8; 32, 80, 32, 80, 96, 64, 32, 48 by 16 (Kimi K2's 61, as DeepSeek-V3's, by none);
  // GPT-J 6B's 28 by 4 only, Falcon-180B's 80 by all three.
  EXPECT_EQ(checked, 14 + 11 + 9);
}

TEST(DualPipeV, DenseLayersFallInTheChunksTheyNumberInto) {
  // 8 layers, the first 7 dense, over p = 2: 4 virtual stages of 2 layers, stage 3 holding layer 6
  // (dense) and 7 (MoE). Rank 0 runs stages 0 (2 dense) and 3 (1 dense); rank 1 stages 1 and 2
  // (2 + 2 dense).
  model_spec m = catalogue::deepseek_v2_lite;
  m.layer_num = 8;
  m.dense_layers = 7;
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .pp_size = 2};
  const rank_layout r0 = v_shape_layout_of_rank(m, s, 0), r1 = v_shape_layout_of_rank(m, s, 1);
  EXPECT_EQ(r0.chunk_dense_layers, 2);
  EXPECT_EQ(r0.dense_layers, 3);
  EXPECT_EQ(r1.chunk_dense_layers, 2);
  EXPECT_EQ(r1.dense_layers, 4);
  // DeepSeek-V3's 3 dense layers with 64 layers over p = 4 (8 per stage): all on rank 0's chunk 0.
  model_spec v3 = catalogue::deepseek_v3;
  v3.layer_num = 64;
  strategy_spec s4 = s;
  s4.pp_size = 4;
  s4.world_size = 4;
  EXPECT_EQ(v_shape_layout_of_rank(v3, s4, 0).chunk_dense_layers, 3);
  EXPECT_EQ(v_shape_layout_of_rank(v3, s4, 0).dense_layers, 3);
  EXPECT_EQ(v_shape_layout_of_rank(v3, s4, 1).dense_layers, 0);
}

TEST(DualPipeV, VShapedSplitRefusesWhatItDoesNotModel) {
  const model_spec& m = catalogue::llama3_8b;  // 32 layers
  const strategy_spec ok{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 4, .pp_size = 4};
  EXPECT_NO_THROW(detail::validate_v_shape_split(m, ok));
  auto field_of = [&](strategy_spec s, const model_spec& model) -> std::string {
    try {
      detail::validate_v_shape_split(model, s);
    } catch (const config_error& e) { return e.field(); }
    return "accepted";
  };
  strategy_spec few = ok;
  few.micro_batch_num = 7;
  EXPECT_EQ(field_of(few, m), "strategy.micro_batch_num");
  strategy_spec interleaved = ok;
  interleaved.interleaving_size = 2;
  EXPECT_EQ(field_of(interleaved, m), "strategy.interleaving_size");
  strategy_spec first = ok;
  first.num_layers_in_first_pipeline_stage = 5;
  EXPECT_EQ(field_of(first, m), "strategy.num_layers_in_first_pipeline_stage");
  strategy_spec slots = ok;
  slots.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(field_of(slots, m), "strategy.account_for_embedding_in_pipeline_split");
  strategy_spec p8 = ok;  // 32 layers over 2 * 8 = 16 stages: fine; over 2 * 16 = 32: fine; 2 * 3 = 6: not
  p8.pp_size = 8;
  p8.micro_batch_num = 16;
  EXPECT_EQ(field_of(p8, m), "accepted");
  strategy_spec p3 = ok;
  p3.pp_size = 3;
  EXPECT_EQ(field_of(p3, m), "strategy.pp_size");
}

}  // namespace llmsim_test_dualpipev
