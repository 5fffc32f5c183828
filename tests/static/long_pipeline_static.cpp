// The largest catalogue model (Llama 3 405B, 126 layers) with 4096 micro-batches over 9 pipeline
// stages evaluates as a constant within the compilers' default limits (no -fconstexpr-* flags).
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;
using namespace llmsim::literals;

constexpr strategy_spec tp8_pp9_dp16{.seq_len = 4096,
                                     .micro_batch_size = 1,
                                     .micro_batch_num = 4096,
                                     .world_size = 8 * 9 * 16,
                                     .tp_size = 8,
                                     .pp_size = 9};
constexpr estimate_result llama3_405b = estimate(catalogue::llama3_405b, tp8_pp9_dp16, catalogue::h100_sxm);
static_assert(llama3_405b.stage_count == 3);
static_assert(llama3_405b.mem.peak_mem < 80_GiB);
static_assert(llama3_405b.cost.duration_time_per_iter > 1_s);
}  // namespace
