// Megatron-Bridge rows: the model-FLOP formula worked by hand, the row -> specs mapping of a few
// rows checked by hand, the refusals, malformed rows (tests/bad_input/megatron_bridge/), and the
// formula against every published row (skipped when ../shared is absent).

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/json/megatron_bridge.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "shared_dir.hpp"

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_megatron_bridge {

namespace {

namespace fs = std::filesystem;
namespace lj = llmsim::json;
namespace mbj = llmsim::json::megatron_bridge;
namespace mb = llmsim::megatron_bridge;
using mb::flop_formula;

// ---- the FLOP formula by hand (flop_utils.py: per token, 3 passes x 2 FLOPs per multiply-add) ------

// Llama 3 70B at s = 8192: q = 64 x 128 = 8192, kv = 8 x 128 = 1024.
//   attention: 6 x 80 x (h(q + 2kv) + qh + qs) = 480 x (83,886,080 + 67,108,864 + 67,108,864) = 104,689,827,840
//   MLP (SwiGLU, 3 GEMMs):      6 x 8192 x 28672 x 3 x 80                          = 338,228,674,560
//   logits (vocab 128256 = 1002 x 128, no padding): 6 x 8192 x 128256               =   6,304,038,912
//   total                                                                           = 449,222,541,312
// The published LLAMA3_70B rows print 449.1 - 449.6 GFLOP per token (TFLOP/s over tokens/s).
constexpr mb::flop_inputs llama3_70b_8k{.model = llmsim::catalogue::llama3_70b, .seq_len = 8192};
static_assert(mb::model_flops_per_token(llama3_70b_8k, flop_formula::current) == 449'222'541'312.0);
static_assert(mb::model_flops_per_token(llama3_70b_8k, flop_formula::silu_gated_only) == 449'222'541'312.0);

TEST(MegatronBridgeFlops, Llama3_70bByHand) {
  EXPECT_EQ(mb::model_flops_per_token(llama3_70b_8k, flop_formula::current), 449'222'541'312.0);
  // tp 4 pads the vocabulary to a multiple of 128 x 4 = 512: 128512 rows, 256 more logits columns.
  mb::flop_inputs tp4 = llama3_70b_8k;
  tp4.tp_size = 4;
  EXPECT_EQ(mb::model_flops_per_token(tp4, flop_formula::current), 449'222'541'312.0 + 6.0 * 8192 * 256);
}

// DeepSeek-V3 with one MTP layer (its config's num_nextn_predict_layers) at s = 4096: 62 layers of
// MLA, 3 dense MLPs, 58 + 1 MoE MLPs.
//   MLA per layer: q 1536(7168 + 128 x 192 + 1) = 48,760,320; kv 512(7168 + 128 x 256 + 1) = 20,447,744;
//     k rope 7168 x 64 = 458,752; o 128 x 128 x 7168 = 117,440,512; core 4096 x 128 x (192 + 128) / 2
//     = 83,886,080; sum 270,993,408; x 6 x 62                                  = 100,809,547,776
//   MLP: 6 x 7168 x (18432 x 3 x 3 + (2048 x 8 + 2048) x 3 x 59) = 43008 x 3,428,352 = 147,446,562,816
//   MTP norms and projection: 6 x (3 x 7168 + 2 x 7168^2)                      =     616,691,712
//   logits, main and MTP: 6 x 7168 x 129280 x 2                                 =  11,120,148,480
//   total                                                                      = 259,992,950,784
// The published DeepSeekV3 rows print 259.7 - 260.2.
TEST(MegatronBridgeFlops, DeepSeekV3WithMtpByHand) {
  const mb::flop_inputs in{.model = llmsim::catalogue::deepseek_v3, .seq_len = 4096, .mtp_num_layers = 1};
  EXPECT_EQ(mb::model_flops_per_token(in, flop_formula::current), 259'992'950'784.0);
  mb::flop_inputs no_mtp = in;
  no_mtp.mtp_num_layers = 0;  // one layer of attention and MoE, its norms/projection and a logits pass less
  EXPECT_LT(mb::model_flops_per_token(no_mtp, flop_formula::current), 259'992'950'784.0 - 9e9);
}

// gpt-oss-120b at s = 4096 (q = 64 x 64 = 4096, kv = 8 x 64 = 512): the formula changed between releases.
//   projections h(q + 2kv) + qh = 2880 x 5120 + 4096 x 2880 = 26,542,080; full core q x s = 16,777,216
//   silu_gated_only (26.02): the clamped GLU counts 2 GEMMs, no window:
//     attention 6 x 36 x 43,319,296 = 9,356,967,936; MLP 6 x 2880 x 2880 x 4 x 2 x 36 = 14,332,723,200;
//     logits 6 x 2880 x 201088 = 3,474,800,640; total 27,164,491,776 (rows print 27.1 - 27.4)
//   current (26.06 on): 3 GEMMs: MLP 21,499,084,800; 18 of 36 layers windowed (W = 128):
//     context 128 - 128 x 127 / 8192 = 126.015625, core 2 x 4096 x 126.015625 = 1,032,320;
//     attention 6 x 18 x (43,319,296 + 26,542,080 + 1,032,320) = 7,656,519,168; total 32,630,404,608
//     (rows print 32.58 - 32.62)
TEST(MegatronBridgeFlops, GptOssFormulaChangeByHand) {
  const mb::flop_inputs in{.model = llmsim::catalogue::gpt_oss_120b,
                           .seq_len = 4096,
                           .silu_gated = false,
                           .window = 128,
                           .window_skip_freq = 2};
  EXPECT_EQ(mb::model_flops_per_token(in, flop_formula::silu_gated_only), 27'164'491'776.0);
  EXPECT_EQ(mb::model_flops_per_token(in, flop_formula::current), 32'630'404'608.0);
}

TEST(MegatronBridgeFlops, SlidingWindowSparseRatio) {
  // Half the layers keep 126.015625 of the (4096 + 1) / 2 = 2048.5 causal keys per query.
  EXPECT_DOUBLE_EQ(mb::sliding_window_sparse_ratio(36, 4096, 128, 2), 0.5 * (1 - 126.015625 / 2048.5));
  EXPECT_EQ(mb::sliding_window_sparse_ratio(36, 4096, 0, 2), 0.0);   // no window
  EXPECT_EQ(mb::sliding_window_sparse_ratio(36, 128, 128, 2), 0.0);  // the window covers the sequence
  EXPECT_DOUBLE_EQ(mb::sliding_window_sparse_ratio(4, 8, 2, 0),      // every layer: 2 - 2/16 of 4.5 kept
                   1 - (2 - 2.0 / 16) / 4.5);
}

// ---- catalogue systems of the rows ---------------------------------------------------------------

// GB200 NVL72 data sheet: 72 GPUs on one NVLink 5 switch fabric (130 TB/s = 1.8 TB/s per GPU, 900 GB/s
// each way), 360 PF BF16 with sparsity per rack = 2.5 PF dense per GPU, 13.4 TB HBM3e = 186 GB per GPU;
// one 400 Gb/s NIC per GPU leaves the rack. The system format's units: GB/s are 2^30 B/s.
TEST(CatalogueSystems, Nvl72IsOneNvlinkDomain) {
  const auto& s = llmsim::catalogue::gb200_nvl72;
  EXPECT_EQ(s.num_per_node, 72);
  EXPECT_EQ(s.op(llmsim::compute_kind::matmul).tflops, 2500);
  EXPECT_EQ(s.op(llmsim::compute_kind::fp8_matmul).tflops, 5000);
  EXPECT_EQ(s.accelerator.mem_gbs, 186);
  ASSERT_EQ(s.network_count, 2U);
  EXPECT_EQ(s.networks[0].name.view(), "high_intra_node");
  EXPECT_DOUBLE_EQ(s.networks[0].bandwidth.gbps, 900e9 / 1073741824.0);
  EXPECT_EQ(s.networks[1].name.view(), "inter_node");
  EXPECT_DOUBLE_EQ(s.networks[1].bandwidth.gbps, 72 * 50e9 / 1073741824.0);  // the domain's 72 NICs
  // HGX B300 stays an 8-GPU node: 8 ConnectX-8 NICs of 800 Gb/s.
  EXPECT_EQ(llmsim::catalogue::b300.num_per_node, 8);
  EXPECT_DOUBLE_EQ(llmsim::catalogue::b300.networks[1].bandwidth.gbps, 8 * 100e9 / 1073741824.0);
}

// ---- the mapping of rows, checked by hand ------------------------------------------------------------

lj::value recipes() {
  return lj::read_file(llmsim_test::source_dir() / "configs" / "megatron_bridge" / "recipes.json");
}

/// A row as megatron_bridge_cases.json writes it (only the fields the mapping reads).
lj::value row(const std::string& model, const std::string& gpu, const std::string& precision, std::int64_t gpus,
              std::int64_t gbs, std::int64_t mbs, std::int64_t seq, std::int64_t tp, std::int64_t pp, lj::value cp,
              lj::value vp, lj::value ep, lj::value fsdp, const std::string& release = "26.02") {
  return {{"id", model + "-" + gpu + "-" + precision},
          {"model", model},
          {"gpu_type", gpu},
          {"precision", precision},
          {"release", release},
          {"num_gpus", gpus},
          {"gbs", gbs},
          {"mbs", mbs},
          {"seq_len", seq},
          {"tp", tp},
          {"pp", pp},
          {"cp", cp},
          {"vp", vp},
          {"ep", ep},
          {"etp", nullptr},
          {"fsdp", fsdp},
          {"tokens_per_sec_per_gpu", 1000},
          {"model_tflops_per_sec_per_gpu", 100}};
}

// mb-26.08-DeepSeekV3-GB300-MXFP8-256g-gbs4096: | DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 |
// dp = 256 / (1 x 2 x 1) = 128; gradient accumulation 4096 / (1 x 128) = 32; 2 x 8 = 16 virtual stages.
TEST(MegatronBridgeMapping, DeepSeekV3OnGb300) {
  const auto r = row("DeepSeekV3", "GB300", "MXFP8", 256, 4096, 1, 4096, 1, 2, 1, 8, 32, nullptr, "26.08");
  const auto job = mbj::map_row(r, recipes());
  ASSERT_EQ(job.refused, "");
  EXPECT_EQ(job.model, "deepseek-v3");
  EXPECT_EQ(job.system, "gb300-nvl72");
  // The perf recipe runs the flex dispatcher (HybridEP on GB300), which pads nothing (dropless).
  EXPECT_EQ(
      job.model_overrides,
      (lj::value{{"mtp_num_layers", 1}, {"moe_pad_expert_input_to_capacity", false}, {"moe_router_fusion", true}}));
  const auto& s = job.strategy;
  EXPECT_EQ(s["moe_dispatcher_policy"], "flex");
  EXPECT_EQ(s["world_size"], 256);
  EXPECT_EQ(s["micro_batch_size"], 1);
  EXPECT_EQ(s["micro_batch_num"], 32);
  EXPECT_EQ(s["tp_size"], 1);
  EXPECT_EQ(s["pp_size"], 2);
  EXPECT_EQ(s["cp_size"], 1);
  EXPECT_EQ(s["ep_size"], 32);
  EXPECT_EQ(s["etp_size"], 1);  // not printed: Megatron's default
  EXPECT_EQ(s["interleaving_size"], 8);
  EXPECT_EQ(s["enable_sequence_parallel"], false);
  EXPECT_EQ(s["fp8"], true);
  EXPECT_EQ(s["fp8_recipe"], "mxfp8");
  EXPECT_EQ(s["fp8_param_gather"], true);
  EXPECT_EQ(s["pipeline_model_parallel_layout"], "Et*4|(t*4|)*14tmL");  // 1 + 4 x 15 layers, MTP and loss last
  EXPECT_FALSE(s.contains("megatron_recompute"));                       // the GB300 MXFP8 recipe recomputes nothing
  EXPECT_FALSE(s.contains("data_parallel_sharding_strategy"));
  EXPECT_EQ(job.formula, flop_formula::current);
  ASSERT_TRUE(job.flops);
  EXPECT_EQ(job.flops->mtp_num_layers, 1);
  // v0.6.0 (26.08) perf_recipes/deepseek/gb300/deepseek_v3.py fp8mx: the combined 1F1B step.
  EXPECT_EQ(s["overlap_moe_expert_parallel_comm"], true);
  EXPECT_EQ(s["delay_wgrad_compute"], true);
}

// The EP all-to-all overlap by release: v0.3.0's (26.02) GB300 FP8_MX preset leaves it off; its
// H100 FP8_CS_V2 preset for Qwen3 235B turns it on, which Megatron-LM refuses with pp > 1 and no
// virtual pipeline: a row printing that layout ran without it, and says so.
TEST(MegatronBridgeMapping, ExpertCommOverlapByRelease) {
  const auto rec = recipes();
  const auto old = mbj::map_row(row("DeepSeekV3", "GB300", "MXFP8", 256, 4096, 2, 4096, 1, 2, 1, 8, 32, 0), rec);
  ASSERT_EQ(old.refused, "");
  EXPECT_FALSE(old.strategy.contains("overlap_moe_expert_parallel_comm"));
  const auto on = mbj::map_row(row("Qwen3_235B_a22B", "H100", "FP8", 256, 8192, 1, 4096, 2, 8, 1, 4, 32, 0), rec);
  EXPECT_EQ(on.strategy["overlap_moe_expert_parallel_comm"], true);
  EXPECT_EQ(on.strategy["delay_wgrad_compute"], true);
  const auto off =
      mbj::map_row(row("Qwen3_235B_a22B", "H100", "FP8", 256, 8192, 1, 4096, 2, 8, 1, nullptr, 32, 0), rec);
  EXPECT_EQ(off.strategy["overlap_moe_expert_parallel_comm"], false);
  EXPECT_EQ(off.strategy["delay_wgrad_compute"], false);
  bool noted = false;
  for (const auto& n : off.not_modelled) noted = noted || n.find("left off") != std::string::npos;
  EXPECT_TRUE(noted);
}

// TE userbuffers TP overlap (recipes/llama/llama3.py tp_comm_overlap True; the perf scripts turn it
// off for nvfp4; comm_overlap.py turns it off below TP 2): mb-26.02-LLAMA3_70B-H100-FP8-64g-gbs256
// (TP 4) runs it with the FP8 configs' ring-exchange reduce-scatter, a BF16 row with TE's pipeline,
// the GB200 NVFP4 TP 2 row and a TP 1 row without it.
TEST(MegatronBridgeMapping, TpCommOverlapByPrecisionWithTensorParallelism) {
  const auto rec = recipes();
  const auto fp8 = mbj::map_row(row("LLAMA3_70B", "H100", "FP8", 64, 256, 1, 8192, 4, 8, 1, 5, nullptr, 0), rec);
  ASSERT_EQ(fp8.refused, "");
  EXPECT_EQ(fp8.strategy["tp_comm_overlap"], true);
  EXPECT_EQ(fp8.strategy["tp_comm_overlap_rs_method"], "ring_exchange");
  const auto bf16 =
      mbj::map_row(row("LLAMA3.1_405B", "H100", "BF16", 1024, 1536, 1, 8192, 8, 8, 2, 8, nullptr, 0), rec);
  EXPECT_EQ(bf16.strategy["tp_comm_overlap"], true);
  EXPECT_EQ(bf16.strategy["tp_comm_overlap_rs_method"], "pipeline");
  const auto fp4 = mbj::map_row(row("LLAMA3_70B", "GB200", "NVFP4", 64, 256, 1, 8192, 2, 4, 1, 5, nullptr, 0), rec);
  EXPECT_FALSE(fp4.strategy.contains("tp_comm_overlap"));
  const auto tp1 =
      mbj::map_row(row("LLAMA3_70B", "GB300", "FP8", 64, 256, 2, 8192, 1, 1, 1, nullptr, nullptr, 64), rec);
  EXPECT_FALSE(tp1.strategy.contains("tp_comm_overlap"));
}

// mb-26.02-LLAMA3_70B-GB300-FP8-64g-gbs256: | 64 | FP8 | 256 | 2 | 8192 | 1 | 1 | 1 | n/a | n/a | FSDP 64 |
// dp = 64; gradient accumulation 256 / (2 x 64) = 2; FP8 = per-tensor current scaling; Megatron FSDP.
TEST(MegatronBridgeMapping, Llama3_70bFsdpFp8) {
  const auto r = row("LLAMA3_70B", "GB300", "FP8", 64, 256, 2, 8192, 1, 1, 1, nullptr, nullptr, 64);
  const auto job = mbj::map_row(r, recipes());
  ASSERT_EQ(job.refused, "");
  EXPECT_EQ(job.model, "llama3-70b");
  EXPECT_EQ(job.strategy["micro_batch_num"], 2);
  EXPECT_EQ(job.strategy["interleaving_size"], 1);
  EXPECT_EQ(job.strategy["ep_size"], 1);
  EXPECT_EQ(job.strategy["fp8_recipe"], "tensorwise");
  EXPECT_EQ(job.strategy["data_parallel_sharding_strategy"], "optim_grads_params");
  EXPECT_EQ(job.strategy["zero_state"], 3);  // Megatron FSDP optim_grads_params is ZeRO-3
  EXPECT_EQ(job.formula, flop_formula::silu_gated_only);
}

// mb-26.02-LLAMA3.1_405B-H100-FP8-1024g-gbs1536: tp 8, pp 8, cp 2, vp 8: dp = 1024 / 128 = 8,
// gradient accumulation 1536 / 8 = 192; CP's exchange is Megatron's default p2p; 126 + 2 over 64 stages.
TEST(MegatronBridgeMapping, Llama31_405bContextParallel) {
  const auto r = row("LLAMA3.1_405B", "H100", "FP8", 1024, 1536, 1, 8192, 8, 8, 2, 8, nullptr, 0);
  const auto job = mbj::map_row(r, recipes());
  ASSERT_EQ(job.refused, "");
  EXPECT_EQ(job.model, "llama3-405b");
  EXPECT_EQ(job.system, "h100-sxm");
  EXPECT_EQ(job.strategy["micro_batch_num"], 192);
  EXPECT_EQ(job.strategy["cp_size"], 2);
  EXPECT_EQ(job.strategy["cp_comm_type"], "p2p");
  EXPECT_EQ(job.strategy["enable_sequence_parallel"], true);
  EXPECT_EQ(job.strategy["account_for_embedding_in_pipeline_split"], true);
  EXPECT_EQ(job.strategy["account_for_loss_in_pipeline_split"], true);
  EXPECT_FALSE(job.strategy.contains("data_parallel_sharding_strategy"));  // FSDP 0 = DDP
}

// mb-26.02-GPT_OSS_120B-B200-BF16-64g-gbs1280: BF16 runs with what llmsim models today: estimated.
TEST(MegatronBridgeMapping, GptOssBf16IsEstimated) {
  const auto r = row("GPT OSS 120B", "B200", "BF16", 64, 1280, 4, 4096, 1, 1, 1, nullptr, 64, 0);
  const auto result = mbj::estimate_row(r, recipes());
  ASSERT_TRUE(result.estimated()) << result.error;
  const auto& s = result.job.strategy;
  EXPECT_EQ(s["micro_batch_num"], 5);  // 1280 / (4 x 64)
  EXPECT_EQ(s["fp8"], false);
  EXPECT_EQ(s["megatron_recompute_modules"], (lj::value{"layernorm", "moe_act"}));
  // The window (128 tokens on every other layer) is the catalogue model's own: the strategy
  // declares no sparsity, and the model keeps what the recipe's window_context formula gives.
  EXPECT_FALSE(s.contains("attention_sparse_ratio"));
  EXPECT_DOUBLE_EQ(llmsim::window_kept_share(llmsim::catalogue::gpt_oss_120b, 4096, 4096),
                   1 - 0.5 * (1 - 126.015625 / 2048.5));
  // tokens/s/GPU = gbs x seq / (iteration x GPUs); model TFLOP/s/GPU = that x 27.164491776 GFLOP.
  EXPECT_DOUBLE_EQ(result.tokens_per_sec_per_gpu, 1280.0 * 4096 / (result.iter_time_s * 64));
  EXPECT_DOUBLE_EQ(result.model_tflops_per_sec_per_gpu, result.tokens_per_sec_per_gpu * 27.164491776 / 1e3);
}

// gpt-oss-120b's dispatcher and recompute by release: the v0.3.x recipes behind 26.02 set the
// all-to-all dispatcher (recipes/gpt_oss/gpt_oss.py moe_token_dispatcher_type "alltoall"); the
// v0.5.x presets switch to flex (hybridep) for B300 and GB200 / GB300 MXFP8 only, and the GB200
// MXFP8 preset clears the recompute modules (recompute_modules=[]).
TEST(MegatronBridgeMapping, GptOssDispatcherAndRecomputeByRelease) {
  const auto rec = recipes();
  const auto strategy = [&](const std::string& gpu, const std::string& precision, const std::string& release) {
    const auto r = mbj::estimate_row(
        row("GPT OSS 120B", gpu, precision, 64, 1280, 4, 4096, 1, 1, 1, nullptr, 64, 0, release), rec);
    EXPECT_TRUE(r.estimated()) << gpu << " " << precision << " " << release << ": " << r.error << r.reason;
    return r.job.strategy;
  };
  const auto policy = [](const lj::value& s) {
    return s.contains("moe_dispatcher_policy") ? s["moe_dispatcher_policy"].get<std::string>() : "all2all";
  };
  const auto bf16 = strategy("B200", "BF16", "26.02");
  EXPECT_EQ(policy(bf16), "all2all");
  EXPECT_EQ(bf16["enable_recompute"], true);
  EXPECT_EQ(policy(strategy("GB300", "BF16", "26.02.01")), "all2all");
  EXPECT_EQ(policy(strategy("B300", "MXFP8", "26.06")), "flex");
  const auto gb200 = strategy("GB200", "MXFP8", "26.06.01");
  EXPECT_EQ(policy(gb200), "flex");
  EXPECT_EQ(gb200["enable_recompute"], false);
  EXPECT_EQ(gb200["overlap_moe_expert_parallel_comm"], true);
  EXPECT_EQ(policy(strategy("GB300", "MXFP8", "26.08")), "flex");
}

// Nemotron 3 Super in NVFP4 keeps its last 14 of 88 layers in bf16 (Megatron-Bridge
// nemotron_3_super_bf16_with_nvfp4_mixed: first_last_layers_bf16, num_layers_at_end_in_bf16 14);
// its MXFP8 runs quantize every layer.
TEST(MegatronBridgeMapping, NemotronSuperNvfp4KeepsItsLastLayersInBf16) {
  const auto rec = recipes();
  const auto strategy = [&](const std::string& precision) {
    const auto r = mbj::estimate_row(
        row("Nemotron_3_Super", "GB200", precision, 64, 512, 1, 8192, 1, 1, 1, nullptr, 8, 0, "26.06"), rec);
    EXPECT_TRUE(r.estimated()) << precision << ": " << r.error << r.reason;
    return r.job.strategy;
  };
  const auto nvfp4 = strategy("NVFP4");
  EXPECT_EQ(nvfp4["fp8_first_last_layers_bf16"], true);
  EXPECT_EQ(nvfp4["fp8_layers_at_start_in_bf16"], 0);
  EXPECT_EQ(nvfp4["fp8_layers_at_end_in_bf16"], 14);
  EXPECT_FALSE(strategy("MXFP8").contains("fp8_first_last_layers_bf16"));
}

TEST(MegatronBridgeMapping, RefusedRowsSayWhy) {
  const auto rec = recipes();
  const auto reason = [&](const std::string& model) {
    return mbj::estimate_row(row(model, "GB200", "MXFP8", 8, 512, 1, 8192, 1, 1, 1, nullptr, 8, nullptr), rec).reason;
  };
  EXPECT_EQ(reason("Nemotron_3_Nano"), "");         // estimated (hybrid Mamba-2 / attention / MoE)
  EXPECT_EQ(reason("Nemotron_3_Super"), "");        // estimated (LatentMoE, two repeated MTP depths)
  EXPECT_EQ(reason("Nemotron_3_5_Lightning"), "");  // estimated (Nano with two repeated "*E" MTP depths)
  EXPECT_NE(reason("Nemotron_3_Ultra").find("num_hidden_layers, hybrid_override_pattern"), std::string::npos);
  // DeepSeek-V4 maps to its catalogue model and strategy and is estimated (program/dsv4.hpp).
  EXPECT_EQ(mbj::estimate_row(
                row("DeepSeekV4 Flash", "GB200", "MXFP8", 128, 2048, 1, 4096, 1, 1, 1, nullptr, 64, nullptr), rec)
                .reason,
            "");
  // Kimi K2 ran Muon, which is modelled: its rows are estimated.
  EXPECT_EQ(reason("Kimi_K2"), "");
  EXPECT_EQ(reason("GPT-5"), "model \"GPT-5\" has no entry in the recipe file");
  const auto odd = row("LLAMA3_70B", "H100", "FP8", 100, 256, 1, 8192, 8, 1, 1, nullptr, nullptr, 0);
  EXPECT_EQ(mbj::estimate_row(odd, rec).reason, "num_gpus=100 is not a multiple of tp * pp * cp = 8");
  const auto gbs = row("LLAMA3_70B", "H100", "FP8", 64, 100, 1, 8192, 8, 1, 1, nullptr, nullptr, 0);
  EXPECT_EQ(mbj::estimate_row(gbs, rec).reason, "gbs=100 is not a multiple of mbs * dp = 8");
  const auto gpu = row("LLAMA3_70B", "TPU", "FP8", 64, 256, 1, 8192, 8, 1, 1, nullptr, nullptr, 0);
  EXPECT_EQ(mbj::estimate_row(gpu, rec).reason, "gpu_type \"TPU\" has no catalogue system in the recipe file");
  // A mapped row has its FLOP count, so its printed TFLOP/s check the formula.
  EXPECT_TRUE(mbj::map_row(row("Kimi_K2", "GB300", "MXFP8", 256, 4096, 2, 4096, 1, 4, 1, 4, 64, 0), rec).flops);
}

// A setting llmsim has no field for is reported with the loader's error, never dropped.
TEST(MegatronBridgeMapping, UnknownFieldsAreReportedNotIgnored) {
  auto rec = recipes();
  rec["models"]["LLAMA3_70B"]["strategy"] = {{"no_such_field", true}};
  const auto r = row("LLAMA3_70B", "H100", "BF16", 64, 256, 1, 8192, 4, 8, 1, 5, nullptr, 0);
  const auto result = mbj::estimate_row(r, rec);
  EXPECT_FALSE(result.estimated());
  EXPECT_EQ(result.reason, "strategy/no_such_field: unknown key (refused by --strict)");
  rec["models"]["LLAMA3_70B"]["model_overrides"] = {{"no_such_layer", 1}};
  EXPECT_EQ(mbj::estimate_row(r, rec).reason, "model/no_such_layer: unknown key (refused by --strict)");
}

// ---- malformed rows: tests/bad_input/megatron_bridge/cases.json names each file's exact error --------

TEST(MegatronBridgeBadInput, EachFileIsRefusedWithItsExactError) {
  const fs::path dir = llmsim_test::source_dir() / "tests" / "bad_input" / "megatron_bridge";
  const auto manifest = lj::read_file(dir / "cases.json");
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.path().filename() != "cases.json";
  ASSERT_EQ(manifest.size(), files) << "every file of " << dir << " is listed once in its cases.json";
  for (const auto& c : manifest) {
    const std::string file = (dir / c["file"].get<std::string>()).string();
    SCOPED_TRACE(file);
    const auto doc = lj::read_file(file);
    EXPECT_TRUE(mbj::is_cases_document(doc));
    std::string expected = c["error"].get<std::string>();
    expected.replace(expected.find("{file}"), 6, file);
    try {
      mbj::check_document(doc, file);
      ADD_FAILURE() << "accepted";
    } catch (const llmsim::config_error& e) {
      EXPECT_EQ(std::string(e.what()), expected);
      EXPECT_EQ(e.field(), c["field"].get<std::string>());
    }
  }
}

// ---- every published row against the formula (../shared) -------------------------------------------

// The printed TFLOP/s and tokens/s are averaged separately, so rows of one model and formula scatter
// by up to 0.9 % (GPT OSS 120B B300 26.02.01: 27.41 against 27.16 of the other 26.02.01 rows): 1 %.
TEST(MegatronBridgeFlops, PublishedRowsFollowTheirReleasesFormula) {
  const fs::path file = llmsim_test::shared_dir() / "validation" / "megatron_bridge_cases.json";
  if (!fs::exists(file)) GTEST_SKIP() << file << " not found (tests that read ../shared skip when it is absent)";
  const auto doc = lj::read_file(file);
  ASSERT_TRUE(mbj::is_cases_document(doc));
  mbj::check_document(doc, file.string());
  const auto rec = recipes();
  int checked = 0, formula_changed = 0;
  for (const auto& r : doc["rows"]) {
    const auto job = mbj::map_row(r, rec);
    if (!job.flops) continue;
    const double printed =
        r["model_tflops_per_sec_per_gpu"].get<double>() * 1e3 / r["tokens_per_sec_per_gpu"].get<double>();
    const double formula = mb::model_flops_per_token(*job.flops, job.formula) / 1e9;
    // Some 26.06.01 / 26.08 rows print tokens/s rounded to a multiple of 512 (e.g. Nemotron 3 Nano
    // GB300 39936 = 78 x 512): their quotient is good to about 1.3 % only.
    const bool coarse = static_cast<std::int64_t>(r["tokens_per_sec_per_gpu"].get<double>()) % 512 == 0;
    EXPECT_NEAR(printed / formula, 1.0, coarse ? 0.015 : 0.01)
        << job.id << ": printed " << printed << " formula " << formula;
    ++checked;
    // The releases before baa0259bd printed gpt-oss with the old formula: the current one is 20 % above.
    const double other =
        mb::model_flops_per_token(
            *job.flops, job.formula == flop_formula::current ? flop_formula::silu_gated_only : flop_formula::current) /
        1e9;
    if (std::fabs(printed / other - 1) > 0.1) ++formula_changed;
  }
  EXPECT_EQ(checked, 130);         // all but the two Nemotron 3 Ultra rows (no catalogue model)
  EXPECT_EQ(formula_changed, 17);  // every gpt-oss row, and only those
}

}  // namespace

}  // namespace llmsim_test_megatron_bridge
