// FP8 / NVFP4 training as TransformerEngine and Megatron-LM run it: GEMMs on the recipe's op kind,
// quantize kernels, quantized activation caches and weight copies, fp8_param_gather, the bf16
// first/last layers, and the refusals. Expected numbers are derived by hand in each comment.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include "flat_systems.hpp"

#include "sanitized_build.hpp"

#include <cmath>
#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_fp8 {

using namespace llmsim;

namespace {
/// Llama 3 8B on one GPU, no tensor parallelism: 4096 tokens per micro-batch, 4 micro-batches.
strategy_spec one_gpu(fp8_recipe_kind recipe) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .fp8 = true, .world_size = 1};
  s.fp8_recipe = recipe;
  return s;
}

/// Every op of a quantized fc1 (4096 -> 14336) with the time its pricing gave it.
std::vector<priced_op> fc1_ops(const strategy_spec& s, const system_spec& sys, bool quantized = true) {
  op_record rec;
  build_context c = make_build_context(catalogue::llama3_8b, s, sys, 128256);
  c.pricing = &record_op;
  c.record = &rec;
  c.quantized = quantized;
  (void)linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336);
  return rec.ops;
}

/// The bytes of the memory-bound kernels among `ops`, in order.
std::vector<double> memory_bytes(const std::vector<priced_op>& ops) {
  std::vector<double> out;
  for (const auto& p : ops)
    if (p.o.kind == op_kind::memory) out.push_back(p.o.bytes);
  return out;
}

/// The priced time of the forward GEMM among `ops`.
seconds forward_gemm(const std::vector<priced_op>& ops) {
  for (const auto& p : ops)
    if (p.o.kind == op_kind::gemm && p.o.pass == pass_kind::forward) return p.time;
  return {};
}

/// The message of the config_error `f` throws (empty when it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const config_error& e) { return e.what(); }
  return {};
}

constexpr double x = 4096.0 * 4096;   // fc1 input elements
constexpr double y = 4096.0 * 14336;  // fc1 output elements
constexpr double w = 4096.0 * 14336;  // fc1 weight elements
constexpr double fc1_flops = 2.0 * 4096 * 4096 * 14336;
}  // namespace

TEST(Fp8, GemmsRunAtTheFp8EntryRate) {
  // A system whose fp8_matmul entry has its own figures: 1979 TFLOPS x 0.6, against matmul's
  // 989 x 0.75. The forward GEMM is compute-bound (4.8e11 flops: ~405 us against ~60 us of
  // traffic), so fp8 time / bf16 time = (989 x 0.75) / (1979 x 0.6).
  system_spec sys = llmsim_test::flat_h100_sxm();
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].efficient_factor = 0.75;
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::fp8_matmul)].efficient_factor = 0.6;
  const seconds fp8 = forward_gemm(fc1_ops(one_gpu(fp8_recipe_kind::delayed), sys));
  const seconds bf16 = forward_gemm(fc1_ops(one_gpu(fp8_recipe_kind::delayed), sys, false));
  EXPECT_DOUBLE_EQ(fp8.value, fc1_flops / (1979e12 * 0.6));
  EXPECT_DOUBLE_EQ(fp8.value / bf16.value, (989.0 * 0.75) / (1979.0 * 0.6));
}

TEST(Fp8, AnUnusableFp8EntryIsPricedAsTheBf16TwinAtTheDataSheetRatio) {
  // SimuMax's shipped B200 file has fp8_matmul with efficient_factor 0 and no table (SimuMax would
  // divide by zero). The rule: the matmul entry's efficiency for the same key (here measured, 0.8)
  // at twice its peak (FP8 dense = 2 x BF16 dense on Hopper): flops / (989e12 x 0.8 x 2).
  static constexpr std::array<shape_efficiency, 1> table{
      {{"b=1, m=4096, k=4096, n=14336, layout=TN, accumulate=False, out_dtype=bf16", 0.8}}};
  system_spec sys = catalogue::h100_sxm;
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::matmul)].accurate_efficient_factor = {table.data(), 1};
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::fp8_matmul)].efficient_factor = 0;
  EXPECT_DOUBLE_EQ(forward_gemm(fc1_ops(one_gpu(fp8_recipe_kind::delayed), sys)).value, fc1_flops / (989e12 * 0.8 * 2));
  // An absent entry follows the same rule (never the `default` entry's bf16 rate).
  sys.accelerator.op[static_cast<std::size_t>(compute_kind::fp8_matmul)].present = false;
  EXPECT_DOUBLE_EQ(forward_gemm(fc1_ops(one_gpu(fp8_recipe_kind::delayed), sys)).value, fc1_flops / (989e12 * 0.8 * 2));
  // With no compute capability to take the ratio from, it is refused with the op named.
  sys.accelerator.compute_capability = 0;
  sys.sys_name.assign("mystery_gpu");
  const std::string e = error_of([&] { (void)fc1_ops(one_gpu(fp8_recipe_kind::delayed), sys); });
  EXPECT_NE(e.find("system.accelerator.op.fp8_matmul cannot price shape"), std::string::npos) << e;
}

TEST(Fp8, Nvfp4GemmsUseTheFp4EntryOfTheB200) {
  // B200 data sheet: 9 PFLOPS FP4 dense; the catalogue's fp4_matmul entry carries it.
  const auto& fp4 = catalogue::b200.op(compute_kind::fp4_matmul);
  ASSERT_TRUE(fp4.present);
  EXPECT_EQ(fp4.tflops, 9000);
  const auto ops = fc1_ops(one_gpu(fp8_recipe_kind::nvfp4), catalogue::b200);
  for (const auto& p : ops)
    if (p.o.kind == op_kind::gemm) { EXPECT_EQ(p.o.compute, compute_kind::fp4_matmul); }
  // Priced by the Blackwell kernel model (no measured table): the fitted 0.49 of the FP4 peak, in
  // quadrature with streaming its bytes at b200_bf16_ceperm.json's 0.666 x 8000 GiB/s.
  double bytes = 0;
  for (const auto& p : ops)
    if (p.o.kind == op_kind::gemm && p.o.pass == pass_kind::forward) bytes = p.o.bytes;
  ASSERT_GT(bytes, 0);
  EXPECT_NEAR(forward_gemm(ops).value, std::hypot(fc1_flops / (9000e12 * 0.49), bytes / (0.666 * 8000 * 1073741824.0)),
              1e-15);
  EXPECT_EQ(kernel_models::blackwell.gemm_sustained, 0.49);
}

TEST(Fp8, QuantizeKernelBytesPerRecipe) {
  // fc1 without tensor parallelism, per micro-batch (m = 4): the input cast in forward, the weight
  // cast spread over the micro-batches (w / 4 elements), the output-gradient cast in backward.
  // Each cast reads bf16 (2 bytes) and writes its copies.
  // Delayed on Hopper (cc 9.0): FP8 data + transpose (1 + 1 byte).
  EXPECT_EQ(memory_bytes(fc1_ops(one_gpu(fp8_recipe_kind::delayed), catalogue::h100_sxm)),
            (std::vector<double>{4 * x, 4 * (w / 4), 4 * y}));
  // Current scaling adds an amax kernel reading the bf16 tensor before each cast.
  EXPECT_EQ(memory_bytes(fc1_ops(one_gpu(fp8_recipe_kind::tensorwise), catalogue::h100_sxm)),
            (std::vector<double>{2 * x, 4 * x, 2 * (w / 4), 4 * (w / 4), 2 * y, 4 * y}));
  // Delayed on Blackwell: non-TN FP8 GEMMs, one copy: 2 + 1 bytes.
  EXPECT_EQ(memory_bytes(fc1_ops(one_gpu(fp8_recipe_kind::delayed), catalogue::b200)),
            (std::vector<double>{3 * x, 3 * (w / 4), 3 * y}));
  // MXFP8: row-wise and column-wise copies of 1 byte + 1/32 E8M0 scale each.
  const double mx = 2 + 2 * (1 + 1.0 / 32);
  EXPECT_EQ(memory_bytes(fc1_ops(one_gpu(fp8_recipe_kind::mxfp8), catalogue::b200)),
            (std::vector<double>{x * mx, (w / 4) * mx, y * mx}));
}

TEST(Fp8, SequenceParallelGathersMoveFp8) {
  // tp = 2 with SP: the column-parallel input is cast on its local shard (x / 2, row-wise only for
  // tensor scaling) and all-gathered in FP8: x bytes instead of 2x; the wgrad re-gather likewise.
  strategy_spec s = one_gpu(fp8_recipe_kind::delayed);
  s.world_size = s.tp_size = 2;
  const auto ops = fc1_ops(s, catalogue::h100_sxm);
  std::vector<double> gathers;
  for (const auto& p : ops)
    if (p.o.kind == op_kind::collective && p.o.collective == collective_kind::all_gather) gathers.push_back(p.o.bytes);
  EXPECT_EQ(gathers, (std::vector<double>{x, x}));
  // Local cast: read 2 bytes, write one row-wise copy; Hopper transposes the gathered input in
  // the weight-gradient pass (read 1, write 1 over x).
  const auto mem = memory_bytes(ops);
  ASSERT_GE(mem.size(), 1U);
  EXPECT_EQ(mem.front(), 3 * (x / 2));
  EXPECT_EQ(mem.back(), 2 * x);
}

TEST(Fp8, ActivationCachePerLayerIsQuantized) {
  // A Llama 3 8B layer without tensor parallelism keeps the inputs of qkv (4096), proj (4096),
  // fc1 (4096) and fc2 (14336) for backward: TE saves one quantized copy instead of bf16. Delayed:
  // 1 byte instead of 2, i.e. 4096 tokens x 26624 features x 1 byte less; but flash attention's
  // output O (4096 x 4096 bf16), which the bf16 proj keeps for both, is now held on its own:
  // 4096 x (26624 - 2 x 4096) = 75497472 bytes less per layer.
  const strategy_spec s = one_gpu(fp8_recipe_kind::delayed);
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  auto held = [&](bool quantized) {
    c.quantized = quantized;
    const leaf_block b = decoder_layer_leaves(c, false, false);
    double sum = 0;
    for (const leaf& l : b) sum += l.cache;
    return sum;
  };
  EXPECT_EQ(held(false) - held(true), 75497472.0);
  // MXFP8 on B200 keeps 1 + 1/32 bytes per element.
  const strategy_spec mx = one_gpu(fp8_recipe_kind::mxfp8);
  build_context b200 = make_build_context(catalogue::llama3_8b, mx, catalogue::b200, 128256);
  auto held_b200 = [&](bool quantized) {
    b200.quantized = quantized;
    double sum = 0;
    for (const leaf& l : decoder_layer_leaves(b200, false, false)) sum += l.cache;
    return sum;
  };
  EXPECT_DOUBLE_EQ(held_b200(false) - held_b200(true), 4096.0 * 26624 * (2 - (1 + 1.0 / 32)) - 4096.0 * 4096 * 2);
}

TEST(Fp8, QuantizedWeightBytesPerParameterPerRecipe) {
  // TE keeps the weight's quantized copies across micro-batches:
  //   delayed / tensorwise on Hopper: FP8 data + transpose = 2 bytes; on Blackwell one copy = 1;
  //   blockwise: two copies of 1 byte + an fp32 scale per 128x128 block; MXFP8: two of 1 + 1/32;
  //   NVFP4: two of 0.5 + 1/16 (E4M3 scale per 16).
  auto per_param = [](fp8_recipe_kind r, const system_spec& sys) {
    const strategy_spec st = one_gpu(r);  // the context keeps pointers: no temporaries
    build_context c = make_build_context(catalogue::llama3_8b, st, sys, 128256);
    c.quantized = true;
    const leaf l = linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336);
    EXPECT_EQ(l.quantized_params, w);
    return l.quantized_weight_bytes / l.quantized_params;
  };
  EXPECT_EQ(per_param(fp8_recipe_kind::delayed, catalogue::h100_sxm), 2.0);
  EXPECT_EQ(per_param(fp8_recipe_kind::tensorwise, catalogue::h100_sxm), 2.0);
  EXPECT_EQ(per_param(fp8_recipe_kind::delayed, catalogue::b200), 1.0);
  EXPECT_DOUBLE_EQ(per_param(fp8_recipe_kind::blockwise, catalogue::b200), 2 * (1 + 4.0 / 16384));
  EXPECT_DOUBLE_EQ(per_param(fp8_recipe_kind::mxfp8, catalogue::b200), 2 * (1 + 1.0 / 32));
  EXPECT_DOUBLE_EQ(per_param(fp8_recipe_kind::nvfp4, catalogue::b200), 2 * (0.5 + 1.0 / 16));
}

namespace {
/// Llama 3 8B, tp 1, dp 8, distributed optimizer.
strategy_spec dp8(bool fp8) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .fp8 = fp8, .world_size = 8};
  return s;
}
// The decoder linears of Llama 3 8B: 32 x (4096 x 6144 qkv + 4096 x 4096 proj + 4096 x 28672 fc1
// + 14336 x 4096 fc2) = 32 x 218103808 = 6979321856 parameters.
constexpr double llama3_8b_linears = 6979321856.0;
}  // namespace

TEST(Fp8, ModelMemoryPerParameter) {
  // Delayed on H100, per quantized parameter: bf16 weight 2 + FP8 weight 1 + FP8 transpose 1 + fp32
  // grad 4 + Adam (master, m, v) 12 / dp 8 = 9.5 bytes; every other parameter 2 + 4 + 1.5 = 7.5.
  const auto r = estimate(catalogue::llama3_8b, dp8(true), catalogue::h100_sxm);
  const stage_result& st = r.stages[0];
  EXPECT_EQ(st.quantized_params, llama3_8b_linears);
  const double p = st.params, q = st.quantized_params;
  EXPECT_EQ(static_cast<double>((st.weight_mem + st.grad_mem + st.optimizer_state_mem).value), q * 9.5 + (p - q) * 7.5);
  // fp8_param_gather on B200 (one FP8 copy, no transpose): the quantized parameters are the only
  // copy: 1 byte instead of 2 + 1.
  strategy_spec s = dp8(true);
  s.fp8_param_gather = true;
  const auto g = estimate(catalogue::llama3_8b, s, catalogue::b200);
  EXPECT_EQ(static_cast<double>(g.stages[0].weight_mem.value), (p - q) * 2 + q * 1);
  // The bf16 job keeps 2 bytes per parameter.
  const auto bf16 = estimate(catalogue::llama3_8b, dp8(false), catalogue::h100_sxm);
  EXPECT_EQ(static_cast<double>(bf16.stages[0].weight_mem.value), p * 2);
}

TEST(Fp8, ParamGatherMovesFp8Parameters) {
  // With fp8_param_gather the distributed optimizer's all-gather moves 1 byte per quantized
  // parameter instead of 2: ~87% of Llama 3 8B's parameters are decoder linears, so the gather
  // takes between half and the whole of the bf16 gather's time.
  strategy_spec s = dp8(true);
  const auto plain = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.fp8_param_gather = true;
  const auto gathered = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const double ratio = gathered.stages[0].param_gather_time.value / plain.stages[0].param_gather_time.value;
  EXPECT_LT(ratio, 0.75);
  EXPECT_GT(ratio, 0.5);
  EXPECT_EQ(gathered.stages[0].grad_reduce_time, plain.stages[0].grad_reduce_time);  // gradients stay fp32
}

TEST(Fp8, FirstAndLastLayersRunInBf16) {
  // --first-last-layers-bf16 with one layer at each end: the stage's forward is the fp8 job's
  // with two layers at the bf16 layer's time, and that layer is the bf16 job's layer.
  strategy_spec s = dp8(true);
  s.world_size = 1;
  s.fp8_recipe = fp8_recipe_kind::tensorwise;  // delayed scaling cannot keep the ends in bf16
  const build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  const job_blocks blocks = build_blocks(c);
  auto fwd = [](const leaf_block& b) {
    double t = 0;
    for (const leaf& l : b) t += l.fwd.value;
    return t;
  };
  strategy_spec ends = s;
  ends.fp8_first_last_layers_bf16 = true;
  const job_blocks with_ends =
      build_blocks(make_build_context(catalogue::llama3_8b, ends, catalogue::h100_sxm, 128256));
  strategy_spec bf16_job = s;
  bf16_job.fp8 = false;
  const job_blocks bf16_blocks =
      build_blocks(make_build_context(catalogue::llama3_8b, bf16_job, catalogue::h100_sxm, 128256));
  EXPECT_EQ(fwd(with_ends.dense_layer_bf16), fwd(bf16_blocks.dense_layer));
  EXPECT_LT(fwd(blocks.dense_layer), fwd(bf16_blocks.dense_layer));  // fp8 layers are faster
  const auto all_fp8 = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto r = estimate(catalogue::llama3_8b, ends, catalogue::h100_sxm);
  EXPECT_NEAR(r.stages[0].fwd_compute_time.value,
              all_fp8.stages[0].fwd_compute_time.value + 2 * (fwd(bf16_blocks.dense_layer) - fwd(blocks.dense_layer)),
              1e-12);
  EXPECT_EQ(r.stages[0].quantized_params, llama3_8b_linears * 30 / 32);
  // Two pipeline stages: each holds one of the bf16 layers.
  ends.world_size = ends.pp_size = 2;
  const auto pp = estimate(catalogue::llama3_8b, ends, catalogue::h100_sxm);
  ASSERT_EQ(pp.stage_count, 2U);
  EXPECT_EQ(pp.stages[0].layout.bf16_head_layers, 1);
  EXPECT_EQ(pp.stages[0].layout.bf16_tail_layers, 0);
  EXPECT_EQ(pp.stages[1].layout.bf16_head_layers, 0);
  EXPECT_EQ(pp.stages[1].layout.bf16_tail_layers, 1);
  EXPECT_EQ(pp.stages[0].quantized_params + pp.stages[1].quantized_params, llama3_8b_linears * 30 / 32);
}

TEST(Fp8, GroupedFc1SavesBf16UnlessCachingFp8Inputs) {
  // SimuMax's QuantizedGroupLinearCol: fc1 of the experts keeps its bf16 input (2 bytes) and
  // re-quantizes it in backward; cache_groupgemm_col_fp8_inputs keeps the FP8 input (1 byte).
  // 8 experts, 4096 token copies, 2048 -> 1408.
  strategy_spec s = one_gpu(fp8_recipe_kind::delayed);
  build_context c = make_build_context(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm, 102400);
  c.quantized = true;
  const double in = 4096.0 * 2048;
  const leaf fc1 = grouped_linear_leaf(c, leaf_id::experts_linear_fc1, 8, 4096, 2048, 1408);
  EXPECT_EQ(fc1.cache, in * 2);
  const leaf fc2 = grouped_linear_leaf(c, leaf_id::experts_linear_fc2, 8, 4096, 2048, 1408);
  EXPECT_EQ(fc2.cache, in * 1);
  s.cache_groupgemm_col_fp8_inputs = true;
  c = make_build_context(catalogue::deepseek_v2_lite, s, catalogue::h100_sxm, 102400);
  c.quantized = true;
  EXPECT_EQ(grouped_linear_leaf(c, leaf_id::experts_linear_fc1, 8, 4096, 2048, 1408).cache, in * 1);
  EXPECT_LT(grouped_linear_leaf(c, leaf_id::experts_linear_fc1, 8, 4096, 2048, 1408).bwd.value, fc1.bwd.value);
}

TEST(Fp8, Refusals) {
  const auto& m = catalogue::llama3_8b;
  strategy_spec s = dp8(true);
  s.fp8_recipe = fp8_recipe_kind::mxfp8;
  EXPECT_EQ(error_of([&] { validate(m, s, catalogue::h100_sxm); }),
            "llmsim::strategy: strategy.fp8_recipe=\"mxfp8\" needs a Blackwell GPU (compute capability >= 10.0); "
            "system h100_sxm has compute capability 9");
  EXPECT_EQ(error_of([&] { validate(m, s, catalogue::b200); }), "");
  s.fp8_recipe = fp8_recipe_kind::nvfp4;
  EXPECT_NE(error_of([&] { validate(m, s, catalogue::h100_sxm); }).find("strategy.fp8_recipe=\"nvfp4\""),
            std::string::npos);
  EXPECT_EQ(error_of([&] { validate(m, dp8(true), catalogue::a100_sxm); }),
            "llmsim::strategy: strategy.fp8=true needs FP8 tensor cores (compute capability >= 8.9: Ada, Hopper, "
            "Blackwell); system a100_sxm has compute capability 8");
  strategy_spec no_fp8 = dp8(false);
  no_fp8.fp8_recipe = fp8_recipe_kind::blockwise;
  EXPECT_EQ(error_of([&] { validate(no_fp8); }),
            "llmsim::strategy: strategy.fp8_recipe=\"blockwise\" requires strategy.fp8=true");
  strategy_spec ends = dp8(true);
  ends.fp8_first_last_layers_bf16 = true;
  // Delayed scaling (the default recipe) cannot keep the ends in bf16 (Megatron fp8_utils.py asserts).
  EXPECT_EQ(error_of([&] { validate(ends); }),
            "llmsim::strategy: strategy.fp8_first_last_layers_bf16=true needs a recipe other than \"delayed\" "
            "(Megatron-LM fp8_utils.py: delayed scaling does not support first / last layers in bf16)");
  ends.fp8_recipe = fp8_recipe_kind::tensorwise;
  ends.fp8_layers_at_start_in_bf16 = 20;
  ends.fp8_layers_at_end_in_bf16 = 13;
  EXPECT_EQ(error_of([&] { validate(m, ends, catalogue::h100_sxm); }),
            "llmsim::strategy: strategy.fp8_layers_at_start_in_bf16=20 + fp8_layers_at_end_in_bf16=13 exceeds "
            "model.layer_num=32");
  // TE's FP8 linears need their local input's rows, this rank's tokens, a multiple of 8: 4094
  // tokens over tp 2 with SP are 2047 a rank; without SP 4094 (6 over); 4 sequences of 4094 are
  // 16376 = 8 x 2047; 4112 over tp 2 are 2056 = 8 x 257.
  strategy_spec odd = dp8(true);
  odd.world_size = 2;
  odd.tp_size = 2;
  odd.seq_len = 4094;
  EXPECT_EQ(error_of([&] { validate(m, odd, catalogue::h100_sxm); }),
            "llmsim::strategy: strategy.fp8=true needs each rank's tokens per micro-batch, seq_len / cp_size / "
            "tp_size x micro_batch_size = 2047, to be a multiple of 8 (TransformerEngine assert_dim_for_fp8_exec)");
  odd.enable_sequence_parallel = false;
  EXPECT_NE(error_of([&] { validate(m, odd, catalogue::h100_sxm); }).find("micro_batch_size = 4094,"),
            std::string::npos);
  odd.micro_batch_size = 4;
  EXPECT_EQ(error_of([&] { validate(m, odd, catalogue::h100_sxm); }), "");
  odd = dp8(true);
  odd.world_size = 2;
  odd.tp_size = 2;
  odd.seq_len = 4112;
  EXPECT_EQ(error_of([&] { validate(m, odd, catalogue::h100_sxm); }), "");
  // ... and each linear's local feature dims multiples of 16 (its input's and weight's last dim):
  // Llama 3 8B's 4096 hidden, 32 x 128 / 2 = 2048 attention and 14336 / 2 = 7168 MLP features pass;
  // a 14344-wide MLP over tp 2 has 7172 (4 over a multiple of 16); a 4104 hidden (8 over 4096)
  // is refused first.
  model_spec wide = m;
  wide.intermediate_size = 14344;
  EXPECT_EQ(error_of([&] { validate(wide, odd, catalogue::h100_sxm); }),
            "llmsim::strategy: strategy.fp8=true needs every FP8 linear's local feature dims to be multiples of 16, "
            "model.intermediate_size / tp_size = 7172 is not (TransformerEngine assert_dim_for_fp8_exec)");
  wide.hidden_size = 4104;
  wide.head_size = 128;
  EXPECT_NE(error_of([&] { validate(wide, odd, catalogue::h100_sxm); }).find("model.hidden_size = 4104 is not"),
            std::string::npos);
  wide = m;
  wide.intermediate_size = 14352;  // 7176 a rank over tp 2: 8 over a multiple of 16
  EXPECT_NE(error_of([&] { validate(wide, odd, catalogue::h100_sxm); }).find("= 7176 is not"), std::string::npos);
  odd.fp8 = false;  // bf16 linears have no such rule
  EXPECT_EQ(error_of([&] { validate(wide, odd, catalogue::h100_sxm); }), "");
  // MoE models' dense layers and shared experts are TE linears too (only the routed experts'
  // grouped linears skip the check): DeepSeek-V2-Lite's first dense layer is 10944 wide, 1368 a
  // rank over tp 8 (8 over 1360 = 16 x 85); over tp 4, 2736 = 16 x 171 passes.
  strategy_spec tp8 = dp8(true);
  tp8.tp_size = 8;
  tp8.world_size = 8;
  EXPECT_NE(error_of([&] {
              validate(catalogue::deepseek_v2_lite, tp8, catalogue::h100_sxm);
            }).find("model.intermediate_size / tp_size = 1368 is not"),
            std::string::npos);
  strategy_spec tp4 = tp8;
  tp4.tp_size = 4;
  tp4.world_size = 4;
  EXPECT_EQ(error_of([&] { validate(catalogue::deepseek_v2_lite, tp4, catalogue::h100_sxm); }), "");
  model_spec shared = catalogue::deepseek_v2_lite;    // shared experts 2816 wide: 704 over tp 4
  shared.moe_shared_expert_intermediate_size = 2824;  // 706 = 16 x 44 + 2
  EXPECT_NE(error_of([&] {
              validate(shared, tp4, catalogue::h100_sxm);
            }).find("model.moe_shared_expert_intermediate_size / tp_size = 706 is not"),
            std::string::npos);
  model_spec mla = catalogue::deepseek_v2_lite;  // MLA: the KV up-projection's input, kv_lora_rank
  mla.kv_lora_rank = 520;
  EXPECT_NE(error_of([&] { validate(mla, tp4, catalogue::h100_sxm); }).find("model.kv_lora_rank = 520 is not"),
            std::string::npos);
  strategy_spec norm_recompute = dp8(true);
  norm_recompute.recompute_granularity = recompute_kind::selective_recompute;
  norm_recompute.recompute_layer_num = 1;
  norm_recompute.megatron_recompute = true;
  norm_recompute.megatron_recompute_modules.insert(recompute_module::layernorm);
  // Modelled since TE's save_original_input (test_activation_offload.cpp), except MLA without q_lora_rank.
  EXPECT_EQ(error_of([&] { (void)estimate(m, norm_recompute, catalogue::h100_sxm); }), "");
  model_spec mla_without_q_lora = catalogue::deepseek_v2_lite;
  mla_without_q_lora.q_lora_rank.reset();
  EXPECT_NE(error_of([&] {
              (void)estimate(mla_without_q_lora, norm_recompute, catalogue::h100_sxm);
            }).find("strategy.megatron_recompute_modules \"layernorm\" with strategy.fp8=true and an MLA model"),
            std::string::npos);
  ends.fp8_layers_at_start_in_bf16 = ends.fp8_layers_at_end_in_bf16 = 1;
  ends.pp_size = 2;
  ends.interleaving_size = 2;
  EXPECT_NE(error_of([&] { (void)estimate(m, ends, catalogue::h100_sxm); }).find("strategy.fp8_first_last_layers_bf16"),
            std::string::npos);
}

TEST(Fp8, JsonReadsTheFields) {
  const auto s = json::parse_strategy(json::parse_text(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 2,
      "fp8": true, "fp8_recipe": "blockwise", "fp8_param_gather": true, "fp8_first_last_layers_bf16": true,
      "fp8_layers_at_start_in_bf16": 2, "fp8_layers_at_end_in_bf16": 3})",
                                                       "test"));
  EXPECT_EQ(s.fp8_recipe, fp8_recipe_kind::blockwise);
  EXPECT_TRUE(s.fp8_param_gather);
  EXPECT_TRUE(s.fp8_first_last_layers_bf16);
  EXPECT_EQ(s.fp8_layers_at_start_in_bf16, 2);
  EXPECT_EQ(s.fp8_layers_at_end_in_bf16, 3);
}

TEST(Fp8, TypedStrategyOption) {
  // The typed API's option sets the two fields; the estimate is the same as for the plain spec.
  using layout = parallel<tp<2>, dp<4>, fp8_training<fp8_recipe_kind::mxfp8>>;
  static_assert(layout::spec.fp8 && layout::spec.fp8_recipe == fp8_recipe_kind::mxfp8);
  strategy_spec s = parallel<tp<2>, dp<4>>::spec;
  s.fp8 = true;
  s.fp8_recipe = fp8_recipe_kind::mxfp8;
  EXPECT_EQ(layout::spec, s);
  EXPECT_EQ(estimate(catalogue::llama3_8b, layout::spec, catalogue::b200).cost.duration_time_per_iter,
            estimate(catalogue::llama3_8b, s, catalogue::b200).cost.duration_time_per_iter);
}

namespace {
/// An FP8 job with every new field set, for the compile-time identity check.
constexpr strategy_spec fp8_everything() {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .fp8 = true, .world_size = 8};
  s.tp_size = 2;
  s.fp8_recipe = fp8_recipe_kind::mxfp8;
  s.fp8_param_gather = true;
  s.fp8_first_last_layers_bf16 = true;
  return s;
}
}  // namespace

#ifndef LLMSIM_SANITIZED_BUILD
namespace {
constexpr estimate_result fp8_at_compile_time = estimate(catalogue::llama3_8b, fp8_everything(), catalogue::b200);
}  // namespace

TEST(Fp8, CompileTimeEstimateEqualsRunTime) {
  const strategy_spec s = fp8_everything();
  const estimate_result r = estimate(catalogue::llama3_8b, s, catalogue::b200);
  EXPECT_EQ(fp8_at_compile_time.cost.duration_time_per_iter, r.cost.duration_time_per_iter);
  EXPECT_EQ(fp8_at_compile_time.mem.peak_mem, r.mem.peak_mem);
  EXPECT_EQ(fp8_at_compile_time.stages[0].weight_mem, r.stages[0].weight_mem);
  EXPECT_EQ(fp8_at_compile_time.stages[0].param_gather_time, r.stages[0].param_gather_time);
}
#endif

}  // namespace llmsim_test_fp8
