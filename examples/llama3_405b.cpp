// Llama 3 405B ("The Llama 3 Herd of Models" 2024, §3.3) on 16384 H100s: tensor parallel 8,
// 16 pipeline stages with one layer fewer on the first and the last (they hold the embedding and
// the head), data parallel 128, 8K sequences, 16M tokens per step. Which recompute the job needs
// is chosen at compile time: the fastest candidate whose peak memory fits an H100.
#include <llmsim/llmsim.hpp>

#include <cstdio>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::seq, llmsim::micro_batches,
    llmsim::first_stage_layers, llmsim::last_stage_layers;
namespace recompute = llmsim::recompute;

constexpr auto llama3_405b = model("llama3_405b", embedding{.vocab = 128256, .hidden = 16384},
                                   repeated{decoder_layer{gqa_attention{.heads = 128, .kv_heads = 8, .head_dim = 128},
                                                          swiglu_mlp{.ffn = 53248}, rms_norm{}},
                                            126},
                                   lm_head{});

template <class Recompute>
using layout = parallel<tp<8>, pp<16>, first_stage_layers<7>, last_stage_layers<7>, dp<128>, seq<8192>,
                        micro_batches<16>, Recompute>;
using gpu = llmsim::hw::h100_sxm;

// Each candidate is estimated in a constant expression of its own.
constexpr llmsim::strategy_choice best =
    llmsim::fastest_fitting_of<llama3_405b, gpu, layout<recompute::none>, layout<recompute::selective>,
                               layout<recompute::full>>;
static_assert(best.found, "no candidate fits an H100");
static_assert(llmsim::fits_on<best.result.mem.peak_mem, gpu>);
static_assert(best.strategy.world_size == 16384 &&
              llmsim::global_batch_size(best.strategy) * best.strategy.seq_len == 16 * 1024 * 1024);
}  // namespace

int main() {
  const char* names[] = {"none", "selective", "full"};
  std::printf("fastest fitting recompute: %s (candidate %zu of 3)\n\n", names[best.index], best.index + 1);
  std::fputs(llmsim::to_text(best.result, to_spec(llama3_405b), best.strategy, gpu::spec).c_str(), stdout);
  return 0;
}
