// Uses the core headers of an installed llmsim only: a compile-time memory budget and a runtime
// estimate on a catalogue system, no JSON.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
constexpr llmsim::strategy_spec one_node{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 8};
constexpr auto estimate = llmsim::estimate(llmsim::catalogue::llama3_8b, one_node, llmsim::catalogue::h100_sxm);
static_assert(estimate.mem.peak_mem < estimate.mem.device_mem, "Llama 3 8B at tp8 fits an H100");
}  // namespace

int main() {
  const auto r = llmsim::estimate(llmsim::catalogue::llama3_8b, one_node, llmsim::catalogue::h100_sxm);
  if (r.cost.duration_time_per_iter.value != estimate.cost.duration_time_per_iter.value) {
    std::fprintf(stderr, "the runtime estimate differs from the compile-time one\n");
    return 1;
  }
  std::printf("core consumer: %.1f ms per iteration\n", r.cost.duration_time_per_iter.ms());
  return 0;
}
