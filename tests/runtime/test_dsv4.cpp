// DeepSeek-V4 (experimental_attention_variant "dsv4_hybrid"): the catalogue model's parameters and
// Megatron-Bridge FLOPs worked by hand, the model checks, the JSON round trip, and an estimate's
// refusal of what the DeepSeek-V4 program does not model (its layer: test_dsv4_attention.cpp).

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/estimate/model_counts.hpp>
#include <llmsim/json.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>

#include <gtest/gtest.h>

#include <string>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_dsv4 {

namespace {

namespace mb = llmsim::megatron_bridge;
namespace lj = llmsim::json;
using llmsim::config_error;
using llmsim::model_spec;
using llmsim::catalogue::deepseek_v4_flash;

// ---- the layer pattern ---------------------------------------------------------------------------

TEST(DeepSeekV4, FlashLayerPattern) {
  // HF compress_ratios: layers 0, 1 window only, then 4 / 128 alternating to layer 42 (4), MTP 0.
  const auto& r = deepseek_v4_flash.csa_compress_ratios;
  ASSERT_EQ(r.size(), 44U);
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(r[2], 4);
  EXPECT_EQ(r[3], 128);
  EXPECT_EQ(r[42], 4);
  EXPECT_EQ(r[43], 0);
  EXPECT_EQ(r.layers_with(0), 3);
  EXPECT_EQ(r.layers_with(4), 21);
  EXPECT_EQ(r.layers_with(128), 20);
}

// ---- parameters by hand (h 4096, 64 heads, q_lora 1024, v 512, qk 448 + rope 64, o 8 x 1024) -------
//
// Attention of a ratio-0 layer:
//   wq_a 4096 x 1024 = 4,194,304; q_norm 1024; wq_b 1024 x 64 x 512 = 33,554,432; wkv 4096 x 512
//   = 2,097,152; kv_norm 512; wo_a 64 x 512 x 1024 = 33,554,432; wo_b 8 x 1024 x 4096 = 33,554,432;
//   sinks 64                                                                     = 106,956,352
// ratio 128 adds a compressor: wkv + wgate 2 x 4096 x 512, ape 128 x 512, norm 512 = 4,260,352
//                                                                                = 111,216,704
// ratio 4 adds a compressor of doubled width (overlap): 2 x 4096 x 1024 + 4 x 1024 + 512 = 8,393,216,
//   and the indexer: wq_b 1024 x 64 x 128 = 8,388,608, weights_proj 4096 x 64 = 262,144, its
//   compressor at 128 (doubled): 2 x 4096 x 256 + 4 x 256 + 128 = 2,098,304       = 126,098,624
// 43 decoder layers: 2 x 106,956,352 + 21 x 126,098,624 + 20 x 111,216,704       = 5,086,317,888
// Per layer besides attention: router 4096 x 256 = 1,048,576, shared expert 3 x 4096 x 2048 =
//   25,165,824, 256 routed experts x 25,165,824 = 6,442,450,944, two RMSNorms 8192, two
//   hyper-connections 2 x (24 x 4 x 4096 + 24 + 3) = 786,486                     = 6,469,460,022
//   x 43                                                                         = 278,186,780,946
// Embedding and LM head 2 x 129280 x 4096 = 1,059,061,760, final norm 4096, stream contraction
//   4 x 4 x 4096 + 4 + 1 = 65,541.
// Total without the MTP layer                                                    = 284,332,230,231
// (the model card: 284B). The MTP depth: 3 norms 12,288, e_proj + h_proj 2 x 4096^2 = 33,554,432,
// a ratio-0 layer 106,956,352 + 6,469,460,022, its contraction 65,541           = 290,942,278,866.
// Active (top-6): 1,048,576 + 25,165,824 + 6 x 25,165,824 + 8192 + 786,486 = 178,004,022 per layer,
//   43 x that + 5,086,317,888 + 1,059,061,760 + 4096 + 65,541                     = 13,799,622,231
// (the card: 13B active).
TEST(DeepSeekV4, FlashParametersByHand) {
  model_spec no_mtp = deepseek_v4_flash;
  no_mtp.mtp_num_layers = 0;
  no_mtp.csa_compress_ratios.count = 43;
  llmsim::validate(no_mtp);
  EXPECT_EQ(llmsim::parameter_count(no_mtp, 129280), 284'332'230'231.0);
  EXPECT_EQ(llmsim::active_parameter_count(no_mtp, 129280), 13'799'622'231.0);
  EXPECT_EQ(llmsim::parameter_count(deepseek_v4_flash, 129280), 290'942'278'866.0);
}

// ---- Megatron-Bridge FLOPs by hand (flop_utils.py dsv4_hybrid, s = 4096, 43 + 1 layers) -----------
//
// Per layer (x 44): q 1024 x (4096 + 64 x 512 + 1) = 37,749,760; kv 4096 x 512 + 512 = 2,097,664;
//   o 64 x 512 x 1024 + 8 x 1024 x 4096 = 67,108,864                            -> 4,706,076,672
// Window of the 3 ratio-0 and 20 ratio-128 layers: 23 x 64 x 128 x 512 x 2       =   192,937,984
// Compressors: 21 x 4096 x 1024 x 2 + 20 x 4096 x 512 x 2                         =   260,046,848
// Ratio-4 attention: k' = min(512, 1024) = 512, on average 512 (1 - 2048/8192) = 384 selected:
//   21 x 64 x (128 + 384) x 512 x 2                                               =   704,643,072
// Indexer: 21 x (4096 x 256 x 2 + 1024 x 64 x 128 + 4096 x 64)                    =   225,705,984
//   token-linear sum 6,089,410,560, x 6                                          = 36,536,463,360
// s^2 terms: 20 x 64 x 512 / 128 + 21 x 64 x 128 / 4 = 5120 + 43,008 = 48,128, x 6 x 4096
//                                                                                =  1,182,793,728
// MLP: 6 x 4096 x (2048 x 6 + 2048) x 3 x 44                                     = 46,506,442,752
// MTP: 6 x (3 x 4096 + 2 x 4096^2)                                               =    201,400,320
// Logits (129280 = 101 x 1280, no padding): 6 x 4096 x 129280 x 2                 =  6,354,370,560
// Total                                                                          = 90,781,470,720
// The published GB200 row prints 706 TFLOP/s at 7776 tokens/s: 90.79 GFLOP per token.
constexpr mb::flop_inputs flash_4k{.model = deepseek_v4_flash, .seq_len = 4096, .mtp_num_layers = 1};
static_assert(mb::model_flops_per_token(flash_4k, mb::flop_formula::current) == 90'781'470'720.0);

TEST(DeepSeekV4, MegatronBridgeFlopsByHand) {
  EXPECT_EQ(mb::model_flops_per_token(flash_4k, mb::flop_formula::current), 90'781'470'720.0);
  // At s = 1024 the top-k is capped at s/4 = 256, all of them on average 256 (1 - 1024/2048) = 128:
  // only the ratio-4 attention (21 x 64 x (128 + k_avg) x 512 x 2 x 6) and the s^2 terms change.
  mb::flop_inputs short_seq = flash_4k;
  short_seq.seq_len = 1024;
  const double delta = 6.0 * 21 * 64 * (384 - 128) * 512 * 2 + 6.0 * 48128 * (4096 - 1024);
  EXPECT_EQ(mb::model_flops_per_token(flash_4k, mb::flop_formula::current) -
                mb::model_flops_per_token(short_seq, mb::flop_formula::current),
            delta);
}

// ---- checks --------------------------------------------------------------------------------------

std::string rule_of(const model_spec& m) {
  try {
    llmsim::validate(m);
  } catch (const config_error& e) { return e.field() + ": " + e.rule(); }
  return "accepted";
}

TEST(DeepSeekV4, ModelChecksNameFieldAndRule) {
  EXPECT_EQ(rule_of(deepseek_v4_flash), "accepted");
  model_spec m = deepseek_v4_flash;
  m.mtp_num_layers = 0;  // the list still holds the MTP layer's ratio
  EXPECT_NE(rule_of(m).find("model.csa_compress_ratios: model.csa_compress_ratios has 44 entries; it needs one per "
                            "decoder and MTP layer: model.layer_num + model.mtp_num_layers = 43"),
            std::string::npos)
      << rule_of(m);
  m = deepseek_v4_flash;
  m.csa_compress_ratios.values[5] = 8;
  EXPECT_NE(rule_of(m).find("model.csa_compress_ratios[5]=8 must be 0 (sliding window), 4 (CSA) or 128 (HCA)"),
            std::string::npos)
      << rule_of(m);
  m = deepseek_v4_flash;
  m.dsa_indexer_topk.reset();
  EXPECT_NE(rule_of(m).find("model.dsa_indexer_topk: model.csa_compress_ratios has ratio-4 (CSA) layers"),
            std::string::npos)
      << rule_of(m);
  m = deepseek_v4_flash;
  m.o_groups = 3;
  EXPECT_NE(rule_of(m).find("model.o_groups=3 must divide model.head_num=64"), std::string::npos) << rule_of(m);
  m = llmsim::catalogue::deepseek_v3;
  m.o_lora_rank = 1024;  // a V4 field on a model without the variant
  EXPECT_NE(rule_of(m).find("model.o_lora_rank is a DeepSeek-V4 field"), std::string::npos) << rule_of(m);
}

TEST(DeepSeekV4, JsonRoundTrip) {
  const lj::value j = lj::to_json(deepseek_v4_flash);
  EXPECT_EQ(j["experimental_attention_variant"], "dsv4_hybrid");
  ASSERT_EQ(j["csa_compress_ratios"].size(), 44U);
  EXPECT_EQ(j["csa_compress_ratios"][3], 128);
  EXPECT_TRUE(lj::parse_model(j, "round trip", {.strict = true}) == deepseek_v4_flash);
  lj::value bad = j;
  bad["csa_compress_ratios"][2] = "four";
  EXPECT_THROW((void)lj::parse_model(bad, "bad", {.strict = true}), config_error);
  bad = j;
  bad["experimental_attention_variant"] = "dsa";
  EXPECT_THROW((void)lj::parse_model(bad, "bad", {.strict = true}), config_error);
}

TEST(DeepSeekV4, EstimateRefusesContextParallelismNamingTheField) {
  const llmsim::strategy_spec s{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 16, .world_size = 128, .cp_size = 2, .ep_size = 64};
  try {
    (void)llmsim::estimate(deepseek_v4_flash, s, llmsim::catalogue::gb200_nvl72);
    ADD_FAILURE() << "DeepSeek-V4 with cp 2 estimated";
  } catch (const config_error& e) { EXPECT_EQ(e.field(), "strategy.cp_size"); }
}

}  // namespace

}  // namespace llmsim_test_dsv4
