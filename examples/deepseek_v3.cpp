// DeepSeek-V3 (DeepSeek-AI 2024, technical report §3-4; config.json): 61 layers of multi-head
// latent attention, the first 3 with a dense MLP, the other 58 with 256 routed experts of 2048
// (8 per token) and one shared expert. Trained on 2048 GPUs with 16 pipeline stages, experts
// spread over 64 ranks and ZeRO-1 data parallelism; here on H100s with 4 layers per stage (the
// last stage 1), 32 micro-batches and full recompute.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::pp, llmsim::ep, llmsim::dp, llmsim::seq, llmsim::micro_batches,
    llmsim::first_stage_layers, llmsim::last_stage_layers;
namespace recompute = llmsim::recompute;

constexpr mla_attention mla{.heads = 128,
                            .q_lora_rank = 1536,
                            .kv_lora_rank = 512,
                            .qk_head_dim = 128,
                            .qk_pos_emb_head_dim = 64,
                            .v_head_dim = 128};
constexpr auto deepseek_v3 = model("deepseek_v3", embedding{.vocab = 129280, .hidden = 7168},
                                   repeated{decoder_layer{mla, swiglu_mlp{.ffn = 18432}, rms_norm{}}, 3},
                                   repeated{decoder_layer{mla,
                                                          moe_mlp{.experts = 256,
                                                                  .topk = 8,
                                                                  .expert_ffn = 2048,
                                                                  .shared_ffn = 2048,
                                                                  .score = llmsim::router_score_kind::sigmoid,
                                                                  .groups = 8,
                                                                  .group_topk = 4,
                                                                  .expert_bias = true},
                                                          rms_norm{}},
                                            58},
                                   lm_head{});
static_assert(to_spec(deepseek_v3) == llmsim::catalogue::deepseek_v3);  // the same model as the catalogue's

using strategy = parallel<pp<16>, first_stage_layers<4>, last_stage_layers<1>, ep<64>, dp<128>, seq<4096>,
                          micro_batches<32>, recompute::full>;
using gpu = llmsim::hw::h100_sxm;

constexpr llmsim::estimate_result r = estimate(deepseek_v3, strategy{}, gpu{});
static_assert(llmsim::fits_on<r.mem.peak_mem, gpu>);
static_assert(strategy::spec.world_size == 2048 && llmsim::edp_size(strategy::spec) == 2);
}  // namespace

int main() {
  std::fputs(llmsim::to_text(r, to_spec(deepseek_v3), strategy::spec, gpu::spec).c_str(), stdout);
  return 0;
}
