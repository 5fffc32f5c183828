// Llama 3 8B (Meta model card, April 2024) described with the typed API and estimated at compile
// time: a strategy that does not fit the model's heads or layers, or a job that does not fit the
// GPU's memory, does not compile.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::dp, llmsim::seq, llmsim::micro_batches;

constexpr auto llama3_8b = model("llama3_8b", embedding{.vocab = 128256, .hidden = 4096},
                                 repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                                        swiglu_mlp{.ffn = 14336}, rms_norm{}},
                                          32},
                                 lm_head{});

// Eight H100s: tensor parallel 2 inside the pairs, data parallel 4 across them, 8K sequences.
using strategy = parallel<tp<2>, dp<4>, seq<8192>, micro_batches<16>>;
using gpu = llmsim::hw::h100_sxm;

constexpr llmsim::estimate_result r = estimate(llama3_8b, strategy{}, gpu{});
static_assert(llmsim::fits_on<r.mem.peak_mem, gpu>);
static_assert(llmsim::dp_size(strategy::spec) == 4 && llmsim::global_batch_size(strategy::spec) == 64);
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(llama3_8b), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
