/// \file llmsim/cost/kernel_model.hpp
/// The analytic efficiency of GEMMs, grouped GEMMs and fused attention on a system whose
/// measured table lacks the shape and any shapes around it to interpolate between (or that has no
/// table: catalogue systems): what fraction of the data-sheet peak a kernel of this shape
/// sustains on this architecture.
///
/// The forms, each with the mechanism it stands for:
///   GEMM          sustained, and time =           a GEMM's share of the data-sheet peak under the
///                 hypot(compute, streaming)       part's power and clock limits; near the ridge
///                                                 point its tensor-core time and the time to stream
///                                                 its operands (bytes over the HBM share below) do
///                                                 not fully overlap, so the two add in quadrature
///                                                 (the plain roofline takes the larger; a memory-bound
///                                                 GEMM still pays at least the roofline's bytes plus
///                                                 per-kernel latency). A tile and SM-wave
///                                                 quantization term was fitted too and left out
///                                                 (a constant share times it: held-out error 6.7 ->
///                                                 5.4 % on Ampere, 12.3 -> 11.5 % on Blackwell
///                                                 against the constant alone; small-M GEMMs need
///                                                 cuBLAS's choice of small-M kernels to be priced)
///   grouped GEMM  sustained x M / (M + m0)        each expert's GEMM costs as if it had m0 more
///                                                 rows: the per-group tile prologue, epilogue and
///                                                 padding of TE's grouped GEMM (M: rows per expert)
///   grouped GEMM  time = F / (sustained x peak)   Hopper training: TE's one cuBLAS call per expert
///   (Hopper, TE)         + experts x call time    over 4 streams costs a fixed time each
///   attention     ceiling x x / (x + x0)          x = query (backward: key) blocks of 128 over the
///                                                 SMs; FlashAttention fills the GPU only with many
///                                                 more blocks than SMs (causal blocks are uneven)
/// The efficiencies are in the tables' convention (FLOPs / (time x peak), training attention
/// counting every (query, key) pair, so a causal kernel's ceiling exceeds 1); a call counting only
/// the causal pairs (serving) has its efficiency scaled by the share of pairs it counts.
///
/// Memory-bound kernels keep the roofline (bytes over bandwidth plus a per-kernel latency) with
/// each architecture's measured bandwidth shares and latency. NVLink collectives keep NCCL's
/// protocol model (network_cost.hpp) at a share of the data-sheet bandwidth, plus a per-call
/// latency in training, both fitted to the times of the table's NVLink collectives (Blackwell;
/// Ampere's table is a PCIe machine's, see catalogue.hpp `pci_link_efficiency`).
///
/// The per-architecture constants are fitted to SimuMax's microbenchmark tables
/// (../shared/reference/simumax/configs/system: a100_pcie.json for Ampere, b200_bf16_ceperm.json
/// for Blackwell) by scripts/fit_kernel_model.py, which prints each fit's mean and largest error
/// on shapes left out of it (5-fold cross-validation). Nothing here is fitted to training runs.
/// Hopper has no SimuMax table: its constants come from public measurements (XLA's sm_90 GEMM
/// table, cuDNN's published attention figures, BabelStream, NCCL; see `kernel_models::hopper`).
/// CDNA 3 has GEMM constants only, from AMD's published max-achievable rates (`kernel_models::cdna3`).
/// Blackwell Ultra takes Blackwell's with its faster attention (`kernel_models::blackwell_ultra`).
/// Architectures without any (Ada, CDNA 2 and 4) have no model: their catalogue entries keep the
/// flat efficiencies of catalogue.hpp `assumptions`, as CDNA 3 keeps them for the rest.
#pragma once

#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/program/op.hpp>
#include <llmsim/spec/system.hpp>

LLMSIM_BEGIN_NAMESPACE

/// One architecture's fitted constants (see the file comment for the forms).
struct kernel_model_constants {
  double gemm_sustained = 0;
  double grouped_sustained = 0, grouped_m0 = 0;              ///< forward and input-gradient GEMMs
  double grouped_wgrad_sustained = 0, grouped_wgrad_m0 = 0;  ///< weight-gradient GEMMs
  /// TransformerEngine's multi-stream grouped GEMM (one cuBLAS GEMM per expert over 4 streams, its
  /// host-side split and allocation per call): every stage's GEMMs at this share of the peak plus
  /// `grouped_call_us` each expert, where measured (Hopper); 0: the m0 form for training too.
  /// Serving's one-kernel grouped GEMMs (`grouped_gemm_shape::single_kernel`) keep the m0 form.
  double grouped_multi_stream_sustained = 0, grouped_call_us = 0;
  double attention_fwd_ceiling = 0, attention_fwd_x0 = 0;
  double attention_bwd_ceiling = 0, attention_bwd_x0 = 0;
  /// An FP8 GEMM's sustained share of the FP8 peak over a BF16 GEMM's of the BF16 peak (1: the
  /// same share, the rule where no FP8 measurement exists).
  double fp8_share_over_bf16 = 1;
  /// Memory-bound kernels: the share of the data-sheet HBM bandwidth each kind sustains (default,
  /// token permutation forward / backward, cross-entropy, fused cross-entropy; 0: as default) and
  /// the time each kernel adds in eager-mode training (host and launch), microseconds.
  double hbm_default = 0, hbm_permute_fwd = 0, hbm_permute_bwd = 0, hbm_ce = 0, hbm_ce_fusion = 0;
  double kernel_latency_us = 0;
  /// NVLink collectives' bus bandwidth as a share of the data-sheet NVLink bandwidth (one
  /// direction); 0: no measured table, the catalogue's assumption.
  double nvlink_efficiency = 0;
  /// Time each collective call adds in eager-mode training beyond NCCL's latency model (host
  /// launch, stream waits), microseconds: fitted to the table's NVLink collectives and, as an
  /// assumption, paid by every NCCL-priced collective of the system (across nodes too, DeepEP's
  /// dispatch and combine too; not pipeline sends). A serving job replaces it: none in a decode
  /// step replayed as a CUDA graph, its `eager_collective_us` (this same 34 us by default, on every
  /// part) in a pass launched kernel by kernel (inference.hpp `serving_system`).
  double collective_call_latency_us = 0;
};

namespace kernel_models {
/// A SimuMax file's bandwidth (GiB/s, compute_cost.hpp `format_gbps_to_bytes_per_second`) as a
/// share of a data sheet's `sheet_gb_per_s` (10^9 B/s).
constexpr double share_of_sheet(double file_gbps, double sheet_gb_per_s) {
  return format_gbps_to_bytes_per_second(file_gbps) / (sheet_gb_per_s * 1e9);
}
/// Ampere, fitted to a100_pcie.json (183 GEMMs, 12 grouped, 12 + 12 attention shapes). Held-out
/// |error| mean / max: GEMM 5.8 % / 55.6 % (the plain roofline: 6.7 % / 59.1 %), grouped 4.4 % / 7.1 % (wgrad 2.9 % / 5.9 %),
/// attention forward 7.9 % / 18.1 %, backward 12.8 % / 26.9 %. The grouped table holds two row
/// counts only (616 and 1232 per expert): its m0 rests on two points, and its held-out error
/// does not test the dependence on rows.
inline constexpr kernel_model_constants ampere{.gemm_sustained = 0.728,
                                               .grouped_sustained = 0.725,
                                               .grouped_m0 = 64,
                                               .grouped_wgrad_sustained = 0.81,
                                               .grouped_wgrad_m0 = 344,
                                               .attention_fwd_ceiling = 1.27,
                                               .attention_fwd_x0 = 1.5,
                                               .attention_bwd_ceiling = 0.90,
                                               .attention_bwd_x0 = 0.4,
                                               // a100_pcie.json: 1600 GiB/s x 0.91 (default), 0.1879
                                               // (permute), 0.808 (ce), latency 40 us; over the A100
                                               // PCIe's 1935 GB/s.
                                               .hbm_default = 0.91 * share_of_sheet(1600, 1935),
                                               .hbm_permute_fwd = 0.1879 * share_of_sheet(1600, 1935),
                                               .hbm_permute_bwd = 0.1879 * share_of_sheet(1600, 1935),
                                               .hbm_ce = 0.808 * share_of_sheet(1600, 1935),
                                               .kernel_latency_us = 40};
/// Blackwell, fitted to b200_bf16_ceperm.json (514 GEMMs, 108 grouped, 32 + 32 attention shapes).
/// Held-out |error| mean / max: GEMM 10.0 % / 93.7 % (the plain roofline: 11.4 % / 147 %; the
/// worst have one dimension of 160 or 256),
/// grouped 15.3 % / 74.3 % (wgrad 18.0 % / 56.2 %), attention forward 13.9 % / 53.9 %, backward
/// 15.1 % / 53.3 %. A B200 GEMM sustains about half its 2.25 PFLOPS data-sheet peak.
inline constexpr kernel_model_constants blackwell{.gemm_sustained = 0.49,
                                                  .grouped_sustained = 0.495,
                                                  .grouped_m0 = 224,
                                                  .grouped_wgrad_sustained = 0.435,
                                                  .grouped_wgrad_m0 = 392,
                                                  .attention_fwd_ceiling = 1.10,
                                                  .attention_fwd_x0 = 3.6,
                                                  .attention_bwd_ceiling = 0.83,
                                                  .attention_bwd_x0 = 0.55,
                                                  // b200_bf16_ceperm.json: 8000 GiB/s x 0.666
                                                  // (default), 0.5008 / 0.5108 (permute), 0.3246
                                                  // (ce), 0.2795 (ce_fusion), latency 30 us; over
                                                  // the B200's 8000 GB/s.
                                                  .hbm_default = 0.666 * share_of_sheet(8000, 8000),
                                                  .hbm_permute_fwd = 0.5008136513816437 * share_of_sheet(8000, 8000),
                                                  .hbm_permute_bwd = 0.5108178337365621 * share_of_sheet(8000, 8000),
                                                  .hbm_ce = 0.3246108444537549 * share_of_sheet(8000, 8000),
                                                  .hbm_ce_fusion = 0.2795145022199592 * share_of_sheet(8000, 8000),
                                                  .kernel_latency_us = 30,
                                                  // b200_bf16_ceperm.json's NVLink all-reduce,
                                                  // all-gather, reduce-scatter and all-to-all
                                                  // times (bandwidth, per-step and per-call
                                                  // latencies) at 2, 4 and 8 ranks, 1 MiB to
                                                  // 1 GiB, against NCCL's model at this share of
                                                  // the data sheet's 900 GB/s each way plus a
                                                  // per-call latency. Held out by collective:
                                                  // |error| mean 12.0-18.2 %, max 31.8-49.3 % (the
                                                  // 1-4 MiB calls: the table's per-step latencies
                                                  // grow with ranks, NCCL's barely). Mean |log
                                                  // error| 0.148; bandwidth alone (no call
                                                  // latency) 0.54, its best share still 35 % off
                                                  // on average.
                                                  .nvlink_efficiency = 0.735,
                                                  .collective_call_latency_us = 34};
/// Hopper (H100 SXM5: GH100, 132 SMs), from public measurements (SimuMax has no Hopper table);
/// scripts/fit_kernel_model.py --hopper-gemms CSV reproduces the GEMM fit:
/// - GEMM: XLA's measured BF16 matmul table for sm_90 (openxla matmul_interpolator_data.h, as in
///   tensorflow/tensorflow 372d578b; its sibling hlo_op_profiles_data.h names the sm_90 device
///   "NVIDIA H100 80GB HBM3"; the library is not named): 375 shapes, batch 1-4, m, n, k 256-4096.
///   Its times carry a per-call overhead of an isolated launch (b = 1-4 256^3 GEMMs take 5.2-6.0
///   us), so the fit takes the 75 shapes of at least 30 us (5x that floor): quadrature 0.802,
///   held-out |error| mean / max 5.5 % / 23.6 % (the plain roofline: 0.738, 8.8 % / 42.2 %), close to the best torch.matmul BF16 rate found by brute force, 794.5 TFLOPS
///   = 80.3 % (stas00/ml-engineering, compute/accelerator/README.md, "Maximum Achievable Matmul
///   FLOPS").
/// - FP8 GEMM: the same source's FP8 e4m3 rate, 1402.6 TFLOPS = 70.9 % of 1979: 0.709 / 0.803 of
///   the BF16 share (Hopper's FP8 tensor cores do not sustain their BF16 share).
/// - grouped GEMM in training: TransformerEngine's per-expert cuBLAS calls as measured on an H100
///   (`hopper_grouped_call_us` below). A serving engine's one-kernel grouped GEMM, unmeasured,
///   takes Blackwell's form: each expert's rows pay m0 = 224 extra (weight gradients 392), at
///   Blackwell's ratios to the GEMM's sustained share (0.495 / 0.49 forward, 0.435 / 0.49 weight
///   gradients). (DeepGEMM's FP8 grouped kernels on H800 SXM5, a different library, fit m0 = 128:
///   deepseek-ai/DeepGEMM README at 2e7e580.)
/// - attention: cuDNN 9.19 fused attention on H200 (NVIDIA/cudnn-frontend
///   benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv at
///   df73764: 64 query heads, head dim 128, batch 1, causal, 2k-32k tokens; the H200 is GH100 with
///   more memory, its attention compute-bound), in the tables' convention (every pair counted:
///   twice the CSV's causal TFLOPS over 989); |error| mean 0.8 % forward, 1.3 % backward (5
///   points each, none held out).
/// - HBM: BabelStream Copy 2.90 TB/s on an H100 SXM5 of the 3.35 TB/s data sheet
///   (Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md at ae0b6a7); the catalogue
///   H200 takes its own (catalogue.hpp `h200`). The H100 PCIe (HBM2e, 350 W) takes the SXM5's
///   shares over its own data sheet and SM count: an assumption, as A100 PCIe -> SXM.
/// - NVLink: NCCL's effective NVLink 4 bandwidth, "370GB/s" of the 450 GB/s line rate, for ring
///   and non-all-reduce collectives (NCCL's maintainer in NVIDIA/nccl-tests issue #212); the same
///   statement gives all-reduce with NVLink SHARP (NVLS) ~480 GB/s bus bandwidth on 8 GPUs, which
///   llmsim does not model: its large intra-node all-reduces are priced at the ring's rate. No
///   per-call latency measured.
/// The per-kernel latency of eager training is Blackwell's (no Hopper table measures it).
inline constexpr double hopper_gemm_sustained = 0.802;
/// Constants whose GEMMs sustain `gemm_sustained` and whose grouped GEMMs, unmeasured, take
/// Blackwell's form at Blackwell's ratios to its GEMM (the one architecture whose TE grouped GEMM
/// was measured); the other fields zero, to be set by the caller.
constexpr kernel_model_constants with_blackwell_grouping(double gemm_sustained) {
  kernel_model_constants k{};
  k.gemm_sustained = gemm_sustained;
  k.grouped_sustained = gemm_sustained * blackwell.grouped_sustained / blackwell.gemm_sustained;
  k.grouped_m0 = blackwell.grouped_m0;
  k.grouped_wgrad_sustained = gemm_sustained * blackwell.grouped_wgrad_sustained / blackwell.gemm_sustained;
  k.grouped_wgrad_m0 = blackwell.grouped_wgrad_m0;
  return k;
}
/// TransformerEngine's grouped GEMM on Hopper runs one cuBLAS GEMM per expert over 4 streams
/// (transformer_engine/common/gemm/cublaslt_gemm.cu `multi_stream_cublas_gemm`, util/multi_stream.cpp
/// num_compute_streams = 4; FP8 and the default BF16 path). Measured on an H100 with TE 2.7 and CUDA
/// 12.9 (NVIDIA/TransformerEngine pull request #2045, "Benchmark the performance of
/// general_grouped_gemm with TE 2.7"): BF16 (g, m, n, k) = (8, 4096, 768, 2048) at 627.903 TFLOPS and
/// (16, 2048, 768, 2048) at 553.945, both 2 x 32768 x 768 x 2048 = 103.079 GFLOP: 164.164 and 186.081
/// us. As F / (S x 989 TFLOPS) + g x t0: 8 more experts cost 21.917 us, t0 = 2.740 us; F / (S x
/// peak) = 164.164 - 8 x 2.740 = 142.247 us, S = 0.7327. Two points of one shape fit two constants
/// exactly (nothing left out to test them); the weight-gradient GEMMs, unmeasured, take the same.
inline constexpr double hopper_grouped_multi_stream_sustained = 0.7327, hopper_grouped_call_us = 2.740;
inline constexpr kernel_model_constants hopper = [] {
  kernel_model_constants k = with_blackwell_grouping(hopper_gemm_sustained);
  k.grouped_multi_stream_sustained = hopper_grouped_multi_stream_sustained;
  k.grouped_call_us = hopper_grouped_call_us;
  k.attention_fwd_ceiling = 1.44;
  k.attention_fwd_x0 = 3.65;
  k.attention_bwd_ceiling = 1.27;
  k.attention_bwd_x0 = 5.25;
  k.fp8_share_over_bf16 = 0.709 / 0.803;
  k.hbm_default = 2.90 / 3.35;
  k.kernel_latency_us = blackwell.kernel_latency_us;
  k.nvlink_efficiency = 370.0 / 450.0;
  return k;
}();
/// CDNA 3 (MI300X: 304 CUs, 750 W), from AMD's published max-achievable GEMM rates (ROCm/rocm-blogs
/// blogs/software-tools-optimization/measuring-max-achievable-flops-part2/README.md at 8e01195,
/// "AMD MAF Results": hipBLASLt at its best shape, ROCm 6.3.0): 708 TFLOPS BF16 at a median clock of
/// 1207 MHz against the 2100 MHz of the 1307.4 TFLOPS data sheet (the power limit holds dense
/// matrix work to low clocks), 1273 TFLOPS FP8 of 2614.9 (the table's figure; its footnote 4 gives
/// 1223.6 TFLOPS "at 1273MHz", the table 1230 MHz: the table is taken). These are best-shape figures, as
/// Hopper's 0.802 sits at the best torch.matmul rate; their trig_float inputs draw less power than
/// real data (on the MI325X normal-distribution inputs give 831 TFLOPS BF16 against 843: the
/// "Completing the GPU Performance Picture" post of the same series). Grouped GEMMs take
/// Blackwell's ratios as Hopper does (no measurement of a CDNA 3 grouped GEMM). Attention (CK /
/// AITER), streaming and Infinity Fabric keep the catalogue's assumptions: no measurement found
/// (zero here: the kernel model does not price them).
inline constexpr double cdna3_gemm_sustained = 708.0 / 1307.4;
inline constexpr kernel_model_constants cdna3 = [] {
  kernel_model_constants k = with_blackwell_grouping(cdna3_gemm_sustained);
  k.fp8_share_over_bf16 = (1273.0 / 2614.9) / cdna3_gemm_sustained;
  return k;
}();
/// Blackwell Ultra (B300, GB300: sm_103), Blackwell's constants with its attention faster: its
/// SFUs run the softmax's exponentials (MUFU.EX2) at twice Blackwell's throughput (NVIDIA's
/// "Making Softmax More Efficient with NVIDIA Blackwell Ultra" developer blog), the bound
/// on FlashAttention-style kernels' softmax. The ceilings scale by cuDNN 9.19's measured GB300 over
/// GB200 rates on the same benchmark (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/
/// results/gb300_919_only_cudnn/llama3.1_20260226_185510.csv at afa9f7c against
/// gb200_919_only_cudnn/llama3.1_20260226_174648.csv at df73764: BF16, causal, 64 query and 8 KV
/// heads of 128, batch 1): the geometric mean over 2k-32k tokens of forward 2014/1720, 1968/1687,
/// 1887/1598, 1672/1335, 1266/1042 = 1.197 and backward 1549/1473, 1490/1402, 1385/1311,
/// 1195/1132, 906/836 = 1.062 (the backward does 2.5 times the forward's matrix work for the same
/// exponentials, so they bound it less). The GB300's higher power limit is in these ratios too
/// (the B300, 1100 W against the B200's 1000, takes them unchanged: an assumption); its GEMMs'
/// is a part's (catalogue.hpp `gb300_gemm_sustained_scale`).
inline constexpr double ultra_attention_fwd_over_blackwell = 1.197, ultra_attention_bwd_over_blackwell = 1.062;
inline constexpr kernel_model_constants blackwell_ultra = [] {
  kernel_model_constants k = blackwell;
  k.attention_fwd_ceiling = blackwell.attention_fwd_ceiling * ultra_attention_fwd_over_blackwell;
  k.attention_bwd_ceiling = blackwell.attention_bwd_ceiling * ultra_attention_bwd_over_blackwell;
  return k;
}();
/// Tokens per attention block in x: the fit's normalisation (FlashAttention-2's forward tile for
/// head dim 128 holds 128 queries, kBlockM in flash_fwd_launch_template.h; the tables' kernels,
/// TE's fused attention and other head dims, tile differently).
inline constexpr double attention_block = 128;
}  // namespace kernel_models

/// The constants of `a`, or nullptr when it has no model.
constexpr const kernel_model_constants* kernel_constants(kernel_architecture a) {
  switch (a) {
    case kernel_architecture::ampere:
      return &kernel_models::ampere;
    case kernel_architecture::hopper:
      return &kernel_models::hopper;
    case kernel_architecture::blackwell:
      return &kernel_models::blackwell;
    case kernel_architecture::blackwell_ultra:
      return &kernel_models::blackwell_ultra;
    case kernel_architecture::cdna3:
      return &kernel_models::cdna3;
    default:
      return nullptr;
  }
}

namespace detail {
constexpr double ceil_div(double a, double b) {
  const auto whole = static_cast<double>(static_cast<std::int64_t>(a / b));
  return whole * b < a ? whole + 1 : whole;
}
/// The rows each expert's GEMM holds: serving's mean over the experts that have any, else `m`.
constexpr double expert_rows(const grouped_gemm_shape& g) {
  return g.active_rows > 0 ? g.active_rows : static_cast<double>(g.m);
}
constexpr double grouped_efficiency(const kernel_model_constants& k, const grouped_gemm_shape& g) {
  const bool wgrad =
      g.stage == grouped_stage::weight_gradient || g.stage == grouped_stage::weight_gradient_unaccumulated;
  const double rows = expert_rows(g);
  const double m0 = wgrad ? k.grouped_wgrad_m0 : k.grouped_m0;
  return (wgrad ? k.grouped_wgrad_sustained : k.grouped_sustained) * rows / (rows + m0);
}
/// TE's multi-stream grouped GEMM: `sustained` of `peak_tflops` for the FLOPs plus the fixed
/// `grouped_call_us` each expert, as an efficiency: time = F / (S P) + g t0 = F / (S P) x (1 + t0 S P
/// / F_expert), F_expert = 2 x rows x N x K.
constexpr double multi_stream_grouped_efficiency(const kernel_model_constants& k, const grouped_gemm_shape& g,
                                                 double sustained, double peak_tflops) {
  const double rows = expert_rows(g);
  const double per_expert = 2 * rows * static_cast<double>(g.n) * static_cast<double>(g.k);
  if (per_expert <= 0) return sustained;
  return sustained / (1 + k.grouped_call_us * 1e-6 * sustained * peak_tflops * 1e12 / per_expert);
}
constexpr double attention_efficiency(const kernel_model_constants& k, const attention_shape& a, bool backward,
                                      std::int64_t sm_count) {
  const double tokens = static_cast<double>(backward ? a.kv_len : a.q_len);
  const double blocks =
      static_cast<double>(a.batch) * static_cast<double>(a.head_num) * ceil_div(tokens, kernel_models::attention_block);
  const double x = blocks / static_cast<double>(sm_count);
  const double ceiling = backward ? k.attention_bwd_ceiling : k.attention_fwd_ceiling;
  const double x0 = backward ? k.attention_bwd_x0 : k.attention_fwd_x0;
  // The tables count every (query, key) pair of a causal kernel; a call that counts only the pairs
  // its mask keeps (serving: attention_pairs::causal) does the same work in fewer counted FLOPs.
  return ceiling * x / (x + x0) * a.counted_share();
}
}  // namespace detail

/// The share of its BF16 twin's modelled efficiency a `kind` GEMM sustains on `sys`: the
/// architecture's `fp8_share_over_bf16` for FP8 kinds, else 1.
constexpr double modelled_share_over_bf16(const system_spec& sys, compute_kind kind) {
  const kernel_model_constants* k = kernel_constants(sys.accelerator.kernel_model);
  const bool fp8 = kind == compute_kind::fp8_matmul || kind == compute_kind::fp8_group_matmul;
  return k != nullptr && fp8 ? k->fp8_share_over_bf16 : 1;
}

/// The modelled efficiency of compute op `o` priced as `kind` on `sys`, or 0 when the system has
/// no kernel model or the op is not a GEMM, grouped GEMM or attention kernel. FP8 and FP4 GEMMs
/// take their BF16 twin's fraction of their own data-sheet peak (same clocks and power limit; the
/// tables hold BF16 only), times `fp8_share_over_bf16` for FP8 where it was measured (Hopper);
/// GEMMs and grouped GEMMs times the part's `gemm_sustained_scale` (its power limit's clocks).
constexpr double modelled_efficiency(const system_spec& sys, compute_kind kind, const op& o) {
  const kernel_model_constants* k = kernel_constants(sys.accelerator.kernel_model);
  if (k == nullptr || sys.accelerator.sm_count <= 0) return 0;
  const double part = sys.accelerator.gemm_sustained_scale * modelled_share_over_bf16(sys, kind);
  switch (kind) {
    case compute_kind::matmul:
    case compute_kind::fp8_matmul:
    case compute_kind::fp4_matmul:
      return o.kind == op_kind::gemm ? k->gemm_sustained * part : 0;
    case compute_kind::group_matmul:
    case compute_kind::fp8_group_matmul:
    case compute_kind::fp4_group_matmul:
      if (o.kind != op_kind::grouped_gemm) return 0;
      if (k->grouped_call_us > 0 && !o.grouped.single_kernel)
        return detail::multi_stream_grouped_efficiency(*k, o.grouped, k->grouped_multi_stream_sustained * part,
                                                       sys.accelerator.op[static_cast<std::size_t>(kind)].tflops);
      return detail::grouped_efficiency(*k, o.grouped) * part;
    case compute_kind::sdp_fwd:
    case compute_kind::sdp_bwd:
      return o.kind == op_kind::attention ? detail::attention_efficiency(*k, o.attention, kind == compute_kind::sdp_bwd,
                                                                         sys.accelerator.sm_count)
                                          : 0;
    default:
      return 0;
  }
}

LLMSIM_END_NAMESPACE
