// Properties every estimate must have, checked over random valid jobs (issue 15): a seeded
// generator draws a catalogue model and system and a parallel layout; layouts the model or the
// system refuses are skipped, the others must satisfy every property below.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_properties {

using llmsim::strategy_spec;

struct job {
  const llmsim::model_spec* model;
  const llmsim::system_spec* system;
  strategy_spec strategy;
  std::string name;
};

/// Draws a job; `rng` is seeded, so every run checks the same jobs.
job draw(std::mt19937_64& rng) {
  const auto pick = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  const auto& named_model = llmsim::catalogue::models[static_cast<std::size_t>(pick(llmsim::catalogue::models.size()))];
  const auto& named_system =
      llmsim::catalogue::systems[static_cast<std::size_t>(pick(llmsim::catalogue::systems.size()))];
  strategy_spec s{};
  s.tp_size = std::int64_t{1} << pick(4);
  s.pp_size = std::int64_t{1} << pick(3);
  const std::int64_t dp = std::int64_t{1} << pick(4);
  s.world_size = s.tp_size * s.pp_size * dp;
  s.ep_size = llmsim::is_moe(*named_model.spec) ? std::int64_t{1} << pick(4) : 1;
  s.enable_sequence_parallel = s.tp_size > 1;
  s.seq_len = 4096;
  s.micro_batch_size = 1;
  s.micro_batch_num = s.pp_size * (1 + pick(4));
  s.zero_state = pick(2);
  if (pick(3) == 0) {
    s.enable_recompute = true;
    s.recompute_granularity = llmsim::recompute_kind::full_block;
    s.recompute_layer_num = 1;
  }
  std::string name = std::string(named_model.name) + " on " + std::string(named_system.name) + " tp" +
                     std::to_string(s.tp_size) + " pp" + std::to_string(s.pp_size) + " dp" + std::to_string(dp) +
                     " ep" + std::to_string(s.ep_size) + " mbc" + std::to_string(s.micro_batch_num);
  return {named_model.spec, named_system.spec, s, name};
}

/// The estimate, or false when the job is refused (a refusal is not a property violation).
bool estimated(const job& j, const strategy_spec& s, const llmsim::system_spec& sys, llmsim::estimate_result& out) {
  try {
    out = llmsim::estimate(*j.model, s, sys);
    return true;
  } catch (const llmsim::config_error&) { return false; }
}

TEST(Properties, HoldOverRandomValidJobs) {
  std::mt19937_64 rng(20261123);
  int checked = 0;
  for (int draws = 0; draws < 4000 && checked < 150; ++draws) {
    const job j = draw(rng);
    llmsim::estimate_result base;
    if (!estimated(j, j.strategy, *j.system, base)) continue;
    SCOPED_TRACE(j.name);
    ++checked;
    // Every stage's memory is at most the reported peak, and the peak is one of them.
    bool peak_is_a_stage = false;
    for (std::size_t i = 0; i < base.stage_count; ++i) {
      EXPECT_LE(base.stages[i].peak_mem.value, base.mem.peak_mem.value) << "stage " << i;
      peak_is_a_stage = peak_is_a_stage || base.stages[i].peak_mem == base.mem.peak_mem;
    }
    EXPECT_TRUE(peak_is_a_stage);
    // More micro-batches (one more per pipeline stage) never lower the iteration time.
    strategy_spec more = j.strategy;
    more.micro_batch_num += j.strategy.pp_size;
    llmsim::estimate_result longer;
    if (estimated(j, more, *j.system, longer)) {
      EXPECT_GE(longer.cost.duration_time_per_iter.value, base.cost.duration_time_per_iter.value);
    }
    // More memory per device changes no time and no byte count.
    llmsim::system_spec bigger = *j.system;
    bigger.accelerator.mem_gbs *= 2;
    llmsim::estimate_result roomy;
    ASSERT_TRUE(estimated(j, j.strategy, bigger, roomy));
    EXPECT_EQ(roomy.cost.duration_time_per_iter.value, base.cost.duration_time_per_iter.value);
    EXPECT_EQ(roomy.mem.peak_mem, base.mem.peak_mem);
    // Twice the data-parallel replicas, same micro-batches per replica: the activations are those of
    // one replica either way, so per-GPU memory changes by at most the change of the sharded model
    // state (weights, gradients, optimizer state, gathered buffers) and never grows.
    strategy_spec wider = j.strategy;
    wider.world_size *= 2;
    llmsim::estimate_result twice;
    if (estimated(j, wider, *j.system, twice)) {
      const auto& a = base.stages[static_cast<std::size_t>(base.mem.peak_stage)];
      const auto& b = twice.stages[static_cast<std::size_t>(base.mem.peak_stage)];
      EXPECT_LE(b.peak_mem.value, a.peak_mem.value);
      EXPECT_LE(a.peak_mem.value - b.peak_mem.value, a.model_mem.value - b.model_mem.value);
    }
  }
  EXPECT_GE(checked, 150) << "too few valid jobs drawn: the generator no longer matches the validation rules";
}

}  // namespace llmsim_test_properties
