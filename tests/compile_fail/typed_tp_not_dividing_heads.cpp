// Through the typed API, a tensor-parallel size that does not divide the heads is the same compile
// error as through the specs: the note shows the rule.
// expect: strategy\.tp_size=\{\} must divide model\.head_num=\{\}
#include <llmsim/llmsim.hpp>

using namespace llmsim::typed;

constexpr auto llama3_8b = model(
    "llama3_8b", embedding{.vocab = 128256, .hidden = 4096},
    repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128}, swiglu_mlp{.ffn = 14336}}, 32},
    lm_head{});
constexpr auto r = estimate(llama3_8b, llmsim::parallel<llmsim::tp<3>, llmsim::dp<4>>{}, llmsim::hw::h100_sxm{});
