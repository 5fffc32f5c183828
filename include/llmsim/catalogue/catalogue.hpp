/// \file llmsim/catalogue/catalogue.hpp
/// Built-in models and systems written from public facts (model cards and configs, GPU data
/// sheets), usable in constant expressions and by name from the command line:
/// `llmsim perf --model llama3-8b --system h100-sxm --strategy tp2_dp4`.
///
/// Systems carry data-sheet peaks and *default* efficiencies — stated assumptions, not
/// measurements (see `catalogue::assumptions`). For timing-quality work use a system file with
/// measured shape tables (SimuMax's `accurate_efficient_factor`).
#pragma once

#include <llmsim/cost/kernel_model.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <array>
#include <optional>
#include <string_view>
#include <utility>

LLMSIM_BEGIN_NAMESPACE
namespace catalogue {

// ---- models ----------------------------------------------------------------------------------

/// Llama 2 (Touvron et al. 2023, Table 1 and the released config.json files).
inline constexpr model_spec llama2_7b{
    .model_type = model_kind::dense,
    .model_name = "llama2_7b",
    .hidden_size = 4096,
    .head_num = 32,
    .kv_head_num = 32,
    .head_size = 128,
    .intermediate_size = 11008,
    .layer_num = 32,
    .vocab_size = 32000,
    .use_swiglu = true,
};
inline constexpr model_spec llama2_13b{
    .model_type = model_kind::dense,
    .model_name = "llama2_13b",
    .hidden_size = 5120,
    .head_num = 40,
    .kv_head_num = 40,
    .head_size = 128,
    .intermediate_size = 13824,
    .layer_num = 40,
    .vocab_size = 32000,
    .use_swiglu = true,
};
inline constexpr model_spec llama2_70b{
    .model_type = model_kind::dense,
    .model_name = "llama2_70b",
    .hidden_size = 8192,
    .head_num = 64,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 28672,
    .layer_num = 80,
    .vocab_size = 32000,
    .use_swiglu = true,
};
/// Llama 3 / 3.1 (Meta model cards; "The Llama 3 Herd of Models" 2024, Table 3).
inline constexpr model_spec llama3_8b{
    .model_type = model_kind::dense,
    .model_name = "llama3_8b",
    .hidden_size = 4096,
    .head_num = 32,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 14336,
    .layer_num = 32,
    .vocab_size = 128256,
    .use_swiglu = true,
};
inline constexpr model_spec llama3_70b{
    .model_type = model_kind::dense,
    .model_name = "llama3_70b",
    .hidden_size = 8192,
    .head_num = 64,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 28672,
    .layer_num = 80,
    .vocab_size = 128256,
    .use_swiglu = true,
};
inline constexpr model_spec llama3_405b{
    .model_type = model_kind::dense,
    .model_name = "llama3_405b",
    .hidden_size = 16384,
    .head_num = 128,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 53248,
    .layer_num = 126,
    .vocab_size = 128256,
    .use_swiglu = true,
};
/// GPT-3 175B (Brown et al. 2020, Table 2.1): GeLU MLP of 4h, LayerNorm, learned positions,
/// biases, input and output embeddings tied; GPT-2 BPE vocabulary of 50257.
inline constexpr model_spec gpt3_175b{
    .model_type = model_kind::dense,
    .model_name = "gpt3_175b",
    .hidden_size = 12288,
    .head_num = 96,
    .kv_head_num = 96,
    .head_size = 128,
    .intermediate_size = 49152,
    .layer_num = 96,
    .vocab_size = 50257,
    .use_swiglu = false,
    .norm_type = norm_kind::layernorm,
    .tie_word_embeddings = true,
    .add_linear_bias = true,
    .position_embedding_type = position_kind::learned_absolute,
    .max_position_embeddings = 2048,  // n_ctx = 2048 tokens (Brown et al. 2020, §2.1)
};
/// GPT-J 6B (EleutherAI/gpt-j-6b config.json): 28 layers, d_model 4096, 16 heads of 256, rotary
/// (on 64 of each head's dims), GeLU MLP of 16384, LayerNorm, vocabulary 50400, untied LM head.
inline constexpr model_spec gptj_6b{
    .model_type = model_kind::dense,
    .model_name = "gptj_6b",
    .hidden_size = 4096,
    .head_num = 16,
    .kv_head_num = 16,
    .head_size = 256,
    .intermediate_size = 16384,
    .layer_num = 28,
    .vocab_size = 50400,
    .use_swiglu = false,
    .norm_type = norm_kind::layernorm,
};
/// Falcon-180B (tiiuae/falcon-180B config.json): 80 layers, hidden 14848, 232 query heads of 64,
/// 8 KV heads, GeLU MLP of 4 x 14848, LayerNorm, no biases, vocabulary 65024, tied embeddings.
inline constexpr model_spec falcon_180b{
    .model_type = model_kind::dense,
    .model_name = "falcon_180b",
    .hidden_size = 14848,
    .head_num = 232,
    .kv_head_num = 8,
    .head_size = 64,
    .intermediate_size = 59392,
    .layer_num = 80,
    .vocab_size = 65024,
    .use_swiglu = false,
    .norm_type = norm_kind::layernorm,
    .tie_word_embeddings = true,
};
/// Qwen3-32B (Qwen team config.json): 64 query heads of 128 (wider than hidden 5120), 8 KV heads.
inline constexpr model_spec qwen3_32b{
    .model_type = model_kind::dense,
    .model_name = "qwen3_32b",
    .hidden_size = 5120,
    .head_num = 64,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 25600,
    .layer_num = 64,
    .vocab_size = 151936,
    .use_swiglu = true,
};

/// DeepSeek-V2 (DeepSeek-AI 2024, config.json): MLA with q/kv compression 1536/512, 2 shared + 160
/// routed experts of 1536, top-6, first layer dense (12288).
inline constexpr model_spec deepseek_v2{
    .model_type = model_kind::moe,
    .model_name = "deepseek_v2",
    .hidden_size = 5120,
    .head_num = 128,
    .kv_head_num = 128,
    .head_size = 128,
    .intermediate_size = 12288,
    .layer_num = 60,
    .vocab_size = 102400,
    .use_swiglu = true,
    .expert_num = 160,
    .topk = 6,
    .attention_type = attention_kind::mla,
    .moe_ffn_hidden_size = 1536,
    .moe_shared_expert_intermediate_size = 3072,
    .v_head_dim = 128,
    .qk_head_dim = 128,
    .qk_pos_emb_head_dim = 64,
    .q_lora_rank = 1536,
    .kv_lora_rank = 512,
    .dense_layers = 1,
    // config.json: topk_method group_limited_greedy over n_group 8, topk_group 3 (softmax scores).
    .moe_router_num_groups = 8,
    .moe_router_group_topk = 3,
};
/// DeepSeek-V2-Lite: no q compression, 2 shared + 64 routed experts of 1408, top-6.
inline constexpr model_spec deepseek_v2_lite{
    .model_type = model_kind::moe,
    .model_name = "deepseek_v2_lite",
    .hidden_size = 2048,
    .head_num = 16,
    .kv_head_num = 16,
    .head_size = 128,
    .intermediate_size = 10944,
    .layer_num = 27,
    .vocab_size = 102400,
    .use_swiglu = true,
    .expert_num = 64,
    .topk = 6,
    .attention_type = attention_kind::mla,
    .moe_ffn_hidden_size = 1408,
    .moe_shared_expert_intermediate_size = 2816,
    .v_head_dim = 128,
    .qk_head_dim = 128,
    .qk_pos_emb_head_dim = 64,
    .kv_lora_rank = 512,
    .dense_layers = 1,
};
/// DeepSeek-V3 (DeepSeek-AI 2024, Table/config): 61 layers, first 3 dense (18432), 1 shared + 256
/// routed experts of 2048, top-8; 671B parameters, 37B active.
inline constexpr model_spec deepseek_v3{
    .model_type = model_kind::moe,
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
    .attention_type = attention_kind::mla,
    .moe_ffn_hidden_size = 2048,
    .moe_shared_expert_intermediate_size = 2048,
    .v_head_dim = 128,
    .qk_head_dim = 128,
    .qk_pos_emb_head_dim = 64,
    .q_lora_rank = 1536,
    .kv_lora_rank = 512,
    .dense_layers = 3,
    // Routing of config.json: scoring_func sigmoid, n_group 8, topk_group 4, topk_method noaux_tc
    // (the aux-loss-free expert bias, e_score_correction_bias).
    .moe_router_score_function = router_score_kind::sigmoid,
    .moe_router_num_groups = 8,
    .moe_router_group_topk = 4,
    .moe_router_enable_expert_bias = true,
};
/// Mixtral 8x7B and 8x22B (Mistral AI config.json): GQA, 8 experts of the dense FFN width, top-2.
inline constexpr model_spec mixtral_8x7b{
    .model_type = model_kind::moe,
    .model_name = "mixtral_8x7b",
    .hidden_size = 4096,
    .head_num = 32,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 14336,
    .layer_num = 32,
    .vocab_size = 32000,
    .use_swiglu = true,
    .expert_num = 8,
    .topk = 2,
    .moe_ffn_hidden_size = 14336,
};
inline constexpr model_spec mixtral_8x22b{
    .model_type = model_kind::moe,
    .model_name = "mixtral_8x22b",
    .hidden_size = 6144,
    .head_num = 48,
    .kv_head_num = 8,
    .head_size = 128,
    .intermediate_size = 16384,
    .layer_num = 56,
    .vocab_size = 32768,
    .use_swiglu = true,
    .expert_num = 8,
    .topk = 2,
    .moe_ffn_hidden_size = 16384,
};
/// Qwen3 MoE (Qwen team config.json): 128 experts, top-8, no shared experts, every layer MoE.
inline constexpr model_spec qwen3_30b_a3b{
    .model_type = model_kind::moe,
    .model_name = "qwen3_30b_a3b",
    .hidden_size = 2048,
    .head_num = 32,
    .kv_head_num = 4,
    .head_size = 128,
    .intermediate_size = 6144,
    .layer_num = 48,
    .vocab_size = 151936,
    .use_swiglu = true,
    .expert_num = 128,
    .topk = 8,
    .moe_ffn_hidden_size = 768,
};
inline constexpr model_spec qwen3_235b_a22b{
    .model_type = model_kind::moe,
    .model_name = "qwen3_235b_a22b",
    .hidden_size = 4096,
    .head_num = 64,
    .kv_head_num = 4,
    .head_size = 128,
    .intermediate_size = 12288,
    .layer_num = 94,
    .vocab_size = 151936,
    .use_swiglu = true,
    .expert_num = 128,
    .topk = 8,
    .moe_ffn_hidden_size = 1536,
};

/// Kimi K2 (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's MLA shape with 64 heads, 61
/// layers of which the first is dense (18432), 1 shared + 384 routed experts of 2048, top-8,
/// vocabulary 163840, no multi-token prediction layer (num_nextn_predict_layers 0).
inline constexpr model_spec kimi_k2{
    .model_type = model_kind::moe,
    .model_name = "kimi_k2",
    .hidden_size = 7168,
    .head_num = 64,
    .kv_head_num = 64,
    .head_size = 128,
    .intermediate_size = 18432,
    .layer_num = 61,
    .vocab_size = 163840,
    .use_swiglu = true,
    .expert_num = 384,
    .topk = 8,
    .attention_type = attention_kind::mla,
    .moe_ffn_hidden_size = 2048,
    .moe_shared_expert_intermediate_size = 2048,
    .v_head_dim = 128,
    .qk_head_dim = 128,
    .qk_pos_emb_head_dim = 64,
    .q_lora_rank = 1536,
    .kv_lora_rank = 512,
    .dense_layers = 1,
    // config.json: scoring_func sigmoid, topk_method noaux_tc (expert bias), n_group 1 (no groups).
    .moe_router_score_function = router_score_kind::sigmoid,
    .moe_router_enable_expert_bias = true,
};
/// gpt-oss-120b (openai/gpt-oss-120b config.json): 36 layers, hidden 2880, 64 query heads of 64
/// (wider than hidden), 8 KV heads, 128 experts of 2880 top-4, every layer MoE, vocabulary 201088.
/// Its gated activation is quick-GELU clamped at 7 (`swiglu_limit`; Megatron-Bridge gpt_oss_bridge.py:
/// activation_func quick_gelu, activation_func_clamp_value 7.0), SwiGLU's GEMM shapes. Every linear
/// carries a bias, as Megatron-Bridge builds it (add_bias_linear=True: q, k, v, o, the router and the
/// experts' fc1 / fc2, `add_linear_bias`); the attention sinks are not modelled. YaRN RoPE of factor
/// 32 (`rope_scaling`; the bridge's position_embedding_type "yarn", yarn_rotary_scaling_factor 32).
/// Sliding-window attention: 128 tokens on every other layer, the first windowed (`sliding_window`,
/// `layer_types`).
inline constexpr model_spec gpt_oss_120b{
    .model_type = model_kind::moe,
    .model_name = "gpt_oss_120b",
    .hidden_size = 2880,
    .head_num = 64,
    .kv_head_num = 8,
    .head_size = 64,
    .intermediate_size = 2880,
    .layer_num = 36,
    .vocab_size = 201088,
    .use_swiglu = true,
    .expert_num = 128,
    .topk = 4,
    .moe_ffn_hidden_size = 2880,
    .add_linear_bias = true,
    .sliding_window = 128,
    .sliding_window_pattern = 2,
    .yarn_rotary_scaling_factor = 32,
    .use_quick_geglu = true,
    .activation_func_clamp_value = 7,
};
/// NVIDIA Nemotron 3 Nano 30B-A3B (hybrid Mamba-2 / attention / MoE): Hugging Face
/// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json and Megatron-Bridge
/// recipes/nemotronh/h100/nemotron_3_nano.py (`hybrid_layer_pattern`, 52 layers: 23 Mamba-2, 23
/// MoE, 6 attention; 128 experts of 1856, top-6, one shared expert of 3712; squared-ReLU
/// activation, not gated; GQA 32/2 heads of 128; no position embedding; untied embeddings;
/// vocabulary 131072). Model card: 31.6B parameters in total.
inline constexpr model_spec nemotron_3_nano_30b_a3b{
    .model_type = model_kind::moe,
    .model_name = "nemotron_3_nano_30b_a3b",
    .hidden_size = 2688,
    .head_num = 32,
    .kv_head_num = 2,
    .head_size = 128,
    .intermediate_size = 1856,
    .layer_num = 52,
    .vocab_size = 131072,
    .use_swiglu = false,
    .expert_num = 128,
    .topk = 6,
    .moe_ffn_hidden_size = 1856,
    .moe_shared_expert_intermediate_size = 3712,
    .position_embedding_type = position_kind::none,
    .hybrid_override_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    .mamba_state_dim = 128,
    .mamba_head_dim = 64,
    .mamba_num_heads = 64,
    .mamba_num_groups = 8,
};

/// NVIDIA Nemotron 3 Super 120B-A12B (hybrid Mamba-2 / attention / LatentMoE): Hugging Face
/// nvidia/NVIDIA-Nemotron-3-Super-120B-A12B config.json (model_type nemotron_h: 88 layers, 40
/// Mamba-2, 40 MoE, 8 attention; hidden 4096; GQA 32/2 heads of 128; 512 experts of 2688, top-22,
/// moe_latent_size 1024, one shared expert of 5376; squared-ReLU, not gated; Mamba 128 heads of 64,
/// 8 groups, state 128; vocabulary 131072, untied; num_nextn_predict_layers 1 with
/// mtp_hybrid_override_pattern "*E"), as Megatron-Bridge's models/nemotronh/nemotron_h_bridge.py maps
/// it (moe_latent_size, mtp_num_layers; tests/unit_tests/recipes/nemotronh/test_nemotron_3_super.py
/// asserts 512 / 2688 / 5376 / top-22 / latent 1024 and the "*E" MTP pattern). Model card: 120B
/// parameters in total, 12B active (without the MTP layer).
inline constexpr model_spec nemotron_3_super_120b_a12b{
    .model_type = model_kind::moe,
    .model_name = "nemotron_3_super_120b_a12b",
    .hidden_size = 4096,
    .head_num = 32,
    .kv_head_num = 2,
    .head_size = 128,
    .intermediate_size = 2688,
    .layer_num = 88,
    .vocab_size = 131072,
    .use_swiglu = false,
    .expert_num = 512,
    .topk = 22,
    .moe_ffn_hidden_size = 2688,
    .moe_shared_expert_intermediate_size = 5376,
    .position_embedding_type = position_kind::none,
    .mtp_num_layers = 1,
    .hybrid_override_pattern =
        "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
    .mamba_state_dim = 128,
    .mamba_head_dim = 64,
    .mamba_num_heads = 128,
    .mamba_num_groups = 8,
    .moe_latent_size = 1024,
    .mtp_hybrid_override_pattern = "*E",
};

/// NVIDIA Nemotron 3.5 Lightning 30B-A3B: Nemotron 3 Nano's architecture (Megatron-Bridge
/// recipes/nemotronh/h100/nemotron_3_nano.py `nemotron_3_5_lightning_pretrain_config` starts from
/// the Nano config and only adds MTP; the Lightning HF config.json has Nano's dimensions and
/// num_nextn_predict_layers 1) with one MTP depth of pattern "*E" (attention then MoE).
inline constexpr model_spec nemotron_3_5_lightning_30b_a3b = [] {
  model_spec m = nemotron_3_nano_30b_a3b;
  m.model_name.assign("nemotron_3_5_lightning_30b_a3b");
  m.mtp_num_layers = 1;
  m.mtp_hybrid_override_pattern.assign("*E");
  return m;
}();

/// DeepSeek-V4's csa_compress_ratios for Flash: layers 0 and 1 sliding window only (0), then
/// CSA (4) and HCA (128) alternating up to layer 42 (CSA), and the MTP layer 0 (HF config.json
/// `compress_ratios`, 43 + 1 entries; deepseek_v4_bridge.py `_dsv4_compress_ratios`).
constexpr compress_ratio_list deepseek_v4_flash_compress_ratios() {
  compress_ratio_list r;
  r.push_back(0);
  r.push_back(0);
  for (int i = 0; i < 20; ++i) {
    r.push_back(4);
    r.push_back(128);
  }
  r.push_back(4);
  r.push_back(0);  // the MTP layer
  return r;
}
/// DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash config.json, as Megatron-Bridge's
/// models/deepseek/deepseek_v4_bridge.py maps it): 43 MoE layers of hidden 4096 (256 routed experts
/// of 2048 top-6 + 1 shared, the first 3 hash-routed), 64 query heads of 512 (448 + 64 rotary) through
/// q_lora_rank 1024, one shared 512-wide key/value (kv_lora_rank: the bridge derives it as the head
/// width), the grouped output projection (8 groups, rank 1024), sliding window 128, lightning indexer
/// 64 heads x 128 top-512, 4 hyper-connection streams, one MTP layer, vocabulary 129280 padded to a
/// multiple of 1280. 284B parameters without the MTP layer, 13B active (model card).
inline constexpr model_spec deepseek_v4_flash{
    .model_type = model_kind::moe,
    .model_name = "deepseek_v4_flash",
    .hidden_size = 4096,
    .head_num = 64,
    .kv_head_num = 1,
    .head_size = 512,
    .layer_num = 43,
    .vocab_size = 129280,
    .use_swiglu = true,
    .expert_num = 256,
    .topk = 6,
    .attention_type = attention_kind::mla,
    .moe_ffn_hidden_size = 2048,
    .moe_shared_expert_intermediate_size = 2048,
    .v_head_dim = 512,
    .qk_head_dim = 448,
    .qk_pos_emb_head_dim = 64,
    .q_lora_rank = 1024,
    .kv_lora_rank = 512,
    .make_vocab_size_divisible_by = 1280,
    .mtp_num_layers = 1,
    .experimental_attention_variant = experimental_attention_kind::dsv4_hybrid,
    .csa_compress_ratios = deepseek_v4_flash_compress_ratios(),
    .csa_window_size = 128,
    .dsa_indexer_n_heads = 64,
    .dsa_indexer_head_dim = 128,
    .dsa_indexer_topk = 512,
    .o_groups = 8,
    .o_lora_rank = 1024,
    .num_residual_streams = 4,
};

struct named_model {
  std::string_view name;
  const model_spec* spec;
};
inline constexpr std::array<named_model, 23> models{{
    {"llama2-7b", &llama2_7b},
    {"llama2-13b", &llama2_13b},
    {"llama2-70b", &llama2_70b},
    {"llama3-8b", &llama3_8b},
    {"llama3-70b", &llama3_70b},
    {"llama3-405b", &llama3_405b},
    {"gpt3-175b", &gpt3_175b},
    {"gptj-6b", &gptj_6b},
    {"falcon-180b", &falcon_180b},
    {"qwen3-32b", &qwen3_32b},
    {"deepseek-v2", &deepseek_v2},
    {"deepseek-v2-lite", &deepseek_v2_lite},
    {"deepseek-v3", &deepseek_v3},
    {"mixtral-8x7b", &mixtral_8x7b},
    {"mixtral-8x22b", &mixtral_8x22b},
    {"qwen3-30b-a3b", &qwen3_30b_a3b},
    {"qwen3-235b-a22b", &qwen3_235b_a22b},
    {"kimi-k2", &kimi_k2},
    {"gpt-oss-120b", &gpt_oss_120b},
    {"nemotron-3-nano-30b-a3b", &nemotron_3_nano_30b_a3b},
    {"deepseek-v4-flash", &deepseek_v4_flash},
    {"nemotron-3-super-120b-a12b", &nemotron_3_super_120b_a12b},
    {"nemotron-3.5-lightning-30b-a3b", &nemotron_3_5_lightning_30b_a3b},
}};

// ---- systems -----------------------------------------------------------------------------------

/// Default efficiencies of catalogue systems: assumptions until measured, each with its reason.
namespace assumptions {
/// Large BF16 GEMMs reach about 70 % of the dense peak (NVIDIA's published cuBLAS results on A100/H100).
inline constexpr double gemm_efficiency = 0.70;
/// Grouped GEMMs of MoE experts run smaller tiles: about 55 % of peak.
inline constexpr double grouped_gemm_efficiency = 0.55;
/// FlashAttention-2 reaches 50-73 % of peak forward and somewhat less backward (Dao 2023, Fig. 5-7).
inline constexpr double attention_fwd_efficiency = 0.60;
inline constexpr double attention_bwd_efficiency = 0.50;
/// Everything else (norms, activations) is memory-bound; this only prices stray FLOPs.
inline constexpr double other_compute_efficiency = 0.50;
/// Streaming kernels sustain about 80 % of HBM bandwidth (STREAM-like copy/triad on data-center GPUs).
inline constexpr double hbm_efficiency = 0.80;
/// What each memory-bound kernel adds in eager-mode training (host launch, launch gap, tail),
/// microseconds, an assumption: the value SimuMax's B200 table carries (b200_bf16_ceperm.json; its
/// A100 table carries 40 us), which the kernel-model parts use (kernel_model.hpp
/// `kernel_models::blackwell`) and with which they match the measured training cases. SimuMax's
/// calibration takes it as an input (it subtracts it per launch to derive the bandwidth shares), so
/// it is not a measurement. Parts without a table took an unsourced 10 us before; 30 us was chosen
/// as the same eager stack's figure and checked on the Megatron-Bridge H100 rows (39.9 % -> 31.6 %
/// mean |error|), which therefore do not test it. Serving replaces it (inference.hpp
/// `serving_system`).
inline constexpr double kernel_latency_us = kernel_models::blackwell.kernel_latency_us;
/// NCCL ring collectives reach about 80 % of the unidirectional link bandwidth as bus bandwidth (nccl-tests).
inline constexpr double link_efficiency = 0.80;
/// PCIe tiers carry NCCL's own model figures (24 GB/s a Gen4 x16 link, which already discounts
/// PCIe's protocol overhead from the 31.5 GB/s raw rate; 16 GB/s NCCL's figure for the EPYC socket
/// link; see `pcie_gen4_x16_gb_per_s`): collectives reach 0.928 of them. Fitted by
/// scripts/fit_kernel_model.py to 15 measured collectives of SimuMax's a100_pcie.json (2-, 4- and
/// 8-GPU tiers and its per-group-size data-parallel figures; not the all-to-all across the
/// sockets, `socket_link_all2all_efficiency`); held-out |error| mean 6.4 %, max 25.1 % (the 8-GPU
/// reduce-scatter). Applied to every catalogue PCIe system (L40S included) as an assumption.
inline constexpr double pci_link_efficiency = 0.928;
/// An all-to-all across the socket link moves its bytes faster than NCCL's 16 GB/s socket figure
/// allows a ring: SimuMax's a100_pcie.json measures the 8-GPU one (tier intra_node_pcie_8x) at a
/// ring-equivalent bus bandwidth of 30 GiB/s x 0.2754 = 8.871e9 B/s, where 4 x 4 ranks send
/// 16/7 of a ring's bytes across the link each way: 8.871e9 x 16/7 / 16e9 = 1.267 of the socket
/// figure (its 16 flows each way use more of the inter-socket fabric than a ring's few; the
/// ring collectives of that tier reach 0.74-0.91). One measured entry: nothing is left out to test
/// it. Derived after the catalogue's A100 ep8 training cases were seen 17 % slow (their
/// all-to-alls cross the sockets); they are not fitted. Applied to every catalogue PCIe system and
/// every all-to-all crossing the link, though only the 4 + 4 shape is measured: four pairs across
/// (tp 4 x cp 2, ep 2 x etp 4) move 1.05-1.07 of the figure in the table's data-parallel rows, so
/// their all-to-all is about 15 % fast here; 2 + 2 and 4 + 2 groups are not measured.
inline constexpr double socket_link_all2all_efficiency = kernel_models::share_of_sheet(30 * 0.2754, 16) * 16 / 7;
// Collective latencies are NCCL's own (network_cost.hpp `nccl_collective_time`): each tier names
// its link class (nccl_link) instead of a per-step latency.
}  // namespace assumptions

namespace detail {
/// GB/s as data sheets print it (10^9 B/s) in the system format's unit (2^30 B/s).
constexpr double sheet_gbps(double gb_per_s) { return gb_per_s * 1e9 / 1073741824.0; }

constexpr network_tier tier(std::string_view name, double gb_per_s_one_direction, nccl_link_kind link) {
  network_tier t{};
  t.name.assign(name);
  t.nccl_link = link;
  t.bandwidth = {
      .present = true,
      .gbps = sheet_gbps(gb_per_s_one_direction),
      .efficient_factor = link == nccl_link_kind::pci ? assumptions::pci_link_efficiency : assumptions::link_efficiency,
      .latency_us = 0};
  t.op[0] = {.present = true, .scale = 2, .offset = -1};  // all_reduce: 2(n-1)/n
  t.op[1] = {.present = true, .scale = 1, .offset = -1};  // all_gather
  t.op[2] = {.present = true, .scale = 1, .offset = -1};  // reduce_scatter
  t.op[3] = {.present = true, .scale = 1, .offset = 0};   // p2p
  t.op[4] = {.present = true, .scale = 1, .offset = -1};  // all2all
  return t;
}

/// PCIe nodes are modelled as two-socket AMD EPYC hosts with four GPUs per socket (an assumption
/// for every catalogue PCIe system; L40S servers are often Intel hosts, whose socket link NCCL
/// prices differently). NCCL prices a GPU's PCIe Gen4 x16 link
/// at 24 GB/s (src/graph/topo.cc `ncclTopoAddPci`: 16 lanes x 120 (100 Mb/s per lane at 16 GT/s)
/// / 80) and the link between two AMD EPYC sockets at 16 GB/s (src/graph/topo.h `AMD_BW`; the
/// common 8-GPU PCIe A100 servers, e.g. Supermicro AS-4124GS-TNR, are EPYC hosts). Groups inside a
/// socket run at the PCIe figure; groups spanning both sockets (tier intra_node_pcie_8x) cross the
/// socket link, which the node's groups of a kind share (`shared_link`).
inline constexpr double pcie_gen4_x16_gb_per_s = 24.0;
/// PCIe Gen5 x16 as NCCL prices it: 16 lanes x 240 (100 Mb/s per lane at 32 GT/s) / 80 (same
/// `ncclTopoAddPci` table).
inline constexpr double pcie_gen5_x16_gb_per_s = 48.0;
inline constexpr double epyc_socket_link_gb_per_s = 16.0;

/// A node of `per_node` accelerators. `dense_tflops`: BF16 dense peak; `hbm_gb_per_s`, `mem_gb`:
/// memory; `intra_gb_per_s`: per-GPU link bandwidth in one direction; `pcie`: the GPUs talk over
/// PCIe (tiers intra_node_pcie_2x/4x at `intra_gb_per_s`, 8x across sockets, see above) instead
/// of NVLink/Infinity Fabric;
/// `nic_gb_per_s`: one NIC per GPU. The `inter_node` tier carries the node's total over its
/// `num_per_node` NICs, as the system format means it: SimuMax's `compute_net_op_time`
/// (simumax/core/config.py) divides it by `num_per_node` for one NIC's share (p2p, cross-node
/// all-to-all) and by the data-parallel groups sharing the node; so does `collective_time`.
constexpr system_spec node(std::string_view name, std::string_view backend, double compute_capability,
                           double dense_tflops, double fp8_tflops, double hbm_gb_per_s, double mem_gb,
                           double intra_gb_per_s, bool pcie, double nic_gb_per_s) {
  system_spec s{};
  s.sys_name.assign(name);
  s.num_per_node = 8;
  s.accelerator.backend.assign(backend);
  s.accelerator.mem_gbs = mem_gb;
  s.accelerator.compute_capability = compute_capability;
  auto op = [&](compute_kind k, double tflops, double eff) {
    s.accelerator.op[static_cast<std::size_t>(k)] = {.present = true, .tflops = tflops, .efficient_factor = eff};
  };
  op(compute_kind::default_kind, dense_tflops, assumptions::other_compute_efficiency);
  op(compute_kind::matmul, dense_tflops, assumptions::gemm_efficiency);
  op(compute_kind::group_matmul, dense_tflops, assumptions::grouped_gemm_efficiency);
  op(compute_kind::sdp_fwd, dense_tflops, assumptions::attention_fwd_efficiency);
  op(compute_kind::sdp_bwd, dense_tflops, assumptions::attention_bwd_efficiency);
  if (fp8_tflops > 0) {
    op(compute_kind::fp8_matmul, fp8_tflops, assumptions::gemm_efficiency);
    op(compute_kind::fp8_group_matmul, fp8_tflops, assumptions::grouped_gemm_efficiency);
  }
  s.accelerator.bandwidth[0] = {.present = true,
                                .gbps = sheet_gbps(hbm_gb_per_s),
                                .efficient_factor = assumptions::hbm_efficiency,
                                .latency_us = assumptions::kernel_latency_us};
  s.intra_with_pcie = pcie;
  if (pcie) {
    s.networks[s.network_count++] = tier("intra_node_pcie_2x", intra_gb_per_s, nccl_link_kind::pci);
    s.networks[s.network_count++] = tier("intra_node_pcie_4x", intra_gb_per_s, nccl_link_kind::pci);
    network_tier across = tier("intra_node_pcie_8x", epyc_socket_link_gb_per_s, nccl_link_kind::pci);
    across.shared_link = true;
    across.op[static_cast<std::size_t>(collective_kind::all2all)].efficient_factor =
        assumptions::socket_link_all2all_efficiency;
    s.networks[s.network_count++] = across;
  } else {
    s.networks[s.network_count++] = tier("high_intra_node", intra_gb_per_s, nccl_link_kind::nvlink);
  }
  s.networks[s.network_count++] = tier("inter_node", nic_gb_per_s * 8, nccl_link_kind::net);  // 8 NICs per node
  return s;
}

/// `s` as one NVLink domain of `per_node` GPUs (GB200/GB300 NVL72: 72 GPUs behind NVLink switches
/// count as one node of the system format) with one `nic_gb_per_s` NIC per GPU off the domain:
/// the inter-node tier carries the domain's total, as in `node`.
constexpr system_spec nvlink_domain(system_spec s, std::int64_t per_node, double nic_gb_per_s) {
  s.num_per_node = per_node;
  s.networks[s.network_count - 1] =
      tier("inter_node", nic_gb_per_s * static_cast<double>(per_node), nccl_link_kind::net);
  return s;
}

/// `s` with NVFP4 GEMM entries (`fp4_matmul`, `fp4_group_matmul`, llmsim's extension of the
/// format) at `fp4_tflops` dense, with the bf16 GEMMs' assumed efficiencies.
constexpr system_spec with_fp4(system_spec s, double fp4_tflops) {
  s.accelerator.op[static_cast<std::size_t>(compute_kind::fp4_matmul)] = {
      .present = true, .tflops = fp4_tflops, .efficient_factor = assumptions::gemm_efficiency};
  s.accelerator.op[static_cast<std::size_t>(compute_kind::fp4_group_matmul)] = {
      .present = true, .tflops = fp4_tflops, .efficient_factor = assumptions::grouped_gemm_efficiency};
  return s;
}
/// `s` priced, where its measured tables lack a shape (catalogue systems have none), by the kernel
/// model fitted for `arch` (cost/kernel_model.hpp) over `sms` streaming multiprocessors.
/// Its memory-bound kernels take the architecture's measured bandwidth shares and latency.
constexpr system_spec with_kernel_model(system_spec s, kernel_architecture arch, std::int64_t sms) {
  s.accelerator.kernel_model = arch;
  s.accelerator.sm_count = sms;
  const kernel_model_constants& k = *kernel_constants(arch);
  auto& bw = s.accelerator.bandwidth;
  if (k.hbm_default > 0) bw[0].efficient_factor = k.hbm_default;  // 0: unmeasured, the assumption stands
  if (k.kernel_latency_us > 0) bw[0].latency_us = k.kernel_latency_us;
  const std::array<std::pair<memory_kind, double>, 4> kinds{{{memory_kind::permute_fwd, k.hbm_permute_fwd},
                                                             {memory_kind::permute_bwd, k.hbm_permute_bwd},
                                                             {memory_kind::ce, k.hbm_ce},
                                                             {memory_kind::ce_fusion, k.hbm_ce_fusion}}};
  for (const auto& [kind, share] : kinds)
    if (share > 0) {
      auto& e = bw[static_cast<std::size_t>(kind)];
      e = bw[0];
      e.efficient_factor = share;
    }
  for (std::size_t t = 0; t < s.network_count; ++t) {
    if (s.networks[t].nccl_link == nccl_link_kind::nvlink && k.nvlink_efficiency > 0)
      s.networks[t].bandwidth.efficient_factor = k.nvlink_efficiency;
    if (s.networks[t].nccl_link != nccl_link_kind::none)
      s.networks[t].bandwidth.fixed_latency = k.collective_call_latency_us;
  }
  return s;
}
/// `s` with its default memory-bound kernels at `share` of the data-sheet HBM bandwidth (a part
/// whose own stream measurement differs from its architecture's).
constexpr system_spec with_hbm_share(system_spec s, double share) {
  s.accelerator.bandwidth[0].efficient_factor = share;
  return s;
}
/// SM counts: A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, "108 SMs"); B200 148
/// (CUDA's multiProcessorCount on HGX B200; the Blackwell constants are fitted with it); the
/// enabled counts of the other Blackwell parts as benchmark reports print them (NVIDIA's "Inside
/// NVIDIA Blackwell Ultra" blog gives 160 for the full die only): GB200 152 and B300 148
/// (flashinfer-ai/flashinfer's NVFP4 sparse MLA decode notes: "On GB200 (152 SMs) ... on B300 (148
/// SMs)"), GB300 152 (its cake_sampling docs: "GB300 (sm_103a, 152 SMs)"); B300 also ships with 152
/// (stas00/ml-engineering training/performance/README.md). Ampere's constants come from an A100
/// PCIe (300 W) table and are applied to the SXM parts (400 W) too: an assumption that may price
/// SXM GEMMs a little slow.
inline constexpr std::int64_t a100_sms = 108, b200_sms = 148, b300_sms = 148, gb200_sms = 152, gb300_sms = 152;
/// Hopper SM counts (NVIDIA H100 Tensor Core GPU Architecture whitepaper: 132 SMs on the H100 SXM5,
/// 114 on the H100 PCIe; H200 and H800 SXM are the SXM5 part's GH100 configuration with other
/// memory or NVLink). The Hopper kernel model (kernel_model.hpp `kernel_models::hopper`) prices
/// attention over them and TE's userbuffers take some (strategy.tp_comm_overlap).
inline constexpr std::int64_t h100_sxm_sms = 132, h100_pcie_sms = 114;
/// `s` with `sms` streaming multiprocessors.
constexpr system_spec with_sm_count(system_spec s, std::int64_t sms) {
  s.accelerator.sm_count = sms;
  return s;
}
/// The GB300's GEMMs over the GB200's at the same 2500 / 5000 TFLOPS data-sheet peaks: cuBLASLt
/// FP8 GEMMs of random data on Azure's ND GB300 v6 against ND GB200 v6, the same benchmark
/// (egmsft/AI-benchmarking-guide Azure_Results/ND_GB300_v6_results.md at 18e80a2 and
/// ND_GB200_v6_results.md at 0682f76, "GEMM CuBLASLt (FP8)"): the geometric mean of the five shapes of
/// 4096 and up, 3257.0/2694.7, 3286.3/2781.5, 3308.5/2819.5, 3271.3/2755.3 and 3279.5/2798.7
/// (6144 x 12288 x 12288) = 1.184, near the power limits' 1400 / 1200 W = 1.167: dense tensor work
/// holds Blackwell's clocks at the power limit (the two runs also differ in CUDA 13.0 / 12.8 and
/// driver). The GB200 takes the Blackwell model's share unchanged.
inline constexpr double gb300_gemm_sustained_scale = 1.184;
/// `s` whose GEMMs sustain `scale` times its kernel model's share (`accelerator.gemm_sustained_scale`).
constexpr system_spec with_gemm_sustained_scale(system_spec s, double scale) {
  s.accelerator.gemm_sustained_scale = scale;
  return s;
}
/// A Grace-based GPU's copies to and from host memory over NVLink-C2C as measured: nvbandwidth on
/// Azure ND GB200 v6, "Host to Device 201", "Device to Host 193" GB/s
/// (Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md at fa79995; the ND GB300 v6
/// run of its egmsft fork gives 211 / 193): the smaller, the offload's direction. The link's
/// nominal 900 GB/s both ways (TransformerEngine's cpu_offloading.rst: "NVLink-C2C (GB200), 900
/// GB/s bidirectional per link") is well above it: a Grace and its LPDDR5X serve two GPUs.
/// Against PCIe 5.0 x16's 64 (cost/step_cost.hpp).
inline constexpr double nvlink_c2c_gb_per_s = 193;
/// `s` whose GPUs reach host memory at `gb_per_s` each way.
constexpr system_spec with_host_link(system_spec s, double gb_per_s) {
  s.accelerator.host_link_gbs = gb_per_s;
  return s;
}
}  // namespace detail

/// NVIDIA A100 SXM4 80 GB: 312 TFLOPS BF16 dense, 2039 GB/s HBM2e, NVLink 3 600 GB/s (300 each way),
/// HDR InfiniBand 200 Gb/s (25 GB/s) per GPU (A100 data sheet).
inline constexpr system_spec a100_sxm =
    detail::with_kernel_model(detail::node("a100_sxm", "cuda", 8.0, 312, 0, 2039, 80, 300, false, 25),
                              kernel_architecture::ampere, detail::a100_sms);
/// NVIDIA A100 PCIe 80 GB: 312 TFLOPS, 1935 GB/s, PCIe Gen4 x16 (NCCL's 24 GB/s, see `node`), HDR
/// 200 Gb/s.
inline constexpr system_spec a100_pcie = detail::with_kernel_model(
    detail::node("a100_pcie", "cuda", 8.0, 312, 0, 1935, 80, detail::pcie_gen4_x16_gb_per_s, true, 25),
    kernel_architecture::ampere, detail::a100_sms);
/// NVIDIA A100 SXM4 40 GB: 312 TFLOPS BF16 dense, 1555 GB/s HBM2, NVLink 3 (A100 data sheet).
inline constexpr system_spec a100_sxm_40gb =
    detail::with_kernel_model(detail::node("a100_sxm_40gb", "cuda", 8.0, 312, 0, 1555, 40, 300, false, 25),
                              kernel_architecture::ampere, detail::a100_sms);
/// NVIDIA L40S 48 GB (Ada): 362 TFLOPS BF16 / 733 FP8 dense tensor (the data sheet's 733 / 1466
/// are with sparsity), 864 GB/s GDDR6, PCIe Gen4 x16 (NCCL's 24 GB/s, see `node`), no NVLink (L40S
/// data sheet).
inline constexpr system_spec l40s =
    detail::node("l40s", "cuda", 8.9, 362, 733, 864, 48, detail::pcie_gen4_x16_gb_per_s, true, 25);
/// One GCD of an AMD Instinct MI250X (the OAM package is two GCDs, each its own device): 191.5
/// TFLOPS BF16 dense and 1638.4 GB/s HBM2e of its 64 GB (half the package's 383 TFLOPS and
/// 3.2768 TB/s, MI250X data sheet); Infinity Fabric 50 GB/s each way per link.
inline constexpr system_spec mi250x_gcd = detail::node("mi250x_gcd", "rocm", 0, 191.5, 0, 1638.4, 64, 50, false, 25);
/// NVIDIA H100 SXM5 80 GB: 989 TFLOPS BF16 / 1979 FP8 dense, 3350 GB/s HBM3, NVLink 4 900 GB/s (450 each way), NDR 400 Gb/s;
/// priced by the Hopper kernel model.
inline constexpr system_spec h100_sxm =
    detail::with_kernel_model(detail::node("h100_sxm", "cuda", 9.0, 989, 1979, 3350, 80, 450, false, 50),
                              kernel_architecture::hopper, detail::h100_sxm_sms);
/// NVIDIA H100 PCIe 80 GB: 756 TFLOPS BF16 / 1513 FP8 dense (the data sheet's 1,513 / 3,026 are
/// with sparsity), 2000 GB/s HBM2e, PCIe Gen5 x16 (NCCL's 48 GB/s, see `node`; the optional
/// two-GPU NVLink bridge is not modelled), 400 Gb/s per GPU assumed as for the SXM part (NVIDIA
/// H100 data sheet, "H100 PCIe" column). Its collectives take the PCIe fit of the A100 PCIe.
inline constexpr system_spec h100_pcie = detail::with_kernel_model(
    detail::node("h100_pcie", "cuda", 9.0, 756, 1513, 2000, 80, detail::pcie_gen5_x16_gb_per_s, true, 50),
    kernel_architecture::hopper, detail::h100_pcie_sms);
/// NVIDIA H200 SXM 141 GB: H100 compute, 4800 GB/s HBM3e, NVLink 4, NDR 400 Gb/s. Its streams reach
/// 4.01 TB/s (BabelStream Copy on Azure ND H200 v5: Azure/AI-benchmarking-guide
/// Azure_Results/ND_H200_v5_results.md), a smaller share than the H100's.
inline constexpr system_spec h200 = detail::with_hbm_share(
    detail::with_kernel_model(detail::node("h200", "cuda", 9.0, 989, 1979, 4800, 141, 450, false, 50),
                              kernel_architecture::hopper, detail::h100_sxm_sms),
    4.01 / 4.8);
/// NVIDIA B200 (HGX B200) 180 GB: 2250 TFLOPS BF16 / 4500 FP8 / 9000 FP4 dense (the data sheet's
/// 18 PFLOPS FP4 is with sparsity), 8000 GB/s HBM3e, NVLink 5 1800 GB/s (900 each way), 400 Gb/s NIC.
inline constexpr system_spec b200 = detail::with_kernel_model(
    detail::with_fp4(detail::node("b200", "cuda", 10.0, 2250, 4500, 8000, 180, 900, false, 50), 9000),
    kernel_architecture::blackwell, detail::b200_sms);
/// NVIDIA H800 SXM5 80 GB: H100's compute (989 TFLOPS BF16 / 1979 FP8 dense) and HBM3 (3350 GB/s)
/// with NVLink cut to 400 GB/s (200 each way) (NVIDIA H800 product brief; DeepSeek-V3 report §3.1
/// describes the same 8-GPU NVLink/NVSwitch nodes), NDR 400 Gb/s per GPU.
inline constexpr system_spec h800 =
    detail::with_kernel_model(detail::node("h800", "cuda", 9.0, 989, 1979, 3350, 80, 200, false, 50),
                              kernel_architecture::hopper, detail::h100_sxm_sms);
/// NVIDIA HGX B300 288 GB (Blackwell Ultra): 36 / 72 PFLOPS BF16 / FP8 per 8 GPUs with sparsity
/// (HGX B300 data sheet) = 2250 / 4500 TFLOPS dense per GPU; FP4 (NVFP4) 13.5 PFLOPS dense per GPU
/// (108 PF dense per 8 GPUs); 8 TB/s HBM3e;
/// NVLink 5 1.8 TB/s (900 GB/s each way); ConnectX-8 800 Gb/s (100 GB/s) per GPU.
/// Priced by the Blackwell Ultra kernel model (kernel_model.hpp `kernel_models::blackwell_ultra`); its
/// GEMMs at Blackwell's share (no comparison with the B200 on one benchmark found).
inline constexpr system_spec b300 = detail::with_kernel_model(
    detail::with_fp4(detail::node("b300", "cuda", 10.3, 2250, 4500, 8000, 288, 900, false, 100), 13500),
    kernel_architecture::blackwell_ultra, detail::b300_sms);
/// NVIDIA GB200 NVL72: 72 Blackwell GPUs in one NVLink 5 domain (130 TB/s = 1.8 TB/s per GPU, 900
/// each way); 360 / 720 PFLOPS BF16 / FP8 per rack with sparsity (GB200 NVL72 data sheet) = 2500 /
/// 5000 TFLOPS dense per GPU; FP4 10 PFLOPS dense per GPU (1440 PF sparse per rack);
/// 13.4 TB HBM3e at 576 TB/s per rack = 186 GB and 8 TB/s per GPU; ConnectX-7 400 Gb/s per GPU;
/// host memory (Grace LPDDR5X) over NVLink-C2C.
inline constexpr system_spec gb200_nvl72 = detail::with_host_link(
    detail::nvlink_domain(
        detail::with_kernel_model(
            detail::with_fp4(detail::node("gb200_nvl72", "cuda", 10.0, 2500, 5000, 8000, 186, 900, false, 50), 10000),
            kernel_architecture::blackwell, detail::gb200_sms),
        72, 50),
    detail::nvlink_c2c_gb_per_s);
/// NVIDIA GB300 NVL72: 72 Blackwell Ultra GPUs in one NVLink 5 domain (1.8 TB/s per GPU); 180 / 360
/// PFLOPS BF16 / FP8 dense per rack (GB300 NVL72 data sheet) = 2500 / 5000 TFLOPS per GPU; FP4 15
/// PFLOPS dense per GPU (1080 PF per rack); 288 GB HBM3e at 8 TB/s per GPU; ConnectX-8
/// 800 Gb/s per GPU; host memory (Grace LPDDR5X) over NVLink-C2C. Priced by the Blackwell Ultra
/// kernel model, its GEMMs `detail::gb300_gemm_sustained_scale` times the GB200's share.
inline constexpr system_spec gb300_nvl72 = detail::with_host_link(
    detail::nvlink_domain(detail::with_gemm_sustained_scale(
                              detail::with_kernel_model(detail::with_fp4(detail::node("gb300_nvl72", "cuda", 10.3, 2500,
                                                                                      5000, 8000, 288, 900, false, 100),
                                                                         15000),
                                                        kernel_architecture::blackwell_ultra, detail::gb300_sms),
                              detail::gb300_gemm_sustained_scale),
                          72, 100),
    detail::nvlink_c2c_gb_per_s);
/// AMD Instinct MI300X 192 GB: 1307 TFLOPS BF16 / 2615 FP8 dense, 5300 GB/s HBM3, Infinity Fabric
/// 7 links x 64 GB/s each way to the other GPUs of the node, 400 Gb/s NIC (MI300X data sheet).
/// Its GEMMs are priced by the CDNA 3 kernel model (kernel_model.hpp `kernel_models::cdna3`) over its
/// 304 CUs (AMD CDNA 3 architecture white paper).
inline constexpr system_spec mi300x = detail::with_kernel_model(
    detail::node("mi300x", "rocm", 0, 1307, 2615, 5300, 192, 448, false, 50), kernel_architecture::cdna3, 304);
/// AMD Instinct MI355X (CDNA 4, OAM, 8 per node; AMD Instinct MI355X data sheet and product page):
/// peak dense matrix 2516.6 TFLOPS BF16 ("2.5 PFLOPS"), 5033.2 FP8 ("5 PFLOPS"), 10066.3 MXFP4
/// ("10 PFLOPS"); 288 GB HBM3E at 8 TB/s; Infinity Fabric 7 links of 153.6 GB/s (both directions) to
/// the other GPUs of the node: 7 x 76.8 = 537.6 GB/s each way; 400 Gb/s NIC per GPU.
inline constexpr system_spec mi355x =
    detail::with_fp4(detail::node("mi355x", "rocm", 0, 2516.6, 5033.2, 8000, 288, 537.6, false, 50), 10066.3);

struct named_system {
  std::string_view name;
  const system_spec* spec;
};
inline constexpr std::array<named_system, 15> systems{{
    {"a100-sxm", &a100_sxm},
    {"a100-pcie", &a100_pcie},
    {"a100-sxm-40gb", &a100_sxm_40gb},
    {"l40s", &l40s},
    {"mi250x-gcd", &mi250x_gcd},
    {"h100-sxm", &h100_sxm},
    {"h100-pcie", &h100_pcie},
    {"h200", &h200},
    {"b200", &b200},
    {"mi300x", &mi300x},
    {"mi355x", &mi355x},
    {"h800", &h800},
    {"b300", &b300},
    {"gb200-nvl72", &gb200_nvl72},
    {"gb300-nvl72", &gb300_nvl72},
}};

/// The catalogue model called `name`, or nullptr.
constexpr const model_spec* find_model(std::string_view name) {
  for (const auto& m : models)
    if (m.name == name) return m.spec;
  return nullptr;
}
/// The catalogue system called `name`, or nullptr.
constexpr const system_spec* find_system(std::string_view name) {
  for (const auto& s : systems)
    if (s.name == name) return s.spec;
  return nullptr;
}

/// One token of compact strategy names: its spelling (<N> a decimal number) and what it sets.
struct strategy_name_token {
  std::string_view token;
  std::string_view meaning;
};
/// Every token `parse_strategy_name` understands, for `llmsim list` and error messages.
inline constexpr std::array<strategy_name_token, 25> strategy_name_tokens{{
    {"tp<N>", "tensor-parallel size (tp_size)"},
    {"pp<N>", "pipeline stages (pp_size)"},
    {"dp<N>", "data-parallel size: world_size = tp * pp * cp * dp"},
    {"cp<N>", "context-parallel size (cp_size), Ulysses all-to-all (cp_comm_type \"a2a\")"},
    {"cp<N>ring", "context-parallel size with the KV ring (cp_comm_type \"p2p\")"},
    {"ep<N>", "expert-parallel size (ep_size)"},
    {"etp<N>", "expert tensor-parallel size (etp_size)"},
    {"mbs<N>", "micro-batch size (micro_batch_size, default 1)"},
    {"mbc<N>", "micro-batches per iteration (micro_batch_num, default 8)"},
    {"seq<N>", "sequence length (seq_len, default 4096)"},
    {"zero<N>", "optimizer state sharding (zero_state, default 1)"},
    {"zero<N>fsdp",
     "ZeRO stage N as Megatron-FSDP (data_parallel_sharding_strategy: no_shard, optim, "
     "optim_grads, optim_grads_params for N = 0..3)"},
    {"vp<N>", "virtual pipeline chunks per stage (interleaving_size)"},
    {"first<N>", "layers of the first pipeline stage (num_layers_in_first_pipeline_stage)"},
    {"last<N>", "layers of the last pipeline stage (num_layers_in_last_pipeline_stage)"},
    {"full", "full recompute of every layer"},
    {"full<N>", "full recompute of the first N layers of each stage (recompute_layer_num)"},
    {"selective", "recompute each layer's QKV projection, RoPE and core attention (SimuMax attn_recompute)"},
    {"fp8<recipe>", "FP8 training with the recipe: fp8delayed, fp8tensorwise, fp8blockwise, fp8mxfp8, fp8nvfp4"},
    {"optoffload",
     "the optimizer step on the CPU (optimizer_cpu_offload; Megatron's with use_precision_aware_optimizer)"},
    {"nosp", "no sequence parallelism (on by default)"},
    {"zbh1", "zero-bubble ZB-H1 pipeline schedule (pipeline_schedule \"zb_h1\")"},
    {"dualpipev", "DualPipeV pipeline schedule (pipeline_schedule \"dualpipev\")"},
    {"epoverlap", "Megatron's EP all-to-all overlap (overlap_moe_expert_parallel_comm, delay_wgrad_compute)"},
    {"tpoverlap", "TE userbuffers TP communication overlap (tp_comm_overlap, TE's default settings)"},
}};

namespace detail {
/// A word token of strategy names (no number): sets what it names in `s`; false if it is none.
constexpr bool apply_name_word(std::string_view tok, strategy_spec& s) {
  if (tok == "full" || tok == "selective") {
    set_recompute(s, tok == "full" ? recompute_kind::full_block : recompute_kind::selective_recompute, max_dimension);
  } else if (tok == "nosp") {
    s.enable_sequence_parallel = false;
  } else if (tok == "epoverlap") {
    s.overlap_moe_expert_parallel_comm = s.delay_wgrad_compute = true;
  } else if (tok == "tpoverlap") {
    s.tp_comm_overlap = true;
  } else if (tok == "zbh1" || tok == "dualpipev") {
    s.pipeline_schedule = tok == "zbh1" ? pipeline_schedule_kind::zb_h1 : pipeline_schedule_kind::dualpipev;
  } else if (tok == "optoffload") {
    s.optimizer_cpu_offload = true;
  } else if (tok.substr(0, 3) == "fp8" && tok.size() > 3) {
    // fp8<recipe>: "fp8" is followed by a recipe's name, not by a number.
    const fp8_recipe_kind recipe = enum_from_name<fp8_recipe_kind>(tok.substr(3));
    if (recipe == fp8_recipe_kind::invalid) return false;
    s.fp8 = true;
    s.fp8_recipe = recipe;
  } else {
    return false;
  }
  return true;
}

/// A number token `<key><N>[<suffix>]` of strategy names: sets what it names in `s` (`dp`, which
/// only sizes the world, into `dp`); false if the key, the suffix or the number is not understood.
constexpr bool apply_name_number(std::string_view key, std::int64_t v, std::string_view suffix, strategy_spec& s,
                                 std::int64_t& dp) {
  if (!suffix.empty()) {
    if (key == "cp" && suffix == "ring") {
      s.cp_size = v;
      s.cp_comm_type = cp_comm_kind::p2p;
      return true;
    }
    if (key == "zero" && suffix == "fsdp" && v <= 3) {
      s.zero_state = v;
      s.data_parallel_sharding_strategy = megatron_fsdp_sharding(v);
      return true;
    }
    return false;
  }
  if (key == "full") {
    if (v >= 1) set_recompute(s, recompute_kind::full_block, v);
    return v >= 1;
  }
  if (key == "first" || key == "last") {
    (key == "first" ? s.num_layers_in_first_pipeline_stage : s.num_layers_in_last_pipeline_stage) = v;
    return true;
  }
  // A later cp<N> / zero<N> replaces what an earlier cp<N>ring / zero<N>fsdp set.
  if (key == "cp") s.cp_comm_type = cp_comm_kind::a2a;
  if (key == "zero") s.data_parallel_sharding_strategy = {};
  const std::array<std::pair<std::string_view, std::int64_t*>, 11> sizes{{{"tp", &s.tp_size},
                                                                          {"pp", &s.pp_size},
                                                                          {"dp", &dp},
                                                                          {"cp", &s.cp_size},
                                                                          {"ep", &s.ep_size},
                                                                          {"etp", &s.etp_size},
                                                                          {"mbs", &s.micro_batch_size},
                                                                          {"mbc", &s.micro_batch_num},
                                                                          {"seq", &s.seq_len},
                                                                          {"zero", &s.zero_state},
                                                                          {"vp", &s.interleaving_size}}};
  for (const auto& [name, field] : sizes)
    if (name == key) {
      *field = v;
      return true;
    }
  return false;
}
}  // namespace detail

/// A strategy from a compact name: the tokens of `strategy_name_tokens` separated by '_' or '-':
/// tp<N>, pp<N>, dp<N>, cp<N> (cp<N>ring: the KV ring), ep<N>, etp<N>, mbs<N>, mbc<N>
/// (micro-batches), seq<N>, zero<N> (zero<N>fsdp: as Megatron-FSDP), vp<N>, first<N> / last<N>
/// (layers of the first / last pipeline stage, the others share the rest evenly), full / full<N> /
/// selective (recompute every layer, or the first N of each stage), fp8<recipe>, optoffload, nosp
/// (no sequence parallelism), zbh1 / dualpipev (pipeline schedule), epoverlap (Megatron's EP
/// all-to-all overlap), tpoverlap (TE's userbuffers TP overlap). world = tp * pp * cp * dp.
/// Defaults: seq 4096, mbs 1, mbc 8, zero 1, sequence parallel on. `tp2_pp1_dp4_mbc16`,
/// `pp16_dp8_ep8_mbc32_first1` (DeepSeek-V3's 61 layers as 1 + 15 * 4). `strategy_name` is the
/// inverse: every name `llmsim search` prints parses back to its candidate.
/// A later token replaces what an earlier one set (`cp2ring_cp2` is Ulysses, `zero3fsdp_zero1`
/// DeepSpeed-style ZeRO-1). Returns false when a token is not understood (a number token without
/// its number, `first`, is not understood, nor a number past max_dimension) or the world
/// tp * pp * cp * dp passes max_dimension.
constexpr bool parse_strategy_name(std::string_view name, strategy_spec& out) {
  strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8};
  std::int64_t dp = 1;
  std::size_t i = 0;
  bool any = false;
  while (i < name.size()) {
    std::size_t j = i;
    while (j < name.size() && name[j] != '_' && name[j] != '-') ++j;
    const std::string_view tok = name.substr(i, j - i);
    i = j + 1;
    if (tok.empty()) continue;
    any = true;
    if (detail::apply_name_word(tok, s)) continue;
    std::size_t k = 0;
    while (k < tok.size() && (tok[k] < '0' || tok[k] > '9')) ++k;
    std::size_t e = k;
    while (e < tok.size() && tok[e] >= '0' && tok[e] <= '9') ++e;
    const std::optional<std::int64_t> v = llmsim::detail::decimal_count(tok.substr(k, e - k));
    if (k == 0 || !v || *v > max_dimension) return false;
    if (!detail::apply_name_number(tok.substr(0, k), *v, tok.substr(e), s, dp)) return false;
  }
  if (!any) return false;
  // world = tp * pp * cp * dp, refused past max_dimension (each factor is at most max_dimension,
  // so checking after each step keeps every product inside int64).
  std::int64_t world = 1;
  for (const std::int64_t f : {s.tp_size, s.pp_size, s.cp_size, dp}) {
    world *= f;
    if (world > max_dimension) return false;
  }
  s.world_size = world;
  if (s.recompute_granularity == recompute_kind::none) s.enable_recompute = false;
  if (megatron_optimizer_offload(s)) s.use_precision_aware_optimizer = true;  // Megatron's offload runs on it
  out = s;
  return true;
}

/// Room for the longest compact name `compact_strategy_name` writes: every token, each number of
/// 19 digits (the most an int64 has), about 450 characters.
inline constexpr std::size_t strategy_name_capacity = 512;

namespace detail {
/// Writes a compact name token by token, '_' between them.
struct name_writer {
  char chars[strategy_name_capacity]{};
  std::size_t length = 0;
  constexpr void put(std::string_view text) {
    for (const char c : text)
      if (length < strategy_name_capacity) chars[length++] = c;  // capacity holds the longest name
  }
  constexpr void token(std::string_view word, std::optional<std::int64_t> n = {}, std::string_view suffix = {}) {
    if (length > 0) put("_");
    put(word);
    if (n) {
      // A negative count is written with its sign (no name reads it back: '-' separates tokens).
      if (*n < 0) put("-");
      std::uint64_t v = *n < 0 ? 0 - static_cast<std::uint64_t>(*n) : static_cast<std::uint64_t>(*n);
      char digits[20]{};
      std::size_t d = 0;
      do {
        digits[d++] = static_cast<char>('0' + v % 10);
        v /= 10;
      } while (v > 0 && d < sizeof digits);
      while (d > 0) put(std::string_view(&digits[--d], 1));
    }
    put(suffix);
  }
  [[nodiscard]] constexpr std::string_view view() const { return {chars, length}; }
};

/// The layout tokens of `s` (parallel sizes, stage splits, schedule, overlaps), in name order.
constexpr void write_layout_tokens(name_writer& w, const strategy_spec& s, std::int64_t dp) {
  w.token("tp", s.tp_size);
  w.token("pp", s.pp_size);
  if (s.cp_size != 1 || s.cp_comm_type != cp_comm_kind::a2a)
    w.token("cp", s.cp_size, s.cp_comm_type == cp_comm_kind::p2p ? "ring" : "");
  w.token("dp", dp);
  if (s.ep_size != 1) w.token("ep", s.ep_size);
  if (s.etp_size != 1) w.token("etp", s.etp_size);
  if (s.interleaving_size != 1) w.token("vp", s.interleaving_size);
  if (s.num_layers_in_first_pipeline_stage) w.token("first", *s.num_layers_in_first_pipeline_stage);
  if (s.num_layers_in_last_pipeline_stage) w.token("last", *s.num_layers_in_last_pipeline_stage);
  if (s.pipeline_schedule == pipeline_schedule_kind::zb_h1) w.token("zbh1");
  if (s.pipeline_schedule == pipeline_schedule_kind::dualpipev) w.token("dualpipev");
  if (s.overlap_moe_expert_parallel_comm) w.token("epoverlap");
  if (s.tp_comm_overlap) w.token("tpoverlap");
}

/// The batch, memory and precision tokens of `s`, in name order.
constexpr void write_run_tokens(name_writer& w, const strategy_spec& s) {
  w.token("mbs", s.micro_batch_size);
  w.token("mbc", s.micro_batch_num);
  w.token("zero", s.zero_state, s.data_parallel_sharding_strategy ? "fsdp" : "");
  if (s.fp8) {
    w.token("fp8");
    w.put(enum_name(s.fp8_recipe));
  }
  if (s.optimizer_cpu_offload) w.token("optoffload");
  if (s.enable_recompute && s.recompute_granularity == recompute_kind::selective_recompute) w.token("selective");
  if (s.enable_recompute && s.recompute_granularity == recompute_kind::full_block) {
    if (s.recompute_layer_num >= max_dimension)
      w.token("full");
    else
      w.token("full", s.recompute_layer_num);
  }
  if (!s.enable_sequence_parallel) w.token("nosp");
  if (s.seq_len != 4096) w.token("seq", s.seq_len);
}
}  // namespace detail

/// The compact name of the fields of `s` that names hold (`parse_strategy_name`'s tokens): tp,
/// pp, cp, dp, ep, etp, vp, first, last, schedule, overlaps, mbs, mbc, zero, fp8, optoffload,
/// recompute, nosp, seq (the last when not 4096), e.g.
/// `tp1_pp1_cp2ring_dp512_mbs1_mbc2_zero3_fp8delayed_full2_seq8192`. Fields no token sets are left
/// out: `strategy_name` says whether the name holds all of `s`.
constexpr fixed_string<strategy_name_capacity> compact_strategy_name(const strategy_spec& s) {
  // dp = world / (tp * pp * cp); 0 when a factor is not positive or the product passes the world
  // (checked before each step, so no product overflows).
  std::int64_t model_parallel = 1;
  bool fits = s.world_size >= 1;
  for (const std::int64_t f : {s.tp_size, s.pp_size, s.cp_size}) {
    fits = fits && f >= 1 && model_parallel <= s.world_size / f;
    if (fits) model_parallel *= f;
  }
  detail::name_writer w;
  detail::write_layout_tokens(w, s, fits ? s.world_size / model_parallel : 0);
  detail::write_run_tokens(w, s);
  return fixed_string<strategy_name_capacity>(w.view());
}

/// `compact_strategy_name(s)` when it parses back to `s` exactly, else nullopt (a field no token
/// sets differs from its default, or the world is not tp * pp * cp * dp).
constexpr std::optional<fixed_string<strategy_name_capacity>> strategy_name(const strategy_spec& s) {
  const fixed_string<strategy_name_capacity> name = compact_strategy_name(s);
  strategy_spec back{};
  if (!parse_strategy_name(name.view(), back) || !(back == s)) return std::nullopt;
  return name;
}

}  // namespace catalogue
LLMSIM_END_NAMESPACE
