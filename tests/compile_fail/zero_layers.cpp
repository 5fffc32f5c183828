// A model without layers is refused at compile time; the note shows the rule.
// expect: \{\}=\{\} must be at least \{\}
#include <llmsim/llmsim.hpp>

constexpr llmsim::model_spec model{.hidden_size = 4096,
                                   .head_num = 32,
                                   .kv_head_num = 8,
                                   .intermediate_size = 14336,
                                   .layer_num = 0,
                                   .vocab_size = 128256};
static_assert((llmsim::validate(model), true));
