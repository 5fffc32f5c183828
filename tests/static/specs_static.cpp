// Specs and their validation in constant expressions: the same functions the JSON path uses.
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;

constexpr model_spec llama3_8b{.model_type = model_kind::dense,
                               .model_name = "llama3_8b",
                               .hidden_size = 4096,
                               .head_num = 32,
                               .kv_head_num = 8,
                               .head_size = 128,
                               .intermediate_size = 14336,
                               .layer_num = 32,
                               .vocab_size = 128256,
                               .use_swiglu = true};
constexpr strategy_spec tp2_dp4{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
constexpr strategy_spec pp4{.seq_len = 4096,
                            .micro_batch_size = 1,
                            .micro_batch_num = 8,
                            .world_size = 8,
                            .pp_size = 4,
                            .num_layers_in_first_pipeline_stage = 7,
                            .num_layers_in_last_pipeline_stage = 7};

constexpr bool valid(const model_spec& m) { return (validate(m), true); }
constexpr bool valid(const strategy_spec& s) { return (validate(s), true); }

static_assert(valid(llama3_8b));
static_assert(valid(tp2_dp4) && valid(pp4));
static_assert(dp_size(tp2_dp4) == 4 && edp_size(tp2_dp4) == 8 && global_batch_size(tp2_dp4) == 32);
static_assert(!is_moe(llama3_8b) && head_dim(llama3_8b) == 128);
// Megatron pads the vocabulary to a multiple of 128 * tp.
static_assert(padded_vocab(llama3_8b, 1) == 128256 && padded_vocab(llama3_8b, 3) == 128256 &&
              padded_vocab(llama3_8b, 5) == 128640);
static_assert(padded_vocab(model_spec{.vocab_size = 128257}, 1) == 128384);
// Uneven pipeline split: 32 layers, 7 + 9 + 9 + 7.
static_assert(split_layers(llama3_8b, pp4).first == 7 && split_layers(llama3_8b, pp4).middle == 9 &&
              split_layers(llama3_8b, pp4).last == 7);
// TransformerEngine version comparisons used by version-dependent memory behaviour.
static_assert(!te_at_least(tp2_dp4, "2.3.0"));
static_assert(detail::version_triple("2.11.0") > detail::version_triple("2.3.0"));
// Enum spellings are the JSON ones.
static_assert(enum_name(recompute_kind::full_block) == "full_block");
static_assert(enum_from_name<attention_kind>("mla") == attention_kind::mla);
static_assert(enum_from_name<attention_kind>("gqa") == attention_kind::invalid);
}  // namespace
