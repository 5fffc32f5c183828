// ZeRO-2/3 (DeepSpeed), Megatron-FSDP and optimizer CPU offload, each against numbers derived by
// hand: model states per rank, the gathered layers in flight, data-parallel volumes, the
// data-parallel stream's exposed time, the host optimizer step.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_zero {

using namespace llmsim;
namespace lj = llmsim::json;

namespace {
strategy_spec tp2_dp4(std::int64_t zero, std::int64_t micro_batches = 8) {
  strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = micro_batches, .world_size = 8, .tp_size = 2};
  s.zero_state = zero;
  return s;
}

// Llama 3 8B on one tp = 2 rank (vocab 128256, hidden 4096, 32 layers):
// a layer: QKV 4096 x 6144, proj 4096 x 4096, SwiGLU 3 x 4096 x 14336, split over tp; its two norms
// (2 x 4096) whole on every rank: 218103808 / 2 + 8192 = 109060096.
constexpr double layer_params = (4096.0 * 6144 + 4096.0 * 4096 + 3 * 4096.0 * 14336) / 2 + 2 * 4096;
// Embedding and output layer: 128256 x 4096 / 2 each; the final norm 4096 (with the head).
constexpr double embedding_params = 128256.0 * 4096 / 2;
constexpr double head_params = embedding_params + 4096;
constexpr double rank_params = 32 * layer_params + embedding_params + head_params;
constexpr double dp_ranks = 4;
// TE's cuBLAS workspace on an H100 (compute capability 9): 32 MiB + 1 KiB, one stream (dense).
constexpr double workspace = 32.0 * 1024 * 1024 + 1024;

const stage_result& only_stage(const estimate_result& r) {
  EXPECT_EQ(r.stage_count, 1U);
  return r.stages[0];
}
}  // namespace

TEST(Zero, ModelStatesPerRankForEachStage) {
  EXPECT_EQ(layer_params, 109060096.0);
  EXPECT_EQ(rank_params, 4015263744.0);
  const auto& m = catalogue::llama3_8b;
  const auto& sys = catalogue::h100_sxm;
  const auto z1 = estimate(m, tp2_dp4(1), sys);
  const auto z2 = estimate(m, tp2_dp4(2), sys);
  const auto z3 = estimate(m, tp2_dp4(3), sys);
  for (const auto* r : {&z1, &z2, &z3}) EXPECT_EQ(only_stage(*r).params, rank_params);
  // ZeRO-1 (Megatron distributed optimizer): bf16 weights 2P, fp32 main grads 4P, 12P/dp optimizer.
  EXPECT_NEAR(static_cast<double>(z1.stages[0].weight_mem.value), 2 * rank_params, 1);
  EXPECT_NEAR(static_cast<double>(z1.stages[0].grad_mem.value), 4 * rank_params, 1);
  EXPECT_NEAR(static_cast<double>(z1.stages[0].optimizer_state_mem.value), 12 * rank_params / dp_ranks, 1);
  // DeepSpeed ZeRO-2: weights 2P whole, bf16 gradients 2P/dp (grad_accum_dtype = model dtype), 12P/dp.
  EXPECT_NEAR(static_cast<double>(z2.stages[0].weight_mem.value), 2 * rank_params, 1);
  EXPECT_NEAR(static_cast<double>(z2.stages[0].grad_mem.value), 2 * rank_params / dp_ranks, 1);
  EXPECT_NEAR(static_cast<double>(z2.stages[0].optimizer_state_mem.value), 12 * rank_params / dp_ranks, 1);
  EXPECT_EQ(z2.stages[0].gathered_param_mem.value, 0);
  // DeepSpeed ZeRO-3: (2 + 2 + 12) P / dp = 16 P / dp (Rajbhandari et al. 2020, §5, P_os+g+p).
  const auto& s3 = z3.stages[0];
  EXPECT_NEAR(static_cast<double>((s3.weight_mem + s3.grad_mem + s3.optimizer_state_mem).value),
              16 * rank_params / dp_ranks, 2);
  EXPECT_NEAR(static_cast<double>(s3.weight_mem.value), 2 * rank_params / dp_ranks, 1);
  // Megatron-FSDP optim_grads_params keeps fp32 main gradients: (2 + 4 + 12) P / dp.
  auto fsdp = tp2_dp4(3);
  fsdp.data_parallel_sharding_strategy = dp_sharding_kind::optim_grads_params;
  const auto f3 = estimate(m, fsdp, sys);
  EXPECT_NEAR(static_cast<double>(f3.stages[0].grad_mem.value), 4 * rank_params / dp_ranks, 1);
  EXPECT_NEAR(static_cast<double>(f3.stages[0].weight_mem.value), 2 * rank_params / dp_ranks, 1);
}

TEST(Zero, GatheredLayersInFlightAndTheZero3Identity) {
  const auto r = estimate(catalogue::llama3_8b, tp2_dp4(3), catalogue::h100_sxm);
  const auto& st = only_stage(r);
  // Units in order: embedding, 32 layers, final norm + output layer + loss. The largest pair in
  // flight (running + prefetched) is the last layer with the head: 2 bytes x (109060096 + 262672384).
  EXPECT_EQ(st.gathered_param_mem.value, static_cast<std::int64_t>(2 * (layer_params + head_params)));
  EXPECT_EQ(st.gathered_param_mem.value, 743464960);
  // One unit's whole bf16 gradients before its reduce-scatter: the head, the largest unit.
  EXPECT_EQ(st.unsharded_grad_mem.value, static_cast<std::int64_t>(2 * head_params));
  // ZeRO-3 model memory = 16 P / dp + gathered layers (+ the unit's gradients in flight, the workspace).
  const double expected = 16 * rank_params / dp_ranks + 2 * (layer_params + head_params) + 2 * head_params + workspace;
  EXPECT_NEAR(static_cast<double>(st.model_mem.value), expected, 4);
  // The peak is model memory plus the activations of the pass at the peak.
  EXPECT_GE(st.peak_mem.value, st.model_mem.value + st.fwd_activation_cache_per_micro_batch.value);
}

TEST(Zero, DataParallelVolumePerIteration) {
  const auto& m = catalogue::llama3_8b;
  const auto& sys = catalogue::h100_sxm;
  // One micro-batch, gradients reduced in bf16: ZeRO-1 moves 2 x (2 bytes x P) per iteration (one
  // reduce-scatter of gradients, one all-gather of weights), ZeRO-3 3 x (2 bytes x P) (gathers in
  // forward and backward, one reduce-scatter): 1.5x, as the ZeRO paper's §7.2.2 (3 Psi vs 2 Psi).
  auto s1 = tp2_dp4(1, 1);
  s1.grad_reduce_in_bf16 = true;
  const auto z1 = estimate(m, s1, sys);
  const auto z3 = estimate(m, tp2_dp4(3, 1), sys);
  EXPECT_DOUBLE_EQ(z1.stages[0].dp_comm_bytes, 2 * 2 * rank_params);
  EXPECT_DOUBLE_EQ(z3.stages[0].dp_comm_bytes, 3 * 2 * rank_params);
  // Every micro-batch gathers and reduces again: 8 micro-batches, 8 times ZeRO-3's volume; ZeRO-2
  // reduces every micro-batch (DeepSpeed partition_grads) and gathers once after the step.
  const auto z3m8 = estimate(m, tp2_dp4(3, 8), sys);
  const auto z2m8 = estimate(m, tp2_dp4(2, 8), sys);
  EXPECT_DOUBLE_EQ(z3m8.stages[0].dp_comm_bytes, 8 * 3 * 2 * rank_params);
  EXPECT_DOUBLE_EQ(z2m8.stages[0].dp_comm_bytes, (8 + 1) * 2 * rank_params);
  // No gradient reduction or weight gather left after the last backward under ZeRO-3; only the tp
  // sum of the sequence-parallel norms' gradients (finalize_model_grads).
  EXPECT_EQ(z3m8.stages[0].dp_time.value, z3m8.stages[0].tp_grad_allreduce_time.value);
  EXPECT_GT(z3m8.stages[0].tp_grad_allreduce_time.value, 0.0);
  EXPECT_GT(z2m8.stages[0].dp_time.value, 0.0);  // ZeRO-2: the weight all-gather after the step
  EXPECT_EQ(z2m8.stages[0].grad_reduce_time.value, 0.0);
}

TEST(Zero, ForwardGatherHiddenWhenComputeIsLongerElseExposed) {
  // Four units. Compute 1 s, gather 3 s: AG0 [0,3], unit 0 [3,4] while AG1 runs [3,6], unit 1
  // [6,7], AG2 [6,9], unit 2 [9,10], AG3 [9,12], unit 3 [12,13]: 13 - 4 s of compute = 9 s exposed.
  EXPECT_DOUBLE_EQ(sharded_forward_exposed({{1, 0, 3, 0, 4}}), 9.0);
  // Compute 4 s, gather 1 s: only the first gather waits; each prefetch hides under a unit.
  EXPECT_DOUBLE_EQ(sharded_forward_exposed({{4, 0, 1, 0, 4}}), 1.0);
  // Nothing gathered (ZeRO-2): nothing exposed.
  EXPECT_DOUBLE_EQ(sharded_forward_exposed({{4, 0, 0, 0, 4}}), 0.0);
}

TEST(Zero, BackwardGathersAndReduceScattersOnOneStream) {
  // Three units, backward 2 s, gather 1 s, reduce-scatter 1 s, overlapped: AG2 [0,1], unit 2 [1,3]
  // with AG1 [1,2], RS2 [3,4]; unit 1 [3,5] with AG0 [4,5], RS1 [5,6]; unit 0 [5,7], RS0 [7,8]:
  // 8 - 6 s = 2 s exposed (the first gather and the last reduce-scatter).
  EXPECT_DOUBLE_EQ(sharded_backward_exposed({{0, 2, 1, 1, 3}}, true), 2.0);
  // Without overlap the compute waits for each reduce-scatter: AG2 [0,1], unit 2 [1,3], RS2 [3,4],
  // unit 1 [4,6] (AG0 [4,5]), RS1 [6,7], unit 0 [7,9], RS0 [9,10]: 10 - 6 = 4 s.
  EXPECT_DOUBLE_EQ(sharded_backward_exposed({{0, 2, 1, 1, 3}}, false), 4.0);
}

TEST(Zero, ExposedGatherEntersTheIterationAndTheBreakdown) {
  // A100 PCIe: the gathers of a tp = 1, dp = 8 ZeRO-3 job over PCIe take longer than a layer's compute.
  strategy_spec s{.seq_len = 1024, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8, .tp_size = 1};
  s.zero_state = 3;
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::a100_pcie);
  const auto& st = only_stage(r);
  EXPECT_GT(st.fwd_shard_exposed_time.value, 0.0);
  EXPECT_GT(st.fwd_shard_comm_time.value, st.fwd_compute_time.value + st.fwd_tp_comm_time.value);
  EXPECT_GE(st.fwd_shard_exposed_time.value,
            st.fwd_shard_comm_time.value - st.fwd_compute_time.value - st.fwd_tp_comm_time.value - 1e-12);
  // One stage, one rank: the iteration is m passes plus the optimizer (no tail: dp_time = 0).
  const double m = 4;
  const double passes = (st.fwd_compute_time + st.bwd_compute_time + st.fwd_tp_comm_time + st.bwd_tp_comm_time +
                         st.fwd_shard_exposed_time + st.bwd_shard_exposed_time)
                            .value;
  EXPECT_NEAR(r.cost.duration_time_per_iter.value, m * passes + st.optim_time.value, 1e-9);
  const auto& b = st.breakdown;
  EXPECT_NEAR(b.dp_exposed_time.value, m * (st.fwd_shard_exposed_time + st.bwd_shard_exposed_time).value, 1e-12);
  const double sum = (b.fwd_compute_time + b.bwd_compute_time + b.recompute_time + b.intra_exposed_time +
                      b.inter_exposed_time + b.bubble_time + b.dp_exposed_time + b.optim_time + b.straggler_time)
                         .value;
  EXPECT_NEAR(sum, r.cost.duration_time_per_iter.value, 1e-9);
}

TEST(Zero, OptimizerCpuOffloadMovesStatesAndStepToTheHost) {
  const auto& m = catalogue::llama3_8b;
  const auto& sys = catalogue::h100_sxm;
  auto s = tp2_dp4(1);
  const auto gpu = estimate(m, s, sys);
  s.optimizer_cpu_offload = true;
  s.use_precision_aware_optimizer = true;  // Megatron's offload runs on it (arguments.py)
  const auto host = estimate(m, s, sys);
  const auto& a = gpu.stages[0];
  const auto& b = host.stages[0];
  EXPECT_EQ(b.optimizer_state_mem.value, 0);
  EXPECT_EQ((a.model_mem - b.model_mem).value, a.optimizer_state_mem.value);
  // The rank's shard P/dp: its fp32 gradients to the host over PCIe 5.0 x16 (64 GB/s), Adam over
  // 28 bytes an element at the node's DDR5 bandwidth (614.4 GB/s) shared by 8 GPUs, its bf16
  // weights back.
  const double local = rank_params / dp_ranks;
  const double expected = local * 4 / 64e9 + local * 28 / (614.4e9 / 8) + local * 2 / 64e9;
  EXPECT_NEAR(b.host_optimizer_time.value, expected, 1e-12);
  EXPECT_GT(b.optim_time.value, b.host_optimizer_time.value);
  EXPECT_EQ(a.host_optimizer_time.value, 0.0);
  // The host step replaces the GPU's Adam and master-weight copy: the iteration grows by the difference.
  EXPECT_NEAR((host.cost.duration_time_per_iter - gpu.cost.duration_time_per_iter).value,
              (b.optim_time - a.optim_time).value, 1e-12);
  // Megatron offloads through the precision-aware optimizer, only with the distributed optimizer
  // (zero_state >= 1), and with FP8 parameter gather only under delayed scaling (arguments.py).
  const auto refusal = [&](const strategy_spec& bad) {
    try {
      (void)estimate(m, bad, sys);
    } catch (const config_error& e) { return e.field(); }
    return std::string("accepted");
  };
  auto plain = tp2_dp4(0);
  plain.optimizer_cpu_offload = true;
  EXPECT_EQ(refusal(plain), "strategy.optimizer_cpu_offload");
  auto without = tp2_dp4(1);  // Megatron refuses the offload without the precision-aware optimizer
  without.optimizer_cpu_offload = true;
  EXPECT_EQ(refusal(without), "strategy.optimizer_cpu_offload");
  auto fp8 = s;
  fp8.fp8 = true;
  fp8.fp8_param_gather = true;
  fp8.fp8_recipe = fp8_recipe_kind::tensorwise;
  EXPECT_EQ(refusal(fp8), "strategy.optimizer_cpu_offload");
  fp8.fp8_recipe = fp8_recipe_kind::delayed;
  EXPECT_EQ(refusal(fp8), "accepted");
  // The host step's DRAM is an 8-GPU x86 node's: an NVL72 domain (72 GPUs, a Grace per two) is
  // refused rather than priced at 614.4 GB/s over 72 GPUs.
  try {
    (void)estimate(m, s, catalogue::gb200_nvl72);
    ADD_FAILURE() << "optimizer offload on GB200 NVL72 was priced";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "strategy.optimizer_cpu_offload");
    EXPECT_NE(std::string(e.what()).find("on a node of 72 GPUs"), std::string::npos) << e.what();
  }
}

TEST(Zero, PrecisionAwareOptimizerStoresTheStatesItIsTold) {
  // Megatron --use-precision-aware-optimizer, ZeRO-1 over dp 4, per parameter of the rank's shard:
  //   bf16 moments, TE holding the master weight as its 16-bit remainder: 2 + 2 + 2 = 6 bytes
  //   (12 without the optimizer); without remainders 4 + 2 + 2 = 8; fp8 moments on the H100 keep
  //   a transposed copy too (no non-TN FP8 GEMMs on sm 9.0): 2 + 2 + 2 = 6, on a B200 2 + 1 + 1 = 4;
  //   FP8 current scaling (tensorwise): Megatron keeps the fp32 master, 4 + 2 + 2 = 8 even with
  //   remainders, as for a Megatron-Bridge BF16 job (its optimizer's fp8_recipe left "tensorwise");
  //   delayed scaling leaves it to TE again: 6. Megatron-FSDP (ZeRO-3 over dp 4) keeps its own fp32
  //   main weights: 4 + 2 + 2 = 8.
  const auto& m = catalogue::llama3_8b;
  const auto& sys = catalogue::h100_sxm;
  const auto state = [&](const strategy_spec& s) {
    return static_cast<double>(only_stage(estimate(m, s, sys)).optimizer_state_mem.value);
  };
  const double shard = rank_params / dp_ranks;
  const auto base = tp2_dp4(1);
  EXPECT_NEAR(state(base), 12 * shard, 1);
  auto pa = base;
  pa.use_precision_aware_optimizer = true;
  EXPECT_NEAR(state(pa), (2 + 4 + 4) * shard, 1);  // fp32 moments, remainder master
  pa.exp_avg_dtype = pa.exp_avg_sq_dtype = dtype_kind::bf16;
  EXPECT_NEAR(state(pa), 6 * shard, 1);
  auto whole = pa;
  whole.store_param_remainders = false;
  EXPECT_NEAR(state(whole), 8 * shard, 1);
  auto fp8_moments = pa;
  fp8_moments.exp_avg_dtype = fp8_moments.exp_avg_sq_dtype = dtype_kind::fp8;
  EXPECT_NEAR(state(fp8_moments), 6 * shard, 1);
  EXPECT_NEAR(static_cast<double>(only_stage(estimate(m, fp8_moments, catalogue::b200)).optimizer_state_mem.value),
              4 * shard, 1);
  auto bridge_bf16 = pa;
  bridge_bf16.optimizer_fp8_recipe = fp8_recipe_kind::tensorwise;
  EXPECT_NEAR(state(bridge_bf16), 8 * shard, 1);
  auto fsdp = pa;
  fsdp.zero_state = 3;
  fsdp.data_parallel_sharding_strategy = dp_sharding_kind::optim_grads_params;
  EXPECT_NEAR(state(fsdp), 8 * shard, 1);
  auto current = pa;
  current.fp8 = true;
  current.fp8_recipe = fp8_recipe_kind::tensorwise;
  EXPECT_NEAR(state(current), 8 * shard, 1);
  current.fp8_recipe = fp8_recipe_kind::delayed;
  EXPECT_NEAR(state(current), 6 * shard, 1);

  // The step: without it, Adam reads the fp32 main gradient (4), m, v, master (12) and writes them
  // (12), then a copy reads the master (4) and writes the bf16 weight (2). With TE holding the
  // master, one FusedAdam pass reads the gradient (4), the state (6) and the bf16 weight (2), and
  // writes the state (6) and the weight (2): 20 bytes, no copy. Each pass is one memory-bound kernel.
  const auto pass = [&](double bytes_per_param) {
    return memory_time(sys, memory_kind::default_kind, shard * bytes_per_param).value;
  };
  const double before = only_stage(estimate(m, base, sys)).optim_time.value;
  const double after = only_stage(estimate(m, pa, sys)).optim_time.value;
  EXPECT_NEAR(before - after, pass(4 + 24) + pass(4 + 2) - pass(4 + 12 + 4), 1e-12);
}

TEST(Zero, PrecisionAwareOptimizerRules) {
  // Megatron: its dtypes (arguments.py choices), fp32 only without it (optimizer_config.py), Adam
  // only, the distributed optimizer only; the JSON reads Megatron's names.
  const auto field_of = [](const strategy_spec& s) {
    try {
      validate(s);
    } catch (const config_error& e) { return e.field(); }
    return std::string("accepted");
  };
  auto s = tp2_dp4(1);
  s.exp_avg_dtype = dtype_kind::bf16;
  EXPECT_EQ(field_of(s), "strategy.exp_avg_dtype");
  s.use_precision_aware_optimizer = true;
  EXPECT_EQ(field_of(s), "accepted");
  s.main_params_dtype = dtype_kind::bf16;
  EXPECT_EQ(field_of(s), "strategy.main_params_dtype");
  s.main_params_dtype = dtype_kind::fp16;
  EXPECT_EQ(field_of(s), "accepted");
  auto muon = s;
  muon.optimizer = optimizer_kind::muon;
  EXPECT_EQ(field_of(muon), "strategy.use_precision_aware_optimizer");
  auto no_zero = s;
  no_zero.zero_state = 0;
  EXPECT_EQ(field_of(no_zero), "strategy.use_precision_aware_optimizer");
  auto deepspeed = s;  // DeepSpeed ZeRO-2 is not Megatron's distributed optimizer
  deepspeed.zero_state = 2;
  EXPECT_EQ(field_of(deepspeed), "strategy.use_precision_aware_optimizer");
  deepspeed.zero_state = 3;
  deepspeed.data_parallel_sharding_strategy = dp_sharding_kind::optim_grads_params;
  EXPECT_EQ(field_of(deepspeed), "accepted");
  const auto read = lj::parse_strategy(lj::value::parse(
      R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 8, "world_size": 8, "tp_size": 2,
          "zero_state": 1, "use_precision_aware_optimizer": true, "exp_avg_dtype": "bf16",
          "exp_avg_sq_dtype": "fp8", "main_params_dtype": "fp16", "store_param_remainders": false,
          "optimizer_fp8_recipe": "tensorwise"})"));
  EXPECT_TRUE(read.use_precision_aware_optimizer);
  EXPECT_EQ(read.exp_avg_dtype, dtype_kind::bf16);
  EXPECT_EQ(read.exp_avg_sq_dtype, dtype_kind::fp8);
  EXPECT_EQ(read.main_params_dtype, dtype_kind::fp16);
  EXPECT_FALSE(read.store_param_remainders);
  EXPECT_EQ(read.optimizer_fp8_recipe, fp8_recipe_kind::tensorwise);
}

TEST(Zero, MegatronFsdpOptimIsTheDistributedOptimizer) {
  // data_parallel_sharding_strategy "optim" / "no_shard" shard as zero_state 1 / 0: same estimate, bit for bit.
  for (const auto& [kind, level] : {std::pair{dp_sharding_kind::optim, 1}, std::pair{dp_sharding_kind::no_shard, 0}}) {
    auto s = tp2_dp4(level);
    const auto zero = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
    s.data_parallel_sharding_strategy = kind;
    const auto fsdp = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
    EXPECT_EQ(zero.cost.duration_time_per_iter.value, fsdp.cost.duration_time_per_iter.value);
    EXPECT_EQ(zero.mem.peak_mem, fsdp.mem.peak_mem);
  }
}

TEST(Zero, ShardingStrategyDecidesZeroStateInJsonAndMustAgree) {
  const auto s = lj::parse_strategy(
      lj::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 8, "tp_size": 2,
                           "data_parallel_sharding_strategy": "optim_grads"})"),
      "s.json");
  EXPECT_EQ(s.zero_state, 2);
  EXPECT_TRUE(megatron_fsdp(s));
  try {
    (void)lj::parse_strategy(lj::value::parse(R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 8,
                                                   "zero_state": 1, "data_parallel_sharding_strategy": "optim_grads_params"})"),
                             "s.json");
    FAIL() << "disagreeing fields must be refused";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "s.json: llmsim::strategy: strategy.data_parallel_sharding_strategy=\"optim_grads_params\" shards at "
                 "ZeRO stage 3, but strategy.zero_state=1; the two fields must agree (or leave zero_state out)");
  }
}

TEST(Zero, UnmodelledCombinationsAreRefused) {
  auto s = tp2_dp4(3);
  s.pp_size = 2;
  s.world_size = 16;
  try {
    (void)estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
    FAIL() << "DeepSpeed refuses ZeRO-3 with pipeline parallelism";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "llmsim::estimate: strategy.zero_state=3 (DeepSpeed ZeRO-3) with strategy.pp_size=2: DeepSpeed's "
                 "pipeline engine refuses ZeRO-2/3 with pipeline parallelism (deepspeed/runtime/pipe/engine.py); for "
                 "Megatron-FSDP set strategy.data_parallel_sharding_strategy");
  }
  // Megatron-FSDP runs with 1F1B pipelines.
  s.data_parallel_sharding_strategy = dp_sharding_kind::optim_grads_params;
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  EXPECT_GT(r.stages[0].bwd_shard_comm_time.value, 0.0);
  s.interleaving_size = 2;
  EXPECT_THROW((void)estimate(catalogue::llama3_8b, s, catalogue::h100_sxm), config_error);
}

TEST(Zero, NothingInFlightWithoutDataParallelRanks) {
  // tp = 8, dp = 1: the shards are the whole tensors, nothing is gathered or reduce-scattered.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 8};
  s.zero_state = 3;
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const auto& st = only_stage(r);
  EXPECT_EQ(st.gathered_param_mem.value, 0);
  EXPECT_EQ(st.unsharded_grad_mem.value, 0);
  EXPECT_EQ(st.fwd_shard_comm_time.value + st.bwd_shard_comm_time.value, 0.0);
  EXPECT_NEAR(static_cast<double>(st.weight_mem.value), 2 * st.params, 1);
}

}  // namespace llmsim_test_zero
