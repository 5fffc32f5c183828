// Hugging Face config.json files of released models (tests/hf_configs, sources in its README)
// imported as models: the same architecture as the catalogue's hand-written entries, the parameter
// counts derived by hand below, what is not modelled reported, and bad configs refused by field.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace llmsim_test_hf_import {

namespace lj = llmsim::json;
namespace fs = std::filesystem;

namespace {
fs::path config(const std::string& name) { return fs::path(LLMSIM_SOURCE_DIR) / "tests" / "hf_configs" / name; }
llmsim::model_spec imported(const std::string& name, std::vector<std::string>* notes = nullptr) {
  return lj::load_model(config(name), {.strict = true, .warnings = notes});
}
/// `m` with the catalogue entry's name, for comparing everything else.
llmsim::model_spec named(llmsim::model_spec m, const llmsim::model_spec& as) {
  m.model_name = as.model_name;
  return m;
}
std::string refusal(const lj::value& v) {
  try {
    (void)lj::hf::to_model_json(v, "config.json");
  } catch (const llmsim::config_error& e) { return e.field() + " | " + e.what(); }
  return "accepted";
}
}  // namespace

TEST(HfImport, Llama3_8bIsTheCatalogueEntry) {
  const auto m = imported("Meta-Llama-3-8B.json");
  EXPECT_EQ(named(m, llmsim::catalogue::llama3_8b), llmsim::catalogue::llama3_8b);
  EXPECT_EQ(m.model_name.view(), "llama");  // no _name_or_path: the model_type
  // 32 layers x 218,112,000 + two 128256 x 4096 embeddings + the final norm (4096).
  EXPECT_EQ(llmsim::parameter_count(m, 128256), 8030261248.0);
}

TEST(HfImport, Mixtral8x7b) {
  const auto m = imported("Mixtral-8x7B-v0.1.json");
  EXPECT_EQ(named(m, llmsim::catalogue::mixtral_8x7b), llmsim::catalogue::mixtral_8x7b);
  // Per layer: attention 2 x 4096^2 + 2 x 4096 x 1024 = 41,943,040; 8 experts x 3 x 4096 x 14336 =
  // 1,409,286,144; router 4096 x 8 = 32,768; two norms 8,192 -> 1,451,270,144; x 32 =
  // 46,440,644,608, + two 32000 x 4096 embeddings 262,144,000 + final norm 4,096 = 46,702,792,704
  // (the model card's 46.7B).
  EXPECT_EQ(llmsim::parameter_count(m, 32000), 46702792704.0);
}

TEST(HfImport, DeepSeekV3IsTheCatalogueEntryWithItsMtpLayer) {
  const auto m = imported("DeepSeek-V3.json");
  auto expected = llmsim::catalogue::deepseek_v3;
  expected.mtp_num_layers = 1;  // num_nextn_predict_layers: the released weights' MTP module
  EXPECT_EQ(named(m, expected), expected);
}

TEST(HfImport, Qwen3MoeAndWhatIsNotModelled) {
  std::vector<std::string> notes;
  const auto m = imported("Qwen3-30B-A3B.json", &notes);
  EXPECT_EQ(named(m, llmsim::catalogue::qwen3_30b_a3b), llmsim::catalogue::qwen3_30b_a3b);
  // 48 layers x 2 norms x 128 = 12,288 q/k norm weights.
  ASSERT_EQ(notes.size(), 1U);
  EXPECT_NE(notes[0].find("q and k RMSNorms are not modelled (12288 parameters"), std::string::npos) << notes[0];
}

TEST(HfImport, Qwen2BiasesAreReportedNotCounted) {
  std::vector<std::string> notes;
  const auto m = imported("Qwen2-7B.json", &notes);
  EXPECT_EQ(m.hidden_size, 3584);
  EXPECT_EQ(m.kv_head_num, 4);
  EXPECT_FALSE(m.tie_word_embeddings);
  // Embeddings 2 x 152064 x 3584 = 1,089,994,752; per layer q, o 3584^2 and k, v 3584 x 512:
  // 29,360,128, MLP 3 x 3584 x 18944 = 203,685,888, two norms 7,168 -> 233,053,184; x 28 =
  // 6,525,489,152; + final norm 3,584 = 7,615,487,488. With the q, k, v biases, 28 x (3584 + 2 x
  // 512) = 129,024, that is 7,615,616,512: the model card's 7.62B.
  EXPECT_EQ(llmsim::parameter_count(m, 152064), 7615487488.0);
  // use_sliding_window false: no window note.
  ASSERT_EQ(notes.size(), 1U);
  EXPECT_NE(notes[0].find("biases of the q, k, v projections are not modelled (129024 parameters)"), std::string::npos)
      << notes[0];
}

TEST(HfImport, BadConfigsAreRefusedByField) {
  lj::value llama = lj::read_file(config("Meta-Llama-3-8B.json"));
  lj::value gemma = llama;
  gemma["model_type"] = "gemma2";
  EXPECT_EQ(refusal(gemma),
            "/model_type | config.json: llmsim::json: /model_type: model_type \"gemma2\" is not one llmsim imports "
            "(llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, phi3)");
  lj::value headless = llama;
  headless.erase("num_attention_heads");
  EXPECT_EQ(refusal(headless),
            "/num_attention_heads | config.json: llmsim::json: /num_attention_heads: required field is missing "
            "(Hugging Face config)");
  lj::value gelu = llama;
  gelu["hidden_act"] = "gelu";
  EXPECT_NE(refusal(gelu).find("/hidden_act"), std::string::npos);
  lj::value fraction = llama;
  fraction["hidden_size"] = 4096.5;
  EXPECT_NE(refusal(fraction).find("/hidden_size: expected an integer"), std::string::npos);
  // A SimuMax model file (model_type dense, layer_num) is not taken for a Hugging Face config.
  EXPECT_FALSE(lj::hf::is_hf_config(lj::to_json(llmsim::catalogue::llama3_8b)));
}

}  // namespace llmsim_test_hf_import
