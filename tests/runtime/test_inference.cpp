// Serving estimates (llmsim/estimate/inference.hpp) on systems whose figures make each phase one
// term of the roofline, so the expected times follow by hand from the model's shapes:
// decode steps from the bytes they read, prefill from its FLOPs, memory from parameter counts.
#include <llmsim/json/inference.hpp>
#include <llmsim/llmsim.hpp>

#include "shared_dir.hpp"

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <tuple>

namespace llmsim_test_inference {

using llmsim::inference_spec;
namespace cat = llmsim::catalogue;

namespace {
/// H100's catalogue system (flat, without its kernel model) with HBM at exactly 1e12 B/s, no kernel latency, and compute so fast
/// that every kernel is bound by the bytes it moves.
llmsim::system_spec bandwidth_bound() {
  llmsim::system_spec s = llmsim_test::flat_h100_sxm();
  for (auto& op : s.accelerator.op)
    if (op.present) {
      op.tflops = 1e6;  // 1e18 FLOP/s: a bs-1 step's 2.6e10 FLOPs take 26 ns
      op.efficient_factor = 1;
    }
  for (auto& bw : s.accelerator.bandwidth) {
    bw.gbps = 1e12 / 1073741824.0;
    bw.efficient_factor = 1;
    bw.latency_us = 0;
  }
  return s;
}
/// ... and the reverse: 100 TFLOP/s at full efficiency for every kernel, bandwidth so large that
/// memory traffic costs next to nothing (under 1e-4 of a prefill).
llmsim::system_spec compute_bound() {
  llmsim::system_spec s = llmsim_test::flat_h100_sxm();
  for (auto& op : s.accelerator.op)
    if (op.present) {
      op.tflops = 100;
      op.efficient_factor = 1;
    }
  for (auto& bw : s.accelerator.bandwidth) {
    bw.gbps = 1e6;  // 1.07e15 B/s: prefill's few GB of traffic take microseconds
    bw.efficient_factor = 1;
    bw.latency_us = 0;
  }
  return s;
}
/// `s` with links that cost nothing: no NCCL model, no latency, 1e6 GB/s.
llmsim::system_spec with_free_links(llmsim::system_spec s) {
  for (std::size_t k = 0; k < s.network_count; ++k) {
    s.networks[k].nccl_link = llmsim::nccl_link_kind::none;
    s.networks[k].bandwidth.gbps = 1e6;
    s.networks[k].bandwidth.latency_us = 0;
    s.networks[k].bandwidth.fixed_latency = 0;
  }
  return s;
}
inference_spec job(std::int64_t batch, std::int64_t input, std::int64_t output) {
  inference_spec i;
  i.batch = batch;
  i.input_len = input;
  i.output_len = output;
  i.kernel_latency_us = 0;  // the test systems' kernels take their bytes over bandwidth only
  return i;
}
std::string refused_field(const llmsim::model_spec& m, const inference_spec& i, const llmsim::system_spec& sys) {
  try {
    (void)llmsim::infer(m, i, sys);
  } catch (const llmsim::config_error& e) { return e.field(); }
  return "accepted";
}

// Llama-2-7B's decoder linears per layer: qkv 4096 x 12288, proj 4096 x 4096, fc1 4096 x 22016
// (gate and up), fc2 11008 x 4096 = 202,375,168 weights; 32 layers: 6,476,005,376. LM head
// 32000 x 4096 = 131,072,000.
constexpr double llama2_7b_linear_weights = 32 * 202375168.0;
constexpr double llama2_7b_head_weights = 32000 * 4096.0;
}  // namespace

TEST(Inference, BatchOneDecodeStepReadsEveryWeightOnce) {
  // One decode step at batch 1 reads every decoder weight and the LM head once, in bf16:
  // (6,476,005,376 + 131,072,000) x 2 B = 13,214,154,752 B at 1e12 B/s = 13.214 ms. Activations,
  // norms and the two cached tokens add about 13 MB (0.1 %).
  const auto r = llmsim::infer(cat::llama2_7b, job(1, 1, 2), bandwidth_bound());
  const double weights_only = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  EXPECT_GT(r.tpot.value, weights_only);
  EXPECT_NEAR(r.tpot.value, weights_only, 0.002 * weights_only);
  EXPECT_DOUBLE_EQ(r.first_step.value, r.tpot.value);
  EXPECT_NEAR(r.decode_tok_s_per_user, 1 / r.tpot.value, 1e-9);
}

TEST(Inference, Int4WeightsReadFiveEighthsOfAByteWithTheirGroupScales) {
  // int4 with a bf16 scale and zero per 32 weights: 0.5 + 4/32 = 0.625 B per weight; the LM head
  // stays bf16: 6,476,005,376 x 0.625 + 131,072,000 x 2 = 4,309,647,360 B -> 4.310 ms.
  auto i = job(1, 1, 2);
  i.weights = llmsim::weight_format::int4;
  i.int4_group_size = 32;
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  const double expected = (llama2_7b_linear_weights * 0.625 + llama2_7b_head_weights * 2) / 1e12;
  EXPECT_NEAR(r.tpot.value, expected, 0.003 * expected);
  i.weights = llmsim::weight_format::int8;
  const double int8 = (llama2_7b_linear_weights * 1 + llama2_7b_head_weights * 2) / 1e12;
  EXPECT_NEAR(llmsim::infer(cat::llama2_7b, i, bandwidth_bound()).tpot.value, int8, 0.003 * int8);
}

TEST(Inference, Fp4WeightsReadHalfAByteAndTheirBlockScales) {
  // NVFP4: E2M1 plus an E4M3 scale per 16 weights, 0.5 + 1/16 = 0.5625 B; MXFP4: an E8M0 scale per
  // 32, 0.53125 B. Weight-only (bf16 activations), a decode step reads the decoder linears at that
  // against int8's 1 B, the rest alike: 6,476,005,376 x 0.4375 B = 2.833 ms less (0.46875 B: 3.036).
  auto i = job(1, 1, 2);
  i.weights = llmsim::weight_format::int8;
  const double int8 = llmsim::infer(cat::llama2_7b, i, bandwidth_bound()).tpot.value;
  for (const auto& [format, bytes] :
       {std::pair{llmsim::weight_format::nvfp4, 0.5625}, std::pair{llmsim::weight_format::mxfp4, 0.53125}}) {
    i.weights = format;
    const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
    EXPECT_NEAR(int8 - r.tpot.value, llama2_7b_linear_weights * (1 - bytes) / 1e12, 1e-9) << enum_name(format);
    EXPECT_NEAR(r.weight_bytes, llama2_7b_linear_weights * bytes + 2 * llama2_7b_head_weights + 2 * 32000 * 4096.0,
                0.001 * r.weight_bytes)
        << enum_name(format);
  }
}

TEST(Inference, Fp4ActivationsRunTheLinearsOnFp4TensorCores) {
  // A compute-bound Blackwell-like part: BF16 100, FP8 200, FP4 400 TFLOP/s. One 1000-token prompt
  // of Llama-2-7B: its decoder linears do 2 x 1000 x 6,476,005,376 = 12.952 TFLOP, 129.52 ms in
  // BF16; NVFP4 (W4A4) runs them at 4x: 97.14 ms less; FP8 (W8A8) at 2x: 64.76 ms less. Attention
  // and the LM head stay BF16; the casts' traffic costs microseconds.
  llmsim::system_spec b = compute_bound();
  b.accelerator.compute_capability = 10.0;
  for (const auto& [kind, tflops] :
       {std::pair{llmsim::compute_kind::fp8_matmul, 200.0}, std::pair{llmsim::compute_kind::fp8_group_matmul, 200.0},
        std::pair{llmsim::compute_kind::fp4_matmul, 400.0}, std::pair{llmsim::compute_kind::fp4_group_matmul, 400.0}})
    b.accelerator.op[static_cast<std::size_t>(kind)] = {.present = true, .tflops = tflops, .efficient_factor = 1};
  auto i = job(1, 1000, 1);
  const double bf16 = llmsim::infer(cat::llama2_7b, i, b).ttft.value;
  const double linears = 2 * 1000 * llama2_7b_linear_weights / 100e12;
  i.weights = llmsim::weight_format::nvfp4;
  i.activations = llmsim::activation_format::fp4;
  EXPECT_NEAR(bf16 - llmsim::infer(cat::llama2_7b, i, b).ttft.value, linears * 0.75, 1e-4 * linears);
  i.weights = llmsim::weight_format::fp8;
  i.activations = llmsim::activation_format::fp8;
  EXPECT_NEAR(bf16 - llmsim::infer(cat::llama2_7b, i, b).ttft.value, linears * 0.5, 1e-4 * linears);
  // FP4 activations need NVFP4 weights, and FP4 tensor cores (Hopper has none).
  i.activations = llmsim::activation_format::fp4;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, b), "inference.activations");
  i.weights = llmsim::weight_format::nvfp4;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::h100_sxm), "inference.activations");
  try {
    (void)llmsim::infer(cat::llama2_7b, i, cat::h100_sxm);
    ADD_FAILURE() << "NVFP4 activations accepted on an H100";
  } catch (const llmsim::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("inference.activations=fp4 needs FP4 tensor cores (compute capability >= "
                                         "10.0; where it is unknown, 0, an accelerator.op.fp4_matmul entry); "
                                         "system h100_sxm has 9"),
              std::string::npos)
        << e.what();
  }
  // The MI300X (compute capability unknown) has no FP4 entry: refused by the same rule.
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::mi300x), "inference.activations");
}

TEST(Inference, EachDecodeStepReadsTheCacheAtItsLength) {
  // Batch 8, 100 prompt tokens, 50 generated: the first decode step attends over 101 cached
  // tokens, the last (step 49) over 149. The 48 more tokens' K and V per sequence and layer are
  // 2 x 48 x 32 heads x 128 x 2 B = 786,432 B; x 8 sequences x 32 layers = 201,326,592 B = 201.3 us.
  const auto r = llmsim::infer(cat::llama2_7b, job(8, 100, 50), bandwidth_bound());
  EXPECT_NEAR((r.last_step - r.first_step).value, 201326592.0 / 1e12, 1e-12);
  // Step time grows linearly with the cache, so the mean step is the middle one.
  EXPECT_NEAR(r.tpot.value, (r.first_step.value + r.last_step.value) / 2, 1e-12);
  EXPECT_NEAR(r.e2e.value, r.ttft.value + 49 * r.tpot.value, 1e-12);
  // An FP8 cache halves that difference.
  auto fp8 = job(8, 100, 50);
  fp8.kv_cache = llmsim::kv_cache_format::fp8;
  const auto half = llmsim::infer(cat::llama2_7b, fp8, bandwidth_bound());
  EXPECT_NEAR((half.last_step - half.first_step).value, 201326592.0 / 2 / 1e12, 1e-12);
}

TEST(Inference, GroupedQueryCacheReadPerQueryHeadByTheOldMaskedMhaKernel) {
  // Llama-2-70B: 64 query heads over 8 KV heads of 128, 80 layers. Batch 8, 100 prompt tokens, 50
  // generated: the last step reads 48 more cached tokens than the first, K and V of 8 heads:
  // 2 x 8 x 128 x 2 B = 4,096 B per token and layer; x 48 x 8 sequences x 80 layers = 125,829,120 B
  // -> 125.83 us at 1e12 B/s. Read once per query head (TensorRT-LLM <= 0.6's masked MHA), each
  // KV head's cache streams 64 / 8 = 8 times: 1,006,632,960 B -> 1.00663 ms.
  auto shared = job(8, 100, 50);
  const auto once = llmsim::infer(cat::llama2_70b, shared, bandwidth_bound());
  EXPECT_NEAR((once.last_step - once.first_step).value, 125829120.0 / 1e12, 1e-12);
  auto per_query = shared;
  per_query.gqa_decode_reads = llmsim::gqa_decode_read_kind::per_query_head;
  const auto eight = llmsim::infer(cat::llama2_70b, per_query, bandwidth_bound());
  EXPECT_NEAR((eight.last_step - eight.first_step).value, 8 * 125829120.0 / 1e12, 1e-12);
  // Prefill caches nothing before it: the same time either way.
  EXPECT_DOUBLE_EQ(eight.ttft.value, once.ttft.value);
  // A multi-head model (Llama-2-7B) reads the same either way; so does MLA, whose decode reads
  // one latent per token whatever its head counts (here DeepSeek-V2-Lite given 4 KV heads).
  llmsim::model_spec latent = cat::deepseek_v2_lite;
  latent.kv_head_num = 4;
  for (const llmsim::model_spec* m : {&cat::llama2_7b, static_cast<const llmsim::model_spec*>(&latent)}) {
    const double a = llmsim::infer(*m, shared, bandwidth_bound()).tpot.value;
    EXPECT_DOUBLE_EQ(llmsim::infer(*m, per_query, bandwidth_bound()).tpot.value, a) << m->model_name.view();
  }
  EXPECT_DOUBLE_EQ(llmsim::decode_kv_read_repeats(latent, per_query), 1.0);
  EXPECT_DOUBLE_EQ(llmsim::decode_kv_read_repeats(cat::llama2_70b, per_query), 8.0);
}

TEST(Inference, PipelineMicroBatchesFillTheStagesAtPrefill) {
  // pp 4, batch 8 of 1024 tokens, one micro-batch per stage (TensorRT-LLM's default): 4 of 2
  // sequences. At 100 TFLOP/s with free memory and free links, one micro-batch's decoder layer
  // takes the time of 2 x 202,375,168 x 2,048 = 828,928,688,128 FLOPs of GEMMs plus
  // 34,359,738,368 of attention (PrefillIsItsFlopsAtThePeak) = F = 863,288,426,496; its LM head
  // H = 2 x 2 x 4096 x 32000 = 524,288,000. The first micro-batch crosses all 32 layers
  // (32 F + H); each other one follows a stage behind, the fullest stage taken with both ends
  // (8 F + H): 56 F + 4 H = 48,346,249,035,776 -> 0.483462 s. Stages in turn over the whole
  // batch would take 128 F + 4 H: 56 / 128 = 0.4375 of that.
  const llmsim::system_spec s = with_free_links(compute_bound());
  auto i = job(8, 1024, 1);
  i.pp = 4;
  const auto r = llmsim::infer(cat::llama2_7b, i, s);
  const double expected = (56 * 863288426496.0 + 4 * 524288000.0) / 100e12;
  EXPECT_NEAR(r.ttft.value, expected, 1e-4 * expected);
  EXPECT_EQ(r.prefill_micro_batches, 4);
  EXPECT_EQ(r.decode_micro_batches, 4);
  // One stage: no split, the whole batch at once (128 F + 4 H over pp 4 of the same GPUs' work).
  i.pp = 1;
  const auto one = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_EQ(one.prefill_micro_batches, 1);
  EXPECT_NEAR(one.ttft.value, (128 * 863288426496.0 + 4 * 524288000.0) / 100e12, 1e-4 * one.ttft.value);
}

TEST(Inference, PipelineMicroBatchesOfUnequalSize) {
  // pp 3, batch 5, per stage: ceil(5 / 3) = 2 sequences each, 2 + 2 + 1; the fullest stage
  // holds ceil(32 / 3) = 11 layers. With F2 = 863,288,426,496 per layer for two sequences of 1024
  // tokens (PipelineMicroBatchesFillTheStagesAtPrefill), F1 = 414,464,344,064 + 17,179,869,184 =
  // 431,644,213,248 for one, heads H2 = 524,288,000 and H1 = 262,144,000: the first crosses all
  // layers (32 F2 + H2), then a stage of two (11 F2 + H2) and one of one (11 F1 + H1):
  // 43 F2 + 11 F1 + 2 H2 + H1 = 41,870,799,405,056 -> 0.418708 s.
  auto i = job(5, 1024, 1);
  i.pp = 3;
  const auto r = llmsim::infer(cat::llama2_7b, i, with_free_links(compute_bound()));
  EXPECT_EQ(r.prefill_micro_batches, 3);
  EXPECT_NEAR(r.ttft.value, 0.41870799405056, 1e-4 * 0.41870799405056);
}

TEST(Inference, PipelineMicroBatchesTakeTurnsOnTheFullestStageAtDecode) {
  // pp 2, batch 2: two micro-batches of one sequence. At batch 1 a decode step reads weights
  // only (1e12 B/s): a stage's 16 layers 16 x 202,375,168 x 2 B = 6,476,005,376 B, the head's
  // stage also the head's 262,144,000 B: 6.738 ms. That stage serves both micro-batches in turn:
  // 13.476 ms a step, more than one micro-batch's way through both stages (13.214 ms).
  const llmsim::system_spec s = with_free_links(bandwidth_bound());
  auto i = job(2, 1, 2);
  i.pp = 2;
  const auto r = llmsim::infer(cat::llama2_7b, i, s);
  const double stage = (16 * 202375168.0 * 2 + llama2_7b_head_weights * 2) / 1e12;
  EXPECT_NEAR(r.tpot.value, 2 * stage, 0.003 * 2 * stage);
  EXPECT_EQ(r.decode_micro_batches, 2);
  // One micro-batch (batch 1) crosses both stages once: every weight read once, 13.214 ms.
  auto one = job(1, 1, 2);
  one.pp = 2;
  const auto single = llmsim::infer(cat::llama2_7b, one, s);
  EXPECT_EQ(single.decode_micro_batches, 1);
  EXPECT_NEAR(single.tpot.value, (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12,
              0.003 * single.tpot.value);
  // FasterTransformer's rule: batch 4 over pp 2 is two micro-batches of 2 (2 tokens <= 1024),
  // and each step fills and drains the pipeline: one micro-batch's way through (13.214 ms), then
  // the other a stage behind (6.738 ms): 19.952 ms, where taking turns gives 2 x 6.738 = 13.476.
  auto ft = job(4, 1, 2);
  ft.pp = 2;
  ft.micro_batching = llmsim::pipeline_micro_batching::fastertransformer;
  const auto drained = llmsim::infer(cat::llama2_7b, ft, s);
  EXPECT_EQ(drained.decode_micro_batches, 2);
  const double way = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  EXPECT_NEAR(drained.tpot.value, way + stage, 0.003 * (way + stage));
  ft.micro_batching = llmsim::pipeline_micro_batching::per_stage;
  EXPECT_NEAR(llmsim::infer(cat::llama2_7b, ft, s).tpot.value, 2 * stage, 0.003 * 2 * stage);
}

TEST(Inference, MicroBatchRulesOfTensorRtLlmAndFasterTransformer) {
  // The split is reported by count; each rule worked by hand.
  auto count = [](llmsim::pipeline_micro_batching rule, std::int64_t pp, std::int64_t batch, std::int64_t input) {
    auto i = job(batch, input, 2);
    i.pp = pp;
    i.micro_batching = rule;
    const auto r = llmsim::infer(cat::llama2_7b, i, cat::h100_sxm);
    return std::pair{r.prefill_micro_batches, r.decode_micro_batches};
  };
  using rule = llmsim::pipeline_micro_batching;
  // Per stage: ceil(5 / 3) = 2 sequences each: 2 + 2 + 1, three micro-batches; batch 1: one.
  EXPECT_EQ(count(rule::per_stage, 3, 5, 60), std::pair(std::int64_t{3}, std::int64_t{3}));
  EXPECT_EQ(count(rule::per_stage, 3, 1, 60), std::pair(std::int64_t{1}, std::int64_t{1}));
  // FasterTransformer: 3 does not divide 128, so 128; prefill halves 128 x 60 = 7,680 tokens to
  // 64, 32, 16 (960 <= 1024): 8 micro-batches; decode's 128 tokens stay one.
  EXPECT_EQ(count(rule::fastertransformer, 3, 128, 60), std::pair(std::int64_t{8}, std::int64_t{1}));
  // 96 / 3 = 32: 1,920 tokens halve to 16 (960): 6 at prefill; decode 32 a micro-batch: 3.
  EXPECT_EQ(count(rule::fastertransformer, 3, 96, 60), std::pair(std::int64_t{6}, std::int64_t{3}));
  // An odd micro-batch stops halving: 15 / 3 = 5 sequences of 300 tokens stay 5 (1,500 tokens).
  EXPECT_EQ(count(rule::fastertransformer, 3, 15, 300), std::pair(std::int64_t{3}, std::int64_t{3}));
  // One stage: never split.
  EXPECT_EQ(count(rule::fastertransformer, 1, 128, 60), std::pair(std::int64_t{1}, std::int64_t{1}));
  // FasterTransformer v5.0 halved only above 8192 tokens: 96 / 3 = 32 sequences of 60 = 1,920
  // tokens stay one micro-batch of 32: 3 at prefill, 3 at decode.
  auto v50 = job(96, 60, 2);
  v50.pp = 3;
  v50.micro_batching = rule::fastertransformer;
  v50.micro_batch_token_limit = 8192;
  const auto v50_result = llmsim::infer(cat::llama2_7b, v50, cat::h100_sxm);
  EXPECT_EQ(v50_result.prefill_micro_batches, 3);
  EXPECT_EQ(v50_result.decode_micro_batches, 3);
}

TEST(Inference, PrefillIsItsFlopsAtThePeak) {
  // Batch 2 x 1024 prompt tokens at 100 TFLOP/s, memory free:
  // - decoder GEMMs 2 x 6,476,005,376 x 2,048 tokens = 26,525,718,020,096 FLOPs;
  // - causal attention per layer 2 x 2 seq x 32 heads x (1024 x 1025 / 2 pairs) x (128 + 128)
  //   = 17,196,646,400; x 32 layers = 550,292,684,800 counted. An efficiency of 1 is in the
  //   tables' convention, every one of the 1024^2 pairs counted (SimuMax measures training that
  //   way): the kernel takes the time of 2 x 2 x 32 x 1,048,576 x 256 = 34,359,738,368 per
  //   layer, 1,099,511,627,776 in all;
  // - the LM head on each sequence's last token only: 2 x 2 x 4096 x 32000 = 524,288,000.
  // Time 27,625,753,935,872 FLOPs' worth -> 0.276258 s; counted 27,076,534,992,896 FLOPs over
  // it: 98.012 TFLOP/s.
  const auto r = llmsim::infer(cat::llama2_7b, job(2, 1024, 1), compute_bound());
  const double timed = 2 * llama2_7b_linear_weights * 2048 + 32 * 34359738368.0 + 524288000.0;
  EXPECT_NEAR(r.ttft.value, timed / 100e12, 1e-4 * timed / 100e12);
  EXPECT_NEAR(r.prefill_tflops, 98.0119, 0.01);
  EXPECT_EQ(r.tpot.value, 0) << "one output token: no decode step";
  EXPECT_DOUBLE_EQ(r.e2e.value, r.ttft.value);
}

TEST(Inference, MemoryOfWeightsAndCache) {
  // bf16 weights: linears 6,476,005,376 + norms 32 x 2 x 4096 + final norm 4096 + embedding and
  // head 2 x 131,072,000 = 6,738,415,616 parameters = 13,476,831,232 B. KV cache of 4 sequences at
  // 1024 tokens: 4 x 1024 x (32 layers x 2 x 32 heads x 128 x 2 B = 524,288 B) = 2 GiB.
  const auto r = llmsim::infer(cat::llama2_7b, job(4, 1000, 24), cat::a100_sxm);
  EXPECT_DOUBLE_EQ(r.weight_bytes, 13476831232.0);
  EXPECT_DOUBLE_EQ(r.kv_bytes_per_token, 524288.0);
  EXPECT_DOUBLE_EQ(r.kv_cache_bytes, 2147483648.0);
  EXPECT_DOUBLE_EQ(r.peak_bytes, r.weight_bytes + r.kv_cache_bytes + r.activation_bytes);
  // 80 GiB x 0.9 usable; without activations (77,309,411,328 - 13,476,831,232) / 536,870,912 B per
  // sequence = 118.9: the largest batch is at most 118, and exactly the one whose memory fits.
  EXPECT_DOUBLE_EQ(r.capacity_bytes, 80.0 * 1073741824 * 0.9);
  ASSERT_GT(r.max_batch, 0);
  EXPECT_LE(r.max_batch, 118);
  EXPECT_TRUE(llmsim::infer(cat::llama2_7b, job(r.max_batch, 1000, 24), cat::a100_sxm).fits);
  EXPECT_FALSE(llmsim::infer(cat::llama2_7b, job(r.max_batch + 1, 1000, 24), cat::a100_sxm).fits);
  EXPECT_FALSE(r.max_batch_at_limit);
  auto capped = job(4, 1000, 24);
  capped.max_batch_limit = 50;
  const auto c = llmsim::infer(cat::llama2_7b, capped, cat::a100_sxm);
  EXPECT_EQ(c.max_batch, 50);
  EXPECT_TRUE(c.max_batch_at_limit) << "a capped search says so";
  // In-flight batching pages the cache at the mean length (1000 + 12, rounded up to 16-token
  // blocks: 1024 here, the same as the full context) and prefills at most 8192 prompt tokens a step
  // (8 of these prompts), not the whole batch's: its memory at batch B is the weights, B x 1024 x
  // 524,288 B of cache, B sequences' fp32 logits (32000 x 4 B) and the activations of a prefill of
  // 8 prompts (a static batch of 8's, less its 8 sequences' logits).
  const auto eight = llmsim::infer(cat::llama2_7b, job(8, 1000, 24), cat::a100_sxm);
  const double chunk = eight.activation_bytes - 8 * 32000.0 * 4;
  const double per_sequence = 1024 * 524288.0 + 32000.0 * 4;
  const auto expected =
      static_cast<std::int64_t>((r.capacity_bytes - r.weight_bytes - chunk) / per_sequence);  // floor: positive
  EXPECT_EQ(r.offline_batch, expected);
  EXPECT_GT(r.offline_batch, r.max_batch);
}

TEST(Inference, TensorParallelPastTheKvHeadsReplicatesThem) {
  // 16 query heads of 64 over 2 KV heads, hidden 1024, FFN 4096 (SwiGLU), 2 layers, vocab 32768,
  // on tp 8: each rank holds 2 query heads and one of the 2 KV heads, replicated over 4 ranks
  // (vLLM QKVParallelLinear). Per rank and layer: q 1024 x 128 + k and v 1024 x 64 each + o 128 x
  // 1024 = 393,216, the MLP 3 x 1024 x 4096 / 8 = 1,572,864, two norms 2,048: 1,968,128; two layers
  // 3,936,256, the embedding and the output layer 32768 x 1024 / 8 each (8,388,608), the final norm
  // 1,024: 12,325,888 parameters = 24,651,776 B in bf16. Its KV cache: 2 layers x K and V x one
  // head x 64 x 2 B = 512 B a token (half a head, as tp = kv_head_num would give, is not a head).
  llmsim::model_spec m = cat::llama3_8b;
  m.hidden_size = 1024;
  m.head_num = 16;
  m.kv_head_num = 2;
  m.head_size = 64;
  m.intermediate_size = 4096;
  m.layer_num = 2;
  m.vocab_size = 32768;
  auto i = job(1, 128, 16);
  i.tp = 8;
  const auto r = llmsim::infer(m, i, cat::h100_sxm);
  EXPECT_DOUBLE_EQ(r.weight_bytes, 24651776.0);
  EXPECT_DOUBLE_EQ(r.kv_bytes_per_token, 512.0);
  i.tp = 3;  // neither divides 2 nor is a multiple of it
  EXPECT_EQ(refused_field(m, i, cat::h100_sxm), "inference.tp");
}

TEST(Inference, GroupedQueryAndLatentCachesPerToken) {
  // Llama-2-70B on tp 4, FP8 cache: 80 layers x 2 x (8 KV heads / 4) x 128 x 1 B = 40,960 B.
  auto i = job(1, 16, 2);
  i.tp = 4;
  i.weights = llmsim::weight_format::fp8;
  i.kv_cache = llmsim::kv_cache_format::fp8;
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::llama2_70b, i, cat::h100_sxm).kv_bytes_per_token, 40960.0);
  // DeepSeek-V3 on pp 2: ceil(61 / 2) = 31 layers x (512 latent + 64 rope) x 2 B = 35,712 B on
  // every tp rank (the latent is not split over heads).
  auto d = job(1, 16, 2);
  d.tp = 8;
  d.pp = 2;
  d.ep = 8;
  d.weights = llmsim::weight_format::fp8;
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::deepseek_v3, d, cat::h800).kv_bytes_per_token, 35712.0);
}

TEST(Inference, ActiveExpertsOfASmallBatch) {
  // 1 - (1 - k/E)^T: one token picks 2 of 8 experts: 0.25; two tokens 1 - 0.75^2 = 0.4375.
  EXPECT_DOUBLE_EQ(llmsim::expected_active_fraction(8, 2, 1), 0.25);
  EXPECT_DOUBLE_EQ(llmsim::expected_active_fraction(8, 2, 2), 0.4375);
  EXPECT_DOUBLE_EQ(llmsim::expected_active_fraction(1, 1, 5), 1.0);
  EXPECT_NEAR(llmsim::expected_active_fraction(256, 8, 4096), 1.0, 1e-12);
  // Mixtral 8x7B's experts: 32 layers x 8 x 3 x 4096 x 14336 x 2 B = 90.2 GB in all. A decode step
  // of batch 1 reads 25 % of them, of batch 2 43.75 %: 18.75 % = 16.9 GB (16.9 ms at 1e12 B/s)
  // more; the second sequence's own activations add about 13 MB (0.08 %).
  const auto one = llmsim::infer(cat::mixtral_8x7b, job(1, 1, 2), bandwidth_bound());
  const auto two = llmsim::infer(cat::mixtral_8x7b, job(2, 1, 2), bandwidth_bound());
  const double experts = 32 * 8 * 3 * 4096 * 14336.0 * 2;
  EXPECT_NEAR((two.tpot - one.tpot).value, experts * 0.1875 / 1e12, 0.002 * experts * 0.1875 / 1e12);
}

TEST(Inference, ExpertWeightsStoredApartFromTheRest) {
  // Mixtral 8x7B's experts, 32 x 8 x 3 x 4096 x 14336 = 45.10 G weights, stored MXFP4 (0.53125 B)
  // beside bf16 attention: 45.10 G x 1.46875 B = 66.24 GB less memory; a batch-1 decode step reads
  // the 25 % its token activates, 16.56 GB less (16.56 ms at 1e12 B/s); attention's linears alike.
  const double experts = 32 * 8 * 3 * 4096 * 14336.0;
  auto i = job(1, 1, 2);
  const auto bf16 = llmsim::infer(cat::mixtral_8x7b, i, bandwidth_bound());
  i.expert_weights = llmsim::weight_format::mxfp4;
  const auto mx = llmsim::infer(cat::mixtral_8x7b, i, bandwidth_bound());
  EXPECT_NEAR(bf16.weight_bytes - mx.weight_bytes, experts * (2 - 0.53125), 1);
  EXPECT_NEAR((bf16.tpot - mx.tpot).value, experts * 0.25 * (2 - 0.53125) / 1e12, 1e-9);
  // Refused: on a model without experts; beside FP8 activations unless FP8 (W4A8 is not modelled);
  // FP8 experts on a part without FP8 tensor cores, naming the experts' field.
  EXPECT_EQ(refused_field(cat::llama2_7b, i, bandwidth_bound()), "inference.expert_weights");
  i.weights = llmsim::weight_format::fp8;
  i.activations = llmsim::activation_format::fp8;
  EXPECT_EQ(refused_field(cat::mixtral_8x7b, i, cat::h100_sxm), "inference.expert_weights");
  i.weights = llmsim::weight_format::bf16;
  i.activations = llmsim::activation_format::bf16;
  i.expert_weights = llmsim::weight_format::fp8;
  EXPECT_EQ(refused_field(cat::mixtral_8x7b, i, cat::a100_sxm), "inference.expert_weights");
  // NVFP4 GEMMs need NVFP4 experts too.
  i.weights = llmsim::weight_format::nvfp4;
  i.activations = llmsim::activation_format::fp4;
  i.expert_weights = llmsim::weight_format::mxfp4;
  EXPECT_EQ(refused_field(cat::mixtral_8x7b, i, cat::b200), "inference.activations");
}

TEST(Inference, ServingRunsExpertsDroplessAndUnpadded) {
  // The catalogue's Mixtral pads each expert's input to capacity (Megatron drop-and-pad, a training
  // setting); servers route each token to its top-k experts and compute only those rows, so the
  // padding and a capacity factor below 1 change nothing: batch 1 decodes 2 expert rows, not 8.
  llmsim::model_spec padded = cat::mixtral_8x7b;
  padded.moe_pad_expert_input_to_capacity = true;
  llmsim::model_spec dropless = padded;
  dropless.moe_pad_expert_input_to_capacity = false;
  llmsim::model_spec dropping = dropless;
  dropping.capacity = 0.5;
  auto i = job(1, 512, 16);
  i.tp = 2;
  const auto a = llmsim::infer(padded, i, cat::h100_sxm), b = llmsim::infer(dropless, i, cat::h100_sxm),
             d = llmsim::infer(dropping, i, cat::h100_sxm);
  EXPECT_EQ(a.ttft.value, b.ttft.value);
  EXPECT_EQ(a.tpot.value, b.tpot.value);
  EXPECT_EQ(d.tpot.value, b.tpot.value);
  EXPECT_EQ(a.max_batch, b.max_batch);
}

TEST(Inference, TensorParallelMoeSplitsItsExpertsOnce) {
  // Mixtral 8x7B's weights split over tp 2 — each expert's FFN over the two GPUs (ep 1, vLLM's
  // default), or the experts four and four (ep 2) — hold half the model per GPU: the vocabulary-
  // parallel embedding and head, the attention and the experts halve; only the norms (2 x 32 x 4096 +
  // 4096 elements) and the router (32 x 4096 x 8) are whole on each GPU.
  auto i = job(1, 16, 2);
  const double whole = llmsim::infer(cat::mixtral_8x7b, i, cat::h200).weight_bytes;
  const double replicated = (2 * 32 * 4096.0 + 4096 + 32 * 4096 * 8.0) * 2;
  i.tp = 2;
  EXPECT_NEAR(llmsim::infer(cat::mixtral_8x7b, i, cat::h200).weight_bytes, (whole - replicated) / 2 + replicated, 1);
  i.ep = 2;
  EXPECT_NEAR(llmsim::infer(cat::mixtral_8x7b, i, cat::h200).weight_bytes, (whole - replicated) / 2 + replicated, 1);
  // A prefill's expert work does not grow with tp: each GPU runs its half of every expert's FFN
  // for all the tokens. Only the router (vLLM's gate is a ReplicatedLinear) runs on both GPUs for
  // all 4 x 512 tokens: 2 x 2048 x 4096 x 8 x 32 layers = 4.29 GFLOP more.
  auto p = job(4, 512, 1);
  const double flops_tp1 = llmsim::infer(cat::mixtral_8x7b, p, compute_bound()).prefill_tflops *
                           llmsim::infer(cat::mixtral_8x7b, p, compute_bound()).ttft.value;
  p.tp = 2;
  const auto two = llmsim::infer(cat::mixtral_8x7b, p, compute_bound());
  const double router = 2 * 2048 * 4096 * 8 * 32.0 / 1e12;
  EXPECT_NEAR(two.prefill_tflops * two.ttft.value * 2, flops_tp1 + router, 1e-6 * flops_tp1);
}

TEST(Inference, DollarsPerMillionTokensOnlyWithAPrice) {
  auto i = job(16, 128, 64);
  i.tp = 2;
  const auto free = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_EQ(free.usd_per_million_output_tokens, 0) << "no default price";
  i.usd_per_gpu_hour = 2;
  const auto r = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  // $2 x 2 GPUs per hour / (3600 s x output tokens/s) x 1e6.
  EXPECT_NEAR(r.usd_per_million_output_tokens, 2.0 * 2 / 3600 / r.output_tok_s * 1e6, 1e-9);
  EXPECT_NEAR(r.output_tok_s, 16.0 * 64 / r.e2e.value, 1e-9);
  EXPECT_NEAR(r.output_tok_s_per_gpu, r.output_tok_s / 2, 1e-9);
}

TEST(Inference, TensorParallelDecodeAddsTwoAllReducesPerLayer) {
  // tp 2 on the bandwidth-bound system over NVLink at 1e6 GB/s: a decode step waits for 2
  // all-reduces per layer plus the embedding's, 65 of 8 KiB, which NCCL runs with LL,
  // latency-bound: 3.6 us + 2 steps x 0.47 us = 4.54 us each (tuning.cc); then the logits'
  // all-gather, 1 step: 3.6 + 0.47 = 4.07 us. Against the same step with free collectives
  // (tiers without NCCL's model and without latency): 65 x 4.54 + 4.07 = 299.17 us.
  llmsim::system_spec s = bandwidth_bound();
  for (std::size_t k = 0; k < s.network_count; ++k) s.networks[k].bandwidth.gbps = 1e6;
  llmsim::system_spec free = s;
  for (std::size_t k = 0; k < free.network_count; ++k) {
    free.networks[k].nccl_link = llmsim::nccl_link_kind::none;
    free.networks[k].bandwidth.latency_us = 0;
    free.networks[k].bandwidth.fixed_latency = 0;
  }
  auto i = job(1, 1, 2);
  i.tp = 2;
  const double with = llmsim::infer(cat::llama2_7b, i, s).tpot.value;
  const double without = llmsim::infer(cat::llama2_7b, i, free).tpot.value;
  EXPECT_NEAR(with - without, 65 * 4.54e-6 + 4.07e-6, 1e-8);  // bytes at 1e6 GB/s: ~2 ns
}

TEST(Inference, EagerPassesPayEachCollectivesCallLatency) {
  // The same tp 2 pass: 65 all-reduces and the logits' all-gather, 66 NCCL calls. Prefill is
  // launched kernel by kernel (TensorRT-LLM's executeContext, gpt-fast's prefill): each call adds
  // eager_collective_us, 10 us here, so 660 us more than with 0. Decode steps replayed as CUDA
  // graphs add nothing; launched from the host (no graphs) they add the same 660 us a step.
  llmsim::system_spec s = bandwidth_bound();
  for (std::size_t k = 0; k < s.network_count; ++k) s.networks[k].bandwidth.gbps = 1e6;
  auto i = job(1, 1, 2);
  i.tp = 2;
  i.eager_collective_us = 0;
  const auto none = llmsim::infer(cat::llama2_7b, i, s);
  i.eager_collective_us = 10;
  const auto graphs = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_NEAR(graphs.ttft.value - none.ttft.value, 66 * 10e-6, 1e-12);
  EXPECT_DOUBLE_EQ(graphs.tpot.value, none.tpot.value);
  i.cuda_graphs = false;
  const auto eager = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_NEAR(eager.tpot.value - none.tpot.value, 66 * 10e-6, 1e-12);
  EXPECT_DOUBLE_EQ(eager.ttft.value, graphs.ttft.value);
  // Pipeline sends pay no call latency (tp 1, pp 2: the stages' only traffic), and tiers priced by
  // their own per-step latencies (a measured file's, no NCCL model) keep those in every pass.
  i.pp = 2;
  i.tp = 1;
  i.cuda_graphs = true;
  const double piped = llmsim::infer(cat::llama2_7b, i, s).ttft.value;
  i.eager_collective_us = 0;
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::llama2_7b, i, s).ttft.value, piped);
  i.pp = 1;
  i.tp = 2;
  llmsim::system_spec measured = s;
  for (std::size_t k = 0; k < measured.network_count; ++k) {
    measured.networks[k].nccl_link = llmsim::nccl_link_kind::none;
    measured.networks[k].bandwidth.latency_us = 2;
  }
  const double own = llmsim::infer(cat::llama2_7b, i, measured).ttft.value;
  i.eager_collective_us = 10;
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::llama2_7b, i, measured).ttft.value, own);
  // One GPU calls no collective: nothing to pay.
  i.tp = 1;
  const double tp1 = llmsim::infer(cat::llama2_7b, i, s).ttft.value;
  i.eager_collective_us = 0;
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::llama2_7b, i, s).ttft.value, tp1);
  // The default is the 34 us per call fitted to SimuMax's B200 eager-mode table.
  EXPECT_DOUBLE_EQ(inference_spec{}.eager_collective_us, 34.0);
}

TEST(Inference, PrefillIsLaunchedKernelByKernel) {
  // At 1 ms a launch the host bounds the prefill with or without CUDA graphs for decode (graphs
  // capture decode steps only): a pass of K kernels takes K ms.
  auto i = job(1, 1, 2);
  i.host_launch_us = 1000;
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  ASSERT_GT(r.decode_kernels, 100);
  EXPECT_NEAR(r.ttft.value, r.decode_kernels * 1e-3, 1e-12) << "a 1-token prefill runs the decode step's kernels";
  EXPECT_LT(r.tpot.value, 0.02);
}

TEST(Inference, WithoutCudaGraphsTheHostBoundsAStep) {
  // Launching each kernel from the host at 1 ms: a step of K kernels takes K ms, far above its GPU
  // time (13 ms of weights at 1e12 B/s against ~450 kernels); with graphs the GPU time stands.
  auto i = job(1, 1, 2);
  const auto graphs = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  i.cuda_graphs = false;
  i.host_launch_us = 1000;
  const auto host = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  ASSERT_GT(host.decode_kernels, 100);
  EXPECT_DOUBLE_EQ(host.decode_kernels, graphs.decode_kernels);
  EXPECT_NEAR(host.tpot.value, host.decode_kernels * 1e-3, 1e-12);
  EXPECT_LT(graphs.tpot.value, 0.02);
}

TEST(Inference, TheJobsKernelLatencyReplacesTheSystemFiles) {
  // A system file's latency_us (SimuMax fits 30-40 us per kernel to eager-mode training) does not
  // reach a serving job: 1 ms there changes nothing; the job's kernel_latency_us adds its 5 us to
  // every kernel of the step (each moves bytes; compute is negligible on this system).
  auto sys = bandwidth_bound();
  for (auto& bw : sys.accelerator.bandwidth) bw.latency_us = 1000;
  auto i = job(1, 1, 2);
  const auto base = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_DOUBLE_EQ(llmsim::infer(cat::llama2_7b, i, sys).tpot.value, base.tpot.value);
  i.kernel_latency_us = 5;
  const auto slow = llmsim::infer(cat::llama2_7b, i, sys);
  EXPECT_NEAR(slow.tpot.value - base.tpot.value, 5e-6 * base.decode_kernels, 1e-9);
  // The default is the 5 us per kernel of Hazy Research's H100 decode estimate (inference_spec).
  EXPECT_DOUBLE_EQ(inference_spec{}.kernel_latency_us, 5.0);
}

TEST(InferenceInFlight, ClientsShareStepsThatReadTheWeightsOnce) {
  // Bandwidth-bound Llama-2-7B: every step, whatever its few tokens, reads every weight once,
  // W = 13.214 ms (BatchOneDecodeStepReadsEveryWeightOnce), and the caches of its 10 decoding
  // sequences at the mean context, 4 + 6 = 10 tokens of 32 layers x 2 x 4096 x 2 B = 524,288 B:
  // 52,428,800 B -> 0.052 ms; t = 13.267 ms (activations and norms, about 13 MB a token as in
  // BatchOneDecodeStepReadsEveryWeightOnce, add about 1 % for the step's 10-14 tokens). 10
  // clients of 4-token prompts and 11 output tokens: a prompt takes one step (its first token),
  // then 10 decode steps, so a request holds its slot 11 steps. Each client sends its next request
  // as its last completes, while the other 9 run the next step, which it waits out (all 9 ending
  // in the same step as it, 11^-9, leaves the engine idle): its cycle is 12 steps, 10 x 11 / 12 =
  // 9.17 requests in the batch on average, 10 / (12 t) requests/s, 110 / (12 t) output tokens/s,
  // 10 x 4 / 12 = 3.33 prompt tokens a step; time to first token 2 t (the wait, then its prompt).
  auto i = job(1, 4, 11);
  i.concurrency = 10;
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  const double weights = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  const double t = weights + 10 * 10 * 524288.0 / 1e12;
  EXPECT_TRUE(r.in_flight);
  EXPECT_EQ(r.running, 9);
  EXPECT_NEAR(r.mean_running, 110.0 / 12, 1e-6);
  EXPECT_NEAR(r.tpot.value, t, 0.015 * t);
  EXPECT_NEAR(r.ttft.value, 2 * t, 0.015 * 2 * t);
  EXPECT_NEAR(r.queue.value, t, 0.015 * t);
  EXPECT_NEAR(r.e2e.value, 12 * t, 0.015 * 12 * t);
  EXPECT_NEAR(r.request_rate, 10 / (12 * t), 0.015 * 10 / (12 * t));
  EXPECT_NEAR(r.output_tok_s, 110 / (12 * t), 0.015 * 110 / (12 * t));
  EXPECT_NEAR(r.prefill_tokens_per_step, 40.0 / 12, 0.05);
  EXPECT_FALSE(r.token_budget_bound);
  // Closed loop (Little's law): the clients are the request rate times the end-to-end latency.
  EXPECT_NEAR(r.request_rate * r.e2e.value, 10, 1e-6);
  // At most 4 running (vLLM max_num_seqs): 4 caches (t4 = W + 0.021 ms), 4 / (11 t4)
  // requests/s; the 6 others queue 6 / rate = 16.5 t4 each, before their prompt's step (a queue
  // for a slot holds the re-sent request too: no step of its own to wait out).
  i.max_running = 4;
  const auto capped = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  const double t4 = weights + 4 * 10 * 524288.0 / 1e12;
  EXPECT_EQ(capped.running, 4);
  EXPECT_NEAR(capped.request_rate, 4 / (11 * t4), 0.015 * 4 / (11 * t4));
  EXPECT_NEAR(capped.queue.value, 16.5 * t4, 0.015 * 16.5 * t4);
  EXPECT_NEAR(capped.ttft.value, 17.5 * t4, 0.015 * 17.5 * t4);
  EXPECT_NEAR(capped.e2e.value, 27.5 * t4, 0.015 * 27.5 * t4);
  EXPECT_NEAR(capped.request_rate * capped.e2e.value, 10, 1e-6);
}

TEST(InferenceInFlight, AClientsNextRequestWaitsOutTheRoundInProgress) {
  // Bandwidth-bound rounds of t = W = 13.214 ms (two sequences' caches add < 0.1 %), 4-token
  // prompts, 11 output tokens: a request lives 11 rounds. Of two clients, one sends its next
  // request as its last completes; the other runs the round that follows (unless it ended in the
  // same round, 1 / 11), which the new request waits out: 10 / 11 of a round on average. A
  // client's cycle is 11 + 10 / 11 = 131 / 11 rounds: 22 / (131 t) requests/s, time to first token
  // (1 + 10 / 11) t = 21 / 11 t, end to end 131 / 11 t, 2 x 121 / 131 = 1.847 in the batch.
  auto i = job(1, 4, 11);
  i.concurrency = 2;
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  const double t = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  EXPECT_NEAR(r.ttft.value, 21.0 / 11 * t, 0.015 * t);
  EXPECT_NEAR(r.queue.value, 10.0 / 11 * t, 0.015 * t);
  EXPECT_NEAR(r.e2e.value, 131.0 / 11 * t, 0.015 * 11 * t);
  EXPECT_NEAR(r.request_rate, 22 / (131 * t), 0.015 * 22 / (131 * t));
  EXPECT_NEAR(r.mean_running, 242.0 / 131, 1e-6);
  // Open loop with at most 2 admitted, the arrivals past the cap's rate: the cap's closed loop,
  // each held request sent as one ends: the same figures.
  i.request_rate = 1000;
  const auto capped = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_TRUE(capped.cap_bound);
  EXPECT_DOUBLE_EQ(capped.ttft.value, r.ttft.value);
  EXPECT_DOUBLE_EQ(capped.request_rate, r.request_rate);
  // With overlap scheduling the step after the one in progress is already scheduled: the wait is
  // 2 x 10 / 11 rounds, the cycle 11 + 20 / 11 = 141 / 11 rounds: time to first token 31 / 11 t,
  // 22 / (141 t) requests/s.
  i.request_rate = 0;
  i.overlap_scheduling = true;
  const auto overlap = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_NEAR(overlap.ttft.value, 31.0 / 11 * t, 0.015 * t);
  EXPECT_NEAR(overlap.request_rate, 22 / (141 * t), 0.015 * 22 / (141 * t));
  EXPECT_NEAR(overlap.mean_running, 2 * 121.0 / 141, 1e-6);
  i.overlap_scheduling = false;
  // One client finds the engine idle when it sends: no wait, its prompt's round alone.
  i.request_rate = 0;
  i.concurrency = 1;
  const auto one = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_EQ(one.queue.value, 0);
  EXPECT_NEAR(one.ttft.value, t, 0.015 * t);
  EXPECT_NEAR(one.request_rate, 1 / (11 * t), 0.015 / (11 * t));
}

TEST(InferenceInFlight, PromptsFillTheStepUpToItsTokenBudget) {
  // Prefill only (one output token) at 100 TFLOP/s, free memory and links. A 1024-token prompt of
  // Llama-2-7B costs 32 F1 + H1 = 32 x 431,644,213,248 + 262,144,000 FLOPs
  // (PipelineMicroBatchesOfUnequalSize): P = 13,812,876,967,936 -> 0.138129 s. Four clients: each
  // step takes all four prompts (4,096 of the 8,192-token budget), 4 P = 0.552515 s, which is
  // their time to first token and end to end; 4 / 0.552515 = 7.2397 requests/s.
  const llmsim::system_spec s = with_free_links(compute_bound());
  const double prompt = (32 * 431644213248.0 + 262144000.0) / 100e12;
  auto i = job(1, 1024, 1);
  i.concurrency = 4;
  const auto four = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_NEAR(four.ttft.value, 4 * prompt, 1e-4 * 4 * prompt);
  EXPECT_NEAR(four.e2e.value, 4 * prompt, 1e-4 * 4 * prompt);
  EXPECT_NEAR(four.request_rate, 1 / prompt, 1e-4 / prompt);
  EXPECT_NEAR(four.prefill_tokens_per_step, 4096, 1e-6);
  EXPECT_FALSE(four.token_budget_bound);
  // Sixteen: a step holds 8 prompts (8,192 tokens), 8 P; 8 clients wait 8 / (1 / P) = 8 P for a
  // slot, then their 8 P step: time to first token 16 P; the rate stays 1 / P.
  i.concurrency = 16;
  const auto sixteen = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_TRUE(sixteen.token_budget_bound);
  EXPECT_EQ(sixteen.running, 8);
  EXPECT_NEAR(sixteen.queue.value, 8 * prompt, 1e-4 * 8 * prompt);
  EXPECT_NEAR(sixteen.ttft.value, 16 * prompt, 1e-4 * 16 * prompt);
  EXPECT_NEAR(sixteen.request_rate, 1 / prompt, 1e-4 / prompt);
  EXPECT_NEAR(sixteen.prefill_tokens_per_step, 8192, 1e-6);
}

TEST(InferenceInFlight, APipelineKeepsOneMicroBatchPerStageInFlight) {
  // pp 2 on the bandwidth-bound system: each stage reads its 16 layers' weights, 6,476,005,376 B,
  // the head's stage also the head's 262,144,000 B (PipelineMicroBatchesTakeTurnsOnTheFullestStage
  // AtDecode): 6.738 ms. Two clients, one micro-batch each: the fullest stage serves both in turn,
  // 13.476 ms a step (a micro-batch's way through both stages is 13.214 ms). A request lives 101
  // steps; each re-sent one waits for the next micro-batch to be scheduled, a stage's half of the
  // step, unless both ended together (1 / 101): 2 / ((101 + 50 / 101) step) requests/s.
  auto i = job(1, 4, 101);
  i.pp = 2;
  i.concurrency = 2;
  const auto r = llmsim::infer(cat::llama2_7b, i, with_free_links(bandwidth_bound()));
  const double step = 2 * (16 * 202375168.0 * 2 + 262144000.0) / 1e12;
  EXPECT_NEAR(r.tpot.value, step, 0.005 * step);
  const double cycle = (101 + 50.0 / 101) * step;
  EXPECT_NEAR(r.request_rate, 2 / cycle, 0.005 * 2 / cycle);
  // The wait itself, half a step (a whole one would be 100 / 101 of it).
  EXPECT_NEAR(r.queue.value, 50.0 / 101 * r.tpot.value, 0.05 * r.tpot.value);
}

TEST(InferenceInFlight, OneClientIsAStaticBatchOfOne) {
  // One client: every round is either its prompt (its first token) or one of its decode steps, so
  // its latencies are a static batch of one's (the decode steps at the mean context, as a static
  // batch's mean step is; the prompt's round carries that client's decode token too: < 0.5 %).
  auto i = job(1, 512, 64);
  i.kernel_latency_us = 5;
  const auto one = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.concurrency = 1;
  const auto served = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_NEAR(served.ttft.value, one.ttft.value, 0.005 * one.ttft.value);
  EXPECT_NEAR(served.tpot.value, one.tpot.value, 0.005 * one.tpot.value);
  EXPECT_NEAR(served.e2e.value, one.e2e.value, 0.005 * one.e2e.value);
  EXPECT_DOUBLE_EQ(served.first_step.value, served.tpot.value);
  EXPECT_DOUBLE_EQ(served.last_step.value, served.tpot.value);
  EXPECT_EQ(served.prefill_micro_batches, 1);
  EXPECT_EQ(served.decode_micro_batches, 1);
  // Over two pipeline stages too: one sequence is one micro-batch, not one per stage.
  i.pp = 2;
  const auto piped = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.concurrency = 0;
  const auto piped_one = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_NEAR(piped.tpot.value, piped_one.tpot.value, 0.005 * piped_one.tpot.value);
  EXPECT_NEAR(piped.ttft.value, piped_one.ttft.value, 0.005 * piped_one.ttft.value);
  EXPECT_EQ(piped.decode_micro_batches, 1);
}

TEST(InferenceInFlight, ShortPromptsOfARoundShareOneAttentionKernel) {
  // 32 one-token prompts, one output token each: every round prefills all 32 (32 tokens of the
  // 8,192 budget), as a static batch of 32 does, one attention kernel over them (not 32 kernels'
  // latencies).
  auto i = job(32, 1, 1);
  i.kernel_latency_us = 5;
  const auto batch = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.concurrency = 32;
  const auto served = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_NEAR(served.ttft.value, batch.ttft.value, 0.005 * batch.ttft.value);
  EXPECT_NEAR(served.prefill_tokens_per_step, 32, 1e-9);
}

TEST(InferenceInFlight, MemoryHoldsTheRunningSequencesPagedCaches) {
  // 12 running Llama-2-7B sequences at the mean context, 512 + (64 + 1) / 2 = 544 tokens (a whole
  // number of 16-token blocks), 524,288 B a token: 3,422,552,064 B of cache.
  auto i = job(1, 512, 64);
  i.concurrency = 12;
  const auto r = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_EQ(r.running, 12);
  EXPECT_DOUBLE_EQ(r.kv_cache_bytes, 12 * 544 * 524288.0);
  EXPECT_DOUBLE_EQ(r.weight_bytes, (llama2_7b_linear_weights + llama2_7b_head_weights + 32000 * 4096.0) * 2 +
                                       (2 * 32 + 1) * 4096 * 2.0);
  EXPECT_DOUBLE_EQ(r.peak_bytes, r.weight_bytes + r.kv_cache_bytes + r.activation_bytes);
}

TEST(InferenceInFlight, ClientsSpreadOverTheReplicasInWholeNumbers) {
  // 3 clients over dp 8: three replicas serve one client each, five none. Per replica, the mean
  // rate is 3 / 8 of one client's; each request's latency is one client's.
  auto i = job(1, 512, 64);
  i.concurrency = 1;
  const auto one = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.concurrency = 3;
  i.dp = 8;
  const auto spread = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_EQ(spread.running, 1);
  EXPECT_NEAR(spread.request_rate, 3.0 / 8 * one.request_rate, 1e-12 * one.request_rate);
  EXPECT_DOUBLE_EQ(spread.e2e.value, one.e2e.value);
  // 20 over 8: four replicas of 3 clients, four of 2; the rate is their mean.
  i.concurrency = 20;
  const auto twenty = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.dp = 1;
  i.concurrency = 3;
  const double three = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm).request_rate;
  i.concurrency = 2;
  const double two = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm).request_rate;
  EXPECT_EQ(twenty.running, 3);
  EXPECT_NEAR(twenty.request_rate, (4 * three + 4 * two) / 8, 1e-12 * three);
}

TEST(InferenceInFlight, ReplicasSharingExpertsWaitForEachOthersPrompts) {
  // Mixtral 8x7B, attention over dp 2 replicas of tp 1, experts over ep 2: every MoE layer's
  // all-to-all joins the two, so a round lasts a prompt round when either carries prompt tokens.
  // 8 clients a replica, 4-token prompts, 101 output tokens: a request lives 1 + 100 rounds and
  // each replica prefills 8 x 4 / 101 tokens a round, one prompt's 4 in 8 / 101 of its rounds;
  // either of the two in 1 - (93 / 101)^2 = 0.152142 of them.
  auto i = job(1, 4, 101);
  i.dp = 2;
  i.ep = 2;
  const auto sys = bandwidth_bound();
  const auto joined = llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 8, 64);
  EXPECT_NEAR(joined.prompt_share, 8.0 / 101, 1e-12);
  EXPECT_NEAR(joined.long_share, 1 - (93.0 / 101) * (93.0 / 101), 1e-12);
  const double t1 = joined.with_prompt.time.value, t0 = joined.without.time.value;
  ASSERT_GT(t1, t0);
  EXPECT_NEAR(joined.mean_round().value, t0 + (t1 - t0) * joined.long_share, 1e-15);
  // Time per output token: the 101 rounds' mean less its own prompt round, over 100.
  EXPECT_NEAR(joined.tpot.value, (joined.mean_round().value * 101 - joined.with_prompt.first_token.value) / 100, 1e-12);
  // Experts within a replica (ep 1): the replicas run apart, each round its own.
  i.ep = 1;
  const auto apart = llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 8, 64);
  EXPECT_DOUBLE_EQ(apart.long_share, apart.prompt_share);
  // Over eight lockstep replicas (tp 1, ep 8): 1 - (93 / 101)^8 = 0.483 of the rounds.
  i.dp = 8;
  i.ep = 8;
  const auto eight = llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 8, 64);
  EXPECT_NEAR(eight.long_share, 1 - std::pow(93.0 / 101, 8), 1e-12);
  // The group is ep / tp replicas: tp 2, dp 4, ep 4 joins two; so does tp 1, dp 8, ep 2.
  for (const auto& [tp, dp, ep] : {std::array<std::int64_t, 3>{2, 4, 4}, {1, 8, 2}}) {
    i.tp = tp;
    i.dp = dp;
    i.ep = ep;
    const auto two = llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 8, 64);
    EXPECT_NEAR(two.long_share, 1 - (93.0 / 101) * (93.0 / 101), 1e-12) << tp << " " << dp << " " << ep;
  }
  // A dense model's replicas run apart whatever --ep says (no all-to-all joins them).
  i.tp = 1;
  i.dp = 8;
  i.ep = 8;
  const auto dense = llmsim::detail::in_flight(cat::llama2_7b, sys, i, 8, 64);
  EXPECT_DOUBLE_EQ(dense.long_share, dense.prompt_share);
  // Three clients over dp 8: a client's replica waits for the prompts of partners that serve one,
  // each of the other 7 with probability 2 / 7; one client of 101-round requests prefills in 1 / 101
  // of its rounds: 1 - (100 / 101) (1 - 2 / 707)^7 of the rounds last a prompt round.
  const auto sparse = llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 1, 64, false, 2.0 / 7);
  EXPECT_NEAR(sparse.long_share, 1 - (100.0 / 101) * std::pow(1 - 2.0 / 707, 7), 1e-12);
  // End to end the closed loop of 3 clients over dp 8 is that state's, each client re-sending.
  i.concurrency = 3;
  const auto three = llmsim::infer(cat::mixtral_8x7b, i, sys);
  EXPECT_DOUBLE_EQ(
      three.tpot.value,
      llmsim::detail::in_flight(cat::mixtral_8x7b, sys, i, 1, three.offline_batch, true, 2.0 / 7).tpot.value);
}

TEST(InferenceInFlight, OfflineIsInFlightBatchingOfAsManyAsFit) {
  // The offline figure is the in-flight steady state at the largest batch B that fits, every slot
  // refilled from the engine's own queue as it frees (no client to wait for).
  auto i = job(8, 512, 64);
  const auto r = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  ASSERT_GT(r.offline_batch, 8);
  const auto batch = static_cast<double>(r.offline_batch);
  const auto full = llmsim::detail::in_flight(cat::llama2_7b, cat::a100_sxm, i, batch, r.offline_batch);
  EXPECT_DOUBLE_EQ(full.running, batch);
  EXPECT_DOUBLE_EQ(r.offline_output_tok_s_per_gpu, full.request_rate * 64);
  // B closed-loop clients instead each re-send as their last request completes and wait out the
  // round in progress: a request lives 64 rounds (its prompt's, 63 decode), so B x 64 / 65 of them
  // run on average (all others ending in the same round: 64^-(B-1), nil), fewer output tokens.
  i.concurrency = r.offline_batch;
  const auto in_flight = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_NEAR(in_flight.mean_running, batch * 64 / 65, 1e-9 * batch);
  EXPECT_LT(in_flight.output_tok_s_per_gpu, r.offline_output_tok_s_per_gpu);
  EXPECT_NEAR(in_flight.request_rate * in_flight.e2e.value, batch, 1e-9 * batch);
  EXPECT_TRUE(in_flight.fits);
  // A static batch reports no in-flight figures.
  EXPECT_FALSE(r.in_flight);
  EXPECT_EQ(r.running, 0);
}

TEST(InferenceOpenLoop, ArrivalsBelowCapacityCompleteAtTheirRate) {
  // Bandwidth-bound Llama-2-7B, 4-token prompts and 11 output tokens, as in
  // ClientsShareStepsThatReadTheWeightsOnce: every round reads the weights once, t = W = 13.214 ms
  // (+ < 1 % of caches for a few running). A request lives 11 rounds; arriving (Poisson, 20 a
  // second) it finds a round running with probability 1 - e^-N (N requests in the system, M/G/inf)
  // and waits its residual, t / 2 for rounds of one length: w = (1 - e^-N) t / 2, e2e = 11 t + w,
  // N = 20 e2e (Little). Fixed point: N = 3.05, w = 0.476 t.
  auto i = job(1, 4, 11);
  i.request_rate = 20;
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  const double t = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  double n = 0, wait = 0;
  for (int k = 0; k < 100; ++k) {
    wait = (1 - std::exp(-n)) * t / 2;
    n = 20 * (11 * t + wait);
  }
  EXPECT_TRUE(r.in_flight);
  EXPECT_FALSE(r.saturated);
  EXPECT_DOUBLE_EQ(r.request_rate, 20);
  EXPECT_DOUBLE_EQ(r.output_tok_s, 220);
  EXPECT_NEAR(r.queue.value, wait, 0.015 * wait);
  EXPECT_NEAR(r.ttft.value, t + wait, 0.015 * (t + wait));
  EXPECT_NEAR(r.tpot.value, t, 0.015 * t);
  EXPECT_NEAR(r.e2e.value, 11 * t + wait, 0.015 * (11 * t + wait));
  // No slot binds: every request in the system is in the batch, N of them on average.
  EXPECT_NEAR(r.in_system, n, 0.015 * n);
  EXPECT_NEAR(r.mean_running, r.in_system, 1e-6 * n);
  // Little's law holds exactly: the requests in the system are the rate times their stay.
  EXPECT_NEAR(r.in_system, 20 * r.e2e.value, 1e-9 * n);
  // Spread over dp 2 at twice the rate, each replica serves the same 20 a second.
  i.dp = 2;
  i.request_rate = 40;
  const auto two = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_DOUBLE_EQ(two.request_rate, 20);
  EXPECT_DOUBLE_EQ(two.e2e.value, r.e2e.value);
}

TEST(InferenceOpenLoop, FewArrivalsAreServedAsIfAlone) {
  // One request a million seconds: it finds the server idle and no one beside it, so its
  // latencies are one client's alone (a closed loop of one).
  auto i = job(1, 512, 64);
  i.kernel_latency_us = 5;
  i.concurrency = 1;
  const auto alone = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  i.concurrency = 0;
  i.request_rate = 1e-6;
  const auto open = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_NEAR(open.ttft.value, alone.ttft.value, 1e-5 * alone.ttft.value);
  EXPECT_NEAR(open.tpot.value, alone.tpot.value, 1e-5 * alone.tpot.value);
  EXPECT_NEAR(open.e2e.value, alone.e2e.value, 1e-5 * alone.e2e.value);
  EXPECT_DOUBLE_EQ(open.request_rate, 1e-6);
}

TEST(InferenceOpenLoop, TheWaitIsTheResidualOfTheStepInProgress) {
  // Compute-bound, 4-token prompts, 3 output tokens: one request alone runs a prompt round t1 and
  // two decode rounds t0 (the prompt's pass is launched kernel by kernel, 387 launches of 4 us:
  // t1 = 1.55 ms; a decode step replays a CUDA graph, t0 = 0.13 ms). At N = 1e-3 requests in the system
  // an arrival finds one other with probability ~N, in a prompt round a third of the time: its
  // wait is N E[t^2] / (2 E[t]), p = 1/3: N (p t1^2 + (1 - p) t0^2) / (2 (p t1 + (1 - p) t0)),
  // 0.67 ms x N. Half a mean round would be 0.30 ms x N, the shares swapped 0.75 ms x N.
  const llmsim::system_spec s = with_free_links(compute_bound());
  auto i = job(1, 4, 3);
  i.concurrency = 1;
  const auto alone = llmsim::infer(cat::llama2_7b, i, s);
  const double t1 = alone.ttft.value, t0 = alone.tpot.value;
  ASSERT_GT(t1, 3 * t0);
  i.concurrency = 0;
  i.request_rate = 1e-3 / alone.e2e.value;
  const auto r = llmsim::infer(cat::llama2_7b, i, s);
  const double n = r.in_system, p = 1.0 / 3;
  const double residual = (p * t1 * t1 + (1 - p) * t0 * t0) / (2 * (p * t1 + (1 - p) * t0));
  EXPECT_NEAR(n, 1e-3, 1e-5);
  EXPECT_NEAR(r.queue.value, n * residual, 0.005 * n * residual);
  // With overlap scheduling it also waits the round already scheduled after it, the mean round.
  i.overlap_scheduling = true;
  const auto overlap = llmsim::infer(cat::llama2_7b, i, s);
  const double wait = residual + p * t1 + (1 - p) * t0;
  EXPECT_NEAR(overlap.queue.value, overlap.in_system * wait, 0.005 * n * wait);
}

TEST(InferenceOpenLoop, PrefillRoundsTakeEveryPromptBesideTheArrival) {
  // Prefill only at 100 TFLOP/s (PromptsFillTheStepUpToItsTokenBudget): a round of k 1024-token
  // prompts takes k P, P = 0.138129 s, and a request's stay is its one round. With K ~ Poisson(N)
  // others it shares a round of (1 + K) P, after the round in progress, K P / 2 on average: e2e =
  // (1 + N) P + N P / 2. Arriving at 1 / (4 P) a second: N = e2e / (4 P), so N = 0.4, e2e =
  // 1.6 P, also the time to first token (its one token). (A round holds 8 prompts at most, 8,192
  // tokens: 1e-8 of the arrivals find 8 others.)
  const llmsim::system_spec s = with_free_links(compute_bound());
  const double prompt = (32 * 431644213248.0 + 262144000.0) / 100e12;
  auto i = job(1, 1024, 1);
  i.request_rate = 1 / (4 * prompt);
  const auto r = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_FALSE(r.saturated);
  EXPECT_NEAR(r.in_system, 0.4, 1e-3 * 0.4);
  EXPECT_NEAR(r.e2e.value, 1.6 * prompt, 1e-3 * prompt);
  EXPECT_NEAR(r.ttft.value, 1.6 * prompt, 1e-3 * prompt);
  EXPECT_NEAR(r.queue.value, 0.2 * prompt, 1e-3 * prompt);
  // Steps run while requests are in, K >= 1 of them, each step all K prompts: 1024 E[K | K >= 1]
  // = 1024 N / (1 - e^-N) prompt tokens a step.
  EXPECT_NEAR(r.prefill_tokens_per_step, 1024 * 0.4 / (1 - std::exp(-0.4)), 1e-3 * 1024);
  // The slots complete 1 / P a second: 8 prompts (8,192 tokens) a round of 8 P. At 0.99 / P the
  // queue is long but finite: more requests in the system than the 8 in the batch.
  i.request_rate = 0.99 / prompt;
  const auto near = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_FALSE(near.saturated);
  EXPECT_DOUBLE_EQ(near.request_rate, 0.99 / prompt);
  EXPECT_LE(near.mean_running, 8 + 1e-9);
  EXPECT_GT(near.in_system, 20);
  EXPECT_GT(near.queue.value, 10 * prompt);
  // At 1 / P and past it, 10 a second (> 7.24): saturated. The rate is the slots' and the
  // latencies leave out the queue, which grows without bound: one full round.
  for (const double rate : {1 / prompt, 10.0}) {
    i.request_rate = rate;
    const auto over = llmsim::infer(cat::llama2_7b, i, s);
    EXPECT_TRUE(over.saturated) << rate;
    EXPECT_NEAR(over.request_rate, 1 / prompt, 1e-4 / prompt);
    EXPECT_NEAR(over.ttft.value, 8 * prompt, 1e-4 * 8 * prompt);
    EXPECT_EQ(over.queue.value, 0);
    EXPECT_EQ(over.running, 8);
  }
  // With at most 4 admitted (--max-concurrency) the same arrivals hold 4 requests: the closed
  // loop of 4 clients (4 P a round, 1 / P a second), not saturated.
  i.concurrency = 4;
  const auto capped = llmsim::infer(cat::llama2_7b, i, s);
  i.request_rate = 0;
  const auto four = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_FALSE(capped.saturated);
  EXPECT_TRUE(capped.cap_bound) << "the cap admits fewer than arrive";
  EXPECT_DOUBLE_EQ(capped.request_rate, four.request_rate);
  EXPECT_DOUBLE_EQ(capped.ttft.value, four.ttft.value);
  EXPECT_NEAR(capped.ttft.value, 4 * prompt, 1e-4 * 4 * prompt);
  // Below the cap's rate the arrivals' own rate completes, at most 4 admitted, each served
  // faster than in the full closed loop.
  i.request_rate = 1 / (2 * prompt);
  const auto under = llmsim::infer(cat::llama2_7b, i, s);
  EXPECT_DOUBLE_EQ(under.request_rate, 1 / (2 * prompt));
  EXPECT_FALSE(under.cap_bound);
  EXPECT_LE(under.in_system, 4);
  EXPECT_NEAR(under.in_system, under.request_rate * under.e2e.value, 1e-9);
  EXPECT_LT(under.e2e.value, four.e2e.value);
}

TEST(InferenceOpenLoop, LatencyGrowsWithTheRate) {
  // Over a pipeline too, where the closed loop's micro-batch split is not monotone in the
  // clients: averaged over the Poisson count, more arrivals never serve a request faster.
  auto i = job(1, 1024, 128);
  i.pp = 4;
  double previous = 0;
  for (const double rate : {0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0}) {
    i.request_rate = rate;
    const auto r = llmsim::infer(cat::llama3_8b, i, cat::h100_sxm);
    ASSERT_FALSE(r.saturated) << rate;
    EXPECT_GT(r.e2e.value, previous) << rate;
    previous = r.e2e.value;
  }
}

TEST(InferenceOpenLoop, OneSlotQueuesLikeASingleServer) {
  // One slot (--max-running 1), bandwidth-bound rounds of t = W: a request's stay alone is 11 t
  // (4-token prompt, 11 output tokens), X = 1 / (11 t). Finding K others it queues behind them,
  // K x 11 t, and enters as one leaves, at a step's end (no step in progress to wait for): e2e =
  // 11 t (1 + N), N = Q e2e. At Q = X / 2: N = 1, e2e = 22 t, the time to first token 12 t.
  auto i = job(1, 4, 11);
  i.max_running = 1;
  const double t = (llama2_7b_linear_weights + llama2_7b_head_weights) * 2 / 1e12;
  i.request_rate = 1 / (22 * t);
  const auto r = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  EXPECT_NEAR(r.in_system, 1, 0.015);
  EXPECT_NEAR(r.e2e.value, 22 * t, 0.015 * 22 * t);
  EXPECT_NEAR(r.ttft.value, 12 * t, 0.015 * 12 * t);
  EXPECT_NEAR(r.queue.value, 11 * t, 0.015 * 11 * t);
  EXPECT_LE(r.mean_running, 1 + 1e-12);
  EXPECT_NEAR(r.in_system, r.request_rate * r.e2e.value, 1e-9);
}

TEST(InferenceOpenLoop, ACapSpreadsOverTheReplicasInWholeNumbers) {
  // At most 3 admitted over dp 2: one replica admits 2, the other 1. Arrivals past both caps'
  // rates keep each at its closed loop: the replicas' mean rate is that of 2 and 1 clients.
  auto i = job(1, 512, 64);
  i.concurrency = 2;
  const double two = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm).request_rate;
  i.concurrency = 1;
  const double one = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm).request_rate;
  i.concurrency = 3;
  i.dp = 2;
  i.request_rate = 100;
  const auto r = llmsim::infer(cat::llama2_7b, i, cat::a100_sxm);
  EXPECT_FALSE(r.saturated);
  EXPECT_TRUE(r.cap_bound);
  EXPECT_NEAR(r.request_rate, (two + one) / 2, 1e-12 * two);
  // Its running, memory and requests in the system are the fuller replica's: 2.
  EXPECT_DOUBLE_EQ(r.in_system, 2);
  EXPECT_EQ(r.running, 2);
  // A cap below the replicas leaves replicas admitting none: refused.
  i.concurrency = 1;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.concurrency");
}

TEST(InferenceOpenLoop, ArrivalsJustUnderACapsRateAreServedAtTheirRate) {
  // A cap admits at most 8: however close the arrivals come to the cap's closed-loop rate X, they
  // complete at their own rate, never saturate (a cap bounds the queue) and hold at most 8. The
  // arrivals the cap holds are sent as requests end, as the closed loop's are: the latencies grow
  // with the rate up to the cap's closed loop, with no step at the cap. The same with the cap
  // above the slots (105 admitted, 100 a step), where the held requests also queue for a slot.
  struct capped_job {
    std::int64_t input, output, cap, slots;
  };
  for (const capped_job c : {capped_job{512, 64, 8, 0}, capped_job{4, 11, 105, 100}}) {
    auto i = job(1, c.input, c.output);
    i.concurrency = c.cap;
    i.max_running = c.slots;
    const auto closed = llmsim::infer(cat::llama3_8b, i, cat::h100_sxm);
    const double x = closed.request_rate;
    double ttft = 0, e2e = 0;
    for (const double share : {0.9, 0.99, 0.995, 0.999, 0.9999}) {
      i.request_rate = share * x;
      const auto r = llmsim::infer(cat::llama3_8b, i, cat::h100_sxm);
      EXPECT_FALSE(r.saturated) << c.cap << " " << share;
      EXPECT_DOUBLE_EQ(r.request_rate, share * x) << c.cap << " " << share;
      EXPECT_LE(r.in_system, static_cast<double>(c.cap)) << c.cap << " " << share;
      EXPECT_GE(r.ttft.value, ttft) << c.cap << " " << share;
      EXPECT_GE(r.e2e.value, e2e) << c.cap << " " << share;
      ttft = r.ttft.value;
      e2e = r.e2e.value;
    }
    EXPECT_LE(ttft, closed.ttft.value * (1 + 1e-3)) << c.cap;
    EXPECT_NEAR(e2e, closed.e2e.value, 0.01 * closed.e2e.value) << c.cap;
  }
}

TEST(InferenceInFlight, APromptsFirstTokenWaitsForItsStagesLaunches) {
  // At 1 ms a launch, one client's eager prompt pass is bounded by its launches: on one stage
  // every kernel in turn (387 ms, ~ 0.39 s); over 4 stages each stage's host launches its quarter
  // side by side (launch_bound: NCCL receives queued on the stream), 97.5 ms with the stages'
  // point-to-point kernels. Its decode steps without CUDA graphs are a static batch of one's.
  auto i = job(1, 4, 64);
  i.host_launch_us = 1000;
  i.cuda_graphs = false;
  i.concurrency = 1;
  const auto one = llmsim::infer(cat::llama2_7b, i, bandwidth_bound());
  i.pp = 4;
  const auto four = llmsim::infer(cat::llama2_7b, i, with_free_links(bandwidth_bound()));
  i.concurrency = 0;
  const auto batch_of_one = llmsim::infer(cat::llama2_7b, i, with_free_links(bandwidth_bound()));
  ASSERT_GT(one.ttft.value, 0.3);
  EXPECT_NEAR(four.ttft.value, one.ttft.value / 4, 0.03 * one.ttft.value / 4);
  EXPECT_NEAR(four.ttft.value, batch_of_one.ttft.value, 0.005 * batch_of_one.ttft.value);
  EXPECT_NEAR(four.tpot.value, batch_of_one.tpot.value, 0.005 * batch_of_one.tpot.value);
  EXPECT_NEAR(four.e2e.value, batch_of_one.e2e.value, 0.005 * batch_of_one.e2e.value);
}

TEST(InferenceOpenLoop, TheRateIsChecked) {
  auto i = job(1, 16, 4);
  for (const double bad : {-1.0, 2e9, std::nan("")}) {
    i.request_rate = bad;
    EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.request_rate") << bad;
  }
}

TEST(Inference, MoeDecodeGrowsSmoothlyWithTheBatch) {
  // A decode batch spreads its tokens' top-k rows over the experts it activates: Qwen3-30B-A3B
  // (128 experts, top 8) at 31 sequences gives 248 rows over 128 x (1 - (15/16)^31) = 109.5
  // experts, 2.26 each; at 32, 256 over 111.8, 2.29. The grouped GEMMs' per-expert overhead rows
  // (kernel_model.hpp, m0) weigh the same, so one more sequence costs little more (before, 248 / 128
  // truncated to 1 row an expert priced 31 sequences 56 % slower than 32).
  double previous = 0;
  for (std::int64_t b = 24; b <= 40; ++b) {
    const double t = llmsim::infer(cat::qwen3_30b_a3b, job(b, 2048, 3), cat::h100_sxm).tpot.value;
    if (previous > 0) {
      EXPECT_GE(t, previous) << "batch " << b;
      EXPECT_LT(t, 1.03 * previous) << "batch " << b;
    }
    previous = t;
  }
}

TEST(Inference, RefusalsNameTheField) {
  auto i = job(1, 16, 2);
  i.tp = 3;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.tp");
  i = job(0, 16, 2);
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.batch");
  i = job(1, 16, 0);
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.output_len");
  i = job(1, 16, 2);
  i.weights = llmsim::weight_format::fp8;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.weights") << "A100 has no FP8";
  i = job(1, 16, 2);
  i.activations = llmsim::activation_format::fp8;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::h100_sxm), "inference.activations");
  i = job(1, 16, 2);
  i.ep = 3;
  EXPECT_EQ(refused_field(cat::mixtral_8x7b, i, cat::h100_sxm), "inference.ep");
  i = job(1, 16, 2);
  i.pp = 33;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.pp");
  i = job(1, 16, 2);
  i.memory_fraction = 0;
  EXPECT_EQ(refused_field(cat::llama2_7b, i, cat::a100_sxm), "inference.memory_fraction");
}

TEST(Inference, TrainingEstimatesIgnoreTheInferenceHooks) {
  // The programs' inference branches are taken only with build_context::inference set.
  llmsim::strategy_spec s{};
  ASSERT_TRUE(cat::parse_strategy_name("tp2_pp1_dp4_mbs1_mbc8", s));
  s.seq_len = 4096;
  const auto a = llmsim::estimate(cat::llama3_8b, s, cat::h100_sxm);
  (void)llmsim::infer(cat::llama3_8b, job(4, 512, 8), cat::h100_sxm);
  const auto b = llmsim::estimate(cat::llama3_8b, s, cat::h100_sxm);
  EXPECT_EQ(a.cost.duration_time_per_iter.value, b.cost.duration_time_per_iter.value);
}

// ---- the validation adapter -----------------------------------------------------------------

TEST(InferenceCases, NamesMatchWithoutCasePunctuationOrNotes) {
  namespace ic = llmsim::json::inference_cases;
  EXPECT_EQ(ic::normalized_name("Llama-2-7B"), "llama27b");
  EXPECT_EQ(ic::normalized_name("GPT-20B (GPT-style, FT example config)"), "gpt20b");
  EXPECT_EQ(ic::normalized_name("GPT-6.7B"), "gpt67b");
  EXPECT_EQ(ic::normalized_name("llama2-7b"), ic::normalized_name("Llama 2 7B"));
}

TEST(InferenceCases, RowMapsToModelSystemPrecisionAndShape) {
  namespace lj = llmsim::json;
  const auto recipes = lj::read_file(llmsim_test::source_dir() / "configs" / "inference" / "validation.json");
  const lj::value row = {{"id", "X1"},
                         {"model", "Llama-2-70B"},
                         {"gpu", "NVIDIA H100 SXM 80GB"},
                         {"precision_weights", "INT4 weight-only, group size 64"},
                         {"precision_activations", "BF16"},
                         {"precision_kv", "FP8"},
                         {"tp", 4},
                         {"batch_size", 8},
                         {"isl", 100},
                         {"osl", 20},
                         {"tpot_ms", 20.0}};
  // NVFP4 checkpoints run W4A4 on FP4 tensor cores (a B200) unless the row says otherwise, weight-only
  // on this H100; "FP4" alone is NVFP4; MXFP4 weight-only.
  using precision = std::tuple<const char*, const char*, const char*, llmsim::weight_format, llmsim::activation_format>;
  for (const auto& [gpu, weights, activations, w, a] :
       {precision{"B200", "NVFP4", nullptr, llmsim::weight_format::nvfp4, llmsim::activation_format::fp4},
        precision{"H100", "NVFP4", nullptr, llmsim::weight_format::nvfp4, llmsim::activation_format::bf16},
        precision{"B200", "FP4", "FP4", llmsim::weight_format::nvfp4, llmsim::activation_format::fp4},
        precision{"B200", "NVFP4", "BF16", llmsim::weight_format::nvfp4, llmsim::activation_format::bf16},
        precision{"B200", "MXFP4", nullptr, llmsim::weight_format::mxfp4, llmsim::activation_format::bf16}}) {
    lj::value fp4 = row;
    fp4["gpu"] = gpu;
    fp4["precision_weights"] = weights;
    fp4["precision_activations"] = activations == nullptr ? lj::value(nullptr) : lj::value(activations);
    const auto j = lj::inference_cases::map_row(fp4, recipes);
    ASSERT_TRUE(j.refused.empty()) << j.refused;
    EXPECT_EQ(j.spec.weights, w) << weights;
    EXPECT_EQ(j.spec.activations, a) << weights;
  }
  const auto job = lj::inference_cases::map_row(row, recipes);
  ASSERT_TRUE(job.refused.empty()) << job.refused;
  EXPECT_EQ(job.model_name, "llama2-70b");
  EXPECT_EQ(job.system_name, "h100-sxm");
  EXPECT_EQ(job.spec.weights, llmsim::weight_format::int4);
  EXPECT_EQ(job.spec.int4_group_size, 64);
  EXPECT_EQ(job.spec.kv_cache, llmsim::kv_cache_format::fp8);
  EXPECT_EQ(job.spec.tp, 4);
  EXPECT_EQ(job.spec.batch, 8);
  EXPECT_EQ(job.spec.output_len, 20);
  const auto r = lj::inference_cases::estimate_row(row, recipes, {"tpot_ms", "ttft_ms"});
  ASSERT_TRUE(r.estimated()) << r.error;
  ASSERT_EQ(r.metrics.size(), 1U) << "only the figures the row prints";
  EXPECT_DOUBLE_EQ(r.metrics[0].predicted, r.result.tpot.value * 1e3);
  lj::value unknown = row;
  unknown["model"] = "Nonesuch 9B";
  EXPECT_NE(lj::inference_cases::map_row(unknown, recipes).refused.find("Nonesuch 9B"), std::string::npos);
  lj::value sizes = row;
  sizes["tp"] = "4";
  EXPECT_NE(lj::inference_cases::map_row(sizes, recipes).refused.find("tp must be a positive integer"),
            std::string::npos)
      << "a malformed size is refused, not replaced by 1";
  sizes = row;
  sizes["precision_activations"] = "INT8";
  EXPECT_NE(lj::inference_cases::map_row(sizes, recipes).refused.find("not modelled"), std::string::npos);
  unknown = row;
  unknown["gpu"] = "TPU v5e";
  EXPECT_NE(lj::inference_cases::map_row(unknown, recipes).refused.find("TPU v5e"), std::string::npos);
  unknown = row;
  unknown["model"] = 7;
  EXPECT_EQ(lj::inference_cases::map_row(unknown, recipes).refused, "model must be the model's name (a string), got 7");
  // A precision text that names no format is refused, not read as 16-bit; a missing one is 16-bit.
  for (const char* key : {"precision_kv", "precision_activations"}) {
    sizes = row;
    sizes[key] = "QQQ";
    EXPECT_NE(lj::inference_cases::map_row(sizes, recipes).refused.find(std::string(key) + " \"QQQ\" is not"),
              std::string::npos)
        << key;
    sizes[key] = nullptr;
    EXPECT_TRUE(lj::inference_cases::map_row(sizes, recipes).refused.empty()) << key;
  }
  // A printed figure that is not a positive number refuses the row (it is not a 0 % figure).
  for (const lj::value& bad : {lj::value("20"), lj::value(-20.0), lj::value(0)}) {
    lj::value figure = row;
    figure["tpot_ms"] = bad;
    const auto refused = lj::inference_cases::estimate_row(figure, recipes, {"tpot_ms", "ttft_ms"});
    EXPECT_EQ(refused.error, "tpot_ms must be a positive number, got " + bad.dump());
    EXPECT_TRUE(refused.metrics.empty());
  }
  // ... and a row with no figure llmsim predicts is not estimated either.
  const auto none = lj::inference_cases::estimate_row(row, recipes, {"ttft_p99_ms"});
  EXPECT_EQ(none.error, "the row states none of the figures llmsim predicts (metric_fields)");
}

TEST(InferenceCases, ConcurrencyRowsAreServedInFlight) {
  // A serving benchmark's row: 64 clients over dp 2 (32 a replica), at most 48 running a replica;
  // its rates are the in-flight steady state's, every replica's together.
  namespace lj = llmsim::json;
  const auto recipes = lj::read_file(llmsim_test::source_dir() / "configs" / "inference" / "validation.json");
  const lj::value row = {{"id", "X2"},
                         {"model", "Llama-2-7B"},
                         {"gpu", "NVIDIA H100 SXM 80GB"},
                         {"precision_weights", "BF16"},
                         {"tp", 2},
                         {"dp", 2},
                         {"concurrency", 64},
                         {"max_batch_size", 48},
                         {"isl", 1000},
                         {"osl", 200},
                         {"output_tok_s_total", 5000.0},
                         {"request_throughput_req_s", 25.0},
                         {"input_tok_s", 25000.0},
                         {"total_tok_s", 30000.0},
                         {"output_tok_s_per_node", 10000.0},
                         {"ttft_ms", 100.0},
                         {"tpot_ms", 20.0}};
  const auto job = lj::inference_cases::map_row(row, recipes);
  ASSERT_TRUE(job.refused.empty()) << job.refused;
  EXPECT_EQ(job.spec.concurrency, 64);
  EXPECT_EQ(job.spec.max_running, 48);
  const auto r = lj::inference_cases::estimate_row(row, recipes,
                                                   {"output_tok_s_total", "request_throughput_req_s", "input_tok_s",
                                                    "total_tok_s", "output_tok_s_per_node", "ttft_ms", "tpot_ms"});
  ASSERT_TRUE(r.estimated()) << r.error;
  ASSERT_EQ(r.metrics.size(), 7U);
  inference_spec i;
  i.tp = 2;
  i.dp = 2;
  i.input_len = 1000;
  i.output_len = 200;
  i.concurrency = 64;
  i.max_running = 48;
  const auto lib = llmsim::infer(cat::llama2_7b, i, cat::h100_sxm);
  ASSERT_TRUE(lib.in_flight);
  EXPECT_EQ(lib.running, 32) << "64 clients over 2 replicas, under the 48 slots";
  EXPECT_DOUBLE_EQ(r.metrics[0].predicted, lib.output_tok_s * 2);
  EXPECT_DOUBLE_EQ(r.metrics[1].predicted, lib.request_rate * 2);
  EXPECT_DOUBLE_EQ(r.metrics[2].predicted, lib.request_rate * 2 * 1000);
  EXPECT_DOUBLE_EQ(r.metrics[3].predicted, lib.request_rate * 2 * 1200);
  // A node of 8 H100s holds 4 replicas of 2 GPUs.
  EXPECT_DOUBLE_EQ(r.metrics[4].predicted, lib.output_tok_s * 4);
  EXPECT_DOUBLE_EQ(r.metrics[5].predicted, lib.ttft.value * 1e3);
  EXPECT_DOUBLE_EQ(r.metrics[6].predicted, lib.tpot.value * 1e3);
  // A whole set of requests offered at once (benchmark_throughput) to max_batch_size slots.
  lj::value offline = row;
  offline.erase("concurrency");
  offline["num_requests"] = 1000;
  EXPECT_EQ(lj::inference_cases::map_row(offline, recipes).spec.concurrency, 1000);
  // ... its rates compared, not its latencies (each request waits its turn in the set).
  const auto set = lj::inference_cases::estimate_row(offline, recipes, {"output_tok_s_total", "ttft_ms", "tpot_ms"});
  ASSERT_TRUE(set.estimated()) << set.error;
  ASSERT_EQ(set.metrics.size(), 1U);
  EXPECT_EQ(set.metrics[0].name, "output_tok_s_total");
  // In flight without an output length: refused.
  lj::value no_osl = row;
  no_osl.erase("osl");
  EXPECT_EQ(lj::inference_cases::map_row(no_osl, recipes).refused,
            "the row serves requests in flight but states no osl");
  // Neither a batch nor clients: refused, naming what is missing.
  offline.erase("max_batch_size");
  EXPECT_EQ(lj::inference_cases::map_row(offline, recipes).refused,
            "the row states no batch_size, concurrency, request_rate_qps, or num_requests with max_batch_size");
}

TEST(InferenceCases, RequestRateRowsAreServedOpenLoop) {
  // A benchmark_serving --request-rate row: arrivals at 2 a second over dp 2 (1 a replica), its
  // latencies and rates those of the open loop; with a concurrency, that caps the requests in flight.
  namespace lj = llmsim::json;
  const auto recipes = lj::read_file(llmsim_test::source_dir() / "configs" / "inference" / "validation.json");
  lj::value row = {{"id", "X3"},
                   {"model", "Llama-2-7B"},
                   {"gpu", "NVIDIA H100 SXM 80GB"},
                   {"precision_weights", "BF16"},
                   {"tp", 2},
                   {"dp", 2},
                   {"request_rate_qps", 2.0},
                   {"isl", 1000},
                   {"osl", 200},
                   {"output_tok_s_total", 400.0},
                   {"ttft_ms", 50.0},
                   {"tpot_ms", 10.0}};
  const auto job = lj::inference_cases::map_row(row, recipes);
  ASSERT_TRUE(job.refused.empty()) << job.refused;
  EXPECT_DOUBLE_EQ(job.spec.request_rate, 2.0);
  EXPECT_EQ(job.spec.concurrency, 0);
  const auto r = lj::inference_cases::estimate_row(row, recipes, {"output_tok_s_total", "ttft_ms", "tpot_ms"});
  ASSERT_TRUE(r.estimated()) << r.error;
  ASSERT_EQ(r.metrics.size(), 3U);
  inference_spec i;
  i.tp = 2;
  i.dp = 2;
  i.input_len = 1000;
  i.output_len = 200;
  i.request_rate = 2;
  const auto lib = llmsim::infer(cat::llama2_7b, i, cat::h100_sxm);
  EXPECT_DOUBLE_EQ(r.metrics[0].predicted, 2.0 * 200) << "below capacity the arrivals' rate completes";
  EXPECT_DOUBLE_EQ(r.metrics[1].predicted, lib.ttft.value * 1e3);
  EXPECT_DOUBLE_EQ(r.metrics[2].predicted, lib.tpot.value * 1e3);
  row["concurrency"] = 16;
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.concurrency, 16);
  // Arrivals past what the slots complete: the rates and a full batch's steps are compared, not
  // the time to first token (the queue before it grows with the run's length).
  row.erase("concurrency");
  row["request_rate_qps"] = 1e6;
  const auto over = lj::inference_cases::estimate_row(row, recipes, {"output_tok_s_total", "ttft_ms", "tpot_ms"});
  ASSERT_TRUE(over.estimated()) << over.error;
  EXPECT_TRUE(over.result.saturated);
  ASSERT_EQ(over.metrics.size(), 2U);
  EXPECT_EQ(over.metrics[0].name, "output_tok_s_total");
  EXPECT_EQ(over.metrics[1].name, "tpot_ms");
  // "inf" is every request at once, no rate: the row then needs clients or a set with slots.
  row["request_rate_qps"] = "inf";
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).refused,
            "the row states no batch_size, concurrency, request_rate_qps, or num_requests with max_batch_size");
  row["request_rate_qps"] = -1;
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).refused,
            "request_rate_qps must be a positive number of requests/s, got -1");
}

TEST(InferenceCases, FrameworkVersionDecidesHowDecodeReadsAGroupedCache) {
  // The recipes' decode_attention rule: TensorRT-LLM v0.5 / v0.6 rows decode with the per-head
  // masked MHA kernel; a later release, another framework, or none read once per KV head.
  namespace lj = llmsim::json;
  const auto recipes = lj::read_file(llmsim_test::source_dir() / "configs" / "inference" / "validation.json");
  lj::value row = {{"id", "X2"},
                   {"model", "Llama-2-70B"},
                   {"gpu", "H100 SXM"},
                   {"precision_weights", "FP16"},
                   {"tp", 4},
                   {"batch_size", 8},
                   {"isl", 100},
                   {"osl", 20},
                   {"framework", "TensorRT-LLM (gptSessionBenchmark, static batching)"},
                   {"framework_version", "v0.6.1"}};
  using kind = llmsim::gqa_decode_read_kind;
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_query_head);
  row["framework_version"] = "v0.5 (doc: \"The following data is from TensorRT-LLM v0.5\")";
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_query_head);
  row["framework_version"] = "v0.7.1";
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_kv_head);
  row["framework"] = "vLLM";
  row["framework_version"] = "v0.6.1";
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_kv_head);
  EXPECT_TRUE(lj::inference_cases::map_row(row, recipes).spec.cuda_graphs);
  row.erase("framework");
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_kv_head);
  // FasterTransformer rows split a pipeline's batch its own way; others one micro-batch a stage.
  using split = llmsim::pipeline_micro_batching;
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.micro_batching, split::per_stage);
  row["framework"] = "FasterTransformer";
  row["framework_version"] = "not stated";
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.micro_batching, split::fastertransformer);
  // ... at the v5.0 betas' token limit, under which the Megatron-530B table's pipeline column was
  // measured, launching each kernel from the host.
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.micro_batch_token_limit, 2048);
  EXPECT_FALSE(lj::inference_cases::map_row(row, recipes).spec.cuda_graphs);
  lj::value launch = recipes;
  launch["kernel_launch"][0]["cuda_graphs"] = "no";
  EXPECT_EQ(lj::inference_cases::map_row(row, launch).refused,
            "recipe kernel_launch.cuda_graphs must be true or false");
  lj::value zero = recipes;
  zero["pipeline_micro_batching"][0]["micro_batch_token_limit"] = 0;
  EXPECT_EQ(lj::inference_cases::map_row(row, zero).refused,
            "recipe pipeline_micro_batching.micro_batch_token_limit=0 must be a positive integer");
  EXPECT_EQ(lj::inference_cases::map_row(row, recipes).spec.gqa_decode_reads, kind::per_kv_head);
  lj::value unknown = recipes;
  unknown["pipeline_micro_batching"][0]["micro_batching"] = "round_robin";
  EXPECT_EQ(lj::inference_cases::map_row(row, unknown).refused,
            "recipe pipeline_micro_batching.micro_batching=\"round_robin\" must be per_stage or fastertransformer");
  // A recipe naming no such reading is refused with the field and the rule.
  lj::value bad = recipes;
  bad["decode_attention"][0]["gqa_decode_reads"] = "per_token";
  row["framework"] = "TensorRT-LLM";
  row["framework_version"] = "v0.6.1";
  EXPECT_EQ(lj::inference_cases::map_row(row, bad).refused,
            "recipe decode_attention.gqa_decode_reads=\"per_token\" must be per_kv_head or per_query_head");
}

TEST(InferenceCases, EveryVisibleRowIsEstimated) {
  const auto file = llmsim_test::shared_dir() / "validation" / "inference_cases.json";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file << " (tests that read ../shared skip)";
  namespace lj = llmsim::json;
  const auto doc = lj::read_file(file);
  const auto recipes = lj::read_file(llmsim_test::source_dir() / "configs" / "inference" / "validation.json");
  std::vector<std::string> metrics;
  for (const auto& m : doc["metric_fields"]) metrics.push_back(m.get<std::string>());
  std::size_t figures = 0;
  double error_sum = 0, worst = 0;
  for (const auto& row : doc["rows"]) {
    const auto r = lj::inference_cases::estimate_row(row, recipes, metrics);
    EXPECT_TRUE(r.estimated()) << row["id"] << ": " << r.error;
    figures += r.metrics.size();
    for (const auto& m : r.metrics) {
      error_sum += std::abs(m.error());
      worst = std::max(worst, std::abs(m.error()));
    }
  }
  EXPECT_EQ(doc["rows"].size(), 147U);
  EXPECT_EQ(figures, 197U) << "every printed latency, rate and memory figure is compared";
  // The README's "all" row: a change to these is a change to its table.
  EXPECT_NEAR(100 * error_sum / static_cast<double>(figures), 12.0, 0.05);
  EXPECT_NEAR(100 * worst, 38.9, 0.05);
}

}  // namespace llmsim_test_inference
