// llmsim::llm_analysis, the reproduction of llm-analysis (cli99/llm-analysis, commit d841e40):
// - every key of every case of ../shared/validation/llm_analysis_oracle.json (llm-analysis's own
//   outputs) to 1e-9 relative;
// - hand-derived cases on a small made-up model (parameter and weight bytes, ZeRO sharding, FLOPs,
//   KV cache), evaluated at compile time as well;
// - Python's round(x, 2), which the training summary applies to device_tokens_per_sec;
// - `llmsim llm-analysis train|infer`: JSON keys, exit statuses, errors naming field and rule.

#include <llmsim/json/llm_analysis.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "sanitized_build.hpp"
#include "shared_dir.hpp"

namespace llmsim_test_llm_analysis {

namespace {

namespace la = llmsim::llm_analysis;
namespace lja = llmsim::json::llm_analysis;
namespace fs = std::filesystem;
using json = llmsim::json::value;

fs::path configs_dir() { return llmsim_test::shared_dir() / "reference" / "llm-analysis"; }
fs::path oracle_file() { return llmsim_test::shared_dir() / "validation" / "llm_analysis_oracle.json"; }

#define LLMSIM_REQUIRE_ORACLE()                                                        \
  do {                                                                                 \
    if (!fs::exists(oracle_file()) || !fs::exists(configs_dir()))                      \
      GTEST_SKIP() << oracle_file() << " or " << configs_dir()                         \
                   << " not found (tests that read ../shared skip when it is absent)"; \
  } while (0)

// ---- the oracle: llm-analysis's own outputs -----------------------------------------------------

// An oracle case's keyword arguments go through the library's reader (json/llm_analysis.hpp
// read_training_kwargs / read_inference_kwargs, what the Python module calls): a key it does not
// know is an error, so a new oracle field is not silently ignored.
la::training_params training_kwargs(const json& k) { return lja::read_training_kwargs(k, "oracle"); }
la::inference_params inference_kwargs(const json& k) { return lja::read_inference_kwargs(k, "oracle"); }

json run_case(const json& c) {
  const auto& k = c["kwargs"];
  const auto model = lja::find_model_config(configs_dir(), k["model_name"].get<std::string>());
  const auto gpu = lja::find_gpu_config(configs_dir(), k["gpu_name"].get<std::string>());
  const auto dtype = lja::find_dtype_config(configs_dir(), k.value("dtype_name", std::string("w16a16e16")));
  if (c["function"] == "train") return lja::to_json(la::training(model, gpu, dtype, training_kwargs(k)));
  return lja::to_json(la::inference(model, gpu, dtype, inference_kwargs(k)));
}

/// Keys whose values are counts (Python ints in every case).
bool is_count(const std::string& key) {
  return key.ends_with("_size") || key.ends_with("batch_size_per_gpu") || key == "gradient_accumulation_steps" ||
         key == "total_num_gpus" || key == "seq_len" || key == "num_params_total_mlp" ||
         key == "num_params_total_embedding" || key == "layernorm_dtype_bytes" || key == "num_tokens_to_generate";
}

/// |ours - theirs| / |theirs| (absolute when theirs is 0).
double relative_error(double ours, double theirs) {
  return theirs == 0 ? std::fabs(ours) : std::fabs(ours - theirs) / std::fabs(theirs);
}

TEST(LlmAnalysisOracle, EveryKeyOfEveryCaseWithin1e9Relative) {
  LLMSIM_REQUIRE_ORACLE();
  const json doc = llmsim::json::read_file(oracle_file());
  ASSERT_EQ(doc["cases"].size(), 19U);
  double worst = 0;
  std::size_t compared = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const json ours = run_case(c);
    const json& theirs = c["output"];
    // the same keys in the same order
    std::vector<std::string> our_keys, their_keys;
    for (const auto& item : ours.items()) our_keys.push_back(item.key());
    for (const auto& item : theirs.items()) their_keys.push_back(item.key());
    EXPECT_EQ(our_keys, their_keys) << name;
    for (const auto& [key, v] : theirs.items()) {
      if (!ours.contains(key)) continue;
      const json& o = ours[key];
      ++compared;
      if (v.is_number()) {
        if (!o.is_number()) {
          ADD_FAILURE() << name << ": " << key << " is " << o << ", llm-analysis has " << v;
          continue;
        }
        const double e = relative_error(o.get<double>(), v.get<double>());
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-9) << name << ": " << key << " = " << o << ", llm-analysis has " << v;
        // counts stay integers (Python ints); other values' int-or-float follows Python's arithmetic
        // on its inputs (0 for tp_size 1, 1 x 312 TFLOPS), which JSON readers do not distinguish
        if (is_count(key)) { EXPECT_TRUE(o.is_number_integer()) << name << ": " << key; }
      } else {
        EXPECT_EQ(o, v) << name << ": " << key;
      }
    }
  }
  std::printf("llm-analysis oracle: %zu values, max relative error %.3g\n", compared, worst);
  RecordProperty("max_relative_error", std::to_string(worst));
}

TEST(LlmAnalysisConfigs, EveryShippedConfigLoads) {
  LLMSIM_REQUIRE_ORACLE();
  std::size_t n = 0;
  for (const char* kind : {"model_configs", "gpu_configs", "dtype_configs"}) {
    for (const auto& entry : fs::directory_iterator(configs_dir() / kind)) {
      const json v = llmsim::json::read_file(entry.path());
      const std::string name = v["name"].get<std::string>();
      if (std::string(kind) == "model_configs") {
        const auto m = lja::find_model_config(configs_dir(), name);
        EXPECT_EQ(m.name.view(), name);
        EXPECT_EQ(m.hidden_dim, v["hidden_dim"].get<std::int64_t>());
        EXPECT_EQ(m.max_seq_len.has_value(), v.contains("max_seq_len") && !v["max_seq_len"].is_null()) << name;
      } else if (std::string(kind) == "gpu_configs") {
        EXPECT_EQ(lja::find_gpu_config(configs_dir(), name).peak_fp16_TFLOPS, v["peak_fp16_TFLOPS"].get<double>());
      } else {
        EXPECT_EQ(lja::find_dtype_config(configs_dir(), name).weight_bits, v["weight_bits"].get<std::int64_t>());
      }
      ++n;
    }
  }
  EXPECT_EQ(n, 47U + 17U + 12U);
}

TEST(LlmAnalysisConfigs, BadConfigsNameTheFieldAndRule) {
  const auto message = [](const json& v, auto read) {
    try {
      read(v);
    } catch (const llmsim::config_error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  const auto model = [](const json& v) { (void)lja::read_model_config(v, "m.json"); };
  const auto gpu = [](const json& v) { (void)lja::read_gpu_config(v, "g.json"); };
  EXPECT_EQ(message(json{{"name", "x"}, {"num_layers", 2}, {"n_head", 4}, {"hidden_dim", 64}}, model),
            "m.json: llmsim::json: /vocab_size: missing (llm-analysis requires it)");
  EXPECT_EQ(message(json{{"name", "x"},
                         {"num_layers", 2},
                         {"n_head", 4},
                         {"hidden_dim", 64},
                         {"vocab_size", 10},
                         {"num_key_value_heads", 3}},
                    model),
            "m.json: llmsim::llm_analysis::model_config: /num_key_value_heads: num_key_value_heads=3 must divide "
            "n_head=4");
  EXPECT_EQ(message(json{{"name", "x"},
                         {"num_layers", 2},
                         {"n_head", 4},
                         {"hidden_dim", 64},
                         {"vocab_size", 10},
                         {"hidden_size", 64}},
                    model),
            "m.json: llmsim::json: /hidden_size: unknown key (not a field of llm-analysis's config)");
  EXPECT_EQ(message(json{{"name", "g"},
                         {"mem_per_GPU_in_GB", 80},
                         {"hbm_bandwidth_in_GB_per_sec", 0},
                         {"intra_node_bandwidth_in_GB_per_sec", 300},
                         {"intra_node_min_message_latency", 8e-6},
                         {"peak_fp16_TFLOPS", 312}},
                    gpu),
            "g.json: llmsim::llm_analysis::gpu_config: /hbm_bandwidth_in_GB_per_sec: hbm_bandwidth_in_GB_per_sec=0 "
            "must be in [1e-06, 1e+09]");
}

// ---- hand-derived cases -------------------------------------------------------------------------

// A small made-up model: 2 layers, 4 heads, hidden 64, vocabulary 1000, MLP 256 (not gated).
// Parameters per layer: attention Q, K, V, O = 4 x 64^2 = 16384; MLP 2 x 64 x 256 = 32768; two
// norm scales 2 x 64 = 128; so 49280. Embedding 64 x 1000 = 64000 (tied), last norm 64.
// Total 2 x 49280 + 64000 + 64 = 162624.
constexpr la::model_config small_model() {
  la::model_config m;
  m.name = "small";
  m.num_layers = 2;
  m.n_head = 4;
  m.hidden_dim = 64;
  m.vocab_size = 1000;
  m.max_seq_len = 2048;
  m.ffn_embed_dim = 256;
  return m;
}
// An A100-SXM-80GB as llm-analysis describes it (gpu_configs/a100-sxm-80gb.json).
constexpr la::gpu_config a100() {
  la::gpu_config g;
  g.name = "a100";
  g.mem_per_GPU_in_GB = 80;
  g.hbm_bandwidth_in_GB_per_sec = 2039;
  g.intra_node_bandwidth_in_GB_per_sec = 300;
  g.intra_node_min_message_latency = 8e-6;
  g.peak_fp16_TFLOPS = 312;
  return g;
}

constexpr la::summary small_inference(std::int64_t weight_bits, std::int64_t tp) {
  la::dtype_config d;
  d.weight_bits = weight_bits;
  la::inference_params p;
  p.tp_size = tp;
  p.seq_len = 16;
  p.num_tokens_to_generate = 4;
  return la::inference(small_model(), a100(), d, p);
}

constexpr la::summary small_training(la::ds_zero zero, std::int64_t dp) {
  la::training_params p;
  p.seq_len = 16;
  p.batch_size_per_gpu = 1;
  p.total_num_gpus = dp;
  p.ds_zero = zero;
  return la::training(small_model(), a100(), {}, p);
}

TEST(LlmAnalysisHand, ParametersAndWeightBytes) {
  const auto s = small_inference(16, 1);
  EXPECT_EQ(s["num_params_total"], 162624.0);
  EXPECT_EQ(s["num_params_total_mlp"], 2 * 32768.0);
  EXPECT_EQ(s["num_params_total_embedding"], 64000.0);
  // fp16: 2 bytes per parameter
  EXPECT_EQ(s["weight_memory_per_gpu"], 2 * 162624.0);
  EXPECT_EQ(s["weight_memory_embedding_per_gpu"], 2 * 64000.0);
  // w4a16e16: layer weights and last norm at half a byte, the embedding still at 2 bytes
  EXPECT_EQ(small_inference(4, 1)["weight_memory_per_gpu"], 0.5 * (2 * 49280.0 + 64) + 2 * 64000.0);
}

TEST(LlmAnalysisHand, KvCacheBytes) {
  // K and V of 16 + 4 tokens, head_dim 64 / 4 = 16, 4 heads, 2 bytes, 2 layers:
  // 2 x 1 x 20 x 16 x 4 x 2 x 2 = 10240 bytes
  EXPECT_EQ(small_inference(16, 1)["kv_cache_memory_per_gpu"], 10240.0);
  // tp 2: 2 heads per GPU
  EXPECT_EQ(small_inference(16, 2)["kv_cache_memory_per_gpu"], 5120.0);
  // read and written once per decode step at 2039 GB/s (HBM efficiency 1, the default)
  EXPECT_DOUBLE_EQ(small_inference(16, 1)["kv_cache_latency"], 2 * 10240.0 / 2039e9);
}

TEST(LlmAnalysisHand, GqaKvCacheKeepsOneHeadPerTensorParallelGpu) {
  // Llama-2-70B's 8 KV heads of 128 over tp 8: one head per GPU; at tp 16 still one (replicated).
  la::model_config m;
  m.name = "gqa";
  m.num_layers = 80;
  m.n_head = 64;
  m.num_key_value_heads = 8;
  m.hidden_dim = 8192;
  m.vocab_size = 32000;
  m.ffn_embed_dim = 28672;
  m.mlp_gated_linear_units = true;
  const la::analysis a8{la::resolve(m), a100(), {}, {8, 1, 1, 1, 1, 8}};
  const la::analysis a16{la::resolve(m), a100(), {}, {16, 1, 1, 1, 1, 16}};
  // 2 (K, V) x 32 sequences x 2560 tokens x 128 x 1 head x 1 byte = 20971520 per layer
  EXPECT_EQ(a8.kv_cache_layer(32, 2560, 1), 20971520.0);
  EXPECT_EQ(a16.kv_cache_layer(32, 2560, 1), 20971520.0);
}

TEST(LlmAnalysisHand, ZeroShardsOptimizerStatesThenGradients) {
  // Adam: 12 bytes of states and 4 of fp32 gradient per parameter, 162624 parameters.
  EXPECT_EQ(small_training(la::ds_zero::NONE, 4)["optimizer_state_memory_per_gpu"], 12 * 162624.0);
  EXPECT_EQ(small_training(la::ds_zero::STAGE_1, 4)["optimizer_state_memory_per_gpu"], 3 * 162624.0);
  EXPECT_EQ(small_training(la::ds_zero::STAGE_1, 4)["gradient_memory_per_gpu"], 4 * 162624.0);
  EXPECT_EQ(small_training(la::ds_zero::STAGE_2, 4)["gradient_memory_per_gpu"], 162624.0);
  // ZeRO-3 also shards the fp16 weights: 2 x 162624 / 4
  EXPECT_EQ(small_training(la::ds_zero::STAGE_3, 4)["weight_memory_per_gpu"], 2 * 162624.0 / 4);
}

TEST(LlmAnalysisHand, TrainingFlops) {
  // Forward of one sequence of 16: attention 4bsh^2 + 4bsh^2 + 4bs^2h = 262144 + 262144 + 65536,
  // MLP 4bsh^2 x 4 = 1048576; two layers 3276800; logits 2 x 16 x 64 x 1000 = 2048000; forward
  // 5324800, backward twice that, no recomputation.
  EXPECT_EQ(small_training(la::ds_zero::NONE, 1)["num_flops_total_per_micro_batch"], 3 * 5324800.0);
}

#ifndef LLMSIM_SANITIZED_BUILD
// The same figures as constant expressions.
static_assert(small_inference(16, 1)["weight_memory_per_gpu"] == 2 * 162624.0);
static_assert(small_inference(16, 1)["kv_cache_memory_per_gpu"] == 10240.0);
static_assert(small_training(la::ds_zero::STAGE_1, 4)["optimizer_state_memory_per_gpu"] == 3 * 162624.0);
#endif

TEST(LlmAnalysisHand, PythonRoundTwoDigits) {
  // CPython: round(0.125, 2) == 0.12 and round(0.375, 2) == 0.38 (exact ties, to even);
  // round(2.675, 2) == 2.67 and round(1.005, 2) == 1.0 (the binary values lie below the tie);
  // round(833.665, 2) == 833.66; round(-0.125, 2) == -0.12.
  EXPECT_EQ(la::python_round2(0.125), 0.12);
  EXPECT_EQ(la::python_round2(0.375), 0.38);
  EXPECT_EQ(la::python_round2(2.675), 2.67);
  EXPECT_EQ(la::python_round2(1.005), 1.0);
  EXPECT_EQ(la::python_round2(833.665), 833.66);
  EXPECT_EQ(la::python_round2(-0.125), -0.12);
  EXPECT_EQ(la::python_round2(841.6), 841.6);
}

TEST(LlmAnalysisErrors, ParametersAreCheckedWithFieldAndRule) {
  const auto error = [](auto f) {
    try {
      f();
    } catch (const llmsim::config_error& e) { return e.field() + " | " + e.rule(); }
    return std::string("no error");
  };
  EXPECT_EQ(error([] {
              la::training_params p;
              p.tp_size = 16;
              (void)la::training(small_model(), a100(), {}, p);
            }),
            "tp_size | tp_size=16 must be <= num_gpus_per_node=8");
  EXPECT_EQ(error([] {
              la::training_params p;
              p.total_num_gpus = 6;
              p.tp_size = 4;
              (void)la::training(small_model(), a100(), {}, p);
            }),
            "total_num_gpus | total_num_gpus=6 must be a multiple of tp_size * pp_size = 4");
  EXPECT_EQ(error([] {
              la::inference_params p;
              p.seq_len = 4096;
              (void)la::inference(small_model(), a100(), {}, p);
            }),
            "seq_len | seq_len=4096 must be <= max_seq_len=2048 of small");
  EXPECT_EQ(error([] {
              la::inference_params p;
              p.flops_efficiency = 1.5;
              (void)la::inference(small_model(), a100(), {}, p);
            }),
            "flops_efficiency | flops_efficiency=1.5 must be in (0, 1]");
  // gpu_configs/v100-*.json give peak_i8_TFLOPS 0: loading is fine, an 8-bit GEMM on it is not
  EXPECT_EQ(error([] {
              la::gpu_config g = a100();
              g.peak_i8_TFLOPS = 0.0;
              la::dtype_config d{"w8a8e16", 8, 8, 16};
              (void)la::inference(small_model(), g, d, {});
            }),
            "peak_i8_TFLOPS | data type w8a8e16 computes at 8 bits, but GPU a100 has no such peak (0)");
  // Inputs past what the formulas' 64-bit counts hold are refused (they overflowed to negative
  // latencies and batches, undefined behaviour, or ran for minutes).
  EXPECT_EQ(error([] {
              la::training_params p;
              p.global_batch_size = std::int64_t{1} << 36;
              (void)la::training(small_model(), a100(), {}, p);
            }),
            "global_batch_size | global_batch_size=68719476736 must be >= 1 and <= 2147483647");
  EXPECT_EQ(error([] {
              la::inference_params p;
              p.num_tokens_to_generate = std::int64_t{1} << 62;
              (void)la::inference(small_model(), a100(), {}, p);
            }),
            "num_tokens_to_generate | num_tokens_to_generate=4611686018427387904 must be >= 1 and <= 2147483647");
  EXPECT_EQ(error([] {
              la::gpu_config g = a100();
              g.mem_per_GPU_in_GB = 1e308;
              (void)la::inference(small_model(), g, {}, {});
            }),
            "mem_per_GPU_in_GB | mem_per_GPU_in_GB=1e+308 must be in [1e-06, 1e+09]");
  EXPECT_EQ(error([] {
              la::inference_params p;
              p.achieved_tflops = 1e-320;
              (void)la::inference(small_model(), a100(), {}, p);
            }),
            "achieved_tflops | achieved_tflops=1e-320 gives an efficiency 3e-323 outside [1e-06, 1]");
  // llm-analysis places the experts' ranks inside the data-parallel group (dp / ep replicas).
  EXPECT_EQ(error([] {
              la::training_params p;
              p.ep_size = 2;
              (void)la::training(small_model(), a100(), {}, p);
            }),
            "ep_size | ep_size=2 must divide dp_size=1 (the expert-parallel ranks are data-parallel ranks)");
}

TEST(LlmAnalysisErrors, LargeCountsStayExact) {
  // 1e23 tokens in global batches of 8 x 2048 tokens: floor(1e23 / 16384) iterations, a double of
  // 6.1e18 (past 2^52, whole already); the run's latency is that many iterations, not an overflow.
  la::training_params p;
  p.batch_size_per_gpu = 8;
  p.seq_len = 2048;
  p.total_num_tokens = 1e23;
  const la::summary s = la::training(small_model(), a100(), {}, p);
  const double per_iter = s["latency_per_iter"];
  EXPECT_GT(per_iter, 0);
  EXPECT_DOUBLE_EQ(s["total_training_latency"], per_iter * (1e23 / 16384.0));
  // A global batch of 2 x 3^18 sequences on one GPU: the largest divisor that fits in memory is the
  // micro-batch, found over the divisor pairs (the loop over every count ran for seconds past 2^30).
  la::training_params g;
  g.seq_len = 2048;
  g.global_batch_size = 2 * 387420489;
  const la::summary r = la::training(small_model(), a100(), {}, g);
  const auto most = static_cast<std::int64_t>(r["max_batch_size_per_gpu"]);
  ASSERT_GT(most, 0);
  std::int64_t best = 0;
  for (std::int64_t d = 1; d <= most; ++d)
    if ((2 * 387420489) % d == 0) best = d;
  EXPECT_EQ(static_cast<std::int64_t>(r["batch_size_per_gpu"]), best);
  EXPECT_EQ(static_cast<std::int64_t>(r["gradient_accumulation_steps"]), 2 * 387420489 / best);
}

// ---- the command line ---------------------------------------------------------------------------

struct run_result {
  int exit_code = -1;
  std::string out, err;
};

#ifndef _WIN32
run_result run_cli(const std::string& args) {
  static int counter = 0;
  const fs::path err_file =
      fs::temp_directory_path() / ("llmsim_llma_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string command = "'" + std::string(LLMSIM_CLI_PATH) + "' " + args + " 2>'" + err_file.string() + "'";
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  std::ostringstream text;
  text << in.rdbuf();
  r.err = text.str();
  std::error_code ignored;
  fs::remove(err_file, ignored);
  return r;
}
#define LLMSIM_REQUIRE_CLI()                                                                               \
  do {                                                                                                     \
    if (std::string(LLMSIM_CLI_PATH).empty()) GTEST_SKIP() << "the llmsim command line tool is not built"; \
  } while (0)
#else
run_result run_cli(const std::string&) { return {}; }
#define LLMSIM_REQUIRE_CLI() GTEST_SKIP() << "needs a POSIX shell"
#endif

std::string configs_flag() { return "--configs '" + configs_dir().string() + "'"; }

TEST(LlmAnalysisCli, TrainJsonIsTheOracleSummary) {
  LLMSIM_REQUIRE_CLI();
  LLMSIM_REQUIRE_ORACLE();
  const json doc = llmsim::json::read_file(oracle_file());
  const json& c = doc["cases"][1];  // llama2-7b, a100, tp1 pp2 dp4, ZeRO-1
  ASSERT_EQ(c["function"], "train");
  const auto& k = c["kwargs"];
  std::string args = "llm-analysis train --format json " + configs_flag();
  for (const auto& [key, v] : k.items()) args += " --" + key + " " + (v.is_string() ? v.get<std::string>() : v.dump());
  const auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r.out;
  ASSERT_EQ(out.size(), c["output"].size());
  for (const auto& [key, v] : c["output"].items()) {
    if (v.is_number()) {
      EXPECT_LE(relative_error(out[key].get<double>(), v.get<double>()), 1e-9) << key;
    } else {
      EXPECT_EQ(out[key], v) << key;
    }
  }
}

TEST(LlmAnalysisCli, InferTextAndCost) {
  LLMSIM_REQUIRE_CLI();
  LLMSIM_REQUIRE_ORACLE();
  const auto r = run_cli("llm-analysis infer " + configs_flag() +
                         " --model_name upstage_Llama-2-70b-instruct-v2 --gpu_name a100-sxm-80gb --tp_size 2"
                         " --seq_len 256 --num_tokens_to_generate 512 --cost_per_gpu_hour 2.21"
                         " --flops_efficiency 0.7 --hbm_memory_efficiency 0.9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("total_cost_per_1k_tokens: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv_cache_memory_per_gpu: 120.00 MiB"), std::string::npos) << r.out;
}

TEST(LlmAnalysisCli, ExitStatuses) {
  LLMSIM_REQUIRE_CLI();
  LLMSIM_REQUIRE_ORACLE();
  const std::string base = "llm-analysis train " + configs_flag() + " --model_name NousResearch_Llama-2-7b-hf";
  // an unknown flag: usage error
  EXPECT_EQ(run_cli(base + " --tp 2").exit_code, 2);
  EXPECT_EQ(run_cli(base + " --tp_size two").exit_code, 2);
  // a value breaking a rule: input error naming field and rule
  auto r = run_cli(base + " --seq_len 2048 --batch_size_per_gpu 1 --ds_zero 5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ds_zero=5 must be in [0, 3]"), std::string::npos) << r.err;
  r = run_cli("llm-analysis infer " + configs_flag() + " --model_name no_such_model --format json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown model_configs name \"no_such_model\""), std::string::npos) << r.err;
  EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << r.out;
  // llama2-7b, ZeRO-0, dp 8 on 80 GB: states alone need 92 GB (oracle case 1): exit 3 unless --allow-oom
  const std::string oom = base + " --gpu_name a100-sxm-80gb --seq_len 4096 --batch_size_per_gpu 1 --total_num_gpus 8";
  EXPECT_EQ(run_cli(oom).exit_code, 3);
  EXPECT_EQ(run_cli(oom + " --allow-oom").exit_code, 0);
  EXPECT_EQ(run_cli(oom + " --ds_zero 3").exit_code, 0);
  // inference whose KV cache does not fit: 70B fp16 on one 80 GB GPU does not even hold the weights
  r = run_cli("llm-analysis infer " + configs_flag() +
              " --model_name upstage_Llama-2-70b-instruct-v2 --gpu_name a100-sxm-80gb");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("do not fit in mem_per_GPU_in_GB=80 GiB"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace llmsim_test_llm_analysis

namespace llmsim_test_llm_analysis {
namespace {
namespace lja2 = llmsim::json::llm_analysis;
std::string kwargs_error(const llmsim::json::value& k, bool train) {
  try {
    if (train)
      (void)lja2::read_training_kwargs(k, "train()");
    else
      (void)lja2::read_inference_kwargs(k, "infer()");
  } catch (const llmsim::config_error& e) { return e.what(); }
  return "accepted";
}
}  // namespace

// The keyword readers behind the Python module: llm-analysis's defaults stay unless given, None
// clears an optional, an unknown keyword or an enum out of range is refused with its name.
TEST(LlmAnalysisKwargs, DefaultsNoneAndRefusals) {
  const auto p = lja2::read_training_kwargs(json{{"tp_size", 2}, {"seq_len", 2048}, {"model_name", "x"}});
  EXPECT_EQ(p.tp_size, 2);
  EXPECT_EQ(p.seq_len, 2048);
  ASSERT_TRUE(p.hbm_memory_efficiency.has_value());  // llm-analysis's default 1.0 for train()
  EXPECT_EQ(*p.hbm_memory_efficiency, 1.0);
  EXPECT_FALSE(lja2::read_training_kwargs(json{{"hbm_memory_efficiency", nullptr}}).hbm_memory_efficiency);
  EXPECT_EQ(lja2::read_training_kwargs(json{{"ds_zero", 3}}).ds_zero, llmsim::llm_analysis::ds_zero::STAGE_3);
  EXPECT_EQ(kwargs_error(json{{"no_such", 1}}, true),
            "train(): llmsim::json: /no_such: unknown key (not a field of llm-analysis's config)");
  EXPECT_EQ(kwargs_error(json{{"ds_zero", 4}}, true), "train(): llmsim::json: /ds_zero: ds_zero=4 must be in [0, 3]");
  EXPECT_EQ(kwargs_error(json{{"activation_recomputation", 5}}, true),
            "train(): llmsim::json: /activation_recomputation: activation_recomputation=5 must be in [0, 4]");
  EXPECT_EQ(lja2::read_inference_kwargs(json{{"num_tokens_to_generate", 7}}).num_tokens_to_generate, 7);
  EXPECT_EQ(lja2::read_inference_kwargs(json::object()).seq_len, 512);  // infer()'s default
  EXPECT_EQ(kwargs_error(json{{"tp_size", "two"}}, false).rfind("infer(): llmsim::json: /tp_size: expected", 0), 0U)
      << kwargs_error(json{{"tp_size", "two"}}, false);
}

}  // namespace llmsim_test_llm_analysis
