/// \file llmsim/spec/field_lists.hpp
/// The JSON names of every field of `model_spec` and `strategy_spec`, written once. Only the
/// JSON adapter and tools that print or override fields by name include this header (a tuple of
/// 60+ members costs compile time the core does not need).
#pragma once

#include <llmsim/spec/fields.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>

#include <tuple>

LLMSIM_BEGIN_NAMESPACE

template <>
struct field_list<model_spec> {
  using m = model_spec;
  static constexpr auto value = std::tuple{
      field{"model_type", &m::model_type},
      field{"model_name", &m::model_name},
      field{"hidden_size", &m::hidden_size, presence::required},
      field{"head_num", &m::head_num, presence::required},
      field{"kv_head_num", &m::kv_head_num, presence::required},
      field{"head_size", &m::head_size},
      field{"intermediate_size", &m::intermediate_size},
      field{"layer_num", &m::layer_num, presence::required},
      field{"vocab_size", &m::vocab_size, presence::required},
      field{"orig_vocab_size", &m::orig_vocab_size},
      field{"use_swiglu", &m::use_swiglu},
      field{"expert_num", &m::expert_num},
      field{"topk", &m::topk},
      field{"attention_type", &m::attention_type},
      field{"moe_ffn_hidden_size", &m::moe_ffn_hidden_size},
      field{"moe_shared_expert_intermediate_size", &m::moe_shared_expert_intermediate_size},
      field{"v_head_dim", &m::v_head_dim},
      field{"qk_head_dim", &m::qk_head_dim},
      field{"qk_pos_emb_head_dim", &m::qk_pos_emb_head_dim},
      field{"q_lora_rank", &m::q_lora_rank},
      field{"kv_lora_rank", &m::kv_lora_rank},
      field{"dense_layers", &m::dense_layers},
      field{"moe_pad_expert_input_to_capacity", &m::moe_pad_expert_input_to_capacity},
      field{"capacity", &m::capacity},
      field{"group_linear_mode", &m::group_linear_mode},
      field{"make_vocab_size_divisible_by", &m::make_vocab_size_divisible_by},
      field{"padded_vocab_size", &m::padded_vocab_size},
      field{"norm_type", &m::norm_type},
      field{"tie_word_embeddings", &m::tie_word_embeddings},
      field{"add_linear_bias", &m::add_linear_bias},
      field{"position_embedding_type", &m::position_embedding_type},
      field{"max_position_embeddings", &m::max_position_embeddings},
      field{"mtp_num_layers", &m::mtp_num_layers},
  };
};

template <>
struct field_list<strategy_spec> {
  using s = strategy_spec;
  static constexpr auto value = std::tuple{
      field{"seq_len", &s::seq_len, presence::required},
      field{"micro_batch_size", &s::micro_batch_size, presence::required},
      field{"micro_batch_num", &s::micro_batch_num, presence::required},
      field{"dtype", &s::dtype},
      field{"fp8", &s::fp8},
      field{"fp8_recipe", &s::fp8_recipe},
      field{"fp8_param_gather", &s::fp8_param_gather},
      field{"fp8_first_last_layers_bf16", &s::fp8_first_last_layers_bf16},
      field{"fp8_layers_at_start_in_bf16", &s::fp8_layers_at_start_in_bf16},
      field{"fp8_layers_at_end_in_bf16", &s::fp8_layers_at_end_in_bf16},
      field{"world_size", &s::world_size},
      field{"tp_size", &s::tp_size},
      field{"cp_size", &s::cp_size},
      field{"pp_size", &s::pp_size},
      field{"ep_size", &s::ep_size},
      field{"etp_size", &s::etp_size},
      field{"cp_comm_type", &s::cp_comm_type},
      field{"cp_a2a_mode", &s::cp_a2a_mode},
      field{"order_of_paralielism", &s::order_of_paralielism},
      field{"moe_dispatcher_policy", &s::moe_dispatcher_policy},
      field{"num_layers_in_first_pipeline_stage", &s::num_layers_in_first_pipeline_stage},
      field{"num_layers_in_last_pipeline_stage", &s::num_layers_in_last_pipeline_stage},
      field{"account_for_embedding_in_pipeline_split", &s::account_for_embedding_in_pipeline_split},
      field{"account_for_loss_in_pipeline_split", &s::account_for_loss_in_pipeline_split},
      field{"scatter_gather_tensors_in_pipeline", &s::scatter_gather_tensors_in_pipeline},
      field{"grad_reduce_in_bf16", &s::grad_reduce_in_bf16},
      field{"cache_groupgemm_col_fp8_inputs", &s::cache_groupgemm_col_fp8_inputs},
      field{"offload_groupgemm_col_inputs", &s::offload_groupgemm_col_inputs},
      field{"attn_recompute", &s::attn_recompute},
      field{"mla_rms_recompute", &s::mla_rms_recompute},
      field{"mlp_recompute", &s::mlp_recompute},
      field{"mlp_rms_recompute", &s::mlp_rms_recompute},
      field{"enable_sequence_parallel", &s::enable_sequence_parallel},
      field{"interleaving_size", &s::interleaving_size},
      field{"microbatch_group_size_per_vp_stage", &s::microbatch_group_size_per_vp_stage},
      field{"pp_comm_async", &s::pp_comm_async},
      field{"pipeline_schedule", &s::pipeline_schedule},
      field{"enable_straggler_model", &s::enable_straggler_model},
      field{"zero_state", &s::zero_state},
      field{"attention_sparse_ratio", &s::attention_sparse_ratio},
      field{"enable_dropout", &s::enable_dropout},
      field{"use_fp32_accum_grad", &s::use_fp32_accum_grad},
      field{"use_accm_weight", &s::use_accm_weight},
      field{"enable_recompute", &s::enable_recompute},
      field{"recompute_granularity", &s::recompute_granularity},
      field{"recompute_layer_num", &s::recompute_layer_num},
      field{"recompute_variance", &s::recompute_variance},
      field{"megatron_recompute", &s::megatron_recompute},
      field{"megatron_recompute_modules", &s::megatron_recompute_modules},
      field{"use_flash_sdp", &s::use_flash_sdp},
      field{"use_math_sdp", &s::use_math_sdp},
      field{"use_fused_norm", &s::use_fused_norm},
      field{"use_fused_swiglu", &s::use_fused_swiglu},
      field{"use_fused_grad_accumulation", &s::use_fused_grad_accumulation},
      field{"cross_entropy_loss_fusion", &s::cross_entropy_loss_fusion},
      field{"overlap_grad_reduce", &s::overlap_grad_reduce},
      field{"overlap_param_gather", &s::overlap_param_gather},
      field{"te_version", &s::te_version},
      field{"te_dummy_wgrad_min_version", &s::te_dummy_wgrad_min_version},
      field{"te_cp_a2a_save_pre_posta2a_min_version", &s::te_cp_a2a_save_pre_posta2a_min_version},
      field{"te_grouped_linear_dummy_wgrad_min_version", &s::te_grouped_linear_dummy_wgrad_min_version},
      field{"tp_net", &s::tp_net},
      field{"cp_net", &s::cp_net},
      field{"pp_net", &s::pp_net},
      field{"dp_net", &s::dp_net},
      field{"ep_net", &s::ep_net},
      field{"etp_net", &s::etp_net},
      field{"edp_net", &s::edp_net},
      field{"dispatch_probs", &s::dispatch_probs},
      field{"mem_factor", &s::mem_factor},
      field{"data_parallel_sharding_strategy", &s::data_parallel_sharding_strategy},
      field{"optimizer_cpu_offload", &s::optimizer_cpu_offload},
      field{"pipeline_model_parallel_layout", &s::pipeline_model_parallel_layout},
      field{"hierarchical_context_parallel_sizes", &s::hierarchical_context_parallel_sizes},
      field{"optimizer", &s::optimizer},
      field{"muon_num_ns_steps", &s::muon_num_ns_steps},
      field{"muon_tp_mode", &s::muon_tp_mode},
      field{"muon_split_qkv", &s::muon_split_qkv},
  };
};

LLMSIM_END_NAMESPACE
