// Through the typed API, an expert-parallel size that does not divide the experts is a compile
// error that shows the rule (validation runs before anything is estimated).
// expect: strategy\.ep_size=\{\} must divide model\.expert_num=\{\}
#include <llmsim/llmsim.hpp>

using namespace llmsim::typed;

constexpr auto mixtral_8x7b = model("mixtral_8x7b", embedding{.vocab = 32000, .hidden = 4096},
                                    repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                                           moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 14336}},
                                             32},
                                    lm_head{});
constexpr auto r = estimate(mixtral_8x7b, llmsim::parallel<llmsim::ep<3>, llmsim::dp<6>>{}, llmsim::hw::h100_sxm{});
