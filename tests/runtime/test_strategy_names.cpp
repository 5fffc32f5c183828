// Compact strategy names (catalogue::parse_strategy_name) and their inverse
// (catalogue::strategy_name, compact_strategy_name): each token sets the field its entry in
// strategy_name_tokens says, a token that means nothing is refused, and every candidate name
// `llmsim search` prints parses back to the candidate's strategy, so `llmsim perf --strategy NAME`
// prices what the search ranked.
#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/search.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace llmsim_test_strategy_names {

using llmsim::strategy_spec;
namespace catalogue = llmsim::catalogue;

namespace {
strategy_spec named(const std::string& name) {
  strategy_spec s{};
  EXPECT_TRUE(catalogue::parse_strategy_name(name, s)) << name;
  return s;
}
std::string name_of(const strategy_spec& s) {
  const auto n = catalogue::strategy_name(s);
  return n ? std::string(n->view()) : std::string("(no name)");
}
}  // namespace

TEST(StrategyNames, EachTokenSetsItsField) {
  // cp<N>ring: the KV ring; cp<N> alone keeps Ulysses' all-to-all (the strategy default).
  const strategy_spec ring = named("tp2_cp4ring_dp2");
  EXPECT_EQ(ring.cp_size, 4);
  EXPECT_EQ(ring.cp_comm_type, llmsim::cp_comm_kind::p2p);
  EXPECT_EQ(ring.world_size, 2 * 4 * 2);
  EXPECT_EQ(named("cp4").cp_comm_type, llmsim::cp_comm_kind::a2a);
  // zero<N>fsdp: Megatron-FSDP's strategy of the same stage (no_shard, optim, optim_grads,
  // optim_grads_params for ZeRO 0..3); zero<N> alone is DeepSpeed-style ZeRO (no strategy).
  EXPECT_EQ(named("zero3fsdp").zero_state, 3);
  EXPECT_EQ(named("zero3fsdp").data_parallel_sharding_strategy, llmsim::dp_sharding_kind::optim_grads_params);
  EXPECT_EQ(named("zero2fsdp").data_parallel_sharding_strategy, llmsim::dp_sharding_kind::optim_grads);
  EXPECT_EQ(named("zero1fsdp").data_parallel_sharding_strategy, llmsim::dp_sharding_kind::optim);
  EXPECT_EQ(named("zero0fsdp").data_parallel_sharding_strategy, llmsim::dp_sharding_kind::no_shard);
  EXPECT_FALSE(named("zero3").data_parallel_sharding_strategy.has_value());
  // A later token replaces an earlier one: Ulysses again, DeepSpeed-style ZeRO again.
  EXPECT_EQ(named("cp2ring_cp2").cp_comm_type, llmsim::cp_comm_kind::a2a);
  EXPECT_FALSE(named("zero3fsdp_zero1").data_parallel_sharding_strategy.has_value());
  EXPECT_EQ(named("zero3fsdp_zero1").zero_state, 1);
  // fp8<recipe>: FP8 on with that recipe; without the token, no FP8.
  EXPECT_TRUE(named("fp8blockwise").fp8);
  EXPECT_EQ(named("fp8blockwise").fp8_recipe, llmsim::fp8_recipe_kind::blockwise);
  EXPECT_EQ(named("fp8mxfp8").fp8_recipe, llmsim::fp8_recipe_kind::mxfp8);
  EXPECT_EQ(named("fp8nvfp4").fp8_recipe, llmsim::fp8_recipe_kind::nvfp4);
  EXPECT_FALSE(named("tp2").fp8);
  EXPECT_TRUE(named("optoffload").optimizer_cpu_offload);
  EXPECT_FALSE(named("tp2").optimizer_cpu_offload);
  // full<N>: the first N layers of each stage; full alone: every layer.
  const strategy_spec full3 = named("pp2_full3");
  EXPECT_TRUE(full3.enable_recompute);
  EXPECT_EQ(full3.recompute_granularity, llmsim::recompute_kind::full_block);
  EXPECT_EQ(full3.recompute_layer_num, 3);
  EXPECT_FALSE(full3.attn_recompute);
  EXPECT_EQ(named("full").recompute_layer_num, llmsim::max_dimension);
  EXPECT_EQ(named("seq32768").seq_len, 32768);
}

TEST(StrategyNames, RefusesWhatNoTokenMeans) {
  for (const char* bad : {"fp8", "fp8bogus", "fp8delayedx", "full0", "zero4fsdp", "cp2ringx", "tp8ring", "dp2fsdp",
                          "ring", "fsdp", "mbs", "tp", "optoffload2", "seq99999999999999999", "",
                          // past max_dimension = 2^31 - 1: a size, or the world tp * pp * cp * dp
                          "tp2147483648", "tp65536_dp32768", "tp2147483647_pp2147483647_cp2147483647_dp2147483647"}) {
    strategy_spec s{};
    EXPECT_FALSE(catalogue::parse_strategy_name(bad, s)) << "\"" << bad << "\"";
  }
  EXPECT_EQ(named("tp2147483647").world_size, 2147483647) << "max_dimension itself is a size";
  EXPECT_EQ(named("tp65536_dp32767").world_size, 65536LL * 32767);
}

TEST(StrategyNames, NameIsTheInverse) {
  // Tokens in their fixed order (layout, schedule, overlaps, batch, memory, precision, recompute,
  // nosp, seq), whatever order the parsed name had; tp, pp, dp, mbs, mbc, zero always, seq only
  // when it is not 4096.
  EXPECT_EQ(name_of(named("full2_seq8192_zero3_fp8delayed_cp2ring_dp512_mbc2")),
            "tp1_pp1_cp2ring_dp512_mbs1_mbc2_zero3_fp8delayed_full2_seq8192");
  EXPECT_EQ(name_of(named("nosp_tpoverlap_selective_zbh1_vp2_pp4_tp2_dp8_first3_mbs2_mbc16_zero2fsdp_optoffload")),
            "tp2_pp4_dp8_vp2_first3_zbh1_tpoverlap_mbs2_mbc16_zero2fsdp_optoffload_selective_nosp");
  EXPECT_EQ(name_of(named("pp16_dp8_ep8_etp2_mbc32_last5_dualpipev_epoverlap_fp8mxfp8")),
            "tp1_pp16_dp8_ep8_etp2_last5_dualpipev_epoverlap_mbs1_mbc32_zero1_fp8mxfp8");
  EXPECT_EQ(name_of(named("tp8")), "tp8_pp1_dp1_mbs1_mbc8_zero1");
  // Every value a token sets is written when it is not the default, even one validation refuses.
  EXPECT_EQ(name_of(named("cp1ring")), "tp1_pp1_cp1ring_dp1_mbs1_mbc8_zero1");
  EXPECT_EQ(name_of(named("vp0_ep0")), "tp1_pp1_dp1_ep0_vp0_mbs1_mbc8_zero1");
  // The longest name fits: every number at int64's 19 digits, nothing cut.
  strategy_spec widest =
      named("tp1_cp1ring_first1_last1_zbh1_epoverlap_tpoverlap_zero1fsdp_fp8blockwise_optoffload_full1_nosp");
  for (std::int64_t* f : {&widest.tp_size, &widest.pp_size, &widest.cp_size, &widest.world_size, &widest.ep_size,
                          &widest.etp_size, &widest.interleaving_size, &widest.micro_batch_size,
                          &widest.micro_batch_num, &widest.zero_state, &widest.recompute_layer_num, &widest.seq_len})
    *f = 9223372036854775807;
  widest.num_layers_in_first_pipeline_stage = widest.num_layers_in_last_pipeline_stage = 9223372036854775807;
  const std::string long_name(catalogue::compact_strategy_name(widest).view());
  EXPECT_EQ(long_name.substr(long_name.size() - 28), "_nosp_seq9223372036854775807") << long_name;
  EXPECT_FALSE(catalogue::strategy_name(widest)) << "past max_dimension: no name reads it back";
  // A negative size is written with its sign, and no name holds it.
  strategy_spec negative = named("tp2_dp2");
  negative.tp_size = -3;
  EXPECT_EQ(catalogue::compact_strategy_name(negative).view().substr(0, 9), "tp-3_pp1_");
  EXPECT_FALSE(catalogue::strategy_name(negative));
  // What names cannot hold gets no name: another CP exchange, a field no token sets, a world that
  // is not tp * pp * cp * dp, FP8 without a recipe.
  strategy_spec s = named("tp2_cp2_dp2");
  s.cp_comm_type = llmsim::cp_comm_kind::all_gather;
  EXPECT_FALSE(catalogue::strategy_name(s));
  s = named("tp2_dp2");
  s.use_flash_sdp = !s.use_flash_sdp;
  EXPECT_FALSE(catalogue::strategy_name(s));
  EXPECT_EQ(catalogue::compact_strategy_name(s).view(), "tp2_pp1_dp2_mbs1_mbc8_zero1") << "the fields names hold";
  s = named("tp2_dp2");
  s.world_size = 5;  // not tp2 times a whole dp
  EXPECT_FALSE(catalogue::strategy_name(s));
  s = named("tp2_dp2");
  s.fp8 = true;
  s.fp8_recipe = llmsim::fp8_recipe_kind::invalid;
  EXPECT_FALSE(catalogue::strategy_name(s));
}

namespace {
/// Every fitting candidate of the space: its printed name reads back to its strategy exactly, and
/// `strategy_name` agrees that the name holds it. Returns how often each token family occurs.
std::map<std::string, int> check_names(const char* model, const char* system, const llmsim::search_space& sp) {
  const llmsim::search_options all{.top_k = 5, .memory_margin = 0.30, .keep_all = true};
  const auto r = llmsim::search(*catalogue::find_model(model), *catalogue::find_system(system), sp, all);
  EXPECT_GT(r.fitting.size(), 20U) << model;
  std::map<std::string, int> seen;
  for (const auto& c : r.fitting) {
    const strategy_spec s = llmsim::strategy_of(c, sp);
    const std::string name(llmsim::search_candidate_name(c, sp).view());
    strategy_spec back{};
    EXPECT_TRUE(catalogue::parse_strategy_name(name, back)) << name;
    EXPECT_TRUE(back == s) << name;
    EXPECT_EQ(name_of(s), name);
    for (const char* family : {"ring", "fsdp", "_fp8", "optoffload", "_full", "selective", "_seq", "tpoverlap",
                               "epoverlap", "zbh1", "dualpipev", "_vp", "_first", "_last", "_ep", "_etp"})
      seen[family] += name.find(family) != std::string::npos ? 1 : 0;
  }
  return seen;
}
}  // namespace

TEST(StrategyNames, EverySearchCandidateNameReadsBackToItsStrategy) {
  // Dense: Llama 3 8B on 8 H100s at seq 8192 (seq in the names): cp ring, FSDP, the FP8 recipes,
  // offload, selective and full recompute, TE's TP overlap, interleaved and zero-bubble schedules.
  llmsim::search_space dense{.gpus = 8, .global_batch = 16, .seq_len = 8192};
  dense.cp = {1, 2};
  dense.fsdp = true;
  dense.tp_comm_overlap = true;
  const auto d = check_names("llama3-8b", "h100-sxm", dense);
  for (const char* family :
       {"ring", "fsdp", "_fp8", "optoffload", "_full", "selective", "_seq", "tpoverlap", "_vp", "zbh1", "dualpipev"})
    EXPECT_GT(d.at(family), 0) << family << " must be among the dense names";
  // MoE: DeepSeek-V2-Lite (27 layers: uneven first / last splits) on 16 B200s (MXFP8): ep, etp
  // and Megatron's EP overlap.
  llmsim::search_space moe{.gpus = 16, .global_batch = 32, .seq_len = 4096};
  moe.zero = {1};
  moe.offload = false;
  moe.expert_comm_overlap = true;
  const auto m = check_names("deepseek-v2-lite", "b200", moe);
  for (const char* family : {"_ep", "_etp", "epoverlap", "_first", "_last", "_fp8"})
    EXPECT_GT(m.at(family), 0) << family << " must be among the MoE names";
  EXPECT_EQ(m.at("_seq"), 0) << "seq 4096 is the names' default";
}

}  // namespace llmsim_test_strategy_names
