// The JSON adapter on the shared SimuMax config files: every file loads, round-trips, and
// overrides behave like the validation cases use them.
#include "shared_dir.hpp"

#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_json {

namespace fs = std::filesystem;
namespace lj = llmsim::json;
using llmsim_test::simumax_configs;

namespace {
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST(JsonShared, EveryModelLoadsStrictlyAndRoundTrips) {
  LLMSIM_REQUIRE_SHARED();
  const auto files = files_in(simumax_configs() / "models");
  EXPECT_GE(files.size(), 28U);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const auto m = lj::load_model(f, {.strict = true});
    EXPECT_EQ(lj::parse_model(lj::to_json(m), "round-trip", {.strict = true}), m);
  }
}

TEST(JsonShared, EveryStrategyLoadsStrictlyAndRoundTrips) {
  LLMSIM_REQUIRE_SHARED();
  const auto files = files_in(simumax_configs() / "strategy");
  EXPECT_EQ(files.size(), 12U);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const auto s = lj::load_strategy(f, {.strict = true});
    EXPECT_EQ(lj::parse_strategy(lj::to_json(s), "round-trip", {.strict = true}), s);
  }
}

TEST(JsonShared, EverySystemLoadsStrictlyAndRoundTrips) {
  LLMSIM_REQUIRE_SHARED();
  for (const auto& f : files_in(simumax_configs() / "system")) {
    SCOPED_TRACE(f.string());
    const auto sys = lj::load_system(f, {.strict = true});
    const auto again = lj::parse_system(lj::to_json(sys.spec()), "round-trip", {.strict = true});
    EXPECT_EQ(again.spec(), sys.spec());
  }
}

TEST(JsonShared, SystemTablesKeepEveryMeasuredShape) {
  LLMSIM_REQUIRE_SHARED();
  const auto b200 = lj::load_system(simumax_configs() / "system" / "b200_bf16_ceperm.json");
  const auto& sys = b200.spec();
  EXPECT_EQ(sys.sys_name.view(), "b200_bf16_ceperm");
  EXPECT_EQ(sys.op(llmsim::compute_kind::matmul).accurate_efficient_factor.size(), 514U);
  EXPECT_EQ(sys.op(llmsim::compute_kind::group_matmul).accurate_efficient_factor.size(), 108U);
  EXPECT_EQ(sys.op(llmsim::compute_kind::sdp_fwd).accurate_efficient_factor.size(), 32U);
  EXPECT_DOUBLE_EQ(
      *sys.op(llmsim::compute_kind::matmul)
           .accurate_efficient_factor.find("b=1, m=4096, k=8192, n=10240, layout=TN, accumulate=False, out_dtype=bf16"),
      0.6451614102335537);
  EXPECT_FALSE(sys.op(llmsim::compute_kind::matmul).accurate_efficient_factor.find("b=1, m=1, k=1, n=1").has_value());
  EXPECT_TRUE(sys.op(llmsim::compute_kind::fp8_matmul).present);
  EXPECT_FALSE(sys.intra_with_pcie);
  const auto* high = sys.network("high_intra_node");
  ASSERT_NE(high, nullptr);
  const auto& a2a = high->op[static_cast<std::size_t>(llmsim::collective_kind::all2all)];
  EXPECT_EQ(a2a.fixed_latency_us_by_comm_num.find(2), 51.0578);
  EXPECT_EQ(sys.network("no_such_tier"), nullptr);

  const auto a100 = lj::load_system(simumax_configs() / "system" / "a100_pcie.json");
  EXPECT_TRUE(a100.spec().intra_with_pcie);
  const auto* x8 = a100.spec().network("intra_node_pcie_8x");
  ASSERT_NE(x8, nullptr);
  EXPECT_EQ(x8->op[static_cast<std::size_t>(llmsim::collective_kind::reduce_scatter)].dp_fixed_bw.find(4), 7.0);
  EXPECT_FALSE(a100.spec().memory(llmsim::memory_kind::ce_fusion).present);  // falls back to default
}

TEST(JsonShared, CopiesShareTheTableStorage) {
  LLMSIM_REQUIRE_SHARED();
  lj::system_config copy;
  {
    const auto loaded = lj::load_system(simumax_configs() / "system" / "a100_pcie.json");
    copy = loaded;
  }
  EXPECT_EQ(copy.spec().op(llmsim::compute_kind::matmul).accurate_efficient_factor.size(), 183U);
  EXPECT_TRUE(
      copy.spec()
          .op(llmsim::compute_kind::matmul)
          .accurate_efficient_factor.find("b=1, m=4096, k=5120, n=1536, layout=TN, accumulate=False, out_dtype=bf16"));
}

TEST(JsonShared, ValidationCaseOverridesApply) {
  LLMSIM_REQUIRE_SHARED();
  const auto cases = lj::read_file(llmsim_test::shared_dir() / "validation" / "training_cases.json");
  const fs::path root = llmsim_test::shared_dir() / "validation" / cases["config_root"].get<std::string>();
  ASSERT_EQ(cases["cases"].size(), 48U);
  for (const auto& c : cases["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto model = lj::load_model(root / c["model"].get<std::string>(), {.strict = true},
                                      c.value("model_overrides", lj::value::object()));
    const auto strategy = lj::load_strategy(root / c["strategy"].get<std::string>(), {.strict = true},
                                            c.value("strategy_overrides", lj::value::object()));
    const auto system = lj::load_system(root / c["system"].get<std::string>(), {.strict = true});
    EXPECT_NO_THROW(llmsim::validate(model, strategy, system.spec()));
    if (c.contains("model_overrides") && c["model_overrides"].contains("layer_num")) {
      EXPECT_EQ(model.layer_num, c["model_overrides"]["layer_num"].get<std::int64_t>());
    }
    EXPECT_EQ(strategy.micro_batch_num, c["strategy_overrides"]["micro_batch_num"].get<std::int64_t>());
  }
}

TEST(Json, MissingKeysKeepDefaultsAndUnknownKeysWarn) {
  std::vector<std::string> warnings;
  const auto s = lj::parse_strategy(
      lj::value::parse(R"({"seq_len": 2048, "micro_batch_size": 2, "micro_batch_num": 4, "tp_sise": 2})"), "s.json",
      {.strict = false, .warnings = &warnings});
  EXPECT_EQ(s.tp_size, 1);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_DOUBLE_EQ(s.mem_factor, 0.94);
  EXPECT_TRUE(s.enable_sequence_parallel);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0], "s.json: /tp_sise: unknown key (ignored)");
  try {
    (void)lj::parse_strategy(
        lj::value::parse(R"({"seq_len": 2048, "micro_batch_size": 2, "micro_batch_num": 4, "tp_sise": 2})"), "s.json",
        {.strict = true});
    FAIL() << "strict mode must refuse an unknown key";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(), "s.json: llmsim::json: /tp_sise: unknown key (refused by --strict)");
    EXPECT_EQ(e.field(), "/tp_sise");
    EXPECT_EQ(e.file(), "s.json");
  }
}

TEST(Json, NullableFieldsReadNull) {
  const auto m =
      lj::parse_model(lj::value::parse(R"({"hidden_size": 5120, "head_num": 128, "kv_head_num": 128, "layer_num": 4,
      "vocab_size": 102400, "attention_type": "mla", "q_lora_rank": null, "kv_lora_rank": 512, "qk_head_dim": 128,
      "qk_pos_emb_head_dim": 64, "v_head_dim": 128, "intermediate_size": 12288})"));
  EXPECT_FALSE(m.q_lora_rank.has_value());
  EXPECT_EQ(m.kv_lora_rank, 512);
  const auto s = lj::parse_strategy(lj::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 1,
      "recompute_granularity": null, "megatron_recompute_modules": null, "te_version": null})"));
  EXPECT_EQ(s.recompute_granularity, llmsim::recompute_kind::none);
  EXPECT_TRUE(s.megatron_recompute_modules.empty());
  EXPECT_TRUE(s.te_version.empty());
  EXPECT_EQ(lj::to_json(s)["recompute_granularity"], nullptr);
}

TEST(Json, MegatronRecomputeModulesAreASet) {
  const auto s = lj::parse_strategy(lj::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 1,
      "enable_recompute": true, "recompute_granularity": "selective_recompute", "recompute_layer_num": 2,
      "megatron_recompute": true, "megatron_recompute_modules": ["mlp", "layernorm"]})"));
  EXPECT_TRUE(s.megatron_recompute_modules.contains(llmsim::recompute_module::mlp));
  EXPECT_TRUE(s.megatron_recompute_modules.contains(llmsim::recompute_module::layernorm));
  EXPECT_FALSE(s.megatron_recompute_modules.contains(llmsim::recompute_module::moe));
  EXPECT_EQ(lj::to_json(s)["megatron_recompute_modules"], lj::value::parse(R"(["layernorm", "mlp"])"));
  EXPECT_TRUE(llmsim::recompute_active(s));
}

TEST(Json, DottedOverridesReachNestedFields) {
  lj::value v = lj::value::parse(R"({"a": {"b": 1}})");
  lj::set_path(v, "a.c.d", 5, "--set");
  EXPECT_EQ(v["a"]["c"]["d"], 5);
  EXPECT_EQ(v["a"]["b"], 1);
  EXPECT_THROW(lj::set_path(v, "a.b.x", 1, "--set"), llmsim::config_error);  // b is not an object
  EXPECT_THROW(lj::set_path(v, "a..x", 1, "--set"), llmsim::config_error);
  EXPECT_EQ(lj::override_value("12"), 12);
  EXPECT_EQ(lj::override_value("true"), true);
  EXPECT_EQ(lj::override_value("high_intra_node"), "high_intra_node");
}

TEST(Json, CrossFileErrorsNameTheFileOfTheField) {
  const auto m =
      lj::parse_model(lj::value::parse(R"({"hidden_size": 4096, "head_num": 32, "kv_head_num": 8, "layer_num": 32,
      "vocab_size": 128256, "intermediate_size": 14336, "use_swiglu": true})"));
  auto s = lj::parse_strategy(lj::value::parse(
      R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 8, "world_size": 8, "tp_size": 8, "pp_size": 1})"));
  llmsim::system_spec sys{};
  sys.accelerator.mem_gbs = 80;
  sys.accelerator.op[0] = {.present = true, .tflops = 312, .efficient_factor = 0.75};
  sys.accelerator.bandwidth[0] = {.present = true, .gbps = 1600, .efficient_factor = 0.9, .latency_us = 40};
  sys.networks[0].name = "inter_node";
  sys.networks[0].bandwidth = {.present = true, .gbps = 25, .efficient_factor = 0.6, .latency_us = 40};
  sys.network_count = 1;
  EXPECT_NO_THROW(lj::validate_files(m, "m.json", s, "s.json", sys, "sys.json"));
  s.pp_size = 3;
  s.world_size = 24;
  s.tp_size = 8;
  try {
    lj::validate_files(m, "m.json", s, "s.json", sys, "sys.json");
    FAIL() << "pp 3 does not divide 32 layers";
  } catch (const llmsim::config_error& e) {
    // 32 = 2 + 15 + 15: the smallest first stage that leaves the other two stages equal.
    EXPECT_STREQ(e.what(),
                 "s.json: llmsim::strategy: strategy.pp_size=3 must divide model.layer_num=32; set "
                 "strategy.num_layers_in_first_pipeline_stage and/or "
                 "num_layers_in_last_pipeline_stage so the rest divides evenly, e.g. "
                 "num_layers_in_first_pipeline_stage=2 leaves 15 layers on each of the other 2 stages");
  }
  s = lj::parse_strategy(
      lj::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 8, "tp_net": "nvlink"})"));
  try {
    lj::validate_files(m, "m.json", s, "s.json", sys, "sys.json");
    FAIL() << "tp_net names no tier";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(), "s.json: llmsim::strategy: strategy.tp_net=\"nvlink\" names no network tier of system null");
  }
}

// ---- overrides merge into nested objects (JSON merge patch, RFC 7396; null stays null) --------------

namespace {
const fs::path configs_dir = fs::path(LLMSIM_SOURCE_DIR) / "configs";
}  // namespace

// The README's own example: one field of the accelerator changes, the rest of the object stays.
// Expected: the unmodified load with mem_gbs set to 141 by hand.
TEST(JsonOverrides, NestedSystemFieldMergesIntoItsObject) {
  const auto file = configs_dir / "system" / "h100_sxm.json";
  const auto base = lj::load_system(file);
  ASSERT_EQ(base.spec().accelerator.mem_gbs, 80.0);
  for (const auto& overrides :
       {lj::value{{"accelerator.mem_gbs", 141}}, lj::value::parse(R"({"accelerator": {"mem_gbs": 141}})")}) {
    SCOPED_TRACE(overrides.dump());
    lj::system_config sys;
    ASSERT_NO_THROW(sys = lj::load_system(file, {.strict = true}, overrides));
    llmsim::system_spec want = base.spec();
    want.accelerator.mem_gbs = 141;
    EXPECT_EQ(sys.spec(), want);
  }
  // Three levels down: the inter-node tier keeps its efficiency 0.8 and NCCL link class (the file's).
  const auto sys =
      lj::load_system(file, {.strict = true}, {{"networks", {{"inter_node", {{"bandwidth", {{"gbps", 100}}}}}}}});
  const auto* tier = sys.spec().network("inter_node");
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->bandwidth.gbps, 100.0);
  EXPECT_EQ(tier->bandwidth.efficient_factor, 0.8);
  EXPECT_EQ(tier->nccl_link, llmsim::nccl_link_kind::net);
  llmsim::system_spec want = base.spec();
  for (std::size_t i = 0; i < want.network_count; ++i)
    if (want.networks[i].name.view() == "inter_node") want.networks[i].bandwidth.gbps = 100;
  EXPECT_EQ(sys.spec(), want);
}

// json::perf_llm::configure takes the same overrides for each of the three files, dotted keys included.
TEST(JsonOverrides, PerfLlmConfigureMergesOverridesOfAllThree) {
  lj::perf_llm perf;
  perf.configure(configs_dir / "strategy" / "tp2_pp1_dp4_mbs1.json", configs_dir / "models" / "llama3-8b.json",
                 configs_dir / "system" / "h100_sxm.json", {.strict = true}, {{"micro_batch_num", 16}},
                 {{"layer_num", 16}}, {{"accelerator.mem_gbs", 141}});
  EXPECT_EQ(perf.strategy().micro_batch_num, 16);
  EXPECT_EQ(perf.strategy().tp_size, 2);  // the file's
  EXPECT_EQ(perf.model().layer_num, 16);
  EXPECT_EQ(perf.model().hidden_size, 4096);  // the file's
  EXPECT_EQ(perf.system().accelerator.mem_gbs, 141.0);
  EXPECT_EQ(perf.system().accelerator.op[static_cast<std::size_t>(llmsim::compute_kind::matmul)].tflops,
            989.0);  // the file's
}

// merge_path composes: a later object merges into what an earlier dotted key set, in either order.
TEST(JsonOverrides, MergePathComposesInEitherOrder) {
  lj::value a = lj::value::object(), b = lj::value::object();
  lj::merge_path(a, "accelerator.mode", "roofline", "--set");
  lj::merge_path(a, "accelerator", {{"mem_gbs", 141}}, "--set");
  lj::merge_path(b, "accelerator", {{"mem_gbs", 141}}, "--set");
  lj::merge_path(b, "accelerator.mode", "roofline", "--set");
  EXPECT_EQ(a["accelerator"]["mem_gbs"], 141);
  EXPECT_EQ(a["accelerator"]["mode"], "roofline");
  EXPECT_EQ(b["accelerator"]["mem_gbs"], 141);
  EXPECT_EQ(b["accelerator"]["mode"], "roofline");
  EXPECT_THROW(lj::merge_path(a, "accelerator.mem_gbs.x", 1, "--set"), llmsim::config_error);  // 141 is not an object
}

// Null is written as null (what the same text in the file means), not a deletion: for tp_size that is
// an error where deleting would have restored the default 1; for an optional field it clears it.
TEST(JsonOverrides, NullSetsNullRatherThanDeleting) {
  const auto file = configs_dir / "strategy" / "tp2_pp1_dp4_mbs1.json";
  try {
    (void)lj::load_strategy(file, {}, {{"tp_size", nullptr}});
    FAIL() << "tp_size=null must be refused as in a file";
  } catch (const llmsim::config_error& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": llmsim::json: /tp_size: expected an integer, got null");
  }
  const auto s = lj::load_strategy(
      file, {}, lj::value::parse(R"({"pp_size": 2, "world_size": 16, "num_layers_in_first_pipeline_stage": 3})"));
  EXPECT_EQ(s.num_layers_in_first_pipeline_stage, 3);
  const auto cleared =
      lj::load_strategy(file, {}, lj::value::parse(R"({"num_layers_in_first_pipeline_stage": null, "tp_net": null})"));
  EXPECT_FALSE(cleared.num_layers_in_first_pipeline_stage.has_value());
  EXPECT_EQ(cleared.tp_net.view(), "");  // null reads as "" (deleting would have kept "auto")
  lj::value doc = {{"a", {{"b", 1}}}};
  lj::merge_patch(doc, lj::value::parse(R"({"a": {"b": null, "c": 2}})"));
  EXPECT_EQ(doc, lj::value::parse(R"({"a": {"b": null, "c": 2}})"));
}

// A patch nested far deeper than any config merges without recursion.
TEST(JsonOverrides, DeepPatchMergesIteratively) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\"a\":";
  text += "1" + std::string(100000, '}');
  const lj::value patch = lj::value::parse(text);  // nlohmann parses and destroys without recursion
  lj::value doc = lj::value::object();
  lj::merge_patch(doc, patch);
  const lj::value* node = &doc;
  int depth = 0;
  while (node->is_object()) {
    node = &(*node)["a"];
    ++depth;
  }
  EXPECT_EQ(depth, 100000);
  EXPECT_EQ(*node, 1);
}

// validate(model, strategy) holds every rule between the two and needs no system; the three-argument
// form runs it too. Llama 3 70B: 64 heads, 8 KV heads, 80 layers (Meta's config).
TEST(Validate, ModelStrategyRulesNeedNoSystem) {
  constexpr llmsim::strategy_spec tp8{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 8};
  static_assert((llmsim::validate(llmsim::catalogue::llama3_70b, tp8), true));
  llmsim::strategy_spec tp16 = tp8;
  tp16.tp_size = 16;
  tp16.world_size = 16;
  try {
    llmsim::validate(llmsim::catalogue::llama3_70b, tp16);
    FAIL() << "tp16 does not divide 8 KV heads";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(), "llmsim::strategy: strategy.tp_size=16 must divide model.kv_head_num=8");
    EXPECT_EQ(e.field(), "strategy.tp_size");
  }
  EXPECT_THROW(llmsim::validate(llmsim::catalogue::llama3_70b, tp16, llmsim::catalogue::h100_sxm),
               llmsim::config_error);
  try {
    lj::validate_files(llmsim::catalogue::llama3_70b, "m.json", tp16, "s.json");
    FAIL() << "tp16 does not divide 8 KV heads";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(), "s.json: llmsim::strategy: strategy.tp_size=16 must divide model.kv_head_num=8");
  }
}

// With fewer layers than stages no first-stage size helps: the hint names the fields, no example.
TEST(Validate, PipelineSplitHintWithoutAnExample) {
  llmsim::model_spec m = llmsim::catalogue::llama3_8b;
  m.layer_num = 3;
  const llmsim::strategy_spec pp5{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 5, .pp_size = 5};
  try {
    llmsim::validate(m, pp5);
    FAIL() << "5 stages cannot hold 3 layers";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(),
                 "llmsim::strategy: strategy.pp_size=5 must divide model.layer_num=3; set "
                 "strategy.num_layers_in_first_pipeline_stage and/or "
                 "num_layers_in_last_pipeline_stage so the rest divides evenly");
  }
}

// ---- the loaders take catalogue names where no file of that name exists ------------------------------

TEST(JsonCatalogueNames, LoadersAcceptCatalogueAndCompactNames) {
  EXPECT_EQ(lj::load_model("llama3-70b"), llmsim::catalogue::llama3_70b);
  EXPECT_EQ(lj::load_system("h100-sxm").spec(), llmsim::catalogue::h100_sxm);
  const auto s = lj::load_strategy("tp8_pp2_dp4_mbc16");
  EXPECT_EQ(s.tp_size, 8);
  EXPECT_EQ(s.pp_size, 2);
  EXPECT_EQ(s.world_size, 64);  // 8 * 2 * 4
  EXPECT_EQ(s.micro_batch_num, 16);
  EXPECT_EQ(s.seq_len, 4096);  // the documented default
  // Overrides merge into catalogue entries as into files.
  llmsim::system_spec want = llmsim::catalogue::h100_sxm;
  want.accelerator.mem_gbs = 141;
  EXPECT_EQ(lj::load_system("h100-sxm", {}, {{"accelerator.mem_gbs", 141}}).spec(), want);
  EXPECT_EQ(lj::load_system("h100-sxm", {}, lj::value::parse(R"({"accelerator": {"mem_gbs": 141}})")).spec(), want);
  EXPECT_EQ(lj::load_model("llama3-70b", {}, {{"layer_num", 40}}).layer_num, 40);
  EXPECT_EQ(lj::load_strategy("tp8_dp1", {}, {{"micro_batch_num", 32}}).micro_batch_num, 32);
  // And perf_llm::configure takes them too.
  lj::perf_llm perf;
  perf.configure("tp8_dp1", "llama3-70b", "h100-sxm", {}, {}, {}, {{"accelerator.mem_gbs", 141}});
  EXPECT_EQ(perf.model(), llmsim::catalogue::llama3_70b);
  EXPECT_EQ(perf.system().accelerator.mem_gbs, 141.0);
}

TEST(JsonPerfLlm, RefusalsOfTheEstimateNameTheStrategy) {
  // DeepSeek-V4 with context parallelism passes the loaders and is refused by the estimate, which
  // names strategy.cp_size but no file: json::perf_llm reports it against the strategy it read.
  const auto file_of_refusal = [](auto run) {
    try {
      run();
    } catch (const llmsim::config_error& e) {
      EXPECT_EQ(e.field(), "strategy.cp_size");
      return e.file();
    }
    return std::string("accepted");
  };
  lj::perf_llm perf;
  perf.configure("cp2_dp64_ep64", "deepseek-v4-flash", "gb200-nvl72");
  EXPECT_EQ(file_of_refusal([&] { perf.run_estimate(); }), "cp2_dp64_ep64");
  // Configured from specs it knows no file: the caller names one, or the error keeps none.
  perf.configure(lj::load_strategy("cp2_dp64_ep64"), llmsim::catalogue::deepseek_v4_flash,
                 lj::load_system("gb200-nvl72"));
  EXPECT_EQ(file_of_refusal([&] { perf.run_estimate("s.json"); }), "s.json");
  EXPECT_EQ(file_of_refusal([&] { perf.run_estimate(); }), "");
  // Configured from files, then from plain specs: the old file is not blamed.
  perf.configure("cp2_dp64_ep64", "deepseek-v4-flash", "gb200-nvl72");
  perf.configure(lj::load_strategy("cp2_dp64_ep64"), llmsim::catalogue::deepseek_v4_flash,
                 llmsim::catalogue::gb200_nvl72);
  EXPECT_EQ(file_of_refusal([&] { perf.run_estimate(); }), "");
}

TEST(JsonCatalogueNames, NeitherFileNorNameListsTheNames) {
  const auto what = [](auto load, const char* arg) {
    try {
      (void)load(arg);
    } catch (const llmsim::config_error& e) {
      EXPECT_EQ(e.file(), arg);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(what([](const char* a) { return lj::load_model(a); }, "llama3-7b"),
            "llama3-7b: llmsim::json: is neither a file nor a catalogue model name; catalogue models: llama2-7b "
            "llama2-13b llama2-70b "
            "llama3-8b llama3-70b llama3-405b gpt3-175b gptj-6b falcon-180b qwen3-32b deepseek-v2 deepseek-v2-lite "
            "deepseek-v3 "
            "mixtral-8x7b mixtral-8x22b "
            "qwen3-30b-a3b qwen3-235b-a22b kimi-k2 gpt-oss-120b nemotron-3-nano-30b-a3b deepseek-v4-flash "
            "nemotron-3-super-120b-a12b nemotron-3.5-lightning-30b-a3b");
  EXPECT_EQ(
      what([](const char* a) { return lj::load_system(a).spec(); }, "h100"),
      "h100: llmsim::json: is neither a file nor a catalogue system name; catalogue systems: a100-sxm a100-pcie "
      "a100-sxm-40gb l40s mi250x-gcd h100-sxm h100-pcie h200 b200 mi300x mi355x h800 b300 gb200-nvl72 gb300-nvl72");
  EXPECT_EQ(what([](const char* a) { return lj::load_strategy(a); }, "tp8_pp2_first"),
            "tp8_pp2_first: llmsim::json: is neither a file nor a catalogue strategy name; strategy names are compact, "
            "e.g. tp2_pp1_dp4 or "
            "pp16_dp8_ep8_mbc32_first1, from the tokens tp<N> pp<N> dp<N> cp<N> cp<N>ring ep<N> etp<N> mbs<N> mbc<N> "
            "seq<N> zero<N> zero<N>fsdp vp<N> first<N> last<N> full full<N> selective fp8<recipe> optoffload nosp "
            "zbh1 dualpipev epoverlap tpoverlap separated by '_' or '-'");
  const std::string dir = (configs_dir / "models").string();
  EXPECT_EQ(what([](const char* a) { return lj::load_model(a); }, dir.c_str()),
            dir + ": llmsim::json: is a directory, not a config file");
}

TEST(Json, PipelineScheduleNamesItsValues) {
  const auto s = lj::parse_strategy(lj::value::parse(R"({"seq_len": 2048, "micro_batch_size": 1, "micro_batch_num": 8,
      "pipeline_schedule": "zb_h1"})"),
                                    "s.json", {.strict = true});
  EXPECT_EQ(s.pipeline_schedule, llmsim::pipeline_schedule_kind::zb_h1);
  EXPECT_EQ(lj::parse_strategy(lj::to_json(s), "round-trip", {.strict = true}), s);
  try {
    (void)lj::parse_strategy(lj::value::parse(R"({"seq_len": 2048, "micro_batch_size": 1, "micro_batch_num": 8,
        "pipeline_schedule": "gpipe"})"),
                             "s.json", {.strict = true});
    FAIL() << "an unknown schedule must be refused";
  } catch (const llmsim::config_error& e) {
    EXPECT_STREQ(e.what(),
                 "s.json: llmsim::json: /pipeline_schedule: expected one of \"1f1b\", \"interleaved_1f1b\", "
                 "\"zb_h1\", \"dualpipev\", got \"gpipe\"");
  }
}

// RFC 6901 section 3: in a reference token '~' is written "~0" and '/' is written "~1"; a message
// quotes at most detail::max_quoted_key_bytes (64) bytes of a key, cut before a split character.
TEST(Json, PointerTokensAreEscapedAndBounded) {
  EXPECT_EQ(lj::detail::pointer_token("tp_size"), "tp_size");
  EXPECT_EQ(lj::detail::pointer_token("a/b~c"), "a~1b~0c");
  EXPECT_EQ(lj::detail::pointer_token("~1"), "~01");  // not "~1": that would read back as "/"
  EXPECT_EQ(lj::detail::pointer_token("line\nbreak"), "line<0x0A>break");
  EXPECT_EQ(lj::detail::pointer_token(std::string(64, 'k')), std::string(64, 'k'));
  EXPECT_EQ(lj::detail::pointer_token(std::string(65, 'k')), std::string(64, 'k') + "...");
  // 63 ASCII bytes then a 2-byte character: byte 64 is its lead byte, so the character is dropped.
  EXPECT_EQ(lj::detail::pointer_token(std::string(63, 'k') + "\xC3\xA9" + "z"), std::string(63, 'k') + "...");
}

TEST(Json, RepeatedKeysAreRefusedWithTheirPointer) {
  const auto refused = [](const std::string& text) {
    try {
      (void)lj::parse_text(text, "t.json");
    } catch (const llmsim::config_error& e) { return e.field(); }
    return std::string("accepted");
  };
  EXPECT_EQ(refused(R"({"a": 1, "a": 2})"), "/a");
  EXPECT_EQ(refused(R"({"a": [0, {"b": 1}, {"c": {"d": 1, "d": 1}}]})"), "/a/2/c/d");
  EXPECT_EQ(refused(R"({"x/y": {"k": [], "k": {}}})"), "/x~1y/k");
  EXPECT_EQ(refused(R"([{"a": 1}, {"a": 1}])"), "accepted");  // the same key in two objects is fine
  EXPECT_EQ(lj::override_value(R"({"a": 1, "b": 2})"), lj::value::parse(R"({"a": 1, "b": 2})"));
  EXPECT_THROW((void)lj::override_value(R"({"a": 1, "a": 2})"), llmsim::config_error);
}

TEST(Json, OnlyRegularFilesOfBoundedSizeAreRead) {
  const fs::path dir = fs::temp_directory_path() / "llmsim_test_json_files";
  fs::create_directories(dir);
  const auto rule_of = [](const fs::path& file) {
    try {
      (void)lj::read_file(file);
    } catch (const llmsim::config_error& e) { return e.rule(); }
    return std::string("read");
  };
  EXPECT_EQ(rule_of(dir), "is a directory, not a config file");
  EXPECT_EQ(rule_of("/dev/zero"), "is not a regular file (a FIFO, device or socket); configs are files");
  // A sparse file one byte over 64 MiB: refused by its size before a byte is read.
  const fs::path big = dir / "big.json";
  { std::ofstream(big) << "{}"; }
  fs::resize_file(big, (std::uintmax_t{64} << 20) + 1);
  EXPECT_EQ(rule_of(big), "is 67108865 bytes; config files larger than 64 MiB are refused");
  fs::resize_file(big, 2);
  EXPECT_EQ(rule_of(big), "read");
  fs::remove_all(dir);
}

}  // namespace llmsim_test_json
