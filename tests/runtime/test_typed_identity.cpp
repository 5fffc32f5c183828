// One formula: an estimate computed at compile time through the typed API equals, bit for bit,
// the estimate of the same specs written to JSON text, parsed back and estimated at run time.
// Then the same identity over the whole catalogue (every model x strategies x systems) at run
// time: whatever `llmsim::estimate` accepts (dense today, MoE as soon as it is modelled) must
// survive the trip through JSON unchanged, and whatever it refuses must be refused the same way.
#include <llmsim/json.hpp>
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_typed_identity {

namespace {
using namespace llmsim::typed;
namespace hw = llmsim::hw;
namespace lj = llmsim::json;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::ep, llmsim::micro_batches;
namespace recompute = llmsim::recompute;

// ---- the typed descriptions -------------------------------------------------------------------------

constexpr auto llama3_8b = model("llama3_8b", embedding{.vocab = 128256, .hidden = 4096},
                                 repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                                        swiglu_mlp{.ffn = 14336}, rms_norm{}},
                                          32},
                                 lm_head{});
constexpr auto gpt3_175b = model(
    "gpt3_175b",
    embedding{
        .vocab = 50257, .hidden = 12288, .position = llmsim::position_kind::learned_absolute, .max_positions = 2048},
    repeated{decoder_layer{mha_attention{.heads = 96, .head_dim = 128, .bias = true},
                           gelu_mlp{.ffn = 49152, .bias = true}, layer_norm{}},
             96},
    lm_head{.tied = true});
/// GPT-3 175B with a 4096-row position table, so that it runs the 4096-token strategies below.
constexpr auto gpt3_175b_4k = model(
    "gpt3_175b",
    embedding{
        .vocab = 50257, .hidden = 12288, .position = llmsim::position_kind::learned_absolute, .max_positions = 4096},
    repeated{decoder_layer{mha_attention{.heads = 96, .head_dim = 128, .bias = true},
                           gelu_mlp{.ffn = 49152, .bias = true}, layer_norm{}},
             96},
    lm_head{.tied = true});
constexpr auto qwen3_32b = model("qwen3_32b", embedding{.vocab = 151936, .hidden = 5120},
                                 repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128},
                                                        swiglu_mlp{.ffn = 25600}, rms_norm{}},
                                          64},
                                 lm_head{});
constexpr auto mixtral_8x7b = model("mixtral_8x7b", embedding{.vocab = 32000, .hidden = 4096},
                                    repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                                           moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 14336}},
                                             32},
                                    lm_head{});
constexpr mla_attention deepseek_mla{.heads = 128,
                                     .q_lora_rank = 1536,
                                     .kv_lora_rank = 512,
                                     .qk_head_dim = 128,
                                     .qk_pos_emb_head_dim = 64,
                                     .v_head_dim = 128};
constexpr auto deepseek_v3 =
    model("deepseek_v3", embedding{.vocab = 129280, .hidden = 7168},
          repeated{decoder_layer{deepseek_mla, swiglu_mlp{.ffn = 18432}}, 3},
          repeated{decoder_layer{deepseek_mla, moe_mlp{.experts = 256,
                                                       .topk = 8,
                                                       .expert_ffn = 2048,
                                                       .shared_ffn = 2048,
                                                       .score = llmsim::router_score_kind::sigmoid,
                                                       .groups = 8,
                                                       .group_topk = 4,
                                                       .expert_bias = true}},
                   58},
          lm_head{});

using tp2_dp4 = parallel<tp<2>, dp<4>>;
using tp8_pp4_dp2 = parallel<tp<8>, pp<4>, dp<2>, micro_batches<16>, recompute::selective>;
using tp8_pp4_dp2_zbh1 = parallel<tp<8>, pp<4>, dp<2>, micro_batches<16>, llmsim::schedule::zb_h1>;
using tp8_pp4_dp2_vpp2 = parallel<tp<8>, pp<4>, dp<2>, llmsim::vpp<2>, micro_batches<16>>;
using tp8_pp4_dp2_dualpipev = parallel<tp<8>, pp<4>, dp<2>, micro_batches<16>, llmsim::schedule::dualpipev>;
using pp4_ep2_dp2_dualpipev = parallel<pp<4>, ep<2>, dp<2>, micro_batches<8>, llmsim::schedule::dualpipev>;
using tp2_ep4_dp4 = parallel<tp<2>, ep<4>, dp<4>>;
using ep4_dp8 = parallel<ep<4>, dp<8>>;
using tp2_cp2_dp2_p2p = parallel<tp<2>, llmsim::cp<2>, dp<2>, llmsim::seq<16384>, llmsim::cp_comm::p2p>;
using tp2_cp4_a2a = parallel<tp<2>, llmsim::cp<4>, dp<1>, llmsim::seq<16384>, llmsim::cp_comm::a2a>;
using tp2_cp4_hierarchical =
    parallel<tp<2>, llmsim::cp<4>, dp<1>, llmsim::seq<16384>, llmsim::cp_comm::hierarchical<2, 2>>;

// ---- comparing two results bit for bit ------------------------------------------------------------

/// Every number of a result as its bits, with its name (one loop of comparisons keeps this TU cheap).
class result_fields {
 public:
  explicit result_fields(const llmsim::estimate_result& r) {
    const auto& c = r.cost;
    const auto& br = c.breakdown_result;
    add("cost.duration_time_per_iter", c.duration_time_per_iter);
    add("cost.pipeline_time", c.pipeline_time);
    add("cost.mfu", c.mfu);
    add("cost.mfu_6nd_with_attn", c.mfu_6nd_with_attn);
    add("cost.throughput_per_accelerator", c.throughput_per_accelerator);
    add("cost.all_tokens_per_iter", c.all_tokens_per_iter);
    add("cost.model_flops_per_iter", c.model_flops_per_iter.value);
    add("breakdown.fwd_compute_time", br.fwd_compute_time);
    add("breakdown.bwd_compute_time", br.bwd_compute_time);
    add("breakdown.recompute_time", br.recompute_time);
    add("breakdown.intra_exposed_time", br.intra_exposed_time);
    add("breakdown.inter_exposed_time", br.inter_exposed_time);
    add("breakdown.bubble_time", br.bubble_time);
    add("breakdown.dp_exposed_time", br.dp_exposed_time);
    add("breakdown.optim_time", br.optim_time);
    add("breakdown.straggler_time", br.straggler_time);
    add("comm.tp_time_per_iter", c.comm_result.tp_time_per_iter);
    add("comm.p2p_time_per_transfer", c.comm_result.p2p_time_per_transfer);
    add("comm.dp_time", c.comm_result.dp_time);
    add("comm.tp_net", c.comm_result.tp_net);
    add("comm.pp_net", c.comm_result.pp_net);
    add("comm.dp_net", c.comm_result.dp_net);
    add("cost.efficiency_lookups", c.efficiency_lookups);
    add("cost.efficiency_misses", c.efficiency_misses);
    add("cost.efficiency_interpolated", c.efficiency_interpolated);
    add("cost.efficiency_modelled", c.efficiency_modelled);
    add("mem.peak_mem", r.mem.peak_mem);
    add("mem.peak_mem_with_reserved", r.mem.peak_mem_with_reserved);
    add("mem.memory_reserved_ratio", r.mem.memory_reserved_ratio);
    add("mem.peak_stage", r.mem.peak_stage);
    add("padded_vocab", r.padded_vocab);
    add("param_count", r.param_count);
    add("stage_count", static_cast<std::int64_t>(r.stage_count));
    for (std::size_t i = 0; i < r.stage_count; ++i) {
      const auto& st = r.stages[i];
      prefix_ = "stages[" + std::to_string(i) + "].";
      add("kind", static_cast<std::int64_t>(st.kind));
      add("rank", st.rank);
      add("layers", st.layers);
      add("fwd_compute_time", st.fwd_compute_time);
      add("bwd_compute_time", st.bwd_compute_time);
      add("recompute_time", st.recompute_time);
      add("fwd_tp_comm_time", st.fwd_tp_comm_time);
      add("bwd_tp_comm_time", st.bwd_tp_comm_time);
      add("recompute_tp_comm_time", st.recompute_tp_comm_time);
      add("p2p_time", st.p2p_time);
      add("chunk_time", st.chunk_time);
      add("dp_time", st.dp_time);
      add("optim_time", st.optim_time);
      add("dp_buckets", st.dp_buckets);
      add("params", st.params);
      add("expert_params", st.expert_params);
      add("weight_mem", st.weight_mem);
      add("grad_mem", st.grad_mem);
      add("optimizer_state_mem", st.optimizer_state_mem);
      add("te_dummy_wgrad_mem", st.te_dummy_wgrad_mem);
      add("workspace_mem", st.workspace_mem);
      add("model_mem", st.model_mem);
      add("fwd_activation_cache_per_micro_batch", st.fwd_activation_cache_per_micro_batch);
      add("peak_activation_mem_in_1F1B", st.peak_activation_mem_in_1F1B);
      add("micro_batches_in_flight", st.micro_batches_in_flight);
      add("fwd_peak_allocated_mem", st.fwd_peak_allocated_mem);
      add("bwd_peak_allocated_mem", st.bwd_peak_allocated_mem);
      add("peak_mem", st.peak_mem);
      add("peak_mem_with_reserved", st.peak_mem_with_reserved);
      add("peak_path.block", st.peak_path.block);
      add("peak_path.layer", st.peak_path.layer);
      add("peak_path.leaf", st.peak_path.leaf);
      add("peak_path.pass", st.peak_path.pass);
      add("efficiency_lookups", st.efficiency_lookups);
      add("efficiency_misses", st.efficiency_misses);
      add("efficiency_interpolated", st.efficiency_interpolated);
      add("efficiency_modelled", st.efficiency_modelled);
    }
  }
  /// "name: value" lines; equal texts mean equal bits.
  std::vector<std::string> lines;

 private:
  void add(const char* name, double v) {
    line(name, std::to_string(std::bit_cast<std::uint64_t>(v)) + " (" + std::to_string(v) + ")");
  }
  void add(const char* name, llmsim::seconds v) { add(name, v.value); }
  void add(const char* name, llmsim::bytes v) { line(name, std::to_string(v.value)); }
  void add(const char* name, std::int64_t v) { line(name, std::to_string(v)); }
  void add(const char* name, std::int32_t v) { line(name, std::to_string(v)); }
  void add(const char* name, std::string_view v) { line(name, std::string(v)); }
  void line(const char* name, const std::string& v) { lines.push_back(prefix_ + name + ": " + v); }
  std::string prefix_;
};

void expect_identical(const llmsim::estimate_result& a, const llmsim::estimate_result& b) {
  const result_fields x(a), y(b);
  ASSERT_EQ(x.lines.size(), y.lines.size());
  for (std::size_t i = 0; i < x.lines.size(); ++i) EXPECT_EQ(x.lines[i], y.lines[i]);
}

// ---- the run-time path: specs written to JSON text, parsed back, estimated ------------------------

lj::value through_text(const lj::value& v, const std::string& source) { return lj::parse_text(v.dump(2), source); }

struct parsed_specs {
  llmsim::model_spec model;
  llmsim::strategy_spec strategy;
  lj::system_config system;
};

parsed_specs through_json(const llmsim::model_spec& m, const llmsim::strategy_spec& s, const llmsim::system_spec& sys) {
  parsed_specs p{lj::parse_model(through_text(lj::to_json(m), "model.json"), "model.json", {.strict = true}),
                 lj::parse_strategy(through_text(lj::to_json(s), "strategy.json"), "strategy.json", {.strict = true}),
                 lj::parse_system(through_text(lj::to_json(sys), "system.json"), "system.json", {.strict = true})};
  EXPECT_EQ(p.model, m);
  EXPECT_EQ(p.strategy, s);
  EXPECT_EQ(p.system.spec(), sys);
  return p;
}

bool not_modelled_yet(std::string_view error) { return error.find("not modelled yet") != std::string_view::npos; }

/// The estimate at run time, or the message of the config_error that refused it.
struct outcome {
  bool estimated = false;
  llmsim::estimate_result result{};
  std::string error;
};
outcome run(const llmsim::model_spec& m, const llmsim::strategy_spec& s, const llmsim::system_spec& sys) {
  try {
    return {true, llmsim::estimate(m, s, sys), {}};
  } catch (const llmsim::config_error& e) { return {false, {}, e.what()}; }
}

// ---- compile-time cases ------------------------------------------------------------------------------

/// Whether `typed::estimate(Model, P{}, H{})` is a constant expression, i.e. the estimate accepts
/// it (a refusal calls the non-constexpr error path): MoE cases become compile-time cases by
/// themselves once MoE is modelled.
template <const auto& Model, class P, class H>
concept estimable_at_compile_time = requires {
  typename std::integral_constant<bool, (llmsim::typed::estimate(Model, P{}, H{}), true)>;
};

struct compiled_case {
  std::string name;
  llmsim::model_spec model;
  llmsim::strategy_spec strategy;
  const llmsim::system_spec* system;
  const llmsim::estimate_result* compiled;  ///< null: refused at compile time
};

template <const auto& Model, class P, class H>
compiled_case make_case(std::string name) {
  if constexpr (estimable_at_compile_time<Model, P, H>) {
    static constexpr llmsim::estimate_result result = llmsim::typed::estimate(Model, P{}, H{});
    return {std::move(name), to_spec(Model), P::spec, &H::spec, &result};
  } else {
    return {std::move(name), to_spec(Model), P::spec, &H::spec, nullptr};
  }
}

template <const auto& Model>
void add_cases(std::vector<compiled_case>& out, const std::string& name) {
  out.push_back(make_case<Model, tp2_dp4, hw::h100_sxm>(name + " tp2_dp4 h100_sxm"));
  out.push_back(make_case<Model, tp2_dp4, hw::a100_pcie>(name + " tp2_dp4 a100_pcie"));
  out.push_back(make_case<Model, tp8_pp4_dp2, hw::h100_sxm>(name + " tp8_pp4_dp2_mbc16_selective h100_sxm"));
  out.push_back(make_case<Model, tp8_pp4_dp2, hw::a100_pcie>(name + " tp8_pp4_dp2_mbc16_selective a100_pcie"));
  out.push_back(make_case<Model, tp8_pp4_dp2_zbh1, hw::h100_sxm>(name + " tp8_pp4_dp2_mbc16_zbh1 h100_sxm"));
  out.push_back(make_case<Model, tp8_pp4_dp2_dualpipev, hw::h100_sxm>(name + " tp8_pp4_dp2_mbc16_dualpipev h100_sxm"));
  out.push_back(make_case<Model, tp8_pp4_dp2_vpp2, hw::h100_sxm>(name + " tp8_pp4_dp2_vp2_mbc16 h100_sxm"));
}

std::vector<compiled_case> compiled_cases() {
  std::vector<compiled_case> out;
  add_cases<llama3_8b>(out, "llama3_8b");
  add_cases<gpt3_175b_4k>(out, "gpt3_175b_4k");
  add_cases<qwen3_32b>(out, "qwen3_32b");
  out.push_back(make_case<mixtral_8x7b, tp2_ep4_dp4, hw::h100_sxm>("mixtral_8x7b tp2_ep4_dp4 h100_sxm"));
  out.push_back(make_case<mixtral_8x7b, tp2_ep4_dp4, hw::b200>("mixtral_8x7b tp2_ep4_dp4 b200"));
  out.push_back(
      make_case<mixtral_8x7b, pp4_ep2_dp2_dualpipev, hw::h100_sxm>("mixtral_8x7b pp4_ep2_dp2_mbc8_dualpipev h100_sxm"));
  out.push_back(make_case<deepseek_v3, ep4_dp8, hw::h100_sxm>("deepseek_v3 ep4_dp8 h100_sxm"));
  out.push_back(make_case<llama3_8b, tp2_cp2_dp2_p2p, hw::h100_sxm>("llama3_8b tp2_cp2_dp2 p2p h100_sxm"));
  out.push_back(make_case<llama3_8b, tp2_cp4_a2a, hw::a100_pcie>("llama3_8b tp2_cp4 a2a a100_pcie"));
  out.push_back(make_case<qwen3_32b, tp2_cp4_hierarchical, hw::h100_sxm>("qwen3_32b tp2_cp4 a2a+p2p h100_sxm"));
  return out;
}

}  // namespace

TEST(TypedIdentity, TypedModelsLowerToTheCatalogue) {
  EXPECT_EQ(to_spec(llama3_8b), llmsim::catalogue::llama3_8b);
  EXPECT_EQ(to_spec(gpt3_175b), llmsim::catalogue::gpt3_175b);
  EXPECT_EQ(to_spec(qwen3_32b), llmsim::catalogue::qwen3_32b);
  EXPECT_EQ(to_spec(deepseek_v3), llmsim::catalogue::deepseek_v3);
}

#if defined(__SANITIZE_ADDRESS__)
#define LLMSIM_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMSIM_SANITIZED_BUILD 1
#endif
#endif

TEST(TypedIdentity, CompileTimeEqualsRunTimeThroughJson) {
#ifdef LLMSIM_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer instrumentation keeps GCC from evaluating the estimate as a constant; the plain GCC and "
                  "Clang builds run this test";
#endif
  int compared = 0;
  for (const auto& c : compiled_cases()) {
    SCOPED_TRACE(c.name);
    const parsed_specs p = through_json(c.model, c.strategy, *c.system);
    const outcome run_time = run(p.model, p.strategy, p.system);
    if (c.compiled == nullptr) {
      // Refused at compile time: the run-time path must refuse it as well, as not modelled yet.
      EXPECT_FALSE(run_time.estimated) << "refused at compile time but estimated at run time";
      EXPECT_TRUE(not_modelled_yet(run_time.error)) << run_time.error;
      continue;
    }
    ASSERT_TRUE(run_time.estimated) << run_time.error;
    expect_identical(*c.compiled, run_time.result);
    ++compared;
  }
  // 3 dense x (2 strategies x 2 systems + interleaved + ZB-H1 + DualPipeV) + MoE DualPipeV + 3 context-parallel
  EXPECT_GE(compared, 25);
  RecordProperty("compared", compared);
}

TEST(TypedIdentity, EveryCatalogueModelSurvivesJson) {
  const std::string_view strategies[] = {"tp1_dp8",
                                         "tp2_dp4",
                                         "tp8_pp4_dp2_mbc16_selective",
                                         "tp2_pp2_dp2_ep2_mbc8_full",
                                         "tp2_pp4_mbc16_zbh1",
                                         "pp4_dp2_ep2_mbc8_dualpipev"};
  int compared = 0, not_modelled = 0, refused = 0;
  for (const auto& m : llmsim::catalogue::models) {
    for (const std::string_view name : strategies) {
      llmsim::strategy_spec s{};
      ASSERT_TRUE(llmsim::catalogue::parse_strategy_name(name, s)) << name;
      for (const auto& sys : llmsim::catalogue::systems) {
        SCOPED_TRACE(std::string(m.name) + " " + std::string(name) + " " + std::string(sys.name));
        const outcome direct = run(*m.spec, s, *sys.spec);
        const parsed_specs p = through_json(*m.spec, s, *sys.spec);
        const outcome from_json = run(p.model, p.strategy, p.system);
        ASSERT_EQ(from_json.estimated, direct.estimated) << direct.error << from_json.error;
        if (!direct.estimated) {
          // Refused (a rule, or not modelled yet): the specs read from JSON are refused alike.
          EXPECT_EQ(from_json.error, direct.error);
          (not_modelled_yet(direct.error) ? not_modelled : refused) += 1;
          continue;
        }
        expect_identical(direct.result, from_json.result);
        ++compared;
      }
    }
  }
  // Every dense catalogue model takes at least the tp1/tp2 strategies on every system.
  EXPECT_GE(compared, 8 * 2 * 6);
  RecordProperty("compared", compared);
  RecordProperty("not_modelled", not_modelled);
  RecordProperty("refused", refused);
}

}  // namespace llmsim_test_typed_identity
