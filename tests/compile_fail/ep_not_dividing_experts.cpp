// Expert parallelism must divide the number of experts.
// expect: strategy\.ep_size=\{\} must divide model\.expert_num=\{\}
#include <llmsim/llmsim.hpp>

constexpr llmsim::model_spec model{.model_type = llmsim::model_kind::moe,
                                   .hidden_size = 4096,
                                   .head_num = 32,
                                   .kv_head_num = 8,
                                   .intermediate_size = 14336,
                                   .layer_num = 32,
                                   .vocab_size = 32000,
                                   .expert_num = 8,
                                   .topk = 2};
constexpr llmsim::strategy_spec strategy{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 6, .ep_size = 3};
static_assert((llmsim::validate(model, strategy, llmsim::catalogue::h100_sxm), true));
