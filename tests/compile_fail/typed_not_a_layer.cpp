// Only layer kinds may stand in a model; the message names the rule and the notes name the
// argument (llmsim::typed::detail::model_argument<1, int>: the second layer is an int).
// expect: llmsim::typed::model: an argument is not a layer kind \(embedding, decoder_layer, repeated, lm_head\)
// expect: model_argument<1(UL)?, int>
#include <llmsim/llmsim.hpp>

using namespace llmsim::typed;

constexpr auto broken = model("broken", embedding{.vocab = 32000, .hidden = 4096}, 32, lm_head{});
