// The llmsim command line tool as a user runs it: overrides, exit statuses, JSON on stdout.
// Each test runs the built CLI (LLMSIM_CLI_PATH) through a POSIX shell and reads its exit status,
// stdout and stderr. Expected values come from the configs and the documentation, never from a
// previous run of the tool.

#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const fs::path source_dir = fs::path(LLMSIM_SOURCE_DIR);

struct run_result {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
  /// stdout parsed as JSON (discarded when it is not JSON).
  [[nodiscard]] json out_json() const { return json::parse(out, nullptr, false); }
};

/// The tool under test: the environment's LLMSIM_TEST_CLI when set (to run these tests against
/// another build of the tool), else the one built with the tests.
std::string cli_path() {
  const char* env = std::getenv("LLMSIM_TEST_CLI");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(LLMSIM_CLI_PATH);
}

#define LLMSIM_REQUIRE_CLI()                                                                    \
  do {                                                                                          \
    if (cli_path().empty()) GTEST_SKIP() << "the llmsim command line tool is not built"; \
  } while (false)

#ifndef _WIN32
/// Runs `llmsim <args>` from the source directory (so configs/... paths resolve); `args` is shell text.
run_result run_cli(const std::string& args) {
  static std::atomic<int> counter{0};
  const fs::path err_file = fs::temp_directory_path() / ("llmsim_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".err");
  const std::string command = "cd '" + source_dir.string() + "' && '" + cli_path() + "' " + args + " 2>'" + err_file.string() + "'";
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  r.err = text.str();
  std::error_code ignored;
  fs::remove(err_file, ignored);
  return r;
}
#else
run_result run_cli(const std::string&) { return {}; }
#endif

/// `check --format json` of `args`: the resolved specs (fails the test when the command fails).
json checked(const std::string& args) {
  const auto r = run_cli("check --format json " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\nstderr: " << r.err;
  const auto report = r.out_json();
  EXPECT_FALSE(report.is_discarded()) << "stdout is not JSON: " << r.out;
  return report;
}

// ---- item: --set merges into nested objects ---------------------------------------------------

// The README's and --help's own example, on the catalogue system and on the shipped file: memory
// becomes 141 (GiB, as given) and every other field of the system stays as loaded without it.
TEST(CliOverrides, NestedSystemOverrideKeepsTheRestOfTheObject) {
  LLMSIM_REQUIRE_CLI();
  for (const std::string system : {"h100-sxm", "configs/system/h100_sxm.json"}) {
    SCOPED_TRACE(system);
    const json base = checked("--system " + system);
    const json patched = checked("--system " + system + " --set system.accelerator.mem_gbs=141");
    ASSERT_TRUE(base.contains("system") && patched.contains("system"));
    EXPECT_EQ(patched["system"]["accelerator"]["mem_gbs"], 141.0);
    json want = base["system"];
    want["accelerator"]["mem_gbs"] = 141.0;
    EXPECT_EQ(patched["system"], want);
  }
}

// Model and strategy overrides on catalogue entries and files: only the named fields change.
// Llama 3 70B has 80 layers (Meta's config); 40 keeps pp2 even. The JSON value form merges too.
TEST(CliOverrides, ModelAndStrategyOverridesChangeOnlyTheirFields) {
  LLMSIM_REQUIRE_CLI();
  for (const std::string model : {"llama3-70b", "configs/models/llama3-70b.json"}) {
    SCOPED_TRACE(model);
    const std::string specs = "--model " + model + " --strategy tp8_pp2_dp1";
    const json base = checked(specs);
    const json patched = checked(specs + " --set model.layer_num=40 --set strategy.micro_batch_num=16");
    json want_model = base["model"];
    want_model["layer_num"] = 40;
    EXPECT_EQ(patched["model"], want_model);
    json want_strategy = base["strategy"];
    want_strategy["micro_batch_num"] = 16;
    want_strategy["global_batch_size"] = 16;  // mbs 1 * 16 micro-batches * dp 1
    EXPECT_EQ(patched["strategy"], want_strategy);
  }
  const json file = checked("--strategy configs/strategy/tp2_pp1_dp4_mbs1.json");
  const json patched = checked("--strategy configs/strategy/tp2_pp1_dp4_mbs1.json --set 'strategy.megatron_recompute_modules=[\"mlp\"]' "
                               "--set strategy.megatron_recompute=true --set strategy.enable_recompute=true "
                               "--set strategy.recompute_granularity=selective_recompute --set strategy.recompute_layer_num=2");
  json want = file["strategy"];
  want["megatron_recompute_modules"] = json::array({"mlp"});
  want["megatron_recompute"] = true;
  want["enable_recompute"] = true;
  want["recompute_granularity"] = "selective_recompute";
  want["recompute_layer_num"] = 2;
  EXPECT_EQ(patched["strategy"], want);
}

// A JSON object given to --set merges like the dotted form, and later --set compose with earlier ones.
TEST(CliOverrides, ObjectValuedSetMergesAndComposes) {
  LLMSIM_REQUIRE_CLI();
  const json base = checked("--system h100-sxm");
  const json patched = checked("--system h100-sxm --set 'system.accelerator={\"mem_gbs\": 141}' --set system.networks.inter_node.bandwidth.gbps=100");
  json want = base["system"];
  want["accelerator"]["mem_gbs"] = 141.0;
  want["networks"]["inter_node"]["bandwidth"]["gbps"] = 100.0;
  EXPECT_EQ(patched["system"], want);
}


// ---- item: the build says whether it is optimised -------------------------------------------------

// This test is compiled with the CLI's flags, so its own __OPTIMIZE__ tells what --version must say.
TEST(CliVersion, SaysWhetherTheBuildIsOptimised) {
  LLMSIM_REQUIRE_CLI();
  const auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
#ifdef __OPTIMIZE__
  EXPECT_EQ(r.out, std::string("llmsim ") + LLMSIM_VERSION_STRING + " (optimised build)\n");
#else
  EXPECT_EQ(r.out, std::string("llmsim ") + LLMSIM_VERSION_STRING + " (unoptimised build: configure with -DCMAKE_BUILD_TYPE=Release for speed)\n");
#endif
}

// ---- item: model-strategy rules run whenever both are given --------------------------------------

// Llama 3 70B has 64 query and 8 key/value heads (Meta's config): tp16 divides 64 but not 8.
TEST(CliCheck, ModelAndStrategyRulesRunWithoutASystem) {
  LLMSIM_REQUIRE_CLI();
  const auto r = run_cli("check --model llama3-70b --strategy tp16");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("error: tp16: llmsim::strategy: strategy.tp_size=16 must divide model.kv_head_num=8\n"), std::string::npos) << r.err;
  // The strategy file is named when the strategy comes from a file.
  const auto f = run_cli("check --model llama3-70b --strategy configs/strategy/tp2_pp1_dp4_mbs1.json --set strategy.tp_size=16 --set strategy.world_size=16");
  EXPECT_EQ(f.exit_code, 1) << f.out;
  EXPECT_NE(f.err.find("error: configs/strategy/tp2_pp1_dp4_mbs1.json: llmsim::strategy: strategy.tp_size=16 must divide model.kv_head_num=8\n"), std::string::npos) << f.err;
  EXPECT_EQ(run_cli("check --model llama3-70b --strategy tp8").exit_code, 0);
}

// ---- item: pipeline-split errors say how to fix them; compact names take first<N> / last<N> ------

// DeepSeek-V3 has 61 layers (its config.json): pp16 does not divide them, 1 + 15 * 4 does.
TEST(CliCheck, PipelineSplitErrorNamesTheFixAndTheNameTakesIt) {
  LLMSIM_REQUIRE_CLI();
  const auto bad = run_cli("check --model deepseek-v3 --strategy pp16_dp8_ep8_mbc32");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("error: pp16_dp8_ep8_mbc32: llmsim::strategy: strategy.pp_size=16 must divide model.layer_num=61; set "
                         "strategy.num_layers_in_first_pipeline_stage and/or num_layers_in_last_pipeline_stage so the rest divides evenly, "
                         "e.g. num_layers_in_first_pipeline_stage=1 leaves 4 layers on each of the other 15 stages\n"),
            std::string::npos)
      << bad.err;
  const json first = checked("--model deepseek-v3 --strategy pp16_dp8_ep8_mbc32_first1");
  EXPECT_EQ(first["strategy"]["num_layers_in_first_pipeline_stage"], 1);
  EXPECT_EQ(first["strategy"]["num_layers_in_last_pipeline_stage"], nullptr);
  EXPECT_EQ(first["strategy"]["pp_size"], 16);
  EXPECT_EQ(first["strategy"]["world_size"], 128);  // pp16 * dp8
  const json last = checked("--model deepseek-v3 --strategy pp16_dp8_ep8_mbc32_last1");
  EXPECT_EQ(last["strategy"]["num_layers_in_last_pipeline_stage"], 1);
  EXPECT_EQ(last["strategy"]["num_layers_in_first_pipeline_stage"], nullptr);
}

constexpr bool compact_names_take_first_and_last() {
  llmsim::strategy_spec s{};
  if (!llmsim::catalogue::parse_strategy_name("pp4_dp2_first2_last3", s)) return false;
  return s.pp_size == 4 && s.world_size == 8 && s.num_layers_in_first_pipeline_stage == 2 && s.num_layers_in_last_pipeline_stage == 3;
}
constexpr bool compact_names_refuse_a_token_without_its_number() {
  llmsim::strategy_spec s{};
  for (const char* name : {"first", "pp4_first", "pp4_last", "pp4_firstx", "pp4_first2x", "pp4_tp"})
    if (llmsim::catalogue::parse_strategy_name(name, s)) return false;
  return true;
}
static_assert(compact_names_take_first_and_last());
static_assert(compact_names_refuse_a_token_without_its_number());
TEST(CompactStrategyNames, FirstAndLastTokens) {
  EXPECT_TRUE(compact_names_take_first_and_last());
  EXPECT_TRUE(compact_names_refuse_a_token_without_its_number());
}

// ---- item: the CLI loads through the library (files, catalogue names, directories) --------------

TEST(CliCheck, DirectoryAndUnknownNamesAreRefusedClearly) {
  LLMSIM_REQUIRE_CLI();
  const auto dir = run_cli("check --model configs/models");
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_NE(dir.err.find("error: configs/models: llmsim::json: is a directory, not a config file\n"), std::string::npos) << dir.err;
  const auto unknown = run_cli("check --system h100");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("error: h100: llmsim::json: is neither a file nor a catalogue system name; catalogue systems: a100-sxm a100-pcie h100-sxm h200 b200 mi300x\n"),
            std::string::npos)
      << unknown.err;
}

// ---- item: list --format json ---------------------------------------------------------------------

// Key fields by hand: Llama 3 70B (Meta's config.json), DeepSeek-V3 (its config.json), H100 SXM
// (80 GB, 989 dense BF16 TFLOPS, 1979 FP8), and the documented strategy-name tokens and defaults.
TEST(CliList, JsonListsModelsSystemsAndTheStrategyGrammar) {
  LLMSIM_REQUIRE_CLI();
  const auto r = run_cli("list --format json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = r.out_json();
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const auto find = [&](const char* list, const std::string& name) {
    for (const auto& e : j[list])
      if (e["name"] == name) return e;
    return json();
  };
  ASSERT_EQ(j["models"].size(), 15U);
  const json llama = find("models", "llama3-70b");
  EXPECT_EQ(llama["model_type"], "dense");
  EXPECT_EQ(llama["hidden_size"], 8192);
  EXPECT_EQ(llama["layer_num"], 80);
  EXPECT_EQ(llama["head_num"], 64);
  EXPECT_EQ(llama["kv_head_num"], 8);
  EXPECT_EQ(llama["intermediate_size"], 28672);
  EXPECT_EQ(llama["vocab_size"], 128256);
  const json v3 = find("models", "deepseek-v3");
  EXPECT_EQ(v3["model_type"], "moe");
  EXPECT_EQ(v3["attention_type"], "mla");
  EXPECT_EQ(v3["layer_num"], 61);
  EXPECT_EQ(v3["expert_num"], 256);
  EXPECT_EQ(v3["topk"], 8);
  ASSERT_EQ(j["systems"].size(), 6U);
  const json h100 = find("systems", "h100-sxm");
  EXPECT_EQ(h100["mem_gbs"], 80.0);
  EXPECT_EQ(h100["matmul_tflops"], 989.0);
  EXPECT_EQ(h100["fp8_matmul_tflops"], 1979.0);
  EXPECT_EQ(h100["num_per_node"], 8);
  EXPECT_EQ(find("systems", "a100-sxm")["fp8_matmul_tflops"], nullptr);  // Ampere has no FP8
  const json& grammar = j["strategy_names"];
  std::vector<std::string> tokens;
  for (const auto& t : grammar["tokens"]) tokens.push_back(t["token"].get<std::string>());
  EXPECT_EQ(tokens, (std::vector<std::string>{"tp<N>", "pp<N>", "dp<N>", "cp<N>", "ep<N>", "etp<N>", "mbs<N>", "mbc<N>", "seq<N>", "zero<N>", "vp<N>",
                                              "first<N>", "last<N>", "full", "selective", "nosp"}));
  EXPECT_EQ(grammar["defaults"]["seq_len"], 4096);
  EXPECT_EQ(grammar["defaults"]["micro_batch_size"], 1);
  EXPECT_EQ(grammar["defaults"]["micro_batch_num"], 8);
  EXPECT_EQ(grammar["separators"], json::array({"_", "-"}));
}

}  // namespace
