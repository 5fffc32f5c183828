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

TEST(HfImport, TypeDefaultsRoutingAndNotes) {
  lj::value v3 = lj::read_file(config("DeepSeek-V3.json"));
  // DeepSeek-V3's router is sigmoid with the expert bias whatever the config spells out
  // (DeepseekV3Config has neither key).
  lj::value bare = v3;
  bare.erase("scoring_func");
  bare.erase("topk_method");
  const lj::value m = lj::hf::to_model_json(bare, "v3.json");
  EXPECT_EQ(m["moe_router_score_function"], "sigmoid");
  EXPECT_EQ(m["moe_router_enable_expert_bias"], true);
  EXPECT_EQ(m["moe_router_num_groups"], 8);
  // DeepSeek-V2 groups only under group_limited_greedy; plain greedy ignores n_group.
  lj::value v2 = v3;
  v2["model_type"] = "deepseek_v2";
  v2["scoring_func"] = "softmax";
  v2["topk_method"] = "greedy";
  const lj::value greedy = lj::hf::to_model_json(v2, "v2.json");
  EXPECT_FALSE(greedy.contains("moe_router_num_groups"));
  EXPECT_FALSE(greedy.contains("moe_router_score_function"));
  v2["topk_method"] = "group_limited_greedy";
  EXPECT_EQ(lj::hf::to_model_json(v2, "v2.json")["moe_router_group_topk"], 4);
  v2["topk_method"] = "best";
  EXPECT_NE(refusal(v2).find("/topk_method | "), std::string::npos);
  lj::value shared = v3;
  shared["n_shared_experts"] = -1;
  EXPECT_NE(refusal(shared).find("n_shared_experts=-1 must be at least 0"), std::string::npos);
  // Types whose KV-head or head_dim default is not the query heads' must state them.
  lj::value mistral = lj::read_file(config("Meta-Llama-3-8B.json"));
  mistral["model_type"] = "mistral";
  mistral.erase("num_key_value_heads");
  EXPECT_NE(refusal(mistral).find("/num_key_value_heads | "), std::string::npos);
  lj::value qwen3 = lj::read_file(config("Qwen3-30B-A3B.json"));
  qwen3.erase("head_dim");
  EXPECT_NE(refusal(qwen3).find("/head_dim | "), std::string::npos);
  lj::value sparse = lj::read_file(config("Qwen3-30B-A3B.json"));
  sparse["mlp_only_layers"] = 3;
  EXPECT_NE(refusal(sparse).find("/mlp_only_layers | "), std::string::npos);
  lj::value act = lj::read_file(config("Meta-Llama-3-8B.json"));
  act["hidden_act"] = 5;
  EXPECT_NE(refusal(act).find("/hidden_act: expected a string"), std::string::npos);
  // Notes: q, k, v and o biases (Llama's attention_bias: 32 x ((32 + 16) x 128 + 4096) =
  // 327,680), a quantized checkpoint, a long name cut on a character boundary.
  lj::value biased = lj::read_file(config("Meta-Llama-3-8B.json"));
  biased["attention_bias"] = true;
  biased["quantization_config"] = {{"quant_method", "fp8"}};
  biased["_name_or_path"] = std::string(62, 'x') + "\u00e9";  // 62 bytes + a 2-byte character
  std::vector<std::string> notes;
  const lj::value b = lj::hf::to_model_json(biased, "llama.json", &notes);
  EXPECT_EQ(b["model_name"], std::string(62, 'x'));
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_NE(notes[0].find("q, k, v and o projections are not modelled (327680 parameters)"), std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("quantization_config (fp8)"), std::string::npos) << notes[1];
}

}  // namespace llmsim_test_hf_import
