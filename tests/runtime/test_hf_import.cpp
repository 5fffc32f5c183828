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
  // rope_scaling: YaRN of factor 40, which changes no kernel of MLA (the catalogue leaves it out).
  expected.yarn_rotary_scaling_factor = 40;
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

TEST(HfImport, Qwen2QkvBiasesAreCounted) {
  std::vector<std::string> notes;
  const auto m = imported("Qwen2-7B.json", &notes);
  EXPECT_EQ(m.hidden_size, 3584);
  EXPECT_EQ(m.kv_head_num, 4);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_TRUE(m.add_qkv_bias);  // modeling_qwen2.py: q, k, v projections with bias=True, o without
  EXPECT_FALSE(m.add_linear_bias);
  // Embeddings 2 x 152064 x 3584 = 1,089,994,752; per layer q, o 3584^2 and k, v 3584 x 512:
  // 29,360,128, their biases 3584 + 2 x 512 = 4,608, MLP 3 x 3584 x 18944 = 203,685,888, two
  // norms 7,168 -> 233,057,792; x 28 = 6,525,618,176; + final norm 3,584 = 7,615,616,512: the
  // model card's 7.62B.
  EXPECT_EQ(llmsim::parameter_count(m, 152064), 7615616512.0);
  EXPECT_TRUE(notes.empty()) << notes[0];  // use_sliding_window false: no window note either
}

TEST(HfImport, BadConfigsAreRefusedByField) {
  lj::value llama = lj::read_file(config("Meta-Llama-3-8B.json"));
  lj::value falcon = llama;
  falcon["model_type"] = "falcon";
  EXPECT_EQ(refusal(falcon),
            "/model_type | config.json: llmsim::json: /model_type: model_type \"falcon\" is not one llmsim imports "
            "(llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, phi3, gemma2, gemma3, "
            "gemma3_text, gpt_oss)");
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
  // attention_bias: q, k, v biases modelled, the o projection's noted (32 x 4096 = 131,072); a
  // quantized checkpoint noted; a long name cut on a character boundary.
  lj::value biased = lj::read_file(config("Meta-Llama-3-8B.json"));
  biased["attention_bias"] = true;
  biased["quantization_config"] = {{"quant_method", "fp8"}};
  biased["_name_or_path"] = std::string(62, 'x') + "\u00e9";  // 62 bytes + a 2-byte character
  std::vector<std::string> notes;
  const lj::value b = lj::hf::to_model_json(biased, "llama.json", &notes);
  EXPECT_EQ(b["model_name"], std::string(62, 'x'));
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_EQ(b["add_qkv_bias"], true);
  EXPECT_NE(notes[0].find("the o projection's bias is not modelled (131072 parameters)"), std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("quantization_config (fp8)"), std::string::npos) << notes[1];
}

namespace {
/// The notes of importing `name`, each found by a piece of its text.
bool noted(const std::vector<std::string>& notes, const std::string& piece) {
  for (const auto& n : notes)
    if (n.find(piece) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(HfImport, Gemma2WindowsEveryOtherLayer) {
  std::vector<std::string> notes;
  const auto m = imported("gemma-2-9b.json", &notes);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.sliding_window_pattern, 2);  // transformers: layer i is windowed when (i + 1) % 2 != 0
  EXPECT_EQ(llmsim::windowed_layer_count(m), 21);
  EXPECT_TRUE(m.tie_word_embeddings);  // absent from the file: Gemma2Config ties by default
  EXPECT_EQ(llmsim::head_dim(m), 256);
  // Per layer: q 3584 x 4096, k and v 3584 x 2048, o 4096 x 3584 = 44,040,192; MLP 3 x 3584 x
  // 14336 = 154,140,672; two norms 7,168 -> 198,188,032; x 42 = 8,323,897,344; + the tied
  // 256000 x 3584 embedding 917,504,000 + final norm 3,584 = 9,241,404,928. With the 42 x 2 x 3584
  // = 301,056 sandwich-norm weights noted: 9,241,705,984, the released checkpoint's count.
  EXPECT_EQ(llmsim::parameter_count(m, 256000), 9241404928.0);
  EXPECT_TRUE(noted(notes, "sandwich norms) are not modelled (301056 parameters"));
  EXPECT_TRUE(noted(notes, "attn_logit_softcapping"));
  EXPECT_TRUE(noted(notes, "final_logit_softcapping"));
  EXPECT_EQ(notes.size(), 3U);
}

TEST(HfImport, Gemma3KeepsEverySixthLayerFull) {
  std::vector<std::string> notes;
  const auto m = imported("gemma-3-1b-it.json", &notes);
  EXPECT_EQ(m.sliding_window, 512);
  EXPECT_EQ(m.sliding_window_pattern, 6);
  EXPECT_EQ(llmsim::windowed_layer_count(m), 22);  // layers 6, 12, 18, 24 (1-based) are full
  // Per layer: q and o 1152 x 1024, k and v 1152 x 256 = 2,949,120; MLP 3 x 1152 x 6912 =
  // 23,887,872; two norms 2,304 -> 26,839,296; x 26 = 697,821,696; + the tied 262144 x 1152
  // embedding 301,989,888 + final norm 1,152 = 999,812,736. Noted: sandwich norms 26 x 2 x 1152 =
  // 59,904 and q/k norms 26 x 2 x 256 = 13,312: 999,885,952 in all, the released count.
  EXPECT_EQ(llmsim::parameter_count(m, 262144), 999812736.0);
  EXPECT_TRUE(noted(notes, "(59904 parameters"));
  EXPECT_TRUE(noted(notes, "q and k RMSNorms are not modelled (13312 parameters)"));
  EXPECT_EQ(notes.size(), 2U);  // the softcaps are null
}

TEST(HfImport, Gemma3MultimodalConfigUsesItsTextConfig) {
  // Gemma3ForConditionalGeneration keeps the language model in text_config, often without
  // vocab_size (Gemma3TextConfig's default 262208) or the window's pattern (6).
  lj::value text = lj::read_file(config("gemma-3-1b-it.json"));
  text.erase("vocab_size");
  text.erase("sliding_window_pattern");
  const lj::value v = {{"model_type", "gemma3"}, {"text_config", text}, {"vision_config", {{"hidden_size", 1152}}}};
  std::vector<std::string> notes;
  const lj::value m = lj::hf::to_model_json(v, "mm.json", &notes);
  EXPECT_EQ(m["vocab_size"], 262208);
  EXPECT_EQ(m["sliding_window_pattern"], 6);
  EXPECT_EQ(m["hidden_size"], 1152);
  EXPECT_TRUE(noted(notes, "vision_config"));
  EXPECT_TRUE(noted(notes, "Gemma3TextConfig's default 262208"));
  // gemma-3-4b-it's text_config also leaves the heads and head_dim at the class defaults (8, 4, 256).
  lj::value bare = v;
  for (const char* key : {"num_attention_heads", "num_key_value_heads", "head_dim"}) bare["text_config"].erase(key);
  notes.clear();
  const lj::value d = lj::hf::to_model_json(bare, "mm.json", &notes);
  EXPECT_EQ(d["head_num"], 8);
  EXPECT_EQ(d["kv_head_num"], 4);
  EXPECT_EQ(d["head_size"], 256);
  EXPECT_TRUE(noted(notes, "num_key_value_heads absent: Gemma3TextConfig's default 4"));
  // Errors inside text_config name it; a pattern of 1 is every layer full; below 1 is refused.
  lj::value bad = v;
  bad["text_config"]["hidden_size"] = "wide";
  EXPECT_NE(refusal(bad).find("/text_config/hidden_size | "), std::string::npos) << refusal(bad);
  lj::value every = v;
  every["text_config"]["sliding_window_pattern"] = 1;
  EXPECT_FALSE(lj::hf::to_model_json(every, "mm.json").contains("sliding_window"));
  every["text_config"]["sliding_window_pattern"] = -2;
  EXPECT_NE(refusal(every).find("/text_config/sliding_window_pattern | "), std::string::npos) << refusal(every);
}

TEST(HfImport, GptOssLayerTypesExpertsAndBiases) {
  std::vector<std::string> notes;
  const auto m = imported("gpt-oss-20b.json", &notes);
  EXPECT_EQ(m.model_type, llmsim::model_kind::moe);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.sliding_window_pattern, 2);  // layer_types: sliding, full, sliding, ...
  // gpt-oss-120b is the same architecture at 36 layers and 128 experts: the catalogue entry.
  auto big = named(m, llmsim::catalogue::gpt_oss_120b);
  big.layer_num = 36;
  big.expert_num = 128;
  EXPECT_EQ(big, llmsim::catalogue::gpt_oss_120b);
  // Per layer: q and o 2880 x 4096, k and v 2880 x 512 = 26,542,080; router 2880 x 32 = 92,160;
  // 32 experts x 3 x 2880 x 2880 = 796,262,400; two norms 5,760 -> 822,902,400; x 24 =
  // 19,749,657,600; + the biases: q, k, v and o 24 x (4096 + 2 x 512 + 2880) = 192,000, the
  // experts' fc1 and fc2 and the router's 24 x 32 x (2 x 2880 + 2880 + 1) = 6,636,288; + two
  // 201088 x 2880 embeddings 1,158,266,880 + final norm 2,880 = 20,914,755,648. Noted: the sinks
  // 24 x 64 = 1,536: in all 20,914,757,184, the model card's 20.9B.
  EXPECT_TRUE(m.add_linear_bias);
  EXPECT_EQ(llmsim::parameter_count(m, 201088), 20914755648.0);
  EXPECT_FALSE(noted(notes, "bias is not modelled"));
  EXPECT_TRUE(noted(notes, "the attention sinks (1536 parameters, one logit per head)"));
  EXPECT_FALSE(noted(notes, "rope_scaling"));  // YaRN is modelled (yarn_rotary_scaling_factor 32)
  EXPECT_TRUE(noted(notes, "quantization_config (mxfp4)"));
  // Only every N-th layer full is modelled; a list of the wrong length is refused too.
  lj::value v = lj::read_file(config("gpt-oss-20b.json"));
  v["layer_types"][0] = "full_attention";
  EXPECT_NE(refusal(v).find("/layer_types | "), std::string::npos) << refusal(v);
  v["layer_types"] = lj::value::array({"full_attention"});
  EXPECT_NE(refusal(v).find("/layer_types | "), std::string::npos);
  // All full: no window; a null sliding_window: none either (Mixtral's released config).
  v["layer_types"] = lj::value::array();
  for (int i = 0; i < 24; ++i) v["layer_types"].push_back("full_attention");
  EXPECT_FALSE(lj::hf::to_model_json(v, "oss.json").contains("sliding_window"));
  EXPECT_FALSE(
      lj::hf::to_model_json(lj::read_file(config("Mixtral-8x7B-v0.1.json")), "m.json").contains("sliding_window"));
}

TEST(SlidingWindow, SharesOfPairsAndCacheByHand) {
  llmsim::model_spec m = llmsim::catalogue::llama3_8b;
  m.layer_num = 4;
  m.sliding_window = 2;
  m.sliding_window_pattern = 2;  // layers 2 and 4 full, 1 and 3 windowed
  // Training, 4 tokens: a windowed layer scores min(j, 2) keys for j = 1..4: 1 + 2 + 2 + 2 = 7 of
  // the causal 10; half the layers windowed: 1 - 0.5 x 0.3 = 0.85.
  EXPECT_DOUBLE_EQ(llmsim::window_kept_share(m, 4, 4), 0.85);
  // Decode of token 10 over 9 cached: 2 keys of 10 windowed; half: 1 - 0.5 x 0.8 = 0.6.
  EXPECT_DOUBLE_EQ(llmsim::window_kept_share(m, 1, 10), 0.6);
  // Cache at 10 tokens: windowed layers keep 2: 1 - 0.5 x (1 - 2/10) = 0.6; within the window all.
  EXPECT_DOUBLE_EQ(llmsim::window_cached_share(m, 10), 0.6);
  EXPECT_DOUBLE_EQ(llmsim::window_cached_share(m, 2), 1.0);
  // Reads: a chunk of 3 queries at the end of 20 keys reaches back 3 + 2 - 1 = 4 keys in a
  // windowed layer: 1 - 0.5 x (1 - 4/20) = 0.6; a whole prefill of 4 reads everything.
  EXPECT_DOUBLE_EQ(llmsim::window_read_share(m, 3, 20), 0.6);
  EXPECT_DOUBLE_EQ(llmsim::window_read_share(m, 4, 4), 1.0);
  m.sliding_window_pattern = 0;  // every layer windowed
  EXPECT_DOUBLE_EQ(llmsim::window_kept_share(m, 4, 4), 0.7);
  EXPECT_DOUBLE_EQ(llmsim::window_read_share(m, 1, 10), 0.2);  // decode: the last 2 of 10
  m.sliding_window = std::nullopt;
  EXPECT_DOUBLE_EQ(llmsim::window_kept_share(m, 4, 4), 1.0);
  const auto refused_field = [](const llmsim::model_spec& bad) {
    try {
      llmsim::validate(bad);
    } catch (const llmsim::config_error& e) { return e.field(); }
    return std::string("accepted");
  };
  m.sliding_window_pattern = 2;  // a pattern without a window
  EXPECT_EQ(refused_field(m), "model.sliding_window_pattern");
  auto mla = llmsim::catalogue::deepseek_v2_lite;  // MLA's absorbed decode reads its latent cache whole
  mla.sliding_window = 4096;
  EXPECT_EQ(refused_field(mla), "model.sliding_window");
}

TEST(SlidingWindow, ModelFlopsAndServingCacheShrink) {
  auto full = llmsim::catalogue::gpt_oss_120b;
  full.sliding_window = std::nullopt;
  full.sliding_window_pattern = 0;
  const auto& oss = llmsim::catalogue::gpt_oss_120b;
  // At 4096 tokens a 128-token window scores 128 x 129 / 2 + 3968 x 128 = 516,160 of the causal
  // 8,390,656 pairs; 18 of 36 layers windowed keep 1 - 0.5 x (1 - 516160 / 8390656) of the
  // attention-score FLOPs, 6 x 36 x 4096 x 64 heads x (64 + 64) per token in full.
  const double kept = 1 - 0.5 * (1 - 516160.0 / 8390656.0);
  const double scores = 6.0 * 36 * 4096 * 64 * 128;
  EXPECT_NEAR(llmsim::flops_per_token(full, 201088, 4096) - llmsim::flops_per_token(oss, 201088, 4096),
              scores * (1 - kept), 1.0);
  // Serving 2048 + 128 tokens: windowed layers cache the last 128 of 2176 tokens, so the cache is
  // 1 - 0.5 x (1 - 128 / 2176) of the full one.
  llmsim::inference_spec i{.batch = 8, .input_len = 2048, .output_len = 128, .tp = 8};
  const auto with = llmsim::infer(oss, i, llmsim::catalogue::h100_sxm);
  const auto without = llmsim::infer(full, i, llmsim::catalogue::h100_sxm);
  EXPECT_NEAR(with.kv_cache_bytes / without.kv_cache_bytes, 1 - 0.5 * (1 - 128.0 / 2176.0), 1e-12);
  EXPECT_NEAR(with.kv_bytes_per_token * 8 * 2176, with.kv_cache_bytes, 1e-6 * with.kv_cache_bytes);
  EXPECT_LT(with.tpot.value, without.tpot.value);  // decode reads less of the cache
}

}  // namespace llmsim_test_hf_import
