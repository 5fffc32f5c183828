// Llama 3 8B (Meta model card, April 2024) described in code and checked at compile time:
// a strategy that does not fit the model's heads or layers does not compile.
#include <llmsim/llmsim.hpp>

#include <cstdio>
#include <string>

namespace {
using namespace llmsim::literals;

constexpr llmsim::model_spec llama3_8b{.model_type = llmsim::model_kind::dense, .model_name = "llama3_8b",
                                       .hidden_size = 4096, .head_num = 32, .kv_head_num = 8, .head_size = 128,
                                       .intermediate_size = 14336, .layer_num = 32, .vocab_size = 128256,
                                       .use_swiglu = true};

// Eight GPUs: tensor parallel 2 inside the pairs, data parallel 4 across them.
constexpr llmsim::strategy_spec tp2_dp4{.seq_len = 8192, .micro_batch_size = 1, .micro_batch_num = 16,
                                        .world_size = 8, .tp_size = 2};

static_assert((llmsim::validate(llama3_8b), llmsim::validate(tp2_dp4), true));
static_assert(llama3_8b.head_num % tp2_dp4.tp_size == 0, "tp must split the heads evenly");
static_assert(llmsim::dp_size(tp2_dp4) == 4);
static_assert(llmsim::padded_vocab(llama3_8b, tp2_dp4.tp_size) == 128256);
}  // namespace

int main() {
  std::printf("%s: %lld layers, hidden %lld, %lld query heads / %lld kv heads, vocab %lld\n",
              std::string(llama3_8b.model_name.view()).c_str(), static_cast<long long>(llama3_8b.layer_num),
              static_cast<long long>(llama3_8b.hidden_size), static_cast<long long>(llama3_8b.head_num),
              static_cast<long long>(llama3_8b.kv_head_num), static_cast<long long>(llama3_8b.vocab_size));
  std::printf("strategy: world %lld = tp %lld x pp %lld x dp %lld, global batch %lld sequences of %lld tokens\n",
              static_cast<long long>(tp2_dp4.world_size), static_cast<long long>(tp2_dp4.tp_size),
              static_cast<long long>(tp2_dp4.pp_size), static_cast<long long>(llmsim::dp_size(tp2_dp4)),
              static_cast<long long>(llmsim::global_batch_size(tp2_dp4)), static_cast<long long>(tp2_dp4.seq_len));
  return 0;
}
