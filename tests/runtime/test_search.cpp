// The strategy search (llmsim/search.hpp): pruning never changes the ranking (brute force over
// small spaces, order included), a model that fits nowhere names its smallest shortfall, and for
// every visible real run of ../shared/validation the search finds a layout no slower than the
// run's own (both predicted), reporting where the run's layout ranks.
#include "shared_dir.hpp"

#include <llmsim/json.hpp>
#include <llmsim/search.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace llmsim_test_search {

namespace lj = llmsim::json;
using llmsim::search_candidate;

namespace {
const llmsim::model_spec& model(const char* name) { return *llmsim::catalogue::find_model(name); }
const llmsim::system_spec& system_of(const char* name) { return *llmsim::catalogue::find_system(name); }

/// The two rankings are the same candidates in the same order with the same figures.
void expect_same_ranking(const std::vector<search_candidate>& a, const std::vector<search_candidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].point.order, b[i].point.order) << "rank " << i + 1;
    EXPECT_EQ(a[i].time, b[i].time) << "rank " << i + 1;
    EXPECT_EQ(a[i].peak_mem, b[i].peak_mem) << "rank " << i + 1;
  }
}

/// A small space with memory pressure: Llama 3 8B on 8 H100s at seq 8192, so that some groups fit
/// only with some layers recomputed (the bisection and the top-K bound both act).
llmsim::search_space small_space() {
  llmsim::search_space sp{.gpus = 8, .global_batch = 16, .seq_len = 8192};
  sp.cp = {1, 2};
  sp.fp8 = false;
  return sp;
}
}  // namespace

// The search reuses a group's layer blocks across its full-recompute variants (block_cache): each
// estimate must equal the one built from scratch, and the cache must rebuild whenever anything but
// the count of recomputed layers changes.
TEST(Search, ASpaceItCannotMeanIsRefusedByField) {
  const auto field_of = [](const llmsim::search_space& sp, const llmsim::search_options& o = {}) {
    try {
      (void)llmsim::search(llmsim::catalogue::llama3_8b, llmsim::catalogue::h100_sxm, sp, o);
    } catch (const llmsim::config_error& e) { return e.field(); }
    return std::string("searched");
  };
  const llmsim::search_space ok{.gpus = 8, .global_batch = 8, .seq_len = 2048};
  auto sp = ok;
  sp.gpus = 0;  // was an empty result, read as "nothing fits"
  EXPECT_EQ(field_of(sp), "search.gpus");
  sp = ok;
  sp.seq_len = -1;
  EXPECT_EQ(field_of(sp), "search.seq_len");
  sp = ok;
  sp.global_batch = 0;  // neither batch
  EXPECT_EQ(field_of(sp), "search.global_batch");
  sp.tokens_per_step = 3000;  // not a multiple of 2048
  EXPECT_EQ(field_of(sp), "search.tokens_per_step");
  EXPECT_EQ(field_of(ok, {.memory_margin = -0.1}), "search.memory_margin");
  EXPECT_EQ(field_of(ok, {.memory_margin = std::nan("")}), "search.memory_margin");
  EXPECT_EQ(field_of(ok, {.memory_margin = 1.0}), "searched");  // no budget: nothing fits, by how much
}

TEST(Search, BlockCacheReusesOnlyWhatIsTheSame) {
  const auto& m = model("llama3-8b");
  const auto& sys = system_of("h100-sxm");
  llmsim::strategy_spec base{};
  ASSERT_TRUE(llmsim::catalogue::parse_strategy_name("tp2_pp2_dp2_mbc8", base));
  auto full = [&](std::int64_t layers) {
    llmsim::strategy_spec s = base;
    s.enable_recompute = true;
    s.recompute_granularity = llmsim::recompute_kind::full_block;
    s.recompute_layer_num = layers;
    return s;
  };
  llmsim::strategy_spec selective = full(1);
  selective.recompute_granularity = llmsim::recompute_kind::selective_recompute;
  llmsim::strategy_spec wider = full(3);
  wider.micro_batch_size = 2;             // another micro-batch size: other blocks
  llmsim::strategy_spec zero3 = full(4);  // Megatron-FSDP ZeRO-3, optimizer on the host: the same blocks
  zero3.zero_state = 3;
  zero3.data_parallel_sharding_strategy = llmsim::dp_sharding_kind::optim_grads_params;
  zero3.optimizer_cpu_offload = true;
  zero3.use_precision_aware_optimizer = true;  // Megatron's offload needs it
  llmsim::strategy_spec fp8 = full(4);         // an FP8 recipe: quantized linears, other blocks
  fp8.fp8 = true;
  // Expected builds after each estimate: full 16, 1, 2 share one build; none, selective and mbs 2
  // each need their own; full 5 and ZeRO-3 + offload reuse the first; none again too; fp8 builds.
  const std::vector<std::pair<llmsim::strategy_spec, std::int64_t>> steps{
      {full(16), 1}, {full(1), 1}, {full(2), 1}, {base, 2}, {selective, 3},
      {wider, 4},    {full(5), 4}, {zero3, 4},   {base, 4}, {fp8, 5}};
  llmsim::block_cache cache;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& [s, builds] = steps[i];
    const auto fresh = llmsim::estimate(m, s, sys);
    const auto cached = llmsim::estimate_validated(m, s, sys, cache);
    EXPECT_EQ(cached.cost.duration_time_per_iter.value, fresh.cost.duration_time_per_iter.value) << "step " << i;
    EXPECT_EQ(cached.mem.peak_mem.value, fresh.mem.peak_mem.value) << "step " << i;
    for (std::size_t k = 0; k < fresh.stage_count; ++k)
      EXPECT_EQ(cached.stages[k].chunk_time, fresh.stages[k].chunk_time) << "step " << i << " stage " << k;
    EXPECT_EQ(cache.builds(), builds) << "step " << i;
  }
  // Recompute, ZeRO-3 and offload must have changed the figures of the strategies that share
  // blocks (else the test is empty).
  const auto time_of = [&](const llmsim::strategy_spec& s) {
    return llmsim::estimate(m, s, sys).cost.duration_time_per_iter.value;
  };
  EXPECT_NE(time_of(full(1)), time_of(full(16)));
  EXPECT_NE(time_of(zero3), time_of(full(4)));
  EXPECT_NE(llmsim::estimate(m, zero3, sys).mem.peak_mem.value, llmsim::estimate(m, full(4), sys).mem.peak_mem.value);

  // Pipelines: ZeRO-1 (the distributed optimizer shards the step, not a pass) and optimizer
  // offload leave every stage's pass times as they are, so the pipeline of full(4) is reused;
  // Megatron-FSDP ZeRO-3 gathers parameters inside the passes and is simulated anew.
  llmsim::strategy_spec zero1 = full(4);
  zero1.zero_state = 1;
  zero1.optimizer_cpu_offload = true;
  zero1.use_precision_aware_optimizer = true;  // Megatron's offload needs it
  llmsim::block_cache pipes;
  const std::vector<std::pair<llmsim::strategy_spec, std::int64_t>> pipe_steps{
      {full(4), 1}, {zero1, 1}, {zero3, 2}, {full(4), 2}, {full(5), 3}};
  for (std::size_t i = 0; i < pipe_steps.size(); ++i) {
    const auto& [s, simulations] = pipe_steps[i];
    const auto cached = llmsim::estimate_validated(m, s, sys, pipes);
    EXPECT_EQ(cached.cost.duration_time_per_iter.value, time_of(s)) << "pipeline step " << i;
    EXPECT_EQ(pipes.simulations(), simulations) << "pipeline step " << i;
  }
  EXPECT_NE(time_of(zero1), time_of(full(4))) << "offload moves the optimizer step to the host";
}

// Every fitting candidate of a space with every ZeRO stage, Megatron-FSDP, offload and recompute
// variant (candidates that share layer blocks through the cache, in the search's own order) has
// the time and peak of an estimate built from scratch.
TEST(Search, EveryFittingCandidateEqualsAFreshEstimate) {
  const auto& m = model("llama3-8b");
  const auto& sys = system_of("h100-sxm");
  llmsim::search_space sp{.gpus = 8, .global_batch = 16, .seq_len = 4096};
  sp.fsdp = true;
  sp.fp8 = false;
  sp.tp_comm_overlap = true;  // TE's TP overlap: other blocks than the same layout without it
  llmsim::search_options all{.top_k = 5, .memory_margin = 0.30, .threads = 1, .keep_all = true, .prune = false};
  const auto r = llmsim::search(m, sys, sp, all);
  ASSERT_GT(r.fitting.size(), 100U) << "the space must hold many sharing candidates";
  int zero3_fsdp_offload = 0, tp_overlap = 0;
  for (const auto& c : r.fitting) {
    const auto s = llmsim::to_strategy(c.point, sp);
    const auto fresh = llmsim::estimate(m, s, sys);
    ASSERT_EQ(c.time, fresh.cost.duration_time_per_iter.value) << "candidate " << c.point.order;
    ASSERT_EQ(c.peak_mem, fresh.mem.peak_mem.value) << "candidate " << c.point.order;
    zero3_fsdp_offload += (c.point.zero == 3 && c.point.fsdp && c.point.offload) ? 1 : 0;
    tp_overlap += c.point.layout.tp_overlap ? 1 : 0;
  }
  EXPECT_GT(zero3_fsdp_offload, 0) << "Megatron-FSDP ZeRO-3 with offload must be among them";
  EXPECT_GT(tp_overlap, 0) << "TP-overlap candidates must be among them";
}

TEST(Search, PruningEqualsBruteForceTopK) {
  const auto sp = small_space();
  llmsim::search_options brute{.top_k = 40, .memory_margin = 0.30, .prune = false};
  llmsim::search_options pruned = brute;
  pruned.prune = true;
  const auto a = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, brute);
  const auto b = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, pruned);
  expect_same_ranking(a.top, b.top);
  EXPECT_EQ(a.evaluated, b.evaluated) << "every candidate is decided, priced or bounded";
  EXPECT_LT(b.estimated, a.estimated) << "the bounds must save estimates on this space";
  EXPECT_GT(b.over_memory, 0) << "the space must exercise the memory bound";
  EXPECT_GT(a.fitting_count, 40) << "more fitting candidates than K, so the top-K bound matters";
  // Single-threaded and two-threaded searches agree too.
  pruned.threads = 1;
  expect_same_ranking(llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, pruned).top, b.top);
}

TEST(Search, PruningEqualsBruteForceEveryFittingCandidate) {
  auto sp = small_space();
  sp.tp_comm_overlap = true;  // the TP-overlap copies too (searched after the others)
  llmsim::search_options brute{.top_k = 5, .memory_margin = 0.30, .keep_all = true, .prune = false};
  llmsim::search_options pruned = brute;
  pruned.prune = true;
  const auto a = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, brute);
  const auto b = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, pruned);
  expect_same_ranking(a.fitting, b.fitting);
  expect_same_ranking(a.pareto, b.pareto);
  EXPECT_EQ(a.fitting_count, static_cast<std::int64_t>(a.fitting.size()));
  // The Pareto front: fastest first, each one holding strictly less memory than every faster one.
  for (std::size_t i = 1; i < a.pareto.size(); ++i) {
    EXPECT_GT(a.pareto[i].time, a.pareto[i - 1].time - 1e-15);
    EXPECT_LT(a.pareto[i].peak_mem, a.pareto[i - 1].peak_mem);
  }
  ASSERT_FALSE(a.fitting.empty());
  EXPECT_EQ(a.pareto.front().point.order, a.fitting.front().point.order) << "the fastest is on the front";
}

TEST(Search, MoeSpaceEqualsBruteForce) {
  // DeepSeek-V2-Lite (64 experts) on 16 GPUs: ep and etp vary as well.
  llmsim::search_space sp{.gpus = 16, .global_batch = 32, .seq_len = 4096};
  sp.zero = {1};
  sp.fp8 = false;
  sp.offload = false;
  llmsim::search_options brute{.top_k = 25, .memory_margin = 0.5, .prune = false};
  llmsim::search_options pruned = brute;
  pruned.prune = true;
  const auto a = llmsim::search(model("deepseek-v2-lite"), system_of("h100-sxm"), sp, brute);
  const auto b = llmsim::search(model("deepseek-v2-lite"), system_of("h100-sxm"), sp, pruned);
  expect_same_ranking(a.top, b.top);
  EXPECT_GT(a.fitting_count, 0);
}

TEST(Search, ExpertCommOverlapIsADimensionWhereMegatronCombines) {
  // DeepSeek-V2-Lite on 16 GPUs with the EP all-to-all overlap allowed: overlap layouts only with
  // ep > 1 and pp 1 or interleaved; the pruned search equals brute force; every overlap candidate
  // is its strategy's fresh estimate, refuses full recompute, and is no slower than its twin
  // without the overlap.
  const auto& m = model("deepseek-v2-lite");
  const auto& sys = system_of("h100-sxm");
  llmsim::search_space sp{.gpus = 16, .global_batch = 32, .seq_len = 4096};
  sp.zero = {1};
  sp.fp8 = false;
  sp.offload = false;
  sp.expert_comm_overlap = true;
  std::size_t overlap_layouts = 0;
  for (const auto& l : llmsim::search_layouts(m, sp)) {
    if (!l.ep_overlap) continue;
    ++overlap_layouts;
    EXPECT_GT(l.ep, 1);
    EXPECT_TRUE(l.pp == 1 || l.schedule == llmsim::pipeline_schedule_kind::interleaved_1f1b);
  }
  EXPECT_GT(overlap_layouts, 0U);
  llmsim::search_options brute{.top_k = 25, .memory_margin = 0.5, .keep_all = true, .prune = false};
  llmsim::search_options pruned = brute;
  pruned.prune = true;
  const auto a = llmsim::search(m, sys, sp, brute);
  const auto b = llmsim::search(m, sys, sp, pruned);
  expect_same_ranking(a.top, b.top);
  expect_same_ranking(a.fitting, b.fitting);
  int overlapped = 0;
  for (const auto& c : a.fitting) {
    if (!c.point.layout.ep_overlap) continue;
    ++overlapped;
    EXPECT_NE(c.point.recompute, llmsim::search_recompute::full);
    auto s = llmsim::to_strategy(c.point, sp);
    ASSERT_TRUE(s.overlap_moe_expert_parallel_comm && s.delay_wgrad_compute);
    EXPECT_EQ(c.time, llmsim::estimate(m, s, sys).cost.duration_time_per_iter.value);
    s.overlap_moe_expert_parallel_comm = s.delay_wgrad_compute = false;
    EXPECT_LE(c.time, llmsim::estimate(m, s, sys).cost.duration_time_per_iter.value) << c.point.order;
  }
  EXPECT_GT(overlapped, 0);
}

TEST(Search, ExpertCommOverlapCandidatesAreTheOnesValidationAccepts) {
  // The search offers the overlap only where validate would accept it: each overlap layout's
  // strategy validates, and a space whose base breaks one of Megatron's rules for the overlap (fp32,
  // the allgather dispatcher; transformer_config.py) gets no overlap layout at all.
  const auto& m = model("deepseek-v2-lite");
  llmsim::search_space sp{.gpus = 16, .global_batch = 32, .seq_len = 4096};
  sp.expert_comm_overlap = true;
  std::size_t overlap_layouts = 0;
  for (const auto& l : llmsim::search_layouts(m, sp)) {
    if (!l.ep_overlap) continue;
    ++overlap_layouts;
    EXPECT_NO_THROW(llmsim::validate(m, llmsim::to_strategy(llmsim::search_point{.layout = l}, sp)));
  }
  EXPECT_GT(overlap_layouts, 0U);
  for (const auto change : {0, 1}) {
    llmsim::search_space refused = sp;
    if (change == 0) refused.base.dtype = llmsim::dtype_kind::fp32;
    if (change == 1) refused.base.moe_dispatcher_policy = llmsim::dispatcher_kind::allgather;
    std::size_t offered = 0;
    for (const auto& l : llmsim::search_layouts(m, refused)) offered += l.ep_overlap ? 1U : 0U;
    EXPECT_EQ(offered, 0U) << "change " << change;
    EXPECT_GT(llmsim::search_layouts(m, refused).size(), 0U);
  }
}

TEST(Search, TpOverlapCandidatesCopyTheLayoutsWithTensorParallelism) {
  // --allow tp-overlap: every layout with tp > 1 once more with TE's userbuffers overlap (after the
  // others), none with tp 1 and none of a ZB-H1 or DualPipeV layout (their W passes are TE's
  // delayed weight gradients, which its bulk wgrad overlap refuses); each copy validates.
  const auto& m = model("llama3-8b");
  llmsim::search_space sp{.gpus = 8, .global_batch = 8, .seq_len = 4096};
  const auto plain = llmsim::search_layouts(m, sp);
  sp.tp_comm_overlap = true;
  const auto all = llmsim::search_layouts(m, sp);
  const auto copied = [](const llmsim::search_layout& l) {
    return l.tp > 1 && l.schedule != llmsim::pipeline_schedule_kind::zb_h1 &&
           l.schedule != llmsim::pipeline_schedule_kind::dualpipev;
  };
  std::size_t with_tp = 0;
  for (const auto& l : plain) with_tp += copied(l) ? 1U : 0U;
  ASSERT_GT(with_tp, 0U);
  ASSERT_EQ(all.size(), plain.size() + with_tp);
  std::size_t k = plain.size();
  for (const auto& l : plain) {
    if (!copied(l)) continue;
    const auto& o = all[k++];
    EXPECT_TRUE(o.tp_overlap);
    EXPECT_EQ(o.tp, l.tp);
    EXPECT_EQ(o.pp, l.pp);
    EXPECT_EQ(o.cp, l.cp);
    EXPECT_EQ(o.vp, l.vp);
    EXPECT_EQ(o.schedule, l.schedule);
    const auto s = llmsim::to_strategy(llmsim::search_point{.layout = o, .mbn = 8 * o.pp}, sp);
    EXPECT_TRUE(s.tp_comm_overlap);
    EXPECT_NO_THROW(llmsim::validate(m, s, system_of("h100-sxm")));
  }
  // A model whose linears Megatron cannot overlap (MLA) gets no copy; a system without an SM count
  // is refused by name, but only when copies exist (tp fixed at 1: none, and the search runs).
  EXPECT_EQ(llmsim::search_layouts(model("deepseek-v2-lite"), sp).size(), [&] {
    auto off = sp;
    off.tp_comm_overlap = false;
    return llmsim::search_layouts(model("deepseek-v2-lite"), off).size();
  }());
  try {
    (void)llmsim::search(m, system_of("mi355x"), sp, {.top_k = 1});
    ADD_FAILURE() << "mi355x accepted";
  } catch (const llmsim::config_error& e) { EXPECT_EQ(e.field(), "system.accelerator.sm_count"); }
  auto tp1 = sp;
  tp1.tp = {1};
  EXPECT_NO_THROW((void)llmsim::search(m, system_of("mi355x"), tp1, {.top_k = 1}));
}

TEST(Search, FitsNowhereNamesTheSmallestShortfall) {
  // Llama 3 405B (~406e9 parameters) on 8 A100-40GB: 16 bytes of weights, gradients and Adam state
  // per parameter (Megatron's mixed precision, ZeRO-3 sharding them 8 ways) are already ~810 GB /
  // 8 = ~101 GB per GPU — over 40 GB whatever the layout.
  llmsim::search_space sp{.gpus = 8, .global_batch = 8, .seq_len = 4096};
  sp.fp8 = false;
  llmsim::search_options o{.top_k = 3, .memory_margin = 0.05};
  const auto pruned = llmsim::search(model("llama3-405b"), system_of("a100-sxm"), sp, o);
  EXPECT_TRUE(pruned.top.empty());
  EXPECT_EQ(pruned.fitting_count, 0);
  ASSERT_GT(pruned.smallest_shortfall, 0);
  EXPECT_GT(pruned.smallest_shortfall + pruned.budget, 60e9) << "at least ~101 GB less what offload moves to the host";
  o.prune = false;
  const auto brute = llmsim::search(model("llama3-405b"), system_of("a100-sxm"), sp, o);
  EXPECT_EQ(brute.smallest_shortfall, pruned.smallest_shortfall) << "the least-memory candidate is always priced";
  EXPECT_EQ(brute.closest.point.order, pruned.closest.point.order);
}

TEST(Search, EmptySpaceIsNotAnError) {
  llmsim::search_space sp{.gpus = 8, .global_batch = 3, .seq_len = 4096};  // no dp of 8 GPUs divides 3 ... but dp 1
  sp.tp = {3};                                                             // no layout: tp 3 is not allowed
  const auto r = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp);
  EXPECT_EQ(r.layouts, 0);
  EXPECT_EQ(r.evaluated, 0);
  EXPECT_TRUE(r.top.empty());
  EXPECT_LT(r.smallest_shortfall, 0);
}

TEST(Search, SimuMaxEntryPoint) {
  llmsim::perf_llm perf;
  perf.configure({.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .tp_size = 2},
                 model("llama3-8b"), system_of("h100-sxm"));
  const auto best = llmsim::search_best_parallel_strategy_with_recompute(perf, 8, 0.0, 1, 32);
  ASSERT_TRUE(best.found);
  EXPECT_EQ(best.strategy.world_size, 8);
  EXPECT_EQ(llmsim::global_batch_size(best.strategy), 32);
  EXPECT_EQ(best.strategy.micro_batch_size, 1);
  EXPECT_GT(best.mfu, 0);
}

// The SimuMax entry point keeps the configured strategy's FP8 recipe, optimizer offload and
// ZB-H1 schedule (it searches tp, ep, pp and recompute only); they used to be dropped for bf16,
// no offload and 1F1B. Its answer is the estimate of the strategy it returns.
TEST(Search, SimuMaxEntryPointKeepsTheConfiguredFp8OffloadAndSchedule) {
  llmsim::strategy_spec configured{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 16, .tp_size = 2, .pp_size = 2};
  configured.fp8 = true;
  configured.fp8_recipe = llmsim::fp8_recipe_kind::blockwise;
  configured.optimizer_cpu_offload = true;
  configured.use_precision_aware_optimizer =
      true;  // Megatron's offload runs on it (its DeepSpeed ZeRO-2/3 are refused)
  configured.pipeline_schedule = llmsim::pipeline_schedule_kind::zb_h1;
  llmsim::perf_llm perf;
  perf.configure(configured, model("llama3-8b"), system_of("h100-sxm"));
  const auto best = llmsim::search_best_parallel_strategy_with_recompute(perf, 16, 0.0, 1, 64, {}, {}, {2});
  ASSERT_TRUE(best.found);
  EXPECT_EQ(best.strategy.pp_size, 2);
  EXPECT_TRUE(best.strategy.fp8);
  EXPECT_EQ(best.strategy.fp8_recipe, llmsim::fp8_recipe_kind::blockwise);
  EXPECT_TRUE(best.strategy.optimizer_cpu_offload);
  EXPECT_EQ(best.strategy.pipeline_schedule, llmsim::pipeline_schedule_kind::zb_h1);
  const auto fresh = llmsim::estimate(model("llama3-8b"), best.strategy, system_of("h100-sxm"));
  EXPECT_EQ(best.duration_time_per_iter, fresh.cost.duration_time_per_iter.value);
  EXPECT_EQ(best.peak_mem, fresh.mem.peak_mem.value);
  // Every fitting candidate carries them too.
  for (const auto& c : best.search.fitting) {
    const auto s = llmsim::strategy_of(c, llmsim::search_space{.gpus = 16,
                                                               .global_batch = 64,
                                                               .seq_len = 4096,
                                                               .fp8 = false,
                                                               .offload = false,
                                                               .schedules = false,
                                                               .base = configured});
    EXPECT_TRUE(s.fp8 && s.optimizer_cpu_offload && s.pipeline_schedule == llmsim::pipeline_schedule_kind::zb_h1);
    // Megatron's offload (distributed optimizer, Megatron-FSDP) on the precision-aware optimizer;
    // DeepSpeed ZeRO-2/3's (ZeRO-Offload) without it.
    EXPECT_EQ(s.use_precision_aware_optimizer, s.zero_state == 1 || s.data_parallel_sharding_strategy.has_value());
  }
}

// A base's FP8-only settings and its DualPipeV schedule stay where they can run: the bf16
// candidates of a space that searches FP8 drop the base's blockwise recipe and FP8 parameter
// gather (validation refuses them without fp8), and pp 1 layouts (no pipeline) run without the
// base's schedule; none of them is refused for it.
TEST(Search, BaseSettingsStayWhereTheyCanRun) {
  llmsim::search_space sp{.gpus = 8, .global_batch = 16, .seq_len = 4096};
  sp.tp = {2};
  sp.pp = {1};
  sp.zero = {1};
  sp.offload = false;
  sp.recompute = false;
  sp.schedules = false;
  sp.base.fp8 = true;
  sp.base.fp8_recipe = llmsim::fp8_recipe_kind::blockwise;
  sp.base.fp8_param_gather = true;
  sp.base.pipeline_schedule = llmsim::pipeline_schedule_kind::dualpipev;
  const llmsim::search_options all{.top_k = 5, .memory_margin = 0.30, .keep_all = true, .prune = false};
  const auto one = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, all);
  EXPECT_EQ(one.invalid, 0) << "neither the recipe nor the schedule refuses a candidate";
  int bf16 = 0;
  for (const auto& c : one.fitting) {
    const auto s = llmsim::strategy_of(c, sp);
    EXPECT_FALSE(s.pipeline_schedule.has_value());
    if (s.fp8) continue;
    ++bf16;
    EXPECT_EQ(s.fp8_recipe, llmsim::fp8_recipe_kind::delayed);
    EXPECT_FALSE(s.fp8_param_gather);
  }
  EXPECT_GT(bf16, 0);
  // pp 2 layouts (not interleaved: that is a schedule of its own) keep the base's DualPipeV.
  sp.pp = {2};
  sp.vp = {1};
  const auto two = llmsim::search(model("llama3-8b"), system_of("h100-sxm"), sp, all);
  ASSERT_FALSE(two.fitting.empty());
  for (const auto& c : two.fitting)
    EXPECT_EQ(llmsim::strategy_of(c, sp).pipeline_schedule, llmsim::pipeline_schedule_kind::dualpipev);
}

TEST(Search, RealRunsLayoutsAreMatchedOrBeaten) {
  const auto file = llmsim_test::shared_dir() / "validation" / "training_cases.json";
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << "no validation cases at " << file << " (tests that read ../shared skip when it is absent)";
  const auto doc = lj::read_file(file);
  const auto root = file.parent_path() / doc["config_root"].get<std::string>();
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    const auto name = c["name"].get<std::string>();
    lj::perf_llm perf;
    perf.configure(root / c["strategy"].get<std::string>(), root / c["model"].get<std::string>(),
                   root / c["system"].get<std::string>(), {}, c.value("strategy_overrides", lj::value::object()),
                   c.value("model_overrides", lj::value::object()));
    perf.run_estimate();
    const llmsim::strategy_spec& own = perf.strategy();
    const double own_time = perf.analysis_cost().duration_time_per_iter.value;
    llmsim::search_space sp{
        .gpus = own.world_size, .global_batch = llmsim::global_batch_size(own), .seq_len = own.seq_len};
    sp.base = own;
    llmsim::search_options o{.top_k = 1, .memory_margin = 0.0, .keep_all = true};
    const auto r = llmsim::search(perf.model(), perf.system(), sp, o);
    const bool own_fits = static_cast<double>(perf.analysis_mem().peak_mem.value) <= r.budget;
    std::size_t rank = 1;
    for (const auto& f : r.fitting) rank += f.time < own_time ? 1 : 0;
    std::printf("%-45s own %.3f s (%s), best %.3f s %s; own layout ranks %zu of %lld\n", name.c_str(), own_time,
                own_fits ? "fits" : "over device memory", r.top.empty() ? 0.0 : r.top[0].time, r.top.empty() ? "-" : "",
                rank, static_cast<long long>(r.fitting_count));
    if (!own_fits) continue;  // the real run's layout must itself be in the fitting set to be beaten
    ASSERT_FALSE(r.top.empty()) << name;
    EXPECT_LE(r.top[0].time, own_time) << name << ": the search must find a layout no slower than the run's own";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace llmsim_test_search
