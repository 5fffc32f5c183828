// The whole estimate runs in constant expressions: the same functions the runtime path uses.
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;
using namespace llmsim::literals;

constexpr strategy_spec tp2_dp4{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
constexpr estimate_result llama3_8b_h100 = estimate(catalogue::llama3_8b, tp2_dp4, catalogue::h100_sxm);
static_assert(llama3_8b_h100.mem.peak_mem < 80_GiB);
static_assert(llama3_8b_h100.cost.duration_time_per_iter > 100_ms &&
              llama3_8b_h100.cost.duration_time_per_iter < 100_s);
static_assert(llama3_8b_h100.cost.mfu > 0 && llama3_8b_h100.cost.mfu < 1);
// Llama 3 8B: 8,030,261,248 parameters (32 layers of 218,112,000, two 128256 x 4096 embeddings, final norm).
static_assert(parameter_count(catalogue::llama3_8b, 128256) == 8030261248.0);

// 1F1B with equal stages and free p2p: (m + p - 1) * (F + B).
constexpr seconds pipeline_4x8 = [] {
  std::vector<stage_timing> t(4, stage_timing{1_s, 2_s, {}});
  return simulate_1f1b(t, 8).total;
}();
static_assert(pipeline_4x8 == 33_s);
}  // namespace
