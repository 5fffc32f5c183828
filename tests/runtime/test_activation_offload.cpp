// Activation offload (Megatron-LM fine-grained activation offloading, SimuMax's
// offload_groupgemm_col_inputs) and FP8 with the layernorm / moe_act recompute modules (TE's
// save_original_input). Expected bytes and times are derived by hand in each comment.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_activation_offload {

using namespace llmsim;

namespace {
/// The message of the config_error `f` throws (empty when it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const config_error& e) { return e.what(); }
  return {};
}

/// The bytes of the memory-bound kernels among `ops`, in order.
std::vector<double> memory_bytes(const std::vector<priced_op>& ops) {
  std::vector<double> out;
  for (const auto& p : ops)
    if (p.o.kind == op_kind::memory) out.push_back(p.o.bytes);
  return out;
}

/// Llama 3 8B on one B200, MXFP8, 4096 tokens per micro-batch, 4 micro-batches, Megatron
/// selective recompute of `mods`.
strategy_spec mxfp8_recompute(std::initializer_list<recompute_module> mods) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .fp8 = true, .world_size = 1};
  s.fp8_recipe = fp8_recipe_kind::mxfp8;
  s.recompute_granularity = recompute_kind::selective_recompute;
  s.recompute_layer_num = 1;
  s.megatron_recompute = true;
  for (auto m : mods) s.megatron_recompute_modules.insert(m);
  return s;
}

constexpr double mx = 1 + 1.0 / 32;  // MXFP8 bytes per element, E8M0 scale per 32 included

/// A leaf of `id` holding `cache` bytes with the given pass times (seconds).
leaf plain_leaf(leaf_id id, double cache, double fwd, double bwd) {
  leaf l;
  l.id = id;
  l.cache = l.input = cache;
  l.fwd = seconds{fwd};
  l.bwd = seconds{bwd};
  return l;
}
}  // namespace

// ---- FP8 with layernorm / moe_act recompute -------------------------------------------------

TEST(Fp8SelectiveRecompute, NormConsumerKeepsItsBf16InputAndRequantizesInBackward) {
  // fc1 (4096 -> 14336) reading a recomputed pre-MLP norm: TE save_original_input. x = 4096 x 4096
  // input elements, y = 4096 x 14336 output elements, w = 4096 x 14336 weight elements over 4
  // micro-batches. Casts (read 2 bytes, write the copies):
  //   forward input: row-wise copy only: x (2 + mx)   (2 + 2 mx without save_original_input)
  //   weight: (w / 4) (2 + 2 mx);  output gradient: y (2 + 2 mx)
  //   weight gradient: the re-created input cast column-wise: x (2 + mx)
  // Saved for backward: the bf16 input, 2x bytes (the checkpoint frees and re-creates it).
  const double x = 4096.0 * 4096, y = 4096.0 * 14336, w = 4096.0 * 14336;
  op_record rec;
  const strategy_spec s = mxfp8_recompute({recompute_module::layernorm});  // the context points to it
  build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::b200, 128256);
  c.pricing = &record_op;
  c.record = &rec;
  c.quantized = true;
  c.recomputed_layer = true;
  const leaf fc1 = linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336);
  EXPECT_EQ(memory_bytes(rec.ops),
            (std::vector<double>{x * (2 + mx), (w / 4) * (2 + 2 * mx), y * (2 + 2 * mx), x * (2 + mx)}));
  EXPECT_EQ(fc1.cache, 2 * x);
  // A layer the plan does not recompute keeps the quantized copy as before.
  c.recomputed_layer = false;
  EXPECT_EQ(linear_leaf(c, leaf_id::linear_fc1, true, 4096, 14336).cache, mx * x);
  // The norm's other consumers too; a linear that does not read the norm is untouched.
  c.recomputed_layer = true;
  EXPECT_EQ(linear_leaf(c, leaf_id::linear_qkv, true, 4096, 6144).cache, 2 * x);
  EXPECT_EQ(linear_leaf(c, leaf_id::linear_proj, false, 4096, 4096).cache, mx * x);
}

TEST(Fp8SelectiveRecompute, MoeActRecomputeMakesExpertFc2SaveItsBf16Input) {
  // Experts' fc2 (8 experts, 4096 token copies, 1408 -> 2048) under moe_act recompute: Megatron
  // experts.py set_save_original_input(linear_fc2): cache 4096 x 1408 x 2 bytes instead of x mx,
  // forward casts the row-wise copy only, backward adds the column-wise cast of the replayed input.
  const double in = 4096.0 * 1408, out = 4096.0 * 2048;
  strategy_spec s = mxfp8_recompute({recompute_module::moe_act});
  op_record rec;
  build_context c = make_build_context(catalogue::deepseek_v2_lite, s, catalogue::b200, 102400);
  c.pricing = &record_op;
  c.record = &rec;
  c.quantized = true;
  c.recomputed_layer = true;
  const leaf fc2 = grouped_linear_leaf(c, leaf_id::experts_linear_fc2, 8, 4096, 1408, 2048);
  EXPECT_EQ(fc2.cache, 2 * in);
  const double w = 8.0 * 1408 * 2048;
  EXPECT_EQ(memory_bytes(rec.ops),
            (std::vector<double>{in * (2 + mx), (w / 4) * (2 + 2 * mx), out * (2 + 2 * mx), in * (2 + mx)}));
  // Without the recompute module fc2 saves its quantized input (TE's default).
  c.recomputed_layer = false;
  EXPECT_EQ(grouped_linear_leaf(c, leaf_id::experts_linear_fc2, 8, 4096, 1408, 2048).cache, mx * in);
}

TEST(Fp8SelectiveRecompute, LayerHoldsNeitherTheNormOutputsNorTheActivationOutput) {
  // gpt-oss-120b layer, MXFP8 on B200, layernorm + moe_act: the norms keep their inputs (the
  // checkpoint's), their consumers (linear_qkv, the router) and the experts' fc2 keep nothing; the
  // replay adds the two norms' and the activation's forward time to backward, nothing else.
  strategy_spec s = mxfp8_recompute({recompute_module::layernorm, recompute_module::moe_act});
  s.world_size = s.ep_size = 8;
  const build_context c = make_build_context(catalogue::gpt_oss_120b, s, catalogue::b200, 201088);
  build_context q = c;
  q.quantized = true;
  const leaf_block b = decoder_layer_leaves(q, true, true);
  double replay = 0, expected_replay = 0;
  for (const leaf& l : b) {
    replay += l.replay().value;
    if (l.id == leaf_id::input_layernorm || l.id == leaf_id::pre_mlp_layernorm || l.id == leaf_id::experts_swiglu)
      expected_replay += l.fwd.value;
    if (l.id == leaf_id::linear_qkv || l.id == leaf_id::router || l.id == leaf_id::experts_linear_fc2) {
      EXPECT_EQ(l.held(), 0.0) << l.name();
    }
    if (l.id == leaf_id::input_layernorm || l.id == leaf_id::pre_mlp_layernorm) {
      EXPECT_EQ(l.held(), l.input) << l.name();
    }
  }
  EXPECT_EQ(replay, expected_replay);
  // The whole job estimates (it was refused before).
  s.world_size = 64;
  s.micro_batch_num = 16;
  EXPECT_EQ(error_of([&] { (void)estimate(catalogue::gpt_oss_120b, s, catalogue::b200); }), "");
}

// ---- activation offload: memory ---------------------------------------------------------------

TEST(ActivationOffload, StagePeaksDropByTheBytesOnTheHost) {
  // A stage of 4 identical layers of two leaves: a (cache 100, offloaded) and b (cache 50, forward
  // transient 10, backward transient 30). One layer holds 150, of which 100 go to the host.
  // Forward peak, at b of the last layer: 3 earlier layers x 50 on the device + 100 (its a) + 10
  // = 260 (without offload 3 x 150 + 110 = 560: 3 x 100 less, the three finished layers).
  // Backward peak, at b of the last layer: 4 x 50 + 100 (its a, reloaded) + 100 (the next layer's
  // a, prefetched) + 30 = 430 (without offload 4 x 150 + 30 = 630: 2 x 100 less).
  leaf_block layer;
  leaf a = plain_leaf(leaf_id::experts_linear_fc1, 100, 0, 0);
  a.offloaded = 100;
  leaf bl = plain_leaf(leaf_id::experts_linear_fc2, 50, 0, 0);
  bl.fwd_peak = 10;
  bl.bwd_peak = 30;
  layer.push(a);
  layer.push(bl);
  layer.assign_roles();
  stage_program prog;
  prog.add(layer, 4, 0);
  const stage_memory with = walk_stage(prog);
  EXPECT_EQ(with.held, 200.0);
  EXPECT_EQ(with.fwd_peak, 260.0);
  EXPECT_EQ(with.bwd_peak, 430.0);
  layer.leaves[0].offloaded = 0;
  const stage_memory without = walk_stage(prog);
  EXPECT_EQ(without.held, 600.0);
  EXPECT_EQ(without.fwd_peak, 560.0);
  EXPECT_EQ(without.bwd_peak, 630.0);
}

TEST(ActivationOffload, AttentionNormOffloadLeavesTheFinishedLayersOnTheHost) {
  // Llama 3 8B, one GPU, no recompute, --offload-modules attn_norm: each layer's input norm keeps
  // its bf16 input, 4096 tokens x 4096 x 2 = 33554432 bytes, which goes to the host. One stage, so
  // only this micro-batch is held. The forward peak is in the output layer / loss (after all 32
  // layers) or in the last layer (after 31): it drops by 32 or 31 x 33554432. The backward peak:
  // in the head, 31 layers' bytes are on the host (the last one prefetched); in the last layer 30.
  const double norm_input = 4096.0 * 4096 * 2;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  const estimate_result off = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  s.fine_grained_activation_offloading = true;
  s.offload_modules.insert(offload_module::attn_norm);
  const estimate_result on = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const stage_result& a = off.stages[0];
  const stage_result& b = on.stages[0];
  const double fwd_drop = static_cast<double>((a.fwd_peak_allocated_mem - b.fwd_peak_allocated_mem).value);
  const double bwd_drop = static_cast<double>((a.bwd_peak_allocated_mem - b.bwd_peak_allocated_mem).value);
  EXPECT_TRUE(fwd_drop == 32 * norm_input || fwd_drop == 31 * norm_input) << fwd_drop / norm_input;
  EXPECT_TRUE(bwd_drop == 31 * norm_input || bwd_drop == 30 * norm_input) << bwd_drop / norm_input;
  EXPECT_EQ(
      static_cast<double>((a.fwd_activation_cache_per_micro_batch - b.fwd_activation_cache_per_micro_batch).value),
      32 * norm_input);
  // 32 MiB per layer at 64 GB/s (H100's PCIe 5.0 x16) is 0.52 ms, shorter than a layer's forward
  // (about 3 ms here): hidden, the iteration time does not change.
  EXPECT_EQ(on.cost.duration_time_per_iter, off.cost.duration_time_per_iter);
}

// ---- activation offload: time -----------------------------------------------------------------

TEST(ActivationOffload, ACopyLongerThanTheLayersComputeIsExposed) {
  // One layer: fc1 holding 128e6 bytes (offloaded: expert_fc1) and compute of 1 ms forward, 2.5 ms
  // backward. B200 (cc 10): host link 64e9 B/s, so each copy takes 128e6 / 64e9 = 2 ms. Forward:
  // 2 - 1 = 1 ms exposed; backward: hidden (2 < 2.5). A 32e6-byte input (0.5 ms) hides in both.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  s.fine_grained_activation_offloading = true;
  s.offload_modules.insert(offload_module::expert_fc1);
  const build_context c = make_build_context(catalogue::mixtral_8x7b, s, catalogue::b200, 32000);
  auto exposed = [&](double bytes) {
    leaf_block b;
    b.push(plain_leaf(leaf_id::experts_linear_fc1, bytes, 0.5e-3, 1.5e-3));
    b.push(plain_leaf(leaf_id::experts_linear_fc2, 1e6, 0.5e-3, 1e-3));
    b.assign_roles();
    plan_activation_offload(b, c);
    EXPECT_EQ(b.leaves[0].offloaded, bytes);
    EXPECT_EQ(b.leaves[1].offloaded, 0.0);  // expert_fc1 names fc1's input only
    EXPECT_EQ(b.count, 3U);
    EXPECT_EQ(b.leaves[2].name(), "activation_offload");
    return std::pair{b.leaves[2].fwd.value, b.leaves[2].bwd.value};
  };
  const auto [long_fwd, long_bwd] = exposed(128e6);
  EXPECT_DOUBLE_EQ(long_fwd, 1e-3);
  EXPECT_EQ(long_bwd, 0.0);
  const auto [short_fwd, short_bwd] = exposed(32e6);
  EXPECT_EQ(short_fwd, 0.0);
  EXPECT_EQ(short_bwd, 0.0);
  // A100 (cc 8.0): PCIe 4.0 x16, 32e9 B/s: 128e6 bytes take 4 ms: 3 ms and 1.5 ms exposed.
  const build_context older = make_build_context(catalogue::mixtral_8x7b, s, catalogue::a100_sxm, 32000);
  leaf_block b;
  b.push(plain_leaf(leaf_id::experts_linear_fc1, 128e6, 0.5e-3, 1.5e-3));
  b.push(plain_leaf(leaf_id::experts_linear_fc2, 1e6, 0.5e-3, 1e-3));
  plan_activation_offload(b, older);
  EXPECT_DOUBLE_EQ(b.leaves[2].fwd.value, 3e-3);
  EXPECT_DOUBLE_EQ(b.leaves[2].bwd.value, 1.5e-3);
}

TEST(ActivationOffload, SimuMaxOffloadGroupgemmColInputsIsExpertFc1) {
  // SimuMax's offload_groupgemm_col_inputs offloads the grouped fc1's input: the same bytes as
  // Megatron's --offload-modules expert_fc1, and the same estimate.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .ep_size = 8};
  strategy_spec simumax = s;
  simumax.offload_groupgemm_col_inputs = true;
  strategy_spec megatron = s;
  megatron.fine_grained_activation_offloading = true;
  megatron.offload_modules.insert(offload_module::expert_fc1);
  const auto plain = estimate(catalogue::mixtral_8x7b, s, catalogue::h100_sxm);
  const auto a = estimate(catalogue::mixtral_8x7b, simumax, catalogue::h100_sxm);
  const auto b = estimate(catalogue::mixtral_8x7b, megatron, catalogue::h100_sxm);
  EXPECT_EQ(a.mem.peak_mem, b.mem.peak_mem);
  EXPECT_EQ(a.cost.duration_time_per_iter, b.cost.duration_time_per_iter);
  EXPECT_LT(a.stages[0].fwd_activation_cache_per_micro_batch, plain.stages[0].fwd_activation_cache_per_micro_batch);
  EXPECT_GE(a.cost.duration_time_per_iter, plain.cost.duration_time_per_iter);
}

// ---- rules and refusals -----------------------------------------------------------------------

TEST(ActivationOffload, RulesAndRefusals) {
  const auto& m = catalogue::llama3_8b;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  s.offload_modules.insert(offload_module::attn_norm);
  EXPECT_EQ(error_of([&] { validate(s); }),
            "llmsim::strategy: strategy.offload_modules requires strategy.fine_grained_activation_offloading=true");
  s.offload_modules = {};
  s.fine_grained_activation_offloading = true;
  EXPECT_NE(error_of([&] { validate(s); }).find("requires a non-empty strategy.offload_modules"), std::string::npos);
  s.offload_modules.insert(offload_module::attn_proj);
  EXPECT_NE(error_of([&] { validate(s); }).find("\"attn_proj\" requires \"core_attn\""), std::string::npos);
  s.offload_modules.insert(offload_module::core_attn);
  EXPECT_EQ(error_of([&] { validate(s); }), "");
  strategy_spec full = s;
  full.recompute_granularity = recompute_kind::full_block;
  full.recompute_layer_num = 1;
  EXPECT_NE(error_of([&] {
              (void)estimate(m, full, catalogue::h100_sxm);
            }).find("strategy.fine_grained_activation_offloading=true with strategy.recompute_granularity"),
            std::string::npos);
  strategy_spec zb = s;
  zb.world_size = zb.pp_size = 2;
  zb.pipeline_schedule = pipeline_schedule_kind::zb_h1;
  EXPECT_NE(error_of([&] { (void)estimate(m, zb, catalogue::h100_sxm); }).find("\"zb_h1\" pipeline schedule"),
            std::string::npos);
}

// ---- TransformerEngine's layer-level offloading (--cpu-offloading) ----------------------------

TEST(LayerOffload, EveryTensorOfTheLayerGoesAndTheCopiesShareTheLaterLayersCompute) {
  // A layer of two leaves holding 90e6 and 45e6 bytes (135e6 in all), forward f = 0.2 + 0.1 ms,
  // backward b = 0.3 + 0.2 ms, in Llama 3 8B (L = 32 layers), the first N offloaded. TE's copies
  // queue on one stream; the last must end before layer L - 1 starts (forward) and the reloads
  // before layer 0's backward: N copies of c against (L - 1) f forward and (L - 2) b backward, so
  // each offloaded layer is exposed by max(0, c - (L - 1) f / N) and max(0, c - (L - 2) b / N).
  //   GB200, NVLink-C2C as measured, 193e9 B/s: c = 135e6 / 193e9 = 0.6995 ms; N = 8:
  //   0.6995 - 31 x 0.3 / 8 = 0.6995 - 1.1625 < 0 and 0.6995 - 30 x 0.5 / 8 < 0: nothing exposed.
  //   B200, PCIe 5.0 x16 64e9 B/s: c = 2.109375 ms; N = 8: 2.109375 - 1.1625 = 0.946875 ms forward,
  //   2.109375 - 1.875 = 0.234375 ms backward. N = 31: 2.109375 - 0.3 = 1.809375 ms forward,
  //   2.109375 - 15 / 31 ms backward.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  s.cpu_offloading = true;
  s.cpu_offloading_num_layers = 8;
  auto offload = [&](const system_spec& sys, const strategy_spec& st) {
    const build_context c = make_build_context(catalogue::llama3_8b, st, sys, 128256);
    leaf_block b;
    b.push(plain_leaf(leaf_id::linear_fc1, 90e6, 0.2e-3, 0.3e-3));
    b.push(plain_leaf(leaf_id::linear_fc2, 45e6, 0.1e-3, 0.2e-3));
    b.assign_roles();
    plan_layer_offload(b, c);
    EXPECT_EQ(b.leaves[0].offloaded, 90e6);
    EXPECT_EQ(b.leaves[1].offloaded, 45e6);
    EXPECT_EQ(b.count, 3U);
    EXPECT_EQ(b.leaves[2].name(), "activation_offload");
    return std::pair{b.leaves[2].fwd.value, b.leaves[2].bwd.value};
  };
  const auto [c2c_fwd, c2c_bwd] = offload(catalogue::gb200_nvl72, s);
  EXPECT_EQ(c2c_fwd, 0.0);
  EXPECT_EQ(c2c_bwd, 0.0);
  const auto [pcie_fwd, pcie_bwd] = offload(catalogue::b200, s);
  EXPECT_NEAR(pcie_fwd, 0.946875e-3, 1e-15);
  EXPECT_NEAR(pcie_bwd, 0.234375e-3, 1e-15);
  strategy_spec one_set = s;
  one_set.cpu_offloading_num_layers = 31;
  const auto [last_fwd, last_bwd] = offload(catalogue::b200, one_set);
  EXPECT_NEAR(last_fwd, 1.809375e-3, 1e-15);
  EXPECT_NEAR(last_bwd, 2.109375e-3 - 15e-3 / 31, 1e-15);
}

TEST(LayerOffload, BackwardHoldsTheReloadedLayersOfTheWindow) {
  // L = 5 layers, the first N = 2 offloaded (each holding 200, all of it sent to the host), the
  // other 3 holding 100; every layer's backward needs 30 more. TE reloads layer i with the
  // backward of layer L - 1 - N + i = 2 + i, so in the backward of layer j the device holds what
  // layers <= j keep plus the offloaded bytes of layers j - 2 .. j:
  //   j = 4: 300 + 0 + 30 = 330;  j = 3: 200 + 200 (layer 1) + 30 = 430;
  //   j = 2: 100 + 400 (layers 0, 1) + 30 = 530;  j = 1: 0 + 400 + 30 = 430;  j = 0: 230.
  // Peak 530 (three layers' sets: L - N). Forward: the offloaded layers' bytes are gone, 300 held.
  leaf_block big, small;
  leaf a = plain_leaf(leaf_id::linear_fc1, 200, 0, 0);
  a.offloaded = 200;
  a.bwd_peak = 30;
  big.push(a);
  big.assign_roles();
  leaf bl = plain_leaf(leaf_id::linear_fc1, 100, 0, 0);
  bl.bwd_peak = 30;
  small.push(bl);
  small.assign_roles();
  stage_program prog;
  prog.add(big, 2, 0);
  prog.add(small, 3, 2);
  prog.reload_ahead = 2;
  const stage_memory m = walk_stage(prog);
  EXPECT_EQ(m.held, 300.0);
  EXPECT_EQ(m.bwd_peak, 530.0);
  EXPECT_EQ(m.bwd_site.layer, 2);
  // N = L - 1 = 4 of 5 (ahead 0): each offloaded layer is reloaded as its backward starts.
  stage_program last;
  last.add(big, 4, 0);
  last.add(small, 1, 4);
  last.reload_ahead = 0;
  EXPECT_EQ(walk_stage(last).bwd_peak, 230.0);  // j = 0..3: 200 + 30; j = 4: 100 + 30
}

TEST(LayerOffload, OffloadingNLayersFreesWhatNLayersHold) {
  // Llama 3 8B on one GB200, 4096 tokens, no recompute. Offloading the first 8 layers takes their
  // activations off the GPU: the micro-batch's cache drops by what 8 of its 32 identical layers
  // hold, i.e. by 8 x (the 32-layer model's cache - the 31-layer model's cache). With 16 layers,
  // twice that. The copies (each layer's bytes at 193e9 B/s) fit in the window of the later
  // layers' forward and backward on GB200 here, so the iteration time does not change; on a B200 (64e9 B/s over PCIe) it grows.
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  model_spec shorter = catalogue::llama3_8b;
  shorter.layer_num = 31;
  const auto cache = [](const estimate_result& r) {
    return static_cast<double>(r.stages[0].fwd_activation_cache_per_micro_batch.value);
  };
  const estimate_result plain = estimate(catalogue::llama3_8b, s, catalogue::gb200_nvl72);
  const double one_layer = cache(plain) - cache(estimate(shorter, s, catalogue::gb200_nvl72));
  EXPECT_GT(one_layer, 4096.0 * 4096 * 2 * 5);  // at least the layer's five hidden-width tensors
  s.cpu_offloading = true;
  s.cpu_offloading_num_layers = 8;
  const estimate_result eight = estimate(catalogue::llama3_8b, s, catalogue::gb200_nvl72);
  EXPECT_DOUBLE_EQ(cache(plain) - cache(eight), 8 * one_layer);
  EXPECT_LT(eight.mem.peak_mem, plain.mem.peak_mem);
  EXPECT_EQ(eight.cost.duration_time_per_iter, plain.cost.duration_time_per_iter);
  s.cpu_offloading_num_layers = 16;
  EXPECT_DOUBLE_EQ(cache(plain) - cache(estimate(catalogue::llama3_8b, s, catalogue::gb200_nvl72)), 16 * one_layer);
  strategy_spec none = s;
  none.cpu_offloading = false;
  EXPECT_GT(estimate(catalogue::llama3_8b, s, catalogue::b200).cost.duration_time_per_iter,
            estimate(catalogue::llama3_8b, none, catalogue::b200).cost.duration_time_per_iter);
}

TEST(LayerOffload, MegatronsRules) {
  // Megatron transformer_config.py: fewer layers than the model has, no pipeline parallelism, no
  // activation recompute; not with fine-grained offloading (strategy.hpp).
  const auto& m = catalogue::llama3_8b;
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 1};
  s.cpu_offloading = true;
  s.cpu_offloading_num_layers = 32;
  EXPECT_EQ(error_of([&] { validate(m, s); }),
            "llmsim::strategy: strategy.cpu_offloading_num_layers=32 must be below model.layer_num=32 (Megatron "
            "transformer_config.py: CPU offloading can be done only for layers less than num_layers)");
  s.cpu_offloading_num_layers = 4;
  EXPECT_EQ(error_of([&] { validate(m, s); }), "");
  strategy_spec pp = s;
  pp.world_size = pp.pp_size = 2;
  EXPECT_NE(error_of([&] { validate(m, pp); }).find("strategy.cpu_offloading=true with strategy.pp_size=2"),
            std::string::npos);
  strategy_spec rc = s;
  rc.recompute_granularity = recompute_kind::full_block;
  rc.recompute_layer_num = 1;
  EXPECT_NE(error_of([&] { validate(m, rc); }).find("refuses CPU offloading when activation recomputation"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)estimate(catalogue::nemotron_3_nano_30b_a3b, s, catalogue::h100_sxm); })
                .find("strategy.cpu_offloading=true (TransformerEngine's layer-level activation offloading) with "
                      "model.hybrid_override_pattern is not modelled yet"),
            std::string::npos);
}

TEST(LayerOffload, HostLinkIsASystemField) {
  // accelerator.host_link_gbs is read, written back, and range-checked; the catalogue's Grace parts
  // carry NVLink-C2C's measured 193 GB/s (nvbandwidth device to host on GB200), the others none
  // (PCIe by generation).
  EXPECT_EQ(catalogue::gb200_nvl72.accelerator.host_link_gbs, 193.0);
  EXPECT_EQ(catalogue::gb300_nvl72.accelerator.host_link_gbs, 193.0);
  EXPECT_EQ(catalogue::b200.accelerator.host_link_gbs, 0.0);
  json::value written = json::to_json(catalogue::gb200_nvl72);
  EXPECT_EQ(written["accelerator"]["host_link_gbs"], 193.0);
  EXPECT_EQ(json::parse_system(written).spec().accelerator.host_link_gbs, 193.0);
  written["accelerator"]["host_link_gbs"] = -1.0;
  EXPECT_NE(error_of([&] {
              (void)json::parse_system(written);
            }).find("system.accelerator.host_link_gbs=-1 must be in [0, 1e6] GB/s"),
            std::string::npos);
  EXPECT_FALSE(json::to_json(catalogue::b200)["accelerator"].contains("host_link_gbs"));
}

TEST(ActivationOffload, JsonReadsMegatronsNames) {
  const auto s = json::parse_strategy(json::value::parse(
      R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 4, "world_size": 1,
          "fine_grained_activation_offloading": true, "offload_modules": ["expert_fc1", "moe_act"]})"));
  EXPECT_TRUE(s.offload_modules.contains(offload_module::expert_fc1));
  EXPECT_TRUE(s.offload_modules.contains(offload_module::moe_act));
  EXPECT_FALSE(s.offload_modules.contains(offload_module::attn_norm));
  EXPECT_NE(error_of([] {
              (void)json::parse_strategy(json::value::parse(
                  R"({"seq_len": 4096, "micro_batch_size": 1, "micro_batch_num": 4, "world_size": 1,
                      "fine_grained_activation_offloading": true, "offload_modules": ["fused_group_mlp"]})"));
            }).find("offload_modules"),
            std::string::npos);
}

}  // namespace llmsim_test_activation_offload
