// Uses llmsim's core through add_subdirectory: constexpr validation, and the same check at run time.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
constexpr llmsim::strategy_spec tp2_dp4{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
static_assert((llmsim::validate(tp2_dp4), true));
static_assert(llmsim::dp_size(tp2_dp4) == 4);
}  // namespace

int main() {
  llmsim::strategy_spec s = tp2_dp4;
  s.tp_size = 3;  // does not divide world_size=8
  try {
    llmsim::validate(s);
  } catch (const llmsim::config_error& e) {
    std::printf("llmsim %s via add_subdirectory: ok (%s)\n", LLMSIM_VERSION_STRING, e.what());
    return 0;
  }
  std::fprintf(stderr, "a strategy with tp_size=3, world_size=8 was accepted\n");
  return 1;
}
