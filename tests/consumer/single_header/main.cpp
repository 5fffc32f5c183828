// Uses the single headers the way a user who copied single_include/llmsim does: one -I, no CMake.
// json.hpp first: its `#include "llmsim.hpp"` and the later <llmsim/llmsim.hpp> must name the same
// file, or the core would be defined twice.
#include <llmsim/llmsim.hpp>
#include "llmsim/json.hpp"

#include <cstdio>
#include <string_view>

namespace {
constexpr llmsim::model_spec tiny{.model_name = "tiny",
                                  .hidden_size = 256,
                                  .head_num = 4,
                                  .kv_head_num = 2,
                                  .intermediate_size = 1024,
                                  .layer_num = 2,
                                  .vocab_size = 1000};
static_assert((llmsim::validate(tiny), true));
static_assert(std::string_view(llmsim::version.string) == LLMSIM_VERSION_STRING);
}  // namespace

int main() {
  namespace lj = llmsim::json;
  const auto parsed =
      lj::parse_model(lj::parse_text(R"({"model_name": "tiny", "hidden_size": 256, "head_num": 4, "kv_head_num": 2,
                                                         "intermediate_size": 1024, "layer_num": 2, "vocab_size": 1000})",
                                     "tiny.json"));
  if (parsed != tiny) {
    std::fprintf(stderr, "the parsed model differs from the constexpr one\n");
    return 1;
  }
  // The Megatron-Bridge adapter travels in the JSON single header (it recognises its documents by their "format").
  if (lj::megatron_bridge::is_cases_document(lj::value::object())) {
    std::fprintf(stderr, "an empty object was taken for a Megatron-Bridge cases document\n");
    return 1;
  }
  // The strategy search travels in the core single header (two std::threads, no extra flags).
  llmsim::search_space space{.gpus = 8, .global_batch = 8, .seq_len = 2048};
  space.zero = {1};
  space.fp8 = false;
  space.offload = false;
  const auto& model = *llmsim::catalogue::find_model("llama3-8b");
  const auto& system = *llmsim::catalogue::find_system("h100-sxm");
  const llmsim::search_result found = llmsim::search(model, system, space, {});
  if (found.top.empty() ||
      found.top[0].time != llmsim::estimate(model, llmsim::to_strategy(found.top[0].point, space), system)
                               .cost.duration_time_per_iter.value) {
    std::fprintf(stderr, "the search's winner is not priced as its own estimate\n");
    return 1;
  }
  std::printf("llmsim %s single headers: ok\n", LLMSIM_VERSION_STRING);
  return 0;
}
