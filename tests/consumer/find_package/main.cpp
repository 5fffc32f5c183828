// Uses an installed llmsim: the same validate() at compile time on a constexpr spec and at run time
// on a spec parsed from JSON.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <cstdio>
#include <string_view>

namespace {
constexpr llmsim::model_spec tiny{.model_name = "tiny",
                                  .hidden_size = 256,
                                  .head_num = 4,
                                  .kv_head_num = 2,
                                  .intermediate_size = 1024,
                                  .layer_num = 2,
                                  .vocab_size = 1000,
                                  .use_swiglu = true};
static_assert((llmsim::validate(tiny), true));
static_assert(llmsim::head_dim(tiny) == 64);
static_assert(std::string_view(LLMSIM_VERSION_STRING) == LLMSIM_PACKAGE_VERSION,
              "headers and package config disagree on the version");
}  // namespace

int main() {
  namespace lj = llmsim::json;
  const auto parsed =
      lj::parse_model(lj::parse_text(R"({"model_name": "tiny", "hidden_size": 256, "head_num": 4, "kv_head_num": 2,
                                                         "intermediate_size": 1024, "layer_num": 2, "vocab_size": 1000, "use_swiglu": true})",
                                     "tiny.json"));
  if (parsed != tiny) {
    std::fprintf(stderr, "the parsed model differs from the constexpr one\n");
    return 1;
  }
  try {
    (void)lj::parse_model(
        lj::parse_text(R"({"hidden_size": 256, "head_num": 3, "kv_head_num": 2, "layer_num": 2, "vocab_size": 1000})",
                       "bad.json"),
        "bad.json");
    std::fprintf(stderr, "a model with head_num=3, kv_head_num=2 was accepted\n");
    return 1;
  } catch (const llmsim::config_error& e) {
    if (std::string_view(e.what()).find("kv_head_num=2 must divide") == std::string_view::npos) {
      std::fprintf(stderr, "unexpected message: %s\n", e.what());
      return 1;
    }
  }
  std::printf("llmsim %s via find_package: ok\n", LLMSIM_VERSION_STRING);
  return 0;
}
