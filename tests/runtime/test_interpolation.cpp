// Efficiencies between measured shapes (efficiency_table::interpolate): a shape a system's table
// lacks takes the efficiency between the nearest measured shapes below and above it that differ
// from it in one count only, linear in that count's logarithm. Expected values by hand from the
// tables written here; the held-out check reads SimuMax's shipped tables.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include "shared_dir.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace llmsim_test_interpolation {

using namespace llmsim;

namespace {
// Sorted by key, as the loader sorts: m=1024, m=4096, m=512, m=8192 compare as text.
constexpr shape_efficiency gemms[] = {
    {"b=1, m=1024, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16", 0.5},
    {"b=1, m=4096, k=4096, n=4096, layout=NN, accumulate=False, out_dtype=bf16", 0.95},
    {"b=1, m=4096, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16", 0.7},
    {"b=1, m=512, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16", 0.1},
    {"b=1, m=8192, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16", 0.9},
};
constexpr efficiency_table table{gemms, 5};
}  // namespace

TEST(Interpolation, BetweenTheNearestMeasuredShapesInTheLogOfTheCount) {
  ASSERT_TRUE(table.is_sorted());
  // m = 2048 lies halfway (in log2) between m = 1024 (0.5) and m = 4096 (0.7): 0.6. The farther
  // m = 512 and m = 8192 do not take part; nor does the NN shape (another layout).
  const auto mid = table.interpolate("b=1, m=2048, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16");
  ASSERT_TRUE(mid.has_value());
  EXPECT_NEAR(*mid, 0.6, 1e-12);
  // m = 3072: log2(3072 / 1024) / log2(4) = 0.79248 of the way: 0.5 + 0.2 x 0.79248 = 0.658496.
  const auto three = table.interpolate("b=1, m=3072, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16");
  ASSERT_TRUE(three.has_value());
  EXPECT_NEAR(*three, 0.5 + 0.2 * std::log2(3.0) / 2, 1e-12);
  // Beyond the measured range (one side only), two counts apart, or a non-count apart (the
  // measured m=4096 TN and NN shapes differ from an NT one in the layout only): none.
  EXPECT_FALSE(table.interpolate("b=1, m=16384, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16"));
  EXPECT_FALSE(table.interpolate("b=1, m=2048, k=2048, n=4096, layout=TN, accumulate=False, out_dtype=bf16"));
  EXPECT_FALSE(table.interpolate("b=1, m=4096, k=4096, n=4096, layout=NT, accumulate=False, out_dtype=bf16"));
  EXPECT_FALSE(table.interpolate("b=1, m=2048, k=4096, n=4096, layout=TN, accumulate=False"));
  EXPECT_FALSE(table.interpolate("batch=1, seq_len=2048, head_num=32"));
  // A measured shape is its own neighbour on neither side: interpolating it finds the shapes
  // around it (m = 1024 between 512 and 4096: 0.1 + 0.6 x 1/3 = 0.3), which is why compute_cost
  // asks find() first.
  EXPECT_NEAR(*table.interpolate("b=1, m=1024, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16"), 0.3,
              1e-12);
  // In constant expressions too.
  static_assert(table.interpolate("b=1, m=2048, k=4096, n=4096, layout=TN, accumulate=False, out_dtype=bf16") > 0.59);
}

TEST(Interpolation, TheCountWhoseMeasuredShapesLieClosestDecides) {
  // The shape m=2048, n=2048 has measured neighbours in m (1024 and 4096, a ratio of 4) and in n
  // (1024 and 8192, a ratio of 8): m's pair decides, 0.2 + (0.4 - 0.2) / 2 = 0.3.
  static constexpr shape_efficiency two[] = {
      {"b=1, m=1024, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16", 0.2},
      {"b=1, m=2048, k=64, n=1024, layout=TN, accumulate=False, out_dtype=bf16", 0.9},
      {"b=1, m=2048, k=64, n=8192, layout=TN, accumulate=False, out_dtype=bf16", 0.9},
      {"b=1, m=4096, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16", 0.4},
  };
  const efficiency_table t{two, 4};
  ASSERT_TRUE(t.is_sorted());
  const auto e = t.interpolate("b=1, m=2048, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16");
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(*e, 0.3, 1e-12);
  // Pairs as close in m (1024, 4096: 0.2, 0.4) as in n (1024, 4096: 0.6, 1.0) share the answer:
  // (0.3 + 0.8) / 2 = 0.55.
  static constexpr shape_efficiency tie[] = {
      {"b=1, m=1024, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16", 0.2},
      {"b=1, m=2048, k=64, n=1024, layout=TN, accumulate=False, out_dtype=bf16", 0.6},
      {"b=1, m=2048, k=64, n=4096, layout=TN, accumulate=False, out_dtype=bf16", 1.0},
      {"b=1, m=4096, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16", 0.4},
  };
  const efficiency_table even{tie, 4};
  ASSERT_TRUE(even.is_sorted());
  EXPECT_NEAR(*even.interpolate("b=1, m=2048, k=64, n=2048, layout=TN, accumulate=False, out_dtype=bf16"), 0.55, 1e-12);
}

TEST(Interpolation, PairsTieOnlyAtTheSameRatio) {
  // m: 1000 (0.2) and 4000 (0.4), a ratio of exactly 4; n: 1001 (0.6) and 4004 (1.0), exactly 4
  // too: at m = n = 2000 the two interpolations (0.2 + 0.2 x log2(2) / 2 = 0.3 and 0.6 + 0.4 x
  // log2(2000 / 1001) / 2 = 0.799711) share the answer, 0.549856. With n's upper shape at 4005
  // (a ratio 1.00025 x wider) m's pair alone decides: 0.3.
  const double n_share = 0.6 + 0.4 * std::log2(2000.0 / 1001) / 2;
  static constexpr shape_efficiency even[] = {
      {"b=1, m=1000, k=64, n=2000, layout=TN, accumulate=False, out_dtype=bf16", 0.2},
      {"b=1, m=2000, k=64, n=1001, layout=TN, accumulate=False, out_dtype=bf16", 0.6},
      {"b=1, m=2000, k=64, n=4004, layout=TN, accumulate=False, out_dtype=bf16", 1.0},
      {"b=1, m=4000, k=64, n=2000, layout=TN, accumulate=False, out_dtype=bf16", 0.4},
  };
  static constexpr shape_efficiency uneven[] = {
      {"b=1, m=1000, k=64, n=2000, layout=TN, accumulate=False, out_dtype=bf16", 0.2},
      {"b=1, m=2000, k=64, n=1001, layout=TN, accumulate=False, out_dtype=bf16", 0.6},
      {"b=1, m=2000, k=64, n=4005, layout=TN, accumulate=False, out_dtype=bf16", 1.0},
      {"b=1, m=4000, k=64, n=2000, layout=TN, accumulate=False, out_dtype=bf16", 0.4},
  };
  const char* query = "b=1, m=2000, k=64, n=2000, layout=TN, accumulate=False, out_dtype=bf16";
  const efficiency_table tied{even, 4}, apart{uneven, 4};
  ASSERT_TRUE(tied.is_sorted());
  ASSERT_TRUE(apart.is_sorted());
  EXPECT_NEAR(*tied.interpolate(query), (0.3 + n_share) / 2, 1e-12);
  EXPECT_NEAR(*apart.interpolate(query), 0.3, 1e-12);
}

TEST(Interpolation, OnlyInTheCountsThatScaleTheSameKernel) {
  // Attention is interpolated in its sequence length, not in its head count; neither across
  // measured shapes more than 8 times apart.
  static constexpr shape_efficiency sdp[] = {
      {"batch=1, seq_len=1024, head_num=16, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.4},
      {"batch=1, seq_len=16384, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.9},
      {"batch=1, seq_len=2048, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.5},
      {"batch=1, seq_len=4096, head_num=16, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.6},
      {"batch=1, seq_len=4096, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.8},
  };
  const efficiency_table t{sdp, 5};
  ASSERT_TRUE(t.is_sorted());
  // seq_len 2048 between 1024 (0.4) and 4096 (0.6), 16 heads: 0.5.
  EXPECT_NEAR(*t.interpolate("batch=1, seq_len=2048, head_num=16, kv_head_num=8, qk_head_dim=128, v_head_dim=128, "
                             "qkv_contiguous=True"),
              0.5, 1e-12);
  // 32 heads between 16 and 64 at seq_len 4096: not a count to interpolate in.
  EXPECT_FALSE(t.interpolate(
      "batch=1, seq_len=4096, head_num=32, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True"));
  // 64 heads at seq_len 8192: 4096 (0.8) and 16384 (0.9), 4 apart: 0.85; at 3072 between 2048
  // and 4096: 0.5 + 0.3 x log2(1.5) = 0.675489.
  EXPECT_NEAR(*t.interpolate("batch=1, seq_len=8192, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, "
                             "qkv_contiguous=True"),
              0.85, 1e-12);
  EXPECT_NEAR(*t.interpolate("batch=1, seq_len=3072, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, "
                             "qkv_contiguous=True"),
              0.5 + 0.3 * std::log2(1.5), 1e-12);
  // Without the 4096 shape, 2048 and 16384 lie 8 apart (interpolated); 1024 and 16384 (16
  // apart) are not.
  // (0.5 + 0.4 x log2(2) / log2(8) = 0.633333)
  const efficiency_table wide{sdp, 3};
  EXPECT_NEAR(
      *wide.interpolate(
          "batch=1, seq_len=4096, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True"),
      0.5 + 0.4 / 3, 1e-12);
  static constexpr shape_efficiency far[] = {
      {"batch=1, seq_len=1024, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.4},
      {"batch=1, seq_len=16384, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.9},
  };
  EXPECT_FALSE((efficiency_table{far, 2}.interpolate(
      "batch=1, seq_len=4096, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True")));
}

TEST(Interpolation, ServingCausalAttentionScalesTheTablesEfficiency) {
  // The table counts all 4096^2 pairs (SimuMax measures training); a serving prefill counts the
  // causal 4096 x 4097 / 2, a share of 4097 / 8192: efficiency 0.8 x 4097 / 8192 = 0.400098, the
  // same kernel time as the all-pairs call at 0.8. Interpolated (seq_len 3072 between 2048 and
  // 4096) alike: (0.5 + 0.3 x log2(1.5)) x 3073 / 6144.
  static constexpr shape_efficiency sdp[] = {
      {"batch=1, seq_len=2048, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.5},
      {"batch=1, seq_len=4096, head_num=64, kv_head_num=8, qk_head_dim=128, v_head_dim=128, qkv_contiguous=True", 0.8},
  };
  system_spec sys = catalogue::b200;
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::sdp_fwd)].accurate_efficient_factor = {sdp, 2};
  attention_shape a{.q_len = 4096,
                    .kv_len = 4096,
                    .head_num = 64,
                    .kv_head_num = 8,
                    .qk_head_dim = 128,
                    .v_head_dim = 128,
                    .pairs = attention_pairs::causal};
  const kernel_cost causal = compute_op_cost(sys, attention_op(pass_kind::forward, a, 1e6));
  EXPECT_TRUE(causal.measured);
  EXPECT_NEAR(causal.efficiency, 0.8 * 4097 / 8192, 1e-12);
  a.pairs = attention_pairs::all;
  EXPECT_NEAR(compute_op_cost(sys, attention_op(pass_kind::forward, a, 1e6)).time.value, causal.time.value, 1e-15);
  a.q_len = a.kv_len = 3072;
  a.pairs = attention_pairs::causal;
  const kernel_cost between = compute_op_cost(sys, attention_op(pass_kind::forward, a, 1e6));
  EXPECT_TRUE(between.interpolated);
  EXPECT_NEAR(between.efficiency, (0.5 + 0.3 * std::log2(1.5)) * 3073 / 6144, 1e-12);
}

TEST(Interpolation, ComesBeforeTheKernelModelAndIsCounted) {
  // Catalogue B200 (2250 TFLOPS dense BF16, kernel model 0.49) with the table above: a GEMM of
  // m = 2048 takes 0.6, not the model's 0.49: 2 x 2048 x 4096 x 4096 = 68,719,476,736 FLOPs
  // over 2250e12 x 0.6 = 50.9 us.
  system_spec sys = catalogue::b200;
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].accurate_efficient_factor = table;
  const kernel_cost c = compute_op_cost(sys, gemm_op(pass_kind::forward, {.m = 2048, .k = 4096, .n = 4096}, 1e6));
  EXPECT_FALSE(c.measured);
  EXPECT_TRUE(c.interpolated);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.time.value, 68719476736.0 / (2250e12 * 0.6), 1e-15);
  // Outside the measured range the model prices it.
  const kernel_cost far = compute_op_cost(sys, gemm_op(pass_kind::forward, {.m = 16384, .k = 4096, .n = 4096}, 1e6));
  EXPECT_FALSE(far.interpolated);
  EXPECT_TRUE(far.modelled);
  EXPECT_NEAR(far.efficiency, 0.49, 1e-15);
}

TEST(Interpolation, AnEstimateReportsTheInterpolatedShapes) {
  // SimuMax's B200 table measures Llama-3-8B's GEMMs at 4096 and 8192 tokens: at sequence length
  // 6144 (its tp2_pp1_dp4_mbs1 strategy) the table has none of the job's shapes, and interpolates
  // those whose 4096- and 8192-token shapes it holds; the rest fall to the file's flat
  // efficient_factor (the file names no kernel model). Each interpolated shape counts once per
  // kernel priced: the README's 96 of 451.
  LLMSIM_REQUIRE_SHARED();
  const auto configs = llmsim_test::simumax_configs();
  const auto system = json::load_system((configs / "system" / "b200_bf16_ceperm.json").string());
  const model_spec m = json::load_model(configs / "models" / "llama3-8b.json");
  strategy_spec s = json::load_strategy(configs / "strategy" / "tp2_pp1_dp4_mbs1.json");
  s.seq_len = 6144;
  const auto r = estimate(m, s, system.spec());
  EXPECT_EQ(r.cost.efficiency_lookups, 451);
  EXPECT_EQ(r.cost.efficiency_misses, r.cost.efficiency_lookups);
  EXPECT_EQ(r.cost.efficiency_interpolated, 96);
  EXPECT_EQ(r.cost.efficiency_modelled, 0);
  const std::string text = to_text(r, m, s, system.spec());
  EXPECT_NE(text.find("between measured shapes " + std::to_string(r.cost.efficiency_interpolated) + ","),
            std::string::npos)
      << text;
  EXPECT_EQ(json::to_json(r)["cost_result"]["compute_details"]["efficiency_interpolated"].get<std::int32_t>(),
            r.cost.efficiency_interpolated);
}

TEST(Interpolation, ALoadedTableRemembersItsAnswers) {
  // A loaded file's table answers from its memo what a scan answers, found or not, every time.
  // The query: a measured A100 GEMM with m one larger, which lies below the next measured m.
  LLMSIM_REQUIRE_SHARED();
  const auto system = json::load_system((llmsim_test::simumax_configs() / "system" / "a100_pcie.json").string());
  const efficiency_table& t = system.spec().op(compute_kind::matmul).accurate_efficient_factor;
  ASSERT_NE(t.memo, nullptr);
  std::string query;
  for (const shape_efficiency& e : t) {
    const std::string key(e.shape);
    const std::size_t at = key.find(", m=") + 4, end = key.find(',', at);
    const std::string bumped =
        key.substr(0, at) + std::to_string(std::stoll(key.substr(at, end - at)) + 1) + key.substr(end);
    if (t.interpolate_by_scan(bumped)) {
      query = bumped;
      break;
    }
  }
  ASSERT_FALSE(query.empty());
  const auto scanned = t.interpolate_by_scan(query);
  EXPECT_EQ(t.interpolate(query), scanned);
  EXPECT_EQ(t.interpolate(query), scanned) << "second answer, from the memo";
  const std::string nowhere = "b=1, m=3, k=5, n=7, layout=TN, accumulate=False, out_dtype=bf16";
  EXPECT_FALSE(t.interpolate(nowhere));
  EXPECT_FALSE(t.interpolate(nowhere));
  const auto remembered = t.memo->recall(nowhere);  // asked before, nothing found
  ASSERT_TRUE(remembered.has_value());
  EXPECT_FALSE(remembered->has_value());
}

TEST(Interpolation, TheMemoHoldsAtMostItsCapacity) {
  // A loaded table remembers 65,536 shapes; past that it answers by scanning, unremembered. Ask
  // 65,537 distinct shapes no table holds (k=1..65537): the first is remembered, the last not.
  LLMSIM_REQUIRE_SHARED();
  const auto system = json::load_system((llmsim_test::simumax_configs() / "system" / "a100_pcie.json").string());
  const efficiency_table& t = system.spec().op(compute_kind::matmul).accurate_efficient_factor;
  auto shape = [](int k) {
    return "b=1, m=3, k=" + std::to_string(k) + ", n=7, layout=TN, accumulate=False, out_dtype=bf16";
  };
  int found = 0;
  for (int k = 1; k <= 65537; ++k) found += t.interpolate(shape(k)).has_value() ? 1 : 0;
  EXPECT_EQ(found, 0);
  EXPECT_TRUE(t.memo->recall(shape(1)).has_value());
  EXPECT_TRUE(t.memo->recall(shape(65536)).has_value());
  EXPECT_FALSE(t.memo->recall(shape(65537)).has_value());
  EXPECT_FALSE(t.interpolate(shape(65537))) << "still answered, by a scan";
}

TEST(Interpolation, HeldOutMeasuredGemms) {
  // Leave each measured GEMM of SimuMax's A100 and B200 tables out in turn and interpolate it from
  // the rest, where its neighbours allow, against the kernel model's GEMM efficiency (0.728
  // Ampere, 0.49 Blackwell, in quadrature with streaming A, B and C at the file's default
  // bandwidth; fitted with these very shapes in). On the A100 the efficiency varies smoothly with
  // the shape and interpolation nearly halves the model's error; on the B200 it jumps between
  // neighbours (tile shapes) and the two tie. The figures are the README's.
  LLMSIM_REQUIRE_SHARED();
  struct held_out_figures {
    const char* file;
    double sustained, peak, stream;  // FLOP/s of the data sheet, bytes/s of the file's default entry
    int shapes;                      // interpolable when held out
    double mean, worst, versus;      // |error| %: interpolated mean and max, the model's mean
  };
  // The model's efficiency of a table key "b=.., m=.., k=.., n=.., layout=.., accumulate=..,
  // out_dtype=..": bf16 A and B, C at out_dtype, read and written when accumulated.
  auto modelled = [](const held_out_figures& f, std::string_view key) {
    auto field = [&](std::string_view name) {
      const auto at = key.find(std::string(name) + "=") + name.size() + 1;
      return key.substr(at, key.find(',', at) - at);
    };
    auto number = [&](std::string_view name) { return std::stod(std::string(field(name))); };
    const double b = number("b"), m = number("m"), k = number("k"), n = number("n");
    const double c_bytes = (field("out_dtype") == "fp32" ? 4 : 2) * (field("accumulate") == "True" ? 2 : 1);
    const double at_peak = 2 * b * m * k * n / f.peak;
    return at_peak / std::hypot(at_peak / f.sustained, b * (2 * (m * k + k * n) + c_bytes * m * n) / f.stream);
  };
  EXPECT_EQ(kernel_models::ampere.gemm_sustained, 0.728);
  EXPECT_EQ(kernel_models::blackwell.gemm_sustained, 0.49);
  for (const held_out_figures& f :
       {held_out_figures{"a100_pcie.json", 0.728, 312e12, 0.91 * 1600 * 1073741824.0, 111, 3.06, 29.8, 5.13},
        held_out_figures{"b200_bf16_ceperm.json", 0.49, 2250e12, 0.666 * 8000 * 1073741824.0, 285, 9.19, 63.8, 8.97}}) {
    const auto system = json::load_system((llmsim_test::simumax_configs() / "system" / f.file).string());
    const efficiency_table& t = system.spec().op(compute_kind::matmul).accurate_efficient_factor;
    double interpolated = 0, constant = 0, worst = 0;
    int held_out = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      std::vector<shape_efficiency> rest(t.begin(), t.end());
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      const auto e = efficiency_table{rest.data(), rest.size()}.interpolate(t.entries[i].shape);
      if (!e) continue;
      const double measured = t.entries[i].efficiency, error = std::abs(*e / measured - 1);
      interpolated += error;
      worst = std::max(worst, error);
      constant += std::abs(modelled(f, t.entries[i].shape) / measured - 1);
      ++held_out;
    }
    ASSERT_GT(held_out, 0) << f.file;
    const double mean = 100 * interpolated / held_out, versus = 100 * constant / held_out;
    std::printf("%s: %d of %zu GEMMs interpolable when held out; |error| mean %.2f %% (max %.1f %%), model %.2f %%\n",
                f.file, held_out, t.size(), mean, 100 * worst, versus);
    EXPECT_EQ(held_out, f.shapes) << f.file;
    EXPECT_NEAR(mean, f.mean, 0.006) << f.file;
    EXPECT_NEAR(100 * worst, f.worst, 0.05) << f.file;
    EXPECT_NEAR(versus, f.versus, 0.006) << f.file;
  }
}

}  // namespace llmsim_test_interpolation
