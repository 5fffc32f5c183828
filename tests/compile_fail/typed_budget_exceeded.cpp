// A memory budget checked at compile time: Llama 3 70B with tensor parallelism 8 alone needs more
// than an 80 GB H100 holds, and the error shows both byte counts (GCC: "the comparison reduces to
// '(needed <= 85899345920)'", Clang: "requirement 'neededL <= 85899345920L'").
// expect: llmsim::fits_in: the bytes needed \(left\) exceed the bytes available \(right\)
// expect: [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]+L? <= 85899345920
#include <llmsim/llmsim.hpp>

using namespace llmsim::typed;
using namespace llmsim::literals;

constexpr auto llama3_70b = model(
    "llama3_70b", embedding{.vocab = 128256, .hidden = 8192},
    repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128}, swiglu_mlp{.ffn = 28672}}, 80},
    lm_head{});
constexpr auto r = estimate(llama3_70b, llmsim::parallel<llmsim::tp<8>>{}, llmsim::hw::h100_sxm{});
static_assert(llmsim::fits_in<r.mem.peak_mem, 80_GiB>);
