// GPT-3 175B (Brown et al. 2020, Table 2.1): multi-head attention, GeLU MLP of 4h, LayerNorm,
// learned positions, biases, tied input and output embeddings, 2048-token context; trained here
// Megatron-style on 1024 A100s (tensor parallel 8, 8 pipeline stages, data parallel 16).
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::seq, llmsim::micro_batches;

constexpr auto gpt3_175b = model(
    "gpt3_175b",
    embedding{
        .vocab = 50257, .hidden = 12288, .position = llmsim::position_kind::learned_absolute, .max_positions = 2048},
    repeated{decoder_layer{mha_attention{.heads = 96, .head_dim = 128, .bias = true},
                           gelu_mlp{.ffn = 49152, .bias = true}, layer_norm{}},
             96},
    lm_head{.tied = true});

using strategy = parallel<tp<8>, pp<8>, dp<16>, seq<2048>, micro_batches<64>>;
using gpu = llmsim::hw::a100_sxm;

constexpr llmsim::estimate_result r = estimate(gpt3_175b, strategy{}, gpu{});
static_assert(llmsim::fits_on<r.mem.peak_mem, gpu>);
static_assert(to_spec(gpt3_175b) == llmsim::catalogue::gpt3_175b);  // the same model as the catalogue's
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(gpt3_175b), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
