// ZeRO-3 in constant expressions: the same estimate as at run time (tests/runtime/test_zero.cpp
// derives these numbers by hand).
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;
using namespace llmsim::literals;

constexpr strategy_spec zero3{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2, .zero_state = 3};
constexpr estimate_result llama3_8b_zero3 = estimate(catalogue::llama3_8b, zero3, catalogue::h100_sxm);
// Two units in flight: the last layer (109,060,096 parameters on a tp = 2 rank) and the head
// (128256 x 4096 / 2 + 4096), 2 bytes each.
static_assert(llama3_8b_zero3.stages[0].gathered_param_mem.value == 2 * (109060096LL + 262672384LL));
// Weights, gradients and optimizer state: 16 bytes per parameter over dp = 4.
static_assert((llama3_8b_zero3.stages[0].weight_mem + llama3_8b_zero3.stages[0].grad_mem +
               llama3_8b_zero3.stages[0].optimizer_state_mem)
                  .value >= 16 * 4015263744LL / 4 - 2);
// Nothing left after the last backward but the tp sum of the sequence-parallel norms' gradients.
static_assert(llama3_8b_zero3.stages[0].dp_time.value == llama3_8b_zero3.stages[0].tp_grad_allreduce_time.value);
static_assert(llama3_8b_zero3.stages[0].tp_grad_allreduce_time.value > 0);
static_assert(llama3_8b_zero3.mem.peak_mem < 80_GiB);

// The prefetched gathers: compute 4 s per unit hides every gather of 1 s but the first.
static_assert(sharded_forward_exposed({{4, 0, 1, 0, 4}}) == 1.0);
}  // namespace
