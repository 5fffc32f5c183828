// One formula: a pipeline-layout job and an MTP job estimated at compile time equal, bit for bit,
// the same specs estimated at run time (specs passed through a volatile flag so the compiler
// cannot fold the run-time call).
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "sanitized_build.hpp"

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_layout_identity {

using namespace llmsim;

namespace {
constexpr strategy_spec layout_job{.seq_len = 4096,
                                   .micro_batch_size = 1,
                                   .micro_batch_num = 8,
                                   .world_size = 16,
                                   .tp_size = 2,
                                   .pp_size = 4,
                                   .interleaving_size = 2,
                                   .pipeline_model_parallel_layout = "Et*3|(t*4|)*6,t*5L"};
constexpr model_spec mtp_model = [] {
  model_spec m = catalogue::llama3_8b;
  m.mtp_num_layers = 1;
  return m;
}();
constexpr strategy_spec mtp_vp2{.seq_len = 4096,
                                .micro_batch_size = 1,
                                .micro_batch_num = 8,
                                .world_size = 16,
                                .tp_size = 2,
                                .pp_size = 4,
                                .interleaving_size = 2};

template <class T>
T at_run_time(const T& v) {
  volatile bool keep = true;
  T copy = v;
  if (!keep) copy = T{};
  return copy;
}
}  // namespace

TEST(LayoutIdentity, CompileTimeEqualsRunTime) {
#ifdef LLMSIM_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer instrumentation keeps GCC from evaluating the estimate as a constant; the plain GCC and "
                  "Clang builds run this test";
#else
  constexpr estimate_result a = estimate(catalogue::llama3_8b, layout_job, catalogue::h100_sxm);
  const estimate_result b = estimate(catalogue::llama3_8b, at_run_time(layout_job), catalogue::h100_sxm);
  EXPECT_EQ(a.cost.duration_time_per_iter.value, b.cost.duration_time_per_iter.value);
  EXPECT_EQ(a.mem.peak_mem.value, b.mem.peak_mem.value);
  constexpr estimate_result c = estimate(mtp_model, mtp_vp2, catalogue::h100_sxm);
  const estimate_result d = estimate(at_run_time(mtp_model), mtp_vp2, catalogue::h100_sxm);
  EXPECT_EQ(c.cost.duration_time_per_iter.value, d.cost.duration_time_per_iter.value);
  EXPECT_EQ(c.mem.peak_mem.value, d.mem.peak_mem.value);
  EXPECT_EQ(c.cost.mfu, d.cost.mfu);
#endif
}

}  // namespace llmsim_test_layout_identity
