// A strategy whose tensor-parallel size does not divide the model's heads is refused at compile time.
// expect: strategy\.tp_size=\{\} must divide model\.head_num=\{\}
#include <llmsim/llmsim.hpp>

constexpr llmsim::model_spec model{.hidden_size = 4096,
                                   .head_num = 32,
                                   .kv_head_num = 8,
                                   .intermediate_size = 14336,
                                   .layer_num = 32,
                                   .vocab_size = 128256};
constexpr llmsim::strategy_spec strategy{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 12, .tp_size = 3};
static_assert((llmsim::validate(model, strategy, llmsim::catalogue::h100_sxm), true));
