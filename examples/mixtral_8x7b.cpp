// Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts"; Mistral AI config.json): 32 layers of
// grouped-query attention and 8 SwiGLU experts of 14336, two per token; on 32 H100s with tensor
// parallel 2, 2 pipeline stages and the experts spread over 4 ranks.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::ep, llmsim::dp, llmsim::micro_batches;

constexpr auto mixtral_8x7b =
    model("mixtral_8x7b", embedding{.vocab = 32000, .hidden = 4096},
          repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                 moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 14336}, rms_norm{}},
                   32},
          lm_head{});

using strategy = parallel<tp<2>, pp<2>, ep<4>, dp<8>, micro_batches<16>>;
using gpu = llmsim::hw::h100_sxm;

constexpr llmsim::estimate_result r = estimate(mixtral_8x7b, strategy{}, gpu{});
static_assert(llmsim::fits_on<r.mem.peak_mem, gpu>);
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(mixtral_8x7b), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
