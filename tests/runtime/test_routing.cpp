// MoE routing variants (Megatron --moe-router-score-function, --moe-router-num-groups /
// --moe-router-group-topk, --moe-router-enable-expert-bias, --moe-router-fusion): their rules and
// the kernels the unfused router adds (megatron/core/transformer/moe/moe_utils.py
// `topk_routing_with_score_function`, `group_limited_topk`). Expected bytes are counted by hand from
// the router's score tensor: tokens x experts x 2 bytes (bf16).
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_routing {

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

/// DeepSeek-V2-Lite (64 experts, top-6) with the routing fields `edit` sets.
template <class Edit>
model_spec lite(Edit edit) {
  model_spec m = catalogue::deepseek_v2_lite;
  edit(m);
  return m;
}

/// One rank, 4096 tokens per micro-batch: the router scores 4096 x 64 experts.
constexpr strategy_spec one_rank{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 1};
constexpr double scores = 4096.0 * 64 * 2;  // bytes of the bf16 score tensor

/// The (pass, bytes) of the memory-bound kernels the router leaf of `m` emits.
std::vector<std::pair<pass_kind, double>> router_kernels(const model_spec& m) {
  op_record rec;
  build_context c = make_build_context(m, one_rank, catalogue::h100_sxm, 102400);
  c.pricing = &record_op;
  c.record = &rec;
  (void)router_leaf(c, moe_token_counts(c));
  std::vector<std::pair<pass_kind, double>> out;
  for (const auto& p : rec.ops)
    if (p.o.kind == op_kind::memory) out.emplace_back(p.o.pass, p.o.bytes);
  return out;
}
}  // namespace

TEST(Routing, PlainTopKAddsNoKernels) {
  // Softmax top-k: its passes are priced with the gate GEMM's traffic; nothing else is emitted.
  EXPECT_TRUE(router_kernels(catalogue::deepseek_v2_lite).empty());
}

TEST(Routing, GroupLimitedTopKWithoutBias) {
  // Forward: group scores read (1), mask materialised (1), masked_fill reads scores and mask and
  // writes (3): 5 x scores. Backward: the probabilities come from the masked scores, so the
  // gradient goes back through masked_fill (read + write): 2 x scores.
  const auto m = lite([](model_spec& x) {
    x.moe_router_num_groups = 8;
    x.moe_router_group_topk = 3;
  });
  using P = std::pair<pass_kind, double>;
  EXPECT_EQ(router_kernels(m),
            (std::vector<P>{{pass_kind::forward, 5 * scores}, {pass_kind::backward_input, 2 * scores}}));
}

TEST(Routing, AuxLossFreeBiasWithGroups) {
  // DeepSeek-V3's router: sigmoid, groups, expert bias. Forward: the 5 group passes and the
  // bias add (read + write: 2). Backward: probabilities gathered from the unmasked scores: no
  // extra pass.
  const auto m = lite([](model_spec& x) {
    x.moe_router_score_function = router_score_kind::sigmoid;
    x.moe_router_num_groups = 8;
    x.moe_router_group_topk = 3;
    x.moe_router_enable_expert_bias = true;
  });
  using P = std::pair<pass_kind, double>;
  EXPECT_EQ(router_kernels(m), (std::vector<P>{{pass_kind::forward, 5 * scores}, {pass_kind::forward, 2 * scores}}));
}

TEST(Routing, FusedRouterAddsNoKernels) {
  // TE's fused_topk_with_score_function does scores, groups, bias and top-k in one kernel.
  const auto m = lite([](model_spec& x) {
    x.moe_router_score_function = router_score_kind::sigmoid;
    x.moe_router_num_groups = 8;
    x.moe_router_group_topk = 3;
    x.moe_router_enable_expert_bias = true;
    x.moe_router_fusion = true;
  });
  EXPECT_TRUE(router_kernels(m).empty());
}

TEST(Routing, CatalogueRoutersFollowTheirConfigs) {
  // config.json: DeepSeek-V3 sigmoid, n_group 8, topk_group 4, noaux_tc; DeepSeek-V2
  // group_limited_greedy over 8 groups, 3 picked, softmax; Kimi K2 sigmoid, noaux_tc, n_group 1.
  EXPECT_EQ(catalogue::deepseek_v3.moe_router_score_function, router_score_kind::sigmoid);
  EXPECT_EQ(catalogue::deepseek_v3.moe_router_num_groups, 8);
  EXPECT_EQ(catalogue::deepseek_v3.moe_router_group_topk, 4);
  EXPECT_TRUE(catalogue::deepseek_v3.moe_router_enable_expert_bias);
  EXPECT_EQ(catalogue::deepseek_v2.moe_router_score_function, router_score_kind::softmax);
  EXPECT_EQ(catalogue::deepseek_v2.moe_router_num_groups, 8);
  EXPECT_EQ(catalogue::deepseek_v2.moe_router_group_topk, 3);
  EXPECT_FALSE(catalogue::deepseek_v2.moe_router_enable_expert_bias);
  EXPECT_EQ(catalogue::kimi_k2.moe_router_score_function, router_score_kind::sigmoid);
  EXPECT_FALSE(catalogue::kimi_k2.moe_router_num_groups.has_value());
  EXPECT_TRUE(catalogue::kimi_k2.moe_router_enable_expert_bias);
}

TEST(Routing, RulesNameTheFieldAndTheRule) {
  const auto check = [](const model_spec& m) { return error_of([&] { validate(m); }); };
  EXPECT_EQ(check(lite([](model_spec& x) { x.moe_router_num_groups = 8; })),
            "llmsim::model: model.moe_router_num_groups and model.moe_router_group_topk are given together "
            "(group-limited routing) or not at all");
  EXPECT_EQ(check(lite([](model_spec& x) {
              x.moe_router_num_groups = 5;
              x.moe_router_group_topk = 2;
            })),
            "llmsim::model: model.moe_router_num_groups=5 must divide model.expert_num=64 (equal expert groups)");
  EXPECT_EQ(check(lite([](model_spec& x) {
              x.moe_router_num_groups = 8;
              x.moe_router_group_topk = 9;
            })),
            "llmsim::model: model.moe_router_group_topk=9 must not exceed model.moe_router_num_groups=8 nor "
            "model.topk=6");
  // 32 groups of 2 experts, 2 groups picked: 4 experts cannot hold top-6.
  EXPECT_EQ(check(lite([](model_spec& x) {
              x.moe_router_num_groups = 32;
              x.moe_router_group_topk = 2;
            })),
            "llmsim::model: model.moe_router_group_topk=2 groups of 2 experts cannot hold model.topk=6 experts");
  EXPECT_EQ(check(lite([](model_spec& x) { x.moe_router_enable_expert_bias = true; })),
            "llmsim::model: model.moe_router_enable_expert_bias=true requires model.moe_router_score_function "
            "\"sigmoid\" (Megatron: expert bias for aux-loss-free routing only supports sigmoid)");
  model_spec dense = catalogue::llama3_8b;
  dense.moe_router_fusion = true;
  EXPECT_EQ(check(dense),
            "llmsim::model: model.moe_router_* fields describe an MoE router: they require model.model_type \"moe\"");
  EXPECT_EQ(check(lite([](model_spec& x) {
              x.moe_router_score_function = router_score_kind::sigmoid;
              x.moe_router_enable_expert_bias = true;
              x.moe_router_num_groups = 8;
              x.moe_router_group_topk = 3;
            })),
            "");
}

}  // namespace llmsim_test_routing
