// Qwen3-32B (Qwen team config.json): 64 query heads of 128 — wider together than the hidden size
// of 5120 — and 8 key/value heads; on 32 B200s with tensor parallel 4, 2 pipeline stages, data
// parallel 4.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::micro_batches;

constexpr auto qwen3_32b = model("qwen3_32b", embedding{.vocab = 151936, .hidden = 5120},
                                 repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128},
                                                        swiglu_mlp{.ffn = 25600}, rms_norm{}},
                                          64},
                                 lm_head{});

using strategy = parallel<tp<4>, pp<2>, dp<4>, micro_batches<16>>;
using gpu = llmsim::hw::b200;

constexpr llmsim::estimate_result r = estimate(qwen3_32b, strategy{}, gpu{});
static_assert(llmsim::fits_on<r.mem.peak_mem, gpu>);
// Half of a B200 would do as well: this job could share its GPUs.
static_assert(llmsim::fits_in<r.mem.peak_mem, 90_GiB>);
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(qwen3_32b), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
