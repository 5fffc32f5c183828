// Pipeline layouts and MTP layers evaluate as constants (the layout parser's vectors live only
// during the evaluation). Llama 3 8B (32 layers) with "Et*3|(t*4|)*6,t*5L" on pp4 vp2: rank r runs
// stages r and 4 + r, so rank 0 holds [E t t t] + [t*4] = 7 layers, ranks 1 and 2 hold 8, rank 3
// [t*4] + [t*5 L] = 9.
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;

static_assert(parse_pipeline_layout("Et*3|(tt|)*29,m|L").size() == 32);
static_assert(parse_pipeline_layout("Et*3|(tt|)*29,m|L")[30].mtp == 1);

constexpr strategy_spec pp4_vp2_layout{.seq_len = 4096,
                                       .micro_batch_size = 1,
                                       .micro_batch_num = 8,
                                       .world_size = 16,
                                       .tp_size = 2,
                                       .pp_size = 4,
                                       .interleaving_size = 2,
                                       .pipeline_model_parallel_layout = "Et*3|(t*4|)*6,t*5L"};
constexpr estimate_result layout = estimate(catalogue::llama3_8b, pp4_vp2_layout, catalogue::h100_sxm);
static_assert(layout.stage_count == 3);
static_assert(layout.stages[0].layers == 7 && layout.stages[1].layers == 8 && layout.stages[2].layers == 9);
static_assert(layout.stages[1].rank_count == 2);

constexpr model_spec llama3_8b_mtp = [] {
  model_spec m = catalogue::llama3_8b;
  m.mtp_num_layers = 1;
  return m;
}();
constexpr strategy_spec pp2{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2, .pp_size = 2};
constexpr estimate_result mtp = estimate(llama3_8b_mtp, pp2, catalogue::h100_sxm);
constexpr estimate_result plain = estimate(catalogue::llama3_8b, pp2, catalogue::h100_sxm);
// The last stage gains the depth: the embedding's tp shard (128256 / 2 x 4096), three norms,
// eh_proj's shard (2 x 4096 x 4096 / 2) and one decoder layer as the first stage holds it.
static_assert(mtp.stages[1].params - plain.stages[1].params ==
              64128.0 * 4096 + 3 * 4096.0 + 4096.0 * 4096 + (plain.stages[0].params - 64128.0 * 4096) / 16);
static_assert(mtp.stages[0].params == plain.stages[0].params);
}  // namespace
