// Llama 3 70B (Meta model card; "The Llama 3 Herd of Models" 2024, Table 3) on 64 H100s, with a
// budget that keeps 8 GiB of every GPU free for the CUDA context and NCCL buffers.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::seq, llmsim::micro_batches;
namespace recompute = llmsim::recompute;

constexpr auto llama3_70b = model("llama3_70b", embedding{.vocab = 128256, .hidden = 8192},
                                  repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128},
                                                         swiglu_mlp{.ffn = 28672}, rms_norm{}},
                                           80},
                                  lm_head{});

// Tensor parallel 8 inside a node, 4 pipeline stages of 20 layers, data parallel 2; attention recomputed.
using strategy = parallel<tp<8>, pp<4>, dp<2>, seq<8192>, micro_batches<32>, recompute::selective>;
using gpu = llmsim::hw::h100_sxm;

constexpr llmsim::estimate_result r = estimate(llama3_70b, strategy{}, gpu{});
static_assert(llmsim::fits_in<r.mem.peak_mem_with_reserved, llmsim::hw::device_memory(gpu::spec) - 8_GiB>);
static_assert(r.stage_count == 3 && r.stages[0].layers == 20);
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(llama3_70b), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
