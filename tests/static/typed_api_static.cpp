// The typed compile-time API, checked with static_asserts only: typed models lower to the
// catalogue's specs, strategy types to the specs of strategy names, the typed estimate is the core
// estimate, and fastest_fitting picks as the estimates say.
#include <llmsim/llmsim.hpp>

#include <boost/hana/tuple.hpp>

#include <cstdint>

namespace {
using namespace llmsim::typed;
using namespace llmsim::literals;
namespace catalogue = llmsim::catalogue;
namespace hw = llmsim::hw;
using llmsim::parallel, llmsim::tp, llmsim::pp, llmsim::dp, llmsim::cp, llmsim::ep, llmsim::etp, llmsim::zero,
    llmsim::seq, llmsim::micro_batch, llmsim::micro_batches, llmsim::no_sequence_parallel, llmsim::sequence_parallel,
    llmsim::vpp;
namespace recompute = llmsim::recompute;

// ---- every catalogue model, described by its kinds -----------------------------------------------

constexpr auto llama_layer(std::int64_t heads, std::int64_t kv_heads, std::int64_t ffn) {
  return decoder_layer{gqa_attention{.heads = heads, .kv_heads = kv_heads, .head_dim = 128}, swiglu_mlp{.ffn = ffn},
                       rms_norm{}};
}
constexpr auto llama2_7b =
    model("llama2_7b", embedding{.vocab = 32000, .hidden = 4096}, repeated{llama_layer(32, 32, 11008), 32}, lm_head{});
constexpr auto llama2_13b =
    model("llama2_13b", embedding{.vocab = 32000, .hidden = 5120}, repeated{llama_layer(40, 40, 13824), 40}, lm_head{});
constexpr auto llama2_70b =
    model("llama2_70b", embedding{.vocab = 32000, .hidden = 8192}, repeated{llama_layer(64, 8, 28672), 80}, lm_head{});
constexpr auto llama3_8b =
    model("llama3_8b", embedding{.vocab = 128256, .hidden = 4096}, repeated{llama_layer(32, 8, 14336), 32}, lm_head{});
constexpr auto llama3_70b =
    model("llama3_70b", embedding{.vocab = 128256, .hidden = 8192}, repeated{llama_layer(64, 8, 28672), 80}, lm_head{});
constexpr auto llama3_405b = model("llama3_405b", embedding{.vocab = 128256, .hidden = 16384},
                                   repeated{llama_layer(128, 8, 53248), 126}, lm_head{});
constexpr auto qwen3_32b =
    model("qwen3_32b", embedding{.vocab = 151936, .hidden = 5120}, repeated{llama_layer(64, 8, 25600), 64}, lm_head{});
constexpr auto gpt3_175b = model(
    "gpt3_175b",
    embedding{
        .vocab = 50257, .hidden = 12288, .position = llmsim::position_kind::learned_absolute, .max_positions = 2048},
    repeated{decoder_layer{mha_attention{.heads = 96, .head_dim = 128, .bias = true},
                           gelu_mlp{.ffn = 49152, .bias = true}, layer_norm{}},
             96},
    lm_head{.tied = true});

static_assert(to_spec(llama2_7b) == catalogue::llama2_7b);
static_assert(to_spec(llama2_13b) == catalogue::llama2_13b);
static_assert(to_spec(llama2_70b) == catalogue::llama2_70b);
static_assert(to_spec(llama3_8b) == catalogue::llama3_8b);
static_assert(to_spec(llama3_70b) == catalogue::llama3_70b);
static_assert(to_spec(llama3_405b) == catalogue::llama3_405b);
static_assert(to_spec(qwen3_32b) == catalogue::qwen3_32b);
static_assert(to_spec(gpt3_175b) == catalogue::gpt3_175b);

// Splitting the repetition does not change the model.
constexpr auto llama3_8b_split =
    model("llama3_8b", embedding{.vocab = 128256, .hidden = 4096}, llama_layer(32, 8, 14336),
          repeated{llama_layer(32, 8, 14336), 30}, llama_layer(32, 8, 14336), lm_head{});
static_assert(to_spec(llama3_8b_split) == catalogue::llama3_8b);

// Mixture of experts: Mixtral 8x7B (Jiang et al. 2024) and DeepSeek-V3 (three dense layers, MLA).
constexpr auto mixtral_8x7b = model("mixtral_8x7b", embedding{.vocab = 32000, .hidden = 4096},
                                    repeated{decoder_layer{gqa_attention{.heads = 32, .kv_heads = 8, .head_dim = 128},
                                                           moe_mlp{.experts = 8, .topk = 2, .expert_ffn = 14336}},
                                             32},
                                    lm_head{});
constexpr llmsim::model_spec mixtral_spec = to_spec(mixtral_8x7b);
static_assert(mixtral_spec.model_type == llmsim::model_kind::moe && llmsim::is_moe(mixtral_spec));
static_assert(mixtral_spec.expert_num == 8 && *mixtral_spec.topk == 2 &&
              llmsim::expert_ffn_size(mixtral_spec) == 14336);
static_assert(mixtral_spec.dense_layers == 0 && mixtral_spec.layer_num == 32 && mixtral_spec.use_swiglu);
static_assert(!mixtral_spec.intermediate_size && !mixtral_spec.moe_shared_expert_intermediate_size);
static_assert((llmsim::validate(mixtral_spec), true));

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
// The same fields as SimuMax's deepseekv3.json (shared/reference/simumax/configs/models).
constexpr llmsim::model_spec deepseek_v3_json{.model_type = llmsim::model_kind::moe,
                                              .model_name = "deepseek_v3",
                                              .hidden_size = 7168,
                                              .head_num = 128,
                                              .kv_head_num = 128,
                                              .head_size = 128,
                                              .intermediate_size = 18432,
                                              .layer_num = 61,
                                              .vocab_size = 129280,
                                              .use_swiglu = true,
                                              .expert_num = 256,
                                              .topk = 8,
                                              .attention_type = llmsim::attention_kind::mla,
                                              .moe_ffn_hidden_size = 2048,
                                              .moe_shared_expert_intermediate_size = 2048,
                                              .v_head_dim = 128,
                                              .qk_head_dim = 128,
                                              .qk_pos_emb_head_dim = 64,
                                              .q_lora_rank = 1536,
                                              .kv_lora_rank = 512,
                                              .dense_layers = 3,
                                              .moe_router_score_function = llmsim::router_score_kind::sigmoid,
                                              .moe_router_num_groups = 8,
                                              .moe_router_group_topk = 4,
                                              .moe_router_enable_expert_bias = true};
static_assert(to_spec(deepseek_v3) == deepseek_v3_json);

// ---- concepts ---------------------------------------------------------------------------------------

static_assert(Layer<embedding> && Layer<lm_head> && Layer<decltype(llama_layer(32, 8, 128))> &&
              Layer<repeated<decltype(llama_layer(32, 8, 128))>>);
static_assert(!Layer<int> && !Layer<gqa_attention> && !Layer<swiglu_mlp> && !Layer<rms_norm> &&
              !Layer<llmsim::model_spec>);
static_assert(AttentionKind<gqa_attention> && AttentionKind<mha_attention> && AttentionKind<mla_attention> &&
              !AttentionKind<swiglu_mlp>);
static_assert(MlpKind<swiglu_mlp> && MlpKind<gelu_mlp> && MlpKind<moe_mlp> && !MlpKind<rms_norm>);
static_assert(NormKind<rms_norm> && NormKind<layer_norm> && !NormKind<embedding>);
static_assert(llmsim::ParallelStrategy<parallel<tp<2>>> && llmsim::ParallelStrategy<parallel<>>);
static_assert(!llmsim::ParallelStrategy<int> && !llmsim::ParallelStrategy<llmsim::strategy_spec> &&
              !llmsim::ParallelStrategy<hw::h100_sxm>);
static_assert(llmsim::Accelerator<hw::a100_sxm> && llmsim::Accelerator<hw::a100_pcie> &&
              llmsim::Accelerator<hw::h100_sxm> && llmsim::Accelerator<hw::h200> && llmsim::Accelerator<hw::b200> &&
              llmsim::Accelerator<hw::mi300x>);
static_assert(llmsim::Accelerator<hw::system_of<catalogue::h100_sxm>> && !llmsim::Accelerator<int> &&
              !llmsim::Accelerator<parallel<>>);
static_assert(llmsim::StrategyOption<tp<2>> && llmsim::StrategyOption<recompute::full> &&
              !llmsim::StrategyOption<int> && !llmsim::StrategyOption<tp<2>*>);

// ---- hardware ---------------------------------------------------------------------------------------

static_assert(&hw::h100_sxm::spec == &catalogue::h100_sxm && &hw::mi300x::spec == &catalogue::mi300x);
static_assert(hw::device_memory(hw::h100_sxm::spec) == 80_GiB && hw::device_memory(hw::a100_pcie::spec) == 80_GiB);
static_assert(hw::device_memory(hw::h200::spec) == 141_GiB && hw::device_memory(hw::b200::spec) == 180_GiB &&
              hw::device_memory(hw::mi300x::spec) == 192_GiB);

// ---- strategies ---------------------------------------------------------------------------------------

constexpr llmsim::strategy_spec named(std::string_view name) {
  llmsim::strategy_spec s{};
  if (!catalogue::parse_strategy_name(name, s)) llmsim::detail::report_error("test", "", "bad strategy name {}", name);
  return s;
}
// Defaults are those of strategy names.
static_assert(parallel<>::spec == named("tp1") && parallel<>::spec.world_size == 1);
using big = parallel<tp<8>, pp<4>, dp<64>, zero<1>, recompute::selective, seq<4096>, micro_batch<1>, micro_batches<32>>;
static_assert(big::spec == named("tp8_pp4_dp64_zero1_selective_seq4096_mbs1_mbc32"));
static_assert(big::spec.world_size == 8 * 4 * 64 && llmsim::dp_size(big::spec) == 64 && big::spec.tp_size == 8 &&
              big::spec.pp_size == 4);
static_assert(big::spec.micro_batch_num == 32 && big::spec.micro_batch_size == 1 && big::spec.seq_len == 4096 &&
              big::spec.zero_state == 1);
static_assert(big::spec.enable_sequence_parallel &&
              big::spec.recompute_granularity == llmsim::recompute_kind::selective_recompute &&
              big::spec.attn_recompute);
// Options in any order.
static_assert(parallel<micro_batches<32>, recompute::selective, dp<64>, pp<4>, tp<8>>::spec == big::spec);
static_assert(parallel<tp<2>, cp<2>, pp<2>, dp<3>>::spec.world_size == 24);
static_assert(parallel<tp<4>, recompute::full, no_sequence_parallel, micro_batches<16>>::spec ==
              named("tp4_full_nosp_mbc16"));
static_assert(parallel<tp<4>, sequence_parallel<true>>::spec == named("tp4"));
static_assert(parallel<tp<2>, pp<2>, vpp<2>, ep<2>, etp<2>, dp<2>, zero<0>, recompute::none>::spec ==
              named("tp2_pp2_vp2_ep2_etp2_dp2_zero0"));
static_assert(parallel<recompute::full_layers<4>>::spec.recompute_layer_num == 4 &&
              llmsim::recompute_active(parallel<recompute::full_layers<4>>::spec));
static_assert(!llmsim::recompute_active(parallel<>::spec) &&
              llmsim::recompute_active(parallel<recompute::selective>::spec));
// Names written back (catalogue::strategy_name, parse_strategy_name's inverse): the tokens in
// their fixed order, seq only when not 4096, and a name only for what names can hold.
static_assert(catalogue::strategy_name(big::spec)->view() == "tp8_pp4_dp64_mbs1_mbc32_zero1_selective");
using ring_fp8 = parallel<tp<2>, cp<4>, llmsim::cp_comm::p2p, dp<2>,
                          llmsim::fp8_training<llmsim::fp8_recipe_kind::mxfp8>, recompute::full_layers<3>, seq<32768>>;
static_assert(ring_fp8::spec == named("cp4ring_tp2_dp2_fp8mxfp8_full3_seq32768"));
static_assert(catalogue::strategy_name(ring_fp8::spec)->view() ==
              "tp2_pp1_cp4ring_dp2_mbs1_mbc8_zero1_fp8mxfp8_full3_seq32768");

// A user option: any type with a key and an apply.
struct reserve_more {
  static constexpr llmsim::option_key key = llmsim::option_key::custom;
  static constexpr void apply(llmsim::strategy_draft& d) { d.spec.mem_factor = 0.9; }
};
static_assert(parallel<tp<2>, reserve_more>::spec.mem_factor == 0.9 &&
              parallel<tp<2>, reserve_more>::spec.tp_size == 2);
// A field no name token sets (mem_factor): no name holds the strategy; the compact name leaves it out.
static_assert(!catalogue::strategy_name(parallel<tp<2>, reserve_more>::spec) &&
              catalogue::compact_strategy_name(parallel<tp<2>, reserve_more>::spec).view() ==
                  "tp2_pp1_dp1_mbs1_mbc8_zero1");

// ---- the typed estimate is the core estimate ---------------------------------------------------------

using tp2_dp4 = parallel<tp<2>, dp<4>>;
constexpr llmsim::estimate_result typed_8b = estimate(llama3_8b, tp2_dp4{}, hw::h100_sxm{});
constexpr llmsim::estimate_result core_8b =
    llmsim::estimate(catalogue::llama3_8b, named("tp2_dp4"), catalogue::h100_sxm);
static_assert(typed_8b.cost.duration_time_per_iter == core_8b.cost.duration_time_per_iter &&
              typed_8b.cost.mfu == core_8b.cost.mfu);
static_assert(typed_8b.mem.peak_mem == core_8b.mem.peak_mem &&
              typed_8b.stages[0].chunk_time == core_8b.stages[0].chunk_time);
static_assert(llmsim::fits_in<typed_8b.mem.peak_mem, 80_GiB> && llmsim::fits_on<typed_8b.mem.peak_mem, hw::h100_sxm>);
// Specs and types mix.
static_assert(estimate(catalogue::llama3_8b, tp2_dp4{}, catalogue::h100_sxm).mem.peak_mem == core_8b.mem.peak_mem);
static_assert((validate(llama3_8b, parallel<tp<8>>{}, hw::b200{}), true));

// ---- fastest_fitting ---------------------------------------------------------------------------------

using plain = parallel<tp<8>>;
using recomputed = parallel<tp<8>, recompute::full>;
constexpr auto recomputed_8b = estimate(llama3_8b, recomputed{}, hw::h100_sxm{});
constexpr auto plain_8b = estimate(llama3_8b, plain{}, hw::h100_sxm{});
static_assert(recomputed_8b.mem.peak_mem < plain_8b.mem.peak_mem &&
              plain_8b.cost.duration_time_per_iter < recomputed_8b.cost.duration_time_per_iter);
// Both fit an H100: the faster one (no recompute) wins.
constexpr llmsim::strategy_choice both =
    llmsim::fastest_fitting(boost::hana::make_tuple(recomputed{}, plain{}), llama3_8b, hw::h100_sxm{});
static_assert(both.found && both.index == 1 && both.strategy == plain::spec &&
              both.result.mem.peak_mem == plain_8b.mem.peak_mem);
// A budget only the recomputing strategy meets.
constexpr auto tight = llmsim::fastest_fitting(boost::hana::make_tuple(plain{}, recomputed{}), llama3_8b,
                                               hw::h100_sxm{}, recomputed_8b.mem.peak_mem);
static_assert(tight.found && tight.index == 1 && tight.strategy == recomputed::spec);
// Nothing fits one byte; a tie keeps the first; an array of specs works the same.
static_assert(!llmsim::fastest_fitting(boost::hana::make_tuple(plain{}), llama3_8b, hw::h100_sxm{}, 1_B).found);
static_assert(llmsim::fastest_fitting(std::array{plain::spec, plain::spec}, llama3_8b, hw::h100_sxm{}).index == 0);
static_assert(llmsim::fastest_fitting(std::array{recomputed::spec, plain::spec}, catalogue::llama3_8b,
                                      catalogue::h100_sxm)
                  .index == 1);
// Each candidate in a constant expression of its own: the same choice.
constexpr auto both_of = llmsim::fastest_fitting_of<llama3_8b, hw::h100_sxm, recomputed, plain>;
static_assert(both_of.found && both_of.index == both.index &&
              both_of.result.cost.duration_time_per_iter == both.result.cost.duration_time_per_iter);
static_assert(estimate_of<llama3_8b, plain, hw::h100_sxm>.mem.peak_mem == plain_8b.mem.peak_mem);
static_assert(estimate_of<catalogue::llama3_8b, plain, hw::h100_sxm>.mem.peak_mem == plain_8b.mem.peak_mem);
// Llama 3 70B cannot train on 8 GPUs without model parallelism (its bf16 weights alone are 140 GB).
constexpr auto best_70b =
    llmsim::fastest_fitting(boost::hana::make_tuple(parallel<dp<8>>{}, parallel<tp<8>, pp<8>, micro_batches<32>>{}),
                            llama3_70b, hw::h100_sxm{});
static_assert(best_70b.found && best_70b.index == 1 && llmsim::fits_on<best_70b.result.mem.peak_mem, hw::h100_sxm>);

// ---- fastest_fitting over a search_space -------------------------------------------------------------
// The space enumerates, in llmsim::search's order: tp 4 (dp 2) with ZeRO 0 then 1, tp 8 (dp 1, ZeRO 0
// only: nothing to shard); its choice must be the array overload's over those three specs.
constexpr llmsim::search_space small_space() {
  llmsim::search_space sp{.gpus = 8, .global_batch = 8, .seq_len = 4096};
  sp.tp = {4, 8};
  sp.pp = {1};
  sp.cp = {1};
  sp.mbs = {1};
  sp.zero = {0, 1};
  sp.fp8 = false;
  sp.offload = false;
  sp.recompute = false;
  return sp;
}
constexpr llmsim::strategy_spec space_spec(std::int64_t tp, std::int64_t zero) {
  // global batch 8 over dp = 8 / tp ranks of micro-batch 1
  llmsim::strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8 / (8 / tp), .world_size = 8, .tp_size = tp};
  s.zero_state = zero;  // 1F1B: the schedule left unset, as the search leaves it
  s.enable_recompute = false;
  return s;
}
constexpr auto space_best = [] { return llmsim::fastest_fitting(small_space(), llama3_8b, hw::h100_sxm{}); }();
constexpr auto array_best = llmsim::fastest_fitting(std::array{space_spec(4, 0), space_spec(4, 1), space_spec(8, 0)},
                                                    llama3_8b, hw::h100_sxm{});
static_assert(space_best.found && array_best.found && space_best.index == array_best.index &&
              space_best.strategy == array_best.strategy &&
              space_best.result.cost.duration_time_per_iter == array_best.result.cost.duration_time_per_iter);

}  // namespace
