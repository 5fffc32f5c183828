// The fitted kernel model (cost/kernel_model.hpp) prices the shapes a system's tables lack. Each
// expected time is derived by hand from the model's form, the fitted constants and the data-sheet
// peaks in the test's comment; the fit itself is reproduced by scripts/fit_kernel_model.py.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_kernel_model {

using namespace llmsim;

/// Catalogue B200's modelled HBM stream: SimuMax's b200_bf16_ceperm.json default entry, 8000 GiB/s
/// at 0.666 (kernel_model.hpp `blackwell.hbm_default`), in bytes/s.
constexpr double b200_stream = 0.666 * 8000 * 1073741824.0;
/// Catalogue A100 SXM's: 2039 GB/s (data sheet) at a100_pcie.json's share of its 1935 GB/s sheet,
/// 0.91 x 1600 GiB/s (kernel_model.hpp `ampere.hbm_default`).
constexpr double a100_sxm_stream = 2039e9 * 0.91 * 1600 * 1073741824.0 / 1935e9;

TEST(KernelModel, CatalogueB200GemmSustainsTheFittedFractionOfItsPeak) {
  // A 4096 x 8192 x 8192 forward GEMM: 2 x 4096 x 8192 x 8192 = 549,755,813,888 FLOPs at
  // 2250 TFLOPS x 0.49 = 1.1025e15 FLOP/s -> 498.645 us, in quadrature with 1 MB streamed
  // (0.175 us): 3e-5 us more.
  const op o = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  const kernel_cost c = compute_op_cost(catalogue::b200, o);
  EXPECT_NEAR(c.time.value, std::hypot(549755813888.0 / 1.1025e15, 1e6 / b200_stream), 1e-15);
  EXPECT_GT(c.time.value, 549755813888.0 / 1.1025e15 + 2.5e-11);
  EXPECT_TRUE(c.modelled);
  EXPECT_FALSE(c.measured);
  // FP8 takes the same fraction of the FP8 peak (4500 TFLOPS): half the compute time.
  const op fp8 = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6, compute_kind::fp8_matmul);
  EXPECT_NEAR(compute_op_cost(catalogue::b200, fp8).time.value,
              std::hypot(549755813888.0 / 2.205e15, 1e6 / b200_stream), 1e-15);
}

TEST(KernelModel, GemmNearTheRidgePointAddsComputeAndStreamingInQuadrature) {
  // A prefill GEMM of 128 tokens, 4096 -> 4096, fp16 on a serving A100 SXM (5 us per kernel):
  // 2 x 128 x 4096 x 4096 = 4,294,967,296 FLOPs at 312 TFLOPS x 0.728 -> 18.91 us; bytes
  // 128 x 4096 x 2 (input) + 4096 x 4096 x 2 (weights) + 128 x 4096 x 2 (output) = 35,651,584 at
  // 1.6474 TB/s -> 21.64 us. Quadrature: 28.74 us; the plain roofline would take 21.64 + 5 us.
  const system_spec sys = serving_system(catalogue::a100_sxm, inference_spec{}, false);
  const op o = gemm_op(pass_kind::forward, {.m = 128, .k = 4096, .n = 4096}, 35651584);
  const double compute = 4294967296.0 / (312e12 * 0.728), streaming = 35651584 / a100_sxm_stream;
  const kernel_cost c = compute_op_cost(sys, o);
  EXPECT_TRUE(c.modelled);
  EXPECT_NEAR(c.time.value, std::hypot(compute, streaming), 1e-15);
  EXPECT_NEAR(c.time.value, 28.74e-6, 0.01e-6);
  // A decode GEMM (one token) is memory-bound: its bytes plus the kernel's latency, as before.
  const double decode_bytes = 4096.0 * 2 + 4096.0 * 4096 * 2 + 4096.0 * 2;
  const op d = gemm_op(pass_kind::forward, {.m = 1, .k = 4096, .n = 4096}, decode_bytes);
  EXPECT_NEAR(compute_op_cost(sys, d).time.value, decode_bytes / a100_sxm_stream + 5e-6, 1e-15);
  // Without the model (flat 0.70, catalogue::assumptions) the plain roofline: 21.64 + 5 us.
  system_spec flat = sys;
  flat.accelerator.kernel_model = kernel_architecture::none;
  EXPECT_NEAR(compute_op_cost(flat, o).time.value, std::max(4294967296.0 / (312e12 * 0.70), streaming + 5e-6), 1e-15);
}

TEST(KernelModel, GroupedGemmPaysItsPerExpertRows) {
  // 8 experts of 128 rows, N 4096, K 7168 on the B200: efficiency 0.495 x 128 / (128 + 224) = 0.18;
  // 2 x 8 x 128 x 4096 x 7168 = 60,129,542,144 FLOPs at 2250e12 x 0.18 = 4.05e14 -> 148.468 us.
  const grouped_gemm_shape g{.experts = 8, .m = 128, .n = 4096, .k = 7168};
  const double flops = 2.0 * 8 * 128 * 4096 * 7168;
  const kernel_cost fwd = compute_op_cost(catalogue::b200, grouped_gemm_op(pass_kind::forward, g, flops, 1e6));
  EXPECT_NEAR(fwd.time.value, flops / 4.05e14, 1e-12);
  EXPECT_NEAR(fwd.efficiency, 0.18, 1e-12);
  // The weight gradient with 64 rows per expert (fewer than the table's 128: the form's fixed
  // cost per expert holds): 0.435 x 64 / (64 + 392) = 0.061052..., so its time is that of
  // 64 + 392 rows at 0.435.
  grouped_gemm_shape w = g;
  w.m = 64;
  w.stage = grouped_stage::weight_gradient;
  const double wflops = 2.0 * 8 * 64 * 4096 * 7168;
  const kernel_cost wgrad =
      compute_op_cost(catalogue::b200, grouped_gemm_op(pass_kind::backward_weight, w, wflops, 1e6));
  EXPECT_NEAR(wgrad.efficiency, 0.435 * 64 / 456, 1e-12);
  EXPECT_NEAR(wgrad.time.value, 2.0 * 8 * (64 + 392) * 4096 * 7168 / (2250e12 * 0.435), 1e-12);
}

TEST(KernelModel, AttentionEfficiencyGrowsWithBlocksPerSm) {
  // A100: 32 heads x 4096 queries = 32 x 32 blocks of 128 = 1024 over 108 SMs, x = 9.481481...;
  // forward 1.27 x x / (x + 1.5) = 1.096526..., backward 0.90 x x / (x + 0.4) = 0.863568...
  const attention_shape a{
      .q_len = 4096, .kv_len = 4096, .head_num = 32, .kv_head_num = 8, .qk_head_dim = 128, .v_head_dim = 128};
  const double x = 1024.0 / 108;
  const kernel_cost fwd = compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::forward, a, 1e6));
  EXPECT_NEAR(fwd.efficiency, 1.27 * x / (x + 1.5), 1e-12);
  // 2 x 32 x 4096^2 x 256 = 274,877,906,944 FLOPs (every pair, as the tables count them).
  EXPECT_NEAR(fwd.time.value, 274877906944.0 / (312e12 * 1.27 * x / (x + 1.5)), 1e-12);
  const kernel_cost bwd = compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::backward_input, a, 1e6));
  EXPECT_NEAR(bwd.efficiency, 0.90 * x / (x + 0.4), 1e-12);
  // Four heads: 128 blocks, x = 1.185185...: the forward falls to 1.27 x / (x + 1.5) = 0.5604...
  attention_shape few = a;
  few.head_num = 4;
  few.kv_head_num = 1;
  const double x4 = 128.0 / 108;
  EXPECT_NEAR(compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::forward, few, 1e6)).efficiency,
              1.27 * x4 / (x4 + 1.5), 1e-12);
}

TEST(KernelModel, ServingAttentionCountsOnlyCausalPairs) {
  // A 2048-token prefill (32 heads, A100): 32 x 16 blocks over 108 SMs, x = 4.740740...; the
  // tables' efficiency counts all 2048^2 pairs, the serving call only the causal 2048^2 -
  // 2048 x 2047 / 2, a share of 1 - 2047 / 4096 = 0.500244140625: the same time for half the FLOPs.
  attention_shape a{.q_len = 2048,
                    .kv_len = 2048,
                    .head_num = 32,
                    .kv_head_num = 32,
                    .qk_head_dim = 128,
                    .v_head_dim = 128,
                    .pairs = attention_pairs::causal};
  const double x = 512.0 / 108;
  const kernel_cost causal = compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::forward, a, 1e6));
  EXPECT_NEAR(causal.efficiency, 1.27 * x / (x + 1.5) * 0.500244140625, 1e-12);
  a.pairs = attention_pairs::all;
  const kernel_cost all = compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::forward, a, 1e6));
  EXPECT_NEAR(causal.time.value, all.time.value, 1e-15);
  // A decode step (one query over 2048 keys) counts every pair it has: no scaling (x = 32 / 108).
  a.q_len = 1;
  a.pairs = attention_pairs::causal;
  EXPECT_NEAR(compute_op_cost(catalogue::a100_sxm, attention_op(pass_kind::forward, a, 1e6)).efficiency,
              1.27 * (32.0 / 108) / (32.0 / 108 + 1.5), 1e-12);
}

TEST(KernelModel, MuonNewtonSchulzGemmsUseTheModel) {
  // Catalogue B200 Muon GEMMs at the fitted 0.49, in quadrature with their streaming, against a
  // B200 whose flat matmul efficiency were 0.49 (plain roofline). A 7168 x 2048 matrix, 5 steps;
  // each step's GEMMs (muon_cost.hpp), FLOPs at 2250 TFLOPS x 0.49 and bf16 bytes:
  //   gram  2048 x 7168 x 2048: 60,129,542,144 FLOPs, (2 x 2048 x 7168 + 2048^2) x 2 bytes
  //   poly  2048^3:             17,179,869,184 FLOPs, 4 x 2048^2 x 2 bytes (memory-bound on both
  //                             systems with the 30 us latency: no difference)
  //   apply 2048 x 2048 x 7168: 60,129,542,144 FLOPs, (2048^2 + 3 x 2048 x 7168) x 2 bytes
  system_spec flat = catalogue::b200;
  flat.accelerator.kernel_model = kernel_architecture::none;
  flat.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].efficient_factor = 0.49;
  const double mn = 2048.0 * 7168, mm = 2048.0 * 2048, rate = 2250e12 * 0.49;
  auto extra = [&](double flops, double bytes) { return std::hypot(flops / rate, bytes / b200_stream) - flops / rate; };
  const double per_step = extra(60129542144.0, (2 * mn + mm) * 2) + extra(60129542144.0, (mm + 3 * mn) * 2);
  EXPECT_NEAR(muon_ns_time(catalogue::b200, 7168, 2048, 5).value - muon_ns_time(flat, 7168, 2048, 5).value,
              5 * per_step, 1e-12);
  EXPECT_GT(per_step, 3e-6);
}

TEST(KernelModel, ArchitecturesWithoutAFitKeepTheFlatEfficiency) {
  // L40S (Ada, 362 TFLOPS BF16 dense): no table to fit, the flat 0.70.
  const op o = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  EXPECT_EQ(modelled_efficiency(catalogue::l40s, compute_kind::matmul, o), 0.0);
  const kernel_cost c = compute_op_cost(catalogue::l40s, o);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.time.value, 549755813888.0 / (362e12 * 0.70), 1e-12);
}

TEST(KernelModel, HopperFromPublicMeasurements) {
  // The 4096 x 8192 x 8192 GEMM on the catalogue H100 SXM: 549,755,813,888 FLOPs at 989 TFLOPS x
  // 0.802 (XLA's sm_90 table) -> 693.1 us, in quadrature with 1 MB streamed at 2.90 TB/s
  // (BabelStream): 0.345 us, adding 1e-4 us.
  const double h100_stream = 2.90e12;
  const op o = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  const kernel_cost c = compute_op_cost(catalogue::h100_sxm, o);
  EXPECT_TRUE(c.modelled);
  EXPECT_NEAR(c.time.value, std::hypot(549755813888.0 / (989e12 * 0.802), 1e6 / h100_stream), 1e-15);
  // FP8 at 1979 TFLOPS x 0.802 x 0.709 / 0.803 (the best FP8 matmul reaches 70.9 % of its peak
  // where BF16 reaches 80.3 %).
  const op fp8 = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6, compute_kind::fp8_matmul);
  EXPECT_NEAR(compute_op_cost(catalogue::h100_sxm, fp8).time.value,
              std::hypot(549755813888.0 / (1979e12 * 0.802 * 0.709 / 0.803), 1e6 / h100_stream), 1e-15);
  // A GEMM of 1024 tokens, 8192 -> 8192, in training: 137,438,953,472 FLOPs -> 173.27 us; (1024 x
  // 8192 x 2 + 8192^2) x 2 = 167,772,160 bytes -> 57.85 us. Quadrature: 182.67 us (the plain
  // roofline would say 173.27).
  const op mid = gemm_op(pass_kind::forward, {.m = 1024, .k = 8192, .n = 8192}, 167772160);
  EXPECT_NEAR(compute_op_cost(catalogue::h100_sxm, mid).time.value,
              std::hypot(137438953472.0 / (989e12 * 0.802), 167772160 / h100_stream), 1e-15);
  EXPECT_NEAR(compute_op_cost(catalogue::h100_sxm, mid).time.value, 182.67e-6, 0.01e-6);
  // A ridge-point GEMM of a serving job whose quadrature (hypot(5.42, 12.29) = 13.43 us) is below
  // the roofline's memory time: 128 x 4096 x 4096, 35,651,584 bytes -> 12.29 us + 5 us per kernel.
  const system_spec serving = serving_system(catalogue::h100_sxm, inference_spec{}, false);
  const op ridge = gemm_op(pass_kind::forward, {.m = 128, .k = 4096, .n = 4096}, 35651584);
  EXPECT_NEAR(compute_op_cost(serving, ridge).time.value, 35651584 / h100_stream + 5e-6, 1e-15);
  // Causal attention, 64 heads x 32 sequences of 4096 tokens: x = 64 x 32 x 32 / 132 = 496.5
  // blocks of 128 queries per SM; forward 1.44 x 496.5 / (496.5 + 3.65), backward 1.27 x 496.5 /
  // (496.5 + 5.25), of every pair counted (cuDNN 9.19's Llama 3.1 figures, twice its causal TFLOPS
  // over 989).
  const attention_shape a{.batch = 32,
                          .q_len = 4096,
                          .kv_len = 4096,
                          .head_num = 64,
                          .kv_head_num = 8,
                          .qk_head_dim = 128,
                          .v_head_dim = 128};
  const double x = 64.0 * 32 * 32 / 132;
  EXPECT_NEAR(modelled_efficiency(catalogue::h100_sxm, compute_kind::sdp_fwd, attention_op(pass_kind::forward, a, 1e6)),
              1.44 * x / (x + 3.65), 1e-12);
  EXPECT_NEAR(
      modelled_efficiency(catalogue::h100_sxm, compute_kind::sdp_bwd, attention_op(pass_kind::backward_input, a, 1e6)),
      1.27 * x / (x + 5.25), 1e-12);
  // H200 and H800 take the same model (GH100); H100 PCIe too, over its 114 SMs.
  EXPECT_EQ(catalogue::h200.accelerator.kernel_model, kernel_architecture::hopper);
  EXPECT_EQ(catalogue::h800.accelerator.kernel_model, kernel_architecture::hopper);
  EXPECT_EQ(catalogue::h100_pcie.accelerator.kernel_model, kernel_architecture::hopper);
  EXPECT_EQ(catalogue::h100_pcie.accelerator.sm_count, 114);
  // HBM: 2.90 of the 3.35 TB/s data sheet; NVLink 4: 370 of 450 GB/s.
  EXPECT_NEAR(memory_time(catalogue::h100_sxm, memory_kind::default_kind, 2.9e9).value, 1e-3 + 30e-6, 1e-15);
  EXPECT_DOUBLE_EQ(catalogue::h100_sxm.networks[0].bandwidth.efficient_factor, 370.0 / 450.0);
}

TEST(KernelModel, Cdna3GemmsFromAmdsMaxAchievableRates) {
  // The 4096 x 8192 x 8192 GEMM on the catalogue MI300X: 549,755,813,888 FLOPs at 1307 TFLOPS x
  // 708 / 1307.4 (AMD's max-achievable BF16 rate over the data sheet) = 707.78 TFLOPS -> 776.7 us,
  // in quadrature with 1 MB streamed at the catalogue's assumed 0.80 x 5300 GB/s (0.236 us).
  const double mi300x_stream = 0.80 * 5300e9;
  const double bf16_rate = 1307e12 * 708.0 / 1307.4;
  const op o = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  const kernel_cost c = compute_op_cost(catalogue::mi300x, o);
  EXPECT_TRUE(c.modelled);
  EXPECT_NEAR(c.time.value, std::hypot(549755813888.0 / bf16_rate, 1e6 / mi300x_stream), 1e-15);
  EXPECT_NEAR(c.time.value, 776.7e-6, 0.1e-6);
  // FP8 at 2615 TFLOPS x 1273 / 2614.9 (its max-achievable FP8 rate over the data sheet).
  const op fp8 = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6, compute_kind::fp8_matmul);
  EXPECT_NEAR(compute_op_cost(catalogue::mi300x, fp8).time.value,
              std::hypot(549755813888.0 / (2615e12 * 1273.0 / 2614.9), 1e6 / mi300x_stream), 1e-15);
  // Attention has no CDNA 3 measurement: the flat assumption (60 % forward) of every pair, not the model.
  const attention_shape a{.batch = 8,
                          .q_len = 4096,
                          .kv_len = 4096,
                          .head_num = 32,
                          .kv_head_num = 8,
                          .qk_head_dim = 128,
                          .v_head_dim = 128};
  const op attn = attention_op(pass_kind::forward, a, 1e6);
  EXPECT_EQ(modelled_efficiency(catalogue::mi300x, compute_kind::sdp_fwd, attn), 0.0);
  const kernel_cost ac = compute_op_cost(catalogue::mi300x, attn);
  EXPECT_FALSE(ac.modelled);
  EXPECT_DOUBLE_EQ(ac.efficiency, 0.60);
  // Streaming keeps the assumed 80 % of 5300 GB/s and its per-kernel latency: 5.3 GB in 1.25 ms.
  EXPECT_NEAR(memory_time(catalogue::mi300x, memory_kind::default_kind, 5.3e9).value,
              1.25e-3 + catalogue::assumptions::kernel_latency_us * 1e-6, 1e-12);
  EXPECT_EQ(catalogue::mi300x.accelerator.sm_count, 304);
  EXPECT_EQ(catalogue::mi355x.accelerator.kernel_model, kernel_architecture::none);  // CDNA 4: unmeasured
}

TEST(KernelModel, BlackwellUltraAttentionAndTheGb300sGemms) {
  // GEMMs: Blackwell's 0.49 of the data-sheet peak on the B200, GB200 and B300; the GB300's 1.184
  // times that (Azure's cuBLASLt FP8 GEMMs, ND GB300 v6 over ND GB200 v6: 3308.5 / 2819.5 at 16384^3
  // and four more shapes of 4096 and up), FP8 GEMMs the same share of the FP8 peak.
  const op gemm = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  const op fp8 = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6, compute_kind::fp8_matmul);
  for (const system_spec* sys : {&catalogue::b200, &catalogue::gb200_nvl72, &catalogue::b300})
    EXPECT_NEAR(modelled_efficiency(*sys, compute_kind::matmul, gemm), 0.49, 1e-15) << sys->sys_name.view();
  EXPECT_NEAR(modelled_efficiency(catalogue::gb300_nvl72, compute_kind::matmul, gemm), 0.49 * 1.184, 1e-15);
  EXPECT_NEAR(modelled_efficiency(catalogue::gb300_nvl72, compute_kind::fp8_matmul, fp8), 0.49 * 1.184, 1e-15);
  // The 549,755,813,888-FLOP FP8 GEMM takes 1 / 1.184 of the GB200's compute time at the same
  // 5000 TFLOPS: 549755813888 / (5000e12 x 0.58016) = 189.52 us (its 1 MB streams in 0.17 us).
  EXPECT_NEAR(compute_op_cost(catalogue::gb300_nvl72, fp8).time.value, 189.52e-6, 0.01e-6);
  // Grouped GEMMs too: 8 experts of 224 rows, 0.495 x 224 / (224 + 224) = 0.2475, x 1.184 = 0.29304.
  const grouped_gemm_shape g{.experts = 8, .m = 224, .n = 4096, .k = 7168};
  const op grouped = grouped_gemm_op(pass_kind::forward, g, 2.0 * 8 * 224 * 4096 * 7168, 1e6);
  EXPECT_NEAR(modelled_efficiency(catalogue::gb200_nvl72, compute_kind::group_matmul, grouped), 0.2475, 1e-15);
  EXPECT_NEAR(modelled_efficiency(catalogue::gb300_nvl72, compute_kind::group_matmul, grouped), 0.29304, 1e-12);
  // Attention: 64 heads x 8192 causal queries = 64 x 64 blocks of 128 over 148 SMs, x = 27.6757; the
  // B200 forward 1.10 x x / (x + 3.6), backward 0.83 x x / (x + 0.55); the B300 (Blackwell Ultra,
  // the same 148 SMs) 1.197 and 1.062 times them (cuDNN 9.19's GB300 / GB200 Llama 3.1 rates).
  const attention_shape a{.batch = 1,
                          .q_len = 8192,
                          .kv_len = 8192,
                          .head_num = 64,
                          .kv_head_num = 8,
                          .qk_head_dim = 128,
                          .v_head_dim = 128};
  const double x = 64.0 * 64 / 148;
  const op fwd = attention_op(pass_kind::forward, a, 1e6), bwd = attention_op(pass_kind::backward_input, a, 1e6);
  EXPECT_NEAR(modelled_efficiency(catalogue::b200, compute_kind::sdp_fwd, fwd), 1.10 * x / (x + 3.6), 1e-12);
  EXPECT_NEAR(modelled_efficiency(catalogue::b300, compute_kind::sdp_fwd, fwd), 1.197 * 1.10 * x / (x + 3.6), 1e-12);
  EXPECT_NEAR(modelled_efficiency(catalogue::b200, compute_kind::sdp_bwd, bwd), 0.83 * x / (x + 0.55), 1e-12);
  EXPECT_NEAR(modelled_efficiency(catalogue::b300, compute_kind::sdp_bwd, bwd), 1.062 * 0.83 * x / (x + 0.55), 1e-12);
  // Attention takes no GEMM scale: the GB300's is the B300's over its 152 SMs.
  const double x152 = 64.0 * 64 / 152;
  EXPECT_NEAR(modelled_efficiency(catalogue::gb300_nvl72, compute_kind::sdp_fwd, fwd),
              1.197 * 1.10 * x152 / (x152 + 3.6), 1e-12);
  EXPECT_EQ(catalogue::b300.accelerator.kernel_model, kernel_architecture::blackwell_ultra);
  EXPECT_EQ(catalogue::gb200_nvl72.accelerator.kernel_model, kernel_architecture::blackwell);
}

TEST(KernelModel, SystemFilesCarryTheGemmScale) {
  namespace lj = llmsim::json;
  const lj::value written = lj::to_json(catalogue::gb300_nvl72);
  EXPECT_EQ(written["accelerator"]["kernel_model"], "blackwell_ultra");
  EXPECT_EQ(written["accelerator"]["gemm_sustained_scale"], 1.184);
  const system_spec back = lj::parse_system(written).spec();
  EXPECT_EQ(back.accelerator.kernel_model, kernel_architecture::blackwell_ultra);
  EXPECT_EQ(back.accelerator.gemm_sustained_scale, 1.184);
  EXPECT_FALSE(lj::to_json(catalogue::gb200_nvl72)["accelerator"].contains("gemm_sustained_scale"));
  // A file's scale moves its modelled GEMMs; a scale out of (0, 4] is refused with the field named.
  lj::value halved = lj::to_json(catalogue::b200);
  halved["accelerator"]["gemm_sustained_scale"] = 0.5;
  const op gemm = gemm_op(pass_kind::forward, {.m = 4096, .k = 8192, .n = 8192}, 1e6);
  EXPECT_NEAR(modelled_efficiency(lj::parse_system(halved).spec(), compute_kind::matmul, gemm), 0.245, 1e-15);
  halved["accelerator"]["gemm_sustained_scale"] = 4.5;
  try {
    (void)lj::parse_system(halved);
    FAIL() << "gemm_sustained_scale 4.5 was accepted";
  } catch (const config_error& e) { EXPECT_EQ(e.field(), "system.accelerator.gemm_sustained_scale"); }
}

TEST(KernelModel, HopperTrainingGroupedGemmsPayTePerExpertCalls) {
  // TE PR #2045's H100 measurements of its multi-stream grouped GEMM (TE 2.7): (g, m, n, k) =
  // (8, 4096, 768, 2048) at 627.903 TFLOPS and (16, 2048, 768, 2048) at 553.945, both
  // 2 x 32768 x 768 x 2048 = 103,079,215,104 FLOPs: 164.164 and 186.081 us, which the model
  // reproduces as F / (0.7327 x 989e12) + g x 2.740 us (its two constants come from these two).
  const double flops = 2.0 * 32768 * 768 * 2048;
  for (const auto& [experts, rows, measured_tflops] :
       {std::tuple<std::int64_t, std::int64_t, double>{8, 4096, 627.903}, {16, 2048, 553.945}}) {
    const grouped_gemm_shape g{.experts = experts, .m = rows, .n = 768, .k = 2048};
    const kernel_cost c = compute_op_cost(catalogue::h100_sxm, grouped_gemm_op(pass_kind::forward, g, flops, 1e6));
    EXPECT_NEAR(c.time.value, flops / (measured_tflops * 1e12), 0.01e-6) << experts;
    EXPECT_NEAR(c.time.value, flops / (0.7327 * 989e12) + static_cast<double>(experts) * 2.740e-6, 1e-12);
  }
  // FP8 takes the FP8 GEMMs' share of the FP8 peak, 0.709 / 0.803 of it, and the same 2.740 us an
  // expert: 8 x 4096 rows at 1979 TFLOPS x 0.7327 x 0.709 / 0.803 + 21.92 us.
  grouped_gemm_shape fp8{.experts = 8, .m = 4096, .n = 768, .k = 2048, .fp8 = true};
  EXPECT_NEAR(compute_op_cost(catalogue::h100_sxm, grouped_gemm_op(pass_kind::forward, fp8, flops, 1e6)).time.value,
              flops / (1979e12 * 0.7327 * 0.709 / 0.803) + 8 * 2.740e-6, 1e-12);
  // A serving engine's one-kernel grouped GEMM keeps the m0 form: 0.802 x 0.495 / 0.49 x 4096 /
  // (4096 + 224) of 989 TFLOPS.
  grouped_gemm_shape fused{.experts = 8, .m = 4096, .n = 768, .k = 2048};
  fused.single_kernel = true;
  EXPECT_NEAR(compute_op_cost(catalogue::h100_sxm, grouped_gemm_op(pass_kind::forward, fused, flops, 1e6)).time.value,
              flops / (989e12 * 0.802 * 0.495 / 0.49 * 4096 / 4320), 1e-12);
}

TEST(KernelModel, AMeasuredShapeWinsOverTheModel) {
  system_spec sys = catalogue::b200;
  const gemm_shape g{.m = 4096, .k = 8192, .n = 8192};
  static constexpr shape_efficiency measured[] = {
      {"b=1, m=4096, k=8192, n=8192, layout=TN, accumulate=False, out_dtype=bf16", 0.25}};
  ASSERT_EQ(g.key().view(), measured[0].shape);
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].accurate_efficient_factor = {measured, 1};
  const kernel_cost c = compute_op_cost(sys, gemm_op(pass_kind::forward, g, 1e6));
  EXPECT_TRUE(c.measured);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.time.value, 549755813888.0 / (2250e12 * 0.25), 1e-12);
  // Another shape on the same system falls to the model, not to efficient_factor 0.7.
  const kernel_cost other = compute_op_cost(sys, gemm_op(pass_kind::forward, {.m = 2048, .k = 8192, .n = 8192}, 1e6));
  EXPECT_TRUE(other.modelled);
  EXPECT_NEAR(other.efficiency, 0.49, 1e-15);
}

TEST(KernelModel, SystemFilesCarryTheModelAndRefuseItWithoutSmCount) {
  namespace lj = llmsim::json;
  const lj::value written = lj::to_json(catalogue::a100_sxm);
  EXPECT_EQ(written["accelerator"]["kernel_model"], "ampere");
  EXPECT_EQ(written["accelerator"]["sm_count"], 108);
  const system_spec back = lj::parse_system(written).spec();
  EXPECT_EQ(back.accelerator.kernel_model, kernel_architecture::ampere);
  EXPECT_EQ(back.accelerator.sm_count, 108);
  lj::value missing = written;
  missing["accelerator"].erase("sm_count");
  try {
    (void)lj::parse_system(missing);
    FAIL() << "a kernel model without sm_count was accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "system.accelerator.sm_count");
    EXPECT_NE(std::string(e.what()).find("must be in [1, 100000] when system.accelerator.kernel_model is ampere"),
              std::string::npos)
        << e.what();
  }
  // An SM count without a model is kept too.
  system_spec plain = catalogue::l40s;
  plain.accelerator.sm_count = 142;
  EXPECT_EQ(lj::parse_system(lj::to_json(plain)).spec().accelerator.sm_count, 142);
  EXPECT_EQ(lj::parse_system(lj::to_json(catalogue::h100_sxm)).spec().accelerator.kernel_model,
            kernel_architecture::hopper);
  lj::value unknown = written;
  unknown["accelerator"]["kernel_model"] = "volta";
  EXPECT_THROW((void)lj::parse_system(unknown), config_error);
  // "none", the enum's first value, is a name like the others (was refused as "not found").
  lj::value none = written;
  none["accelerator"]["kernel_model"] = "none";
  EXPECT_EQ(lj::parse_system(none).spec().accelerator.kernel_model, kernel_architecture::none);
}

TEST(KernelModel, AnEstimateSaysWhichShapesTheModelPriced) {
  // Every compute kernel of a catalogue B200 job is a GEMM, grouped GEMM or attention kernel the
  // model prices (no measured table); on the L40S (no fit) none is.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 2, .world_size = 8, .tp_size = 8};
  model_spec m = catalogue::llama3_8b;
  m.layer_num = 2;
  const auto b = estimate(m, s, catalogue::b200);
  EXPECT_GT(b.cost.efficiency_lookups, 0);
  EXPECT_EQ(b.cost.efficiency_misses, b.cost.efficiency_lookups);
  EXPECT_EQ(b.cost.efficiency_modelled, b.cost.efficiency_lookups);
  const auto h = estimate(m, s, catalogue::l40s);
  EXPECT_EQ(h.cost.efficiency_modelled, 0);
}

TEST(KernelModel, PcieNodeGroupsAcrossSocketsShareTheSocketLink) {
  // Catalogue A100 PCIe: inside a socket NCCL's Gen4 x16 figure, 24 GB/s; across the two sockets
  // the EPYC link, 16 GB/s, shared by the node's groups that cross it; collectives reach 0.928 of
  // these figures (fitted to a100_pcie.json's measured collectives).
  const system_spec& sys = catalogue::a100_pcie;
  ASSERT_NE(sys.network("intra_node_pcie_8x"), nullptr);
  EXPECT_TRUE(sys.network("intra_node_pcie_8x")->shared_link);
  EXPECT_FALSE(sys.network("intra_node_pcie_4x")->shared_link);
  EXPECT_NEAR(sys.network("intra_node_pcie_4x")->bandwidth.gbps * 1073741824.0, 24e9, 1);
  // tp 4 x dp 2: each data-parallel pair {r, r + 4} spans both sockets; 4 pairs share the link:
  // 16e9 / 4 x 0.928 = 3.712e9 B/s. An all-gather of 1 GiB moves half of it: 536,870,912 B -> 0.14447549 s,
  // plus NCCL's Simple ring latency over PCI, 8.4 + 1 step x 5.7 = 14.1 us.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 4};
  const network_tier& pair_tier = resolve_tier(sys, s, comm_group::dp);
  EXPECT_EQ(pair_tier.name.view(), "intra_node_pcie_8x");
  const double gib = 1073741824.0;
  EXPECT_NEAR(collective_time(sys, s, pair_tier, {collective_kind::all_gather, gib, 2, comm_group::dp}).value,
              536870912.0 / 3.712e9 + 14.1e-6, 1e-9);
  // A job of 4 GPUs has two pairs in its node to share the link: 16e9 / 2 x 0.928 = 7.424e9 B/s.
  const strategy_spec half{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 4};
  EXPECT_NEAR(collective_time(sys, half, pair_tier, {collective_kind::all_gather, gib, 2, comm_group::dp}).value,
              536870912.0 / 7.424e9 + 14.1e-6, 1e-9);
  // tp 2 x dp 4: two groups of four share it: 7.424e9 B/s for 3/4 of the buffer, 3 steps of latency.
  s.tp_size = 2;
  EXPECT_NEAR(collective_time(sys, s, resolve_tier(sys, s, comm_group::dp),
                              {collective_kind::all_gather, gib, 4, comm_group::dp})
                  .value,
              0.75 * gib / 7.424e9 + (8.4 + 3 * 5.7) * 1e-6, 1e-9);
  // Inside a socket (tp 4): NCCL's 24 GB/s x 0.928 = 22.272e9 B/s; an all-reduce of 1 GiB moves
  // 2 x 3/4 of it in 6 ring steps: 1.5 x 2^30 / 22.272e9 + (8.4 + 6 x 5.7) us.
  s.tp_size = 4;
  EXPECT_NEAR(collective_time(sys, s, resolve_tier(sys, s, comm_group::tp),
                              {collective_kind::all_reduce, gib, 4, comm_group::tp})
                  .value,
              1.5 * gib / 22.272e9 + (8.4 + 6 * 5.7) * 1e-6, 1e-9);
}

TEST(KernelModel, BlackwellNvlinkCollectivesTakeTheMeasuredShare) {
  // Catalogue B200: NVLink 5 at 900 GB/s each way x 0.735 (fitted to b200_bf16_ceperm.json's NVLink
  // collectives) = 661.5e9 B/s. A tp8 all-gather of 1 GiB moves 7/8 of it, NCCL's Simple ring on
  // NVLink: 8.4 + 7 x 3.4 = 32.2 us (LL128 would be 0.92 x the bandwidth: slower at this size), plus
  // the fitted 34 us each call carries in eager-mode training: 66.2 us.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 8};
  const double gib = 1073741824.0;
  for (const system_spec* sys : {&catalogue::b200, &catalogue::gb200_nvl72, &catalogue::b300}) {
    const network_tier& tier = resolve_tier(*sys, s, comm_group::tp);
    EXPECT_EQ(tier.name.view(), "high_intra_node");
    EXPECT_NEAR(collective_time(*sys, s, tier, {collective_kind::all_gather, gib, 8, comm_group::tp}).value,
                0.875 * gib / 661.5e9 + 66.2e-6, 1e-9)
        << sys->sys_name.view();
    // A 1 MiB all-gather: LL at 1/3 of the bandwidth, 3.6 + 7 x 0.47 = 6.89 us, beats Simple's
    // 32.2 us + 0.875 MiB / 661.5e9: 0.875 x 2^20 x 3 / 661.5e9 + 6.89e-6 + 34e-6.
    EXPECT_NEAR(collective_time(*sys, s, tier, {collective_kind::all_gather, 1048576.0, 8, comm_group::tp}).value,
                0.875 * 1048576.0 * 3 / 661.5e9 + (6.89 + 34) * 1e-6, 1e-10)
        << sys->sys_name.view();
  }
  // The H100: NCCL's effective 370 of its 450 GB/s (NCCL's maintainer), no per-call latency
  // measured; a flat NVLink system the assumed 0.8 (360 GB/s).
  EXPECT_NEAR(collective_time(catalogue::h100_sxm, s, resolve_tier(catalogue::h100_sxm, s, comm_group::tp),
                              {collective_kind::all_gather, gib, 8, comm_group::tp})
                  .value,
              0.875 * gib / 370e9 + 32.2e-6, 1e-9);
  const system_spec flat = llmsim_test::flat_h100_sxm();
  EXPECT_NEAR(collective_time(flat, s, resolve_tier(flat, s, comm_group::tp),
                              {collective_kind::all_gather, gib, 8, comm_group::tp})
                  .value,
              0.875 * gib / 360e9 + 32.2e-6, 1e-9);
}

TEST(KernelModel, H100PcieFromItsDataSheetAndNcclsGen5Figure) {
  // H100 PCIe data sheet: 1,513 BF16 / 3,026 FP8 TFLOPS with sparsity = 756 / 1513 dense, 2 TB/s,
  // 80 GB. NCCL prices a Gen5 x16 link at 16 x 240 / 80 = 48 GB/s; across the sockets 16 GB/s.
  const system_spec& sys = catalogue::h100_pcie;
  EXPECT_EQ(catalogue::find_system("h100-pcie"), &sys);
  EXPECT_DOUBLE_EQ(sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].tflops, 756);
  EXPECT_DOUBLE_EQ(sys.accelerator.op[static_cast<std::size_t>(compute_kind::fp8_matmul)].tflops, 1513);
  EXPECT_NEAR(sys.accelerator.bandwidth[0].gbps * 1073741824.0, 2000e9, 1);
  EXPECT_DOUBLE_EQ(sys.accelerator.mem_gbs, 80);
  EXPECT_NEAR(sys.network("intra_node_pcie_2x")->bandwidth.gbps * 1073741824.0, 48e9, 1);
  EXPECT_NEAR(sys.network("intra_node_pcie_8x")->bandwidth.gbps * 1073741824.0, 16e9, 1);
  // tp 2 all-reduce of 1 GiB: 2 x 1/2 of it at 48e9 x 0.928 = 44.544e9 B/s, NCCL's Simple ring
  // over PCI for 2 steps: 8.4 + 2 x 5.7 = 19.8 us.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 2};
  const network_tier& tier = resolve_tier(sys, s, comm_group::tp);
  EXPECT_EQ(tier.name.view(), "intra_node_pcie_2x");
  EXPECT_NEAR(collective_time(sys, s, tier, {collective_kind::all_reduce, 1073741824.0, 2, comm_group::tp}).value,
              1073741824.0 / 44.544e9 + 19.8e-6, 1e-9);
}

TEST(KernelModel, PcieAllToAllAcrossSocketsIsBoundByTheSocketLink) {
  // Eight ranks, four per socket, each sending 1 GiB / 8 to every peer: each socket's four ranks
  // send 4 x 4 x 2^30 / 8 = 2 GiB across the link in each direction, 16/7 of a ring's 7/8 GiB. The
  // catalogue takes the socket link's all-to-all rate from a100_pcie.json, whose 8-GPU all-to-all
  // runs at a ring-equivalent 30 GiB/s x 0.2754: the time is the table's own, 7/8 GiB at that
  // rate, plus NCCL's Simple ring latency over PCI for 7 steps, 8.4 + 7 x 5.7 = 48.3 us.
  const system_spec& sys = catalogue::a100_pcie;
  const double gib = 1073741824.0;
  const double table_busbw = 30 * gib * 0.2754;          // a100_pcie.json intra_node_pcie_8x all2all
  const double socket_all2all = table_busbw * 16.0 / 7;  // the same rate for the bytes that cross
  const auto a2a = [&](const strategy_spec& s, comm_group g, std::int64_t n, std::string_view tier_name) {
    const network_tier& tier = resolve_tier(sys, s, g);
    EXPECT_EQ(tier.name.view(), tier_name);
    return collective_time(sys, s, tier, {collective_kind::all2all, gib, n, g}).value;
  };
  const strategy_spec ep8{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 1, .ep_size = 8};
  EXPECT_NEAR(a2a(ep8, comm_group::ep, 8, "intra_node_pcie_8x"), 0.875 * gib / table_busbw + (8.4 + 7 * 5.7) * 1e-6,
              1e-9);
  // Four ranks two apart (ep 4 x etp 2), two on each side: each rank sends 2 x 1/4 GiB across, so
  // 1 GiB each way per group; the node's two such groups share the link (half the rate each);
  // 3 steps of latency, 8.4 + 3 x 5.7 = 25.5 us.
  strategy_spec ep4 = ep8;
  ep4.ep_size = 4;
  ep4.etp_size = 2;
  EXPECT_NEAR(a2a(ep4, comm_group::ep, 4, "intra_node_pcie_8x"), gib / (socket_all2all / 2) + 25.5e-6, 1e-9);
  // Four neighbours sit in one socket (tier intra_node_pcie_4x, not shared): the ring's 3/4 GiB at
  // 24e9 x 0.928 = 22.272e9 B/s.
  ep4.etp_size = 1;
  EXPECT_NEAR(a2a(ep4, comm_group::ep, 4, "intra_node_pcie_4x"), 0.75 * gib / 22.272e9 + 25.5e-6, 1e-9);
  // Six ranks of a six-GPU job split 4 + 2: one way 4 ranks x 2 peers x 1/6 GiB, the other 2 x 4 x
  // 1/6: 4/3 GiB at the socket's all-to-all rate (no other group to share with); 8.4 + 5 x 5.7 =
  // 36.9 us.
  const strategy_spec ep6{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 6, .tp_size = 1, .ep_size = 6};
  EXPECT_NEAR(a2a(ep6, comm_group::ep, 6, "intra_node_pcie_8x"), 4.0 / 3 * gib / socket_all2all + 36.9e-6, 1e-9);
  // Two ranks, one per socket: each sends half its buffer across, as the ring would (factor 1);
  // four such pairs share the link: a quarter of the rate each.
  const strategy_spec pairs{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 4};
  EXPECT_NEAR(a2a(pairs, comm_group::dp, 2, "intra_node_pcie_8x"),
              0.5 * gib / (socket_all2all / 4) + (8.4 + 5.7) * 1e-6, 1e-9);
  EXPECT_DOUBLE_EQ(shared_link_all2all_factor({8, 8, 1}, 8), 16.0 / 7);
  EXPECT_DOUBLE_EQ(shared_link_all2all_factor({6, 6, 1}, 8), 8.0 / 5);
  EXPECT_DOUBLE_EQ(shared_link_all2all_factor({4, 4, 1}, 8), 1.0) << "one side: nothing crosses";
  EXPECT_DOUBLE_EQ(shared_link_all2all_factor({1, 1, 1}, 8), 1.0);
}

TEST(KernelModel, CatalogueMemoryKernelsTakeTheArchitecturesMeasuredShares) {
  // B200: 0.666 of 8000 GiB/s (b200_bf16_ceperm.json) = 5.7209e12 B/s, 30 us per kernel; a 1 GB
  // default-kind kernel: 1e9 / (8000 x 2^30 x 0.666) + 30 us.
  const double b200 = 1e9 / (8000 * 1073741824.0 * 0.666) + 30e-6;
  EXPECT_NEAR(memory_time(catalogue::b200, memory_kind::default_kind, 1e9).value, b200, 1e-12);
  // Cross-entropy: 0.3246... of the same.
  EXPECT_NEAR(memory_time(catalogue::b200, memory_kind::ce, 1e9).value,
              1e9 / (8000 * 1073741824.0 * 0.3246108444537549) + 30e-6, 1e-12);
  // A100 (a100_pcie.json): 0.91 of 1600 GiB/s over the PCIe part's 1935 GB/s, 40 us; the SXM part
  // (2039 GB/s) sustains the same share of its own bandwidth.
  EXPECT_NEAR(memory_time(catalogue::a100_pcie, memory_kind::default_kind, 1e9).value,
              1e9 / (1600 * 1073741824.0 * 0.91) + 40e-6, 1e-12);
  EXPECT_NEAR(memory_time(catalogue::a100_sxm, memory_kind::default_kind, 1e9).value,
              1e9 / (2039e9 * 0.91 * 1600 * 1.073741824 / 1935) + 40e-6, 1e-12);
  // The H100: BabelStream's 2.90 of 3350 GB/s and the B200 table's 30 us; a part without a fit
  // (L40S, 864 GB/s) the catalogue's assumed 0.8.
  EXPECT_NEAR(memory_time(catalogue::h100_sxm, memory_kind::default_kind, 1e9).value, 1e9 / 2.90e12 + 30e-6, 1e-12);
  EXPECT_NEAR(memory_time(catalogue::l40s, memory_kind::default_kind, 1e9).value, 1e9 / (864e9 * 0.8) + 30e-6, 1e-12);
}

TEST(KernelModel, ServingGraphsDropTheEagerCallLatencyOfNvlinkCollectives) {
  // A tp8 decode all-reduce of 16 KiB on catalogue B200: NCCL's LL ring, 3.6 + 14 x 0.47 = 10.18 us
  // plus 2 x 7/8 x 16384 B at a quarter of 661.5e9 B/s (LL's share for an all-reduce). Training adds
  // the fitted 34 us per call; a serving job (CUDA graphs) does not.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 8, .tp_size = 8};
  const collective_call ar{collective_kind::all_reduce, 16384.0, 8, comm_group::tp};
  const double nccl = 10.18e-6 + 28672.0 / (661.5e9 * 0.25);
  const system_spec& training = catalogue::b200;
  EXPECT_NEAR(collective_time(training, s, resolve_tier(training, s, comm_group::tp), ar).value, nccl + 34e-6, 1e-11);
  const system_spec serving = serving_system(catalogue::b200, inference_spec{}, false);
  EXPECT_NEAR(collective_time(serving, s, resolve_tier(serving, s, comm_group::tp), ar).value, nccl, 1e-11);
  // An eager serving pass (prefill; decode without CUDA graphs) pays the job's eager_collective_us
  // instead: 34 us by default, 7 when set so.
  const system_spec eager = serving_system(catalogue::b200, inference_spec{}, true);
  EXPECT_NEAR(collective_time(eager, s, resolve_tier(eager, s, comm_group::tp), ar).value, nccl + 34e-6, 1e-11);
  const system_spec eager7 = serving_system(catalogue::b200, inference_spec{.eager_collective_us = 7}, true);
  EXPECT_NEAR(collective_time(eager7, s, resolve_tier(eager7, s, comm_group::tp), ar).value, nccl + 7e-6, 1e-11);
  // Calls across nodes pay it too (an assumption: the fit saw NVLink calls only), so that 16 GPUs
  // over two nodes never undercut 8 on NVLink: a 1 MiB data-parallel all-reduce of 16 ranks is
  // NCCL's model plus 34 us, and nothing more once the tier's call latency is zeroed.
  const strategy_spec two_nodes{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 16};
  const collective_call grads{collective_kind::all_reduce, 1048576.0, 16, comm_group::dp};
  const network_tier& net = resolve_tier(training, two_nodes, comm_group::dp);
  EXPECT_EQ(net.name.view(), "inter_node");
  network_tier bare = net;
  bare.bandwidth.fixed_latency = 0;
  EXPECT_NEAR(collective_time(training, two_nodes, net, grads).value,
              collective_time(training, two_nodes, bare, grads).value + 34e-6, 1e-12);
  for (const auto& tier : std::span(catalogue::a100_sxm.networks.data(), catalogue::a100_sxm.network_count))
    EXPECT_EQ(tier.bandwidth.fixed_latency, 0.0) << "Ampere's table fits no call latency";
  // A serving job's eager passes pay the assumed 34 us on Ampere too (NVLink and network tiers).
  const system_spec ampere_eager = serving_system(catalogue::a100_sxm, inference_spec{}, true);
  for (const auto& tier : std::span(ampere_eager.networks.data(), ampere_eager.network_count))
    EXPECT_EQ(tier.bandwidth.fixed_latency, 34.0) << tier.name.view();
  // A pipeline send of 64 MiB (pp 2) carries no call latency (the fit saw collectives only):
  // NCCL's Simple protocol, one step, 8.4 + 3.4 us, at the whole 661.5e9 B/s (LL128: 11.9 us at
  // 0.92 of it, LL: 4.07 us at a third: both slower at this size).
  const strategy_spec pipe{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 2, .world_size = 2, .pp_size = 2};
  const collective_call send{collective_kind::p2p, 67108864.0, 2, comm_group::pp};
  EXPECT_NEAR(collective_time(training, pipe, resolve_tier(training, pipe, comm_group::pp), send).value,
              11.8e-6 + 67108864.0 / 661.5e9, 1e-11);
}

}  // namespace llmsim_test_kernel_model
