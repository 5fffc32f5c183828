// Leaves are identified by `leaf_id`; `leaf_name` is the one place their Megatron module names are
// spelled. The expected names below are written by hand from Megatron-LM's module attributes
// (TransformerLayer: input_layernorm, self_attention.{linear_qkv, core_attention, linear_proj},
// pre_mlp_layernorm, mlp.{linear_fc1, linear_fc2}; GPTModel: embedding, decoder.final_layernorm,
// output_layer; MoELayer: router, experts.linear_fc1, shared_experts.linear_fc2).
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_leaf_ids {

using namespace llmsim;

namespace {
constexpr bool every_id_has_a_distinct_name() {
  for (std::size_t i = 0; i < leaf_id_count; ++i) {
    if (leaf_name(static_cast<leaf_id>(i)).empty()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (leaf_name(static_cast<leaf_id>(i)) == leaf_name(static_cast<leaf_id>(j))) return false;
  }
  return true;
}
static_assert(every_id_has_a_distinct_name());
static_assert(leaf_name(leaf_id::experts_linear_fc1) == "experts.linear_fc1");
}  // namespace

TEST(LeafIds, EveryIdHasADistinctNonEmptyName) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < leaf_id_count; ++i) {
    const std::string_view n = leaf_name(static_cast<leaf_id>(i));
    EXPECT_FALSE(n.empty()) << "leaf_id " << i;
    EXPECT_TRUE(names.insert(n).second) << "duplicate name " << n;
  }
  EXPECT_EQ(names.size(), leaf_id_count);
  // leaf_id_count covers the whole enumeration: the value after the last one has no name.
  EXPECT_TRUE(leaf_name(static_cast<leaf_id>(leaf_id_count)).empty());
}

TEST(LeafIds, NamesAreTheMegatronModuleNames) {
  EXPECT_EQ(leaf_name(leaf_id::embedding), "embedding");
  EXPECT_EQ(leaf_name(leaf_id::input_layernorm), "input_layernorm");
  EXPECT_EQ(leaf_name(leaf_id::linear_qkv), "linear_qkv");
  EXPECT_EQ(leaf_name(leaf_id::core_attention), "core_attention");
  EXPECT_EQ(leaf_name(leaf_id::linear_proj), "linear_proj");
  EXPECT_EQ(leaf_name(leaf_id::pre_mlp_layernorm), "pre_mlp_layernorm");
  EXPECT_EQ(leaf_name(leaf_id::linear_fc1), "linear_fc1");
  EXPECT_EQ(leaf_name(leaf_id::linear_fc2), "linear_fc2");
  EXPECT_EQ(leaf_name(leaf_id::router), "router");
  EXPECT_EQ(leaf_name(leaf_id::experts_linear_fc1), "experts.linear_fc1");
  EXPECT_EQ(leaf_name(leaf_id::shared_experts_linear_fc2), "shared_experts.linear_fc2");
  EXPECT_EQ(leaf_name(leaf_id::final_layernorm), "final_layernorm");
  EXPECT_EQ(leaf_name(leaf_id::output_layer), "output_layer");
}

TEST(LeafIds, ALlamaLayerCarriesTheModuleNamesInOrder) {
  // Llama 3 8B (GQA, RoPE, SwiGLU): one decoder layer as Megatron-LM + TE runs it.
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  const build_context c = make_build_context(catalogue::llama3_8b, s, catalogue::h100_sxm, 128256);
  const leaf_block b = decoder_layer_leaves(c, false, false);
  const std::vector<std::string_view> expected{"input_layernorm",   "linear_qkv",      "rotary_pos_emb",
                                               "core_attention",    "linear_proj",     "attention_residual_add",
                                               "pre_mlp_layernorm", "linear_fc1",      "swiglu",
                                               "linear_fc2",        "mlp_residual_add"};
  ASSERT_EQ(b.count, expected.size());
  for (std::size_t i = 0; i < b.count; ++i) EXPECT_EQ(b.leaves[i].name(), expected[i]) << i;
}

TEST(LeafIds, TheReportedPeakPathNamesALeaf) {
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
  const auto r = estimate(catalogue::llama3_8b, s, catalogue::h100_sxm);
  const std::string_view leaf = r.stages[0].peak_path.leaf;
  bool known = false;
  for (std::size_t i = 0; i < leaf_id_count; ++i) known = known || leaf_name(static_cast<leaf_id>(i)) == leaf;
  EXPECT_TRUE(known) << leaf;
  EXPECT_NE(format_peak_path(r, 0).find(std::string(leaf)), std::string::npos);
}

}  // namespace llmsim_test_leaf_ids
