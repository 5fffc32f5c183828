/// \file llmsim/spec/validate.hpp
/// The rules that tie a model, a strategy and a system together (Megatron-LM's argument checks
/// and SimuMax's sanity checks), through the same error path as each spec's own `validate`.
#pragma once

#include <llmsim/schedule/dualpipev.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/pipeline_layout.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <array>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

namespace detail {
constexpr void require_network(const system_spec& sys, std::string_view field, const net_name& name) {
  if (name.view() == "auto" || sys.network(name.view()) != nullptr) return;
  report_error("llmsim::strategy", field, "{}=\"{}\" names no network tier of system {}", field, name, sys.sys_name);
}
}  // namespace detail

namespace detail {
/// How the model's layers split over the pipeline stages (Megatron-LM's split rules).
constexpr void validate_pipeline_split(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  // Pipeline split (Megatron --decoder-first/last-pipeline-num-layers: the other stages share the rest evenly).
  const std::int64_t pp = s.pp_size;
  const auto first = s.num_layers_in_first_pipeline_stage;
  const auto last = s.num_layers_in_last_pipeline_stage;
  if (pp == 1 && (first || last))
    report_error(api, "strategy.num_layers_in_first_pipeline_stage",
                 "strategy.num_layers_in_first/last_pipeline_stage need strategy.pp_size > 1, got {}", pp);
  const std::int64_t slots =
      (s.account_for_embedding_in_pipeline_split ? 1 : 0) + (s.account_for_loss_in_pipeline_split ? 1 : 0);
  if (pp > 1 && slots > 0) {
    // Megatron-LM TransformerConfig: the embedding / loss slots replace the uneven first/last split.
    if (first || last)
      report_error(api, "strategy.account_for_embedding_in_pipeline_split",
                   "strategy.account_for_embedding/loss_in_pipeline_split cannot be combined with "
                   "strategy.num_layers_in_first/last_pipeline_stage (Megatron-LM refuses both)");
    // Megatron get_num_layers_to_build: with vp, (layers + slots) / pp per rank must split into vp chunks.
    if (s.interleaving_size > 1 && (m.layer_num + slots) % (pp * s.interleaving_size) != 0)
      report_error(api, "strategy.interleaving_size",
                   "strategy.pp_size * interleaving_size = {} must divide model.layer_num={} plus the {} "
                   "embedding/loss slot(s) of account_for_*_in_pipeline_split",
                   pp * s.interleaving_size, m.layer_num, slots);
    if ((m.layer_num + slots) % pp != 0)
      report_error(api, "strategy.pp_size",
                   "strategy.pp_size={} must divide model.layer_num={} plus the {} embedding/loss slot(s) of "
                   "account_for_*_in_pipeline_split",
                   pp, m.layer_num, slots);
  } else if (pp > 1) {
    const std::int64_t fixed = first.value_or(0) + last.value_or(0);
    const std::int64_t even_stages = pp - (first ? 1 : 0) - (last ? 1 : 0);
    if (fixed > m.layer_num)
      report_error(api, "strategy.num_layers_in_first_pipeline_stage",
                   "strategy.num_layers_in_first_pipeline_stage + num_layers_in_last_pipeline_stage = {} exceeds "
                   "model.layer_num={}",
                   fixed, m.layer_num);
    if (even_stages == 0 && fixed != m.layer_num)
      report_error(
          api, "strategy.num_layers_in_first_pipeline_stage",
          "with strategy.pp_size=2 the first ({}) and last ({}) stage layers must add up to model.layer_num={}",
          first.value_or(0), last.value_or(0), m.layer_num);
    if (even_stages > 0 && (m.layer_num - fixed) % even_stages != 0) {
      if (fixed == 0) {
        // The fix Megatron offers: give the first stage the remainder (DeepSeek-V3: 61 layers on
        // pp16 = 1 + 15 * 4). Suggest the smallest non-zero first stage that leaves every other
        // stage at least one layer.
        const std::int64_t others = pp - 1;
        const std::int64_t suggest = m.layer_num % others == 0 ? others : m.layer_num % others;
        if (m.layer_num - suggest >= others)
          report_error(
              api, "strategy.pp_size",
              "strategy.pp_size={} must divide model.layer_num={}; set strategy.num_layers_in_first_pipeline_stage "
              "and/or num_layers_in_last_pipeline_stage so the rest divides evenly, e.g. "
              "num_layers_in_first_pipeline_stage={} leaves {} layers on each of the other {} stages",
              pp, m.layer_num, suggest, (m.layer_num - suggest) / others, others);
        report_error(
            api, "strategy.pp_size",
            "strategy.pp_size={} must divide model.layer_num={}; set strategy.num_layers_in_first_pipeline_stage "
            "and/or num_layers_in_last_pipeline_stage so the rest divides evenly",
            pp, m.layer_num);
      }
      report_error(api, "strategy.pp_size",
                   "model.layer_num={} minus the first/last stage layers ({}) must split evenly over the other {} "
                   "stages; set strategy.num_layers_in_first_pipeline_stage and/or num_layers_in_last_pipeline_stage "
                   "so the rest divides evenly",
                   m.layer_num, fixed, even_stages);
    }
    if (even_stages > 0 && (m.layer_num - fixed) / even_stages < 1)
      report_error(api, "strategy.pp_size",
                   "strategy.pp_size={} leaves no layer for the middle stages of model.layer_num={}", pp, m.layer_num);
    if (s.interleaving_size > 1) {
      const stage_layers split = split_layers(m, s);
      const std::int64_t v = s.interleaving_size;
      if (split.first % v != 0 || split.last % v != 0 || split.middle % v != 0)
        report_error(api, "strategy.interleaving_size",
                     "strategy.interleaving_size={} must divide the layers of every pipeline stage (first {}, middle "
                     "{}, last {})",
                     v, split.first, split.middle, split.last);
      if (s.micro_batch_num % pp != 0)
        report_error(
            api, "strategy.micro_batch_num",
            "the interleaved schedule needs strategy.micro_batch_num={} to be a multiple of strategy.pp_size={}",
            s.micro_batch_num, pp);
    }
  }
}

/// The rules of DualPipeV's V-shaped placement (`v_shape_layout_of_rank`), for a strategy that
/// selects it: 2p equal virtual stages, two per rank, and the micro-batch rule of
/// `dualpipev_rule`. dualpipev.py takes exactly two model chunks per rank and splits no layers
/// itself; the uneven looped splits (first/last stage overrides, embedding/loss slots) are
/// refused rather than guessed at.
constexpr void validate_v_shape_split(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  validate_dualpipev(api, s.pp_size, s.micro_batch_num);
  if (s.interleaving_size > 1)
    report_error(api, "strategy.interleaving_size",
                 "DualPipeV places exactly two model chunks per rank; strategy.interleaving_size={} must be 1",
                 s.interleaving_size);
  if (s.num_layers_in_first_pipeline_stage || s.num_layers_in_last_pipeline_stage)
    report_error(api, "strategy.num_layers_in_first_pipeline_stage",
                 "DualPipeV splits the layers evenly over its 2 * strategy.pp_size virtual stages; "
                 "strategy.num_layers_in_first/last_pipeline_stage are not supported with it");
  if (s.account_for_embedding_in_pipeline_split || s.account_for_loss_in_pipeline_split)
    report_error(api, "strategy.account_for_embedding_in_pipeline_split",
                 "DualPipeV splits the layers evenly over its 2 * strategy.pp_size virtual stages; "
                 "strategy.account_for_embedding/loss_in_pipeline_split are not supported with it");
  if (m.layer_num % (2 * s.pp_size) != 0)
    report_error(api, "strategy.pp_size",
                 "DualPipeV needs model.layer_num={} to split evenly over 2 * strategy.pp_size={} virtual stages",
                 m.layer_num, 2 * s.pp_size);
}
}  // namespace detail

/// The rules of overlap_moe_expert_parallel_comm that concern the model (Megatron-LM
/// transformer_config.py: the combined 1F1B step overlaps expert exchanges and holds at most one MTP
/// layer; the strategy's are `expert_overlap_strategy_rules`). Calls `broken(field, rule,
/// values...)` for each rule broken, in order.
template <class Sink>
constexpr void expert_overlap_model_rules(const model_spec& m, const strategy_spec& s, Sink&& broken) {
  constexpr std::string_view field = "strategy.overlap_moe_expert_parallel_comm";
  if (!s.overlap_moe_expert_parallel_comm) return;
  if (!is_moe(m)) broken(field, "{}=true needs a MoE model (model.expert_num > 1)", field);
  if (is_hybrid(m))
    broken(field,
           "{}=true is not available for hybrid models (model.hybrid_override_pattern): Megatron-LM's HybridModel "
           "builds no combined schedule plan",
           field);
  if (m.experimental_attention_variant)
    broken(field,
           "{}=true with model.experimental_attention_variant is not modelled (its layers are priced grouped by "
           "compression ratio, not in the order a combined step pairs them)",
           field);
  if (m.mtp_num_layers > 1)
    broken(field, "{}=true allows at most one MTP layer, model.mtp_num_layers={}", field, m.mtp_num_layers);
}

/// TE's bulk and pipeline userbuffers collectives always run on SMs (CommOverlapBase), taking
/// `s.tp_comm_overlap_num_sm` from their GEMM: the system must have more (validation of a
/// strategy with tp_comm_overlap, and the search before it adds TP-overlap candidates).
constexpr void validate_userbuffers_sms(const strategy_spec& s, const system_spec& sys) {
  if (sys.accelerator.sm_count > s.tp_comm_overlap_num_sm) return;
  detail::report_error("llmsim::system", "system.accelerator.sm_count",
                       "strategy.tp_comm_overlap prices TE userbuffers collectives that take "
                       "strategy.tp_comm_overlap_num_sm={} SMs from their GEMM: system {} needs "
                       "system.accelerator.sm_count above that, got {} (0: unknown)",
                       s.tp_comm_overlap_num_sm, sys.sys_name, sys.accelerator.sm_count);
}

/// Megatron-LM turns tp_comm_overlap off for the whole model when a linear's buffer name is not
/// one TE's userbuffers serve (extensions/transformer_engine.py TELinear: qkv, proj, fc1, fc2), as
/// MLA's projections and DeepSeek-V4's attention name theirs: refused rather than priced off.
constexpr bool tp_comm_overlap_model_allowed(const model_spec& m) {
  return m.attention_type != attention_kind::mla && !m.experimental_attention_variant;
}
/// Refuses tp_comm_overlap on a model `tp_comm_overlap_model_allowed` rules out.
constexpr void validate_tp_comm_overlap_model(const model_spec& m, const strategy_spec& s) {
  if (!s.tp_comm_overlap) return;
  if (!tp_comm_overlap_model_allowed(m))
    detail::report_error("llmsim::strategy", "strategy.tp_comm_overlap",
                         "strategy.tp_comm_overlap=true with {}: Megatron-LM turns the overlap off for the whole "
                         "model when a linear's buffer name is not qkv, proj, fc1 or fc2 "
                         "(extensions/transformer_engine.py TELinear), as these attention projections' are",
                         m.experimental_attention_variant ? "model.experimental_attention_variant"
                                                          : "multi-latent attention (model.attention_type \"mla\")");
}

/// Whether `s` with `m` breaks none of Megatron-LM's rules for the combined 1F1B step (the
/// strategy search asks before it offers a candidate with the overlap on).
constexpr bool expert_overlap_allowed(const model_spec& m, const strategy_spec& s) {
  bool allowed = true;
  const auto refuse = [&allowed](std::string_view, std::string_view, const auto&...) { allowed = false; };
  detail::expert_overlap_strategy_rules(s, refuse);
  expert_overlap_model_rules(m, s, refuse);
  return allowed;
}

namespace detail {
/// TransformerEngine's FP8 linears (utils.py assert_dim_for_fp8_exec, called by Linear,
/// LayerNormLinear and LayerNormMLP on their local input and weight): the rows of the input, this
/// rank's tokens, a multiple of 8, and each linear's local feature dims (its input's and its
/// weight's last) a multiple of 16: the dense and shared-expert MLPs, attention's output projection
/// (MLA: its low-rank up-projections' inputs too), Mamba's out_proj. The routed experts' grouped
/// linears do not assert it.
constexpr void validate_fp8_dims(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  const bool sp = sequence_parallel_active(s);
  const std::int64_t rows = s.seq_len / s.cp_size / (sp ? s.tp_size : 1) * s.micro_batch_size;
  if (rows % 8 != 0)
    report_error(api, "strategy.seq_len",
                 "strategy.fp8=true needs each rank's tokens per micro-batch, seq_len / cp_size{} x "
                 "micro_batch_size = {}, to be a multiple of 8 (TransformerEngine assert_dim_for_fp8_exec)",
                 sp ? " / tp_size" : "", rows);
  struct feature {
    std::string_view name;
    bool applies;
    std::int64_t value;
  };
  const std::int64_t t = s.tp_size;
  const bool mla = m.attention_type == attention_kind::mla;
  const bool dense_mlp = !is_moe(m) || m.dense_layers > 0 || hybrid_layer_count(m, '-') > 0;
  const std::int64_t shared = m.moe_shared_expert_intermediate_size.value_or(0);
  const std::array<feature, 7> features{{
      {"model.hidden_size", true, m.hidden_size},
      {"model.head_num x head_dim / tp_size", !mla || m.v_head_dim.has_value(),
       m.head_num * (mla ? m.v_head_dim.value_or(0) : head_dim(m)) / t},
      {"model.intermediate_size / tp_size", dense_mlp && m.intermediate_size.has_value(),
       m.intermediate_size.value_or(0) / t},
      {"model.moe_shared_expert_intermediate_size / tp_size", shared > 0, shared / t},
      {"model.q_lora_rank", mla && m.q_lora_rank.has_value(), m.q_lora_rank.value_or(0)},
      {"model.kv_lora_rank", mla && m.kv_lora_rank.has_value(), m.kv_lora_rank.value_or(0)},
      {"model.mamba_num_heads x mamba_head_dim / tp_size", hybrid_layer_count(m, 'M') > 0,
       m.mamba_num_heads * m.mamba_head_dim / t},
  }};
  for (const feature& f : features)
    if (f.applies && f.value % 16 != 0)
      report_error(api, "strategy.fp8",
                   "strategy.fp8=true needs every FP8 linear's local feature dims to be multiples of 16, {} = {} is "
                   "not (TransformerEngine assert_dim_for_fp8_exec)",
                   f.name, f.value);
}
}  // namespace detail

namespace detail {
/// TransformerEngine's layer-level activation offloading (Megatron --cpu-offloading): Megatron's
/// transformer_config.py refuses it with pipeline parallelism and with activation recompute, and
/// offloads fewer layers than the model has.
constexpr void validate_cpu_offloading(const model_spec& m, const strategy_spec& s) {
  constexpr std::string_view api = "llmsim::strategy";
  if (s.cpu_offloading_num_layers >= m.layer_num)
    report_error(api, "strategy.cpu_offloading_num_layers",
                 "strategy.cpu_offloading_num_layers={} must be below model.layer_num={} (Megatron "
                 "transformer_config.py: CPU offloading can be done only for layers less than num_layers)",
                 s.cpu_offloading_num_layers, m.layer_num);
  if (s.pp_size > 1)
    report_error(api, "strategy.cpu_offloading",
                 "strategy.cpu_offloading=true with strategy.pp_size={}: Megatron (transformer_config.py) has no "
                 "support for pipeline parallelism with CPU offloading",
                 s.pp_size);
  if (recompute_active(s))
    report_error(api, "strategy.cpu_offloading",
                 "strategy.cpu_offloading=true with activation recompute (strategy.enable_recompute): Megatron "
                 "(transformer_config.py) refuses CPU offloading when activation recomputation is enabled");
}
}  // namespace detail

/// Checks the model and the strategy each on its own and then every rule between the two (they
/// need no system). `llmsim check --model M --strategy T` runs these.
constexpr void validate(const model_spec& m, const strategy_spec& s) {
  validate(m);
  validate(s);
  validate_tp_comm_overlap_model(m, s);
  constexpr std::string_view api = "llmsim::strategy";
  using detail::report_error;
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev) detail::validate_v_shape_split(m, s);
  const bool mla = m.attention_type == attention_kind::mla;
  if (m.head_num % s.tp_size != 0)
    report_error(api, "strategy.tp_size", "strategy.tp_size={} must divide model.head_num={}", s.tp_size, m.head_num);
  if (!mla && m.kv_head_num % s.tp_size != 0)
    report_error(api, "strategy.tp_size", "strategy.tp_size={} must divide model.kv_head_num={}", s.tp_size,
                 m.kv_head_num);
  if (hybrid_layer_count(m, 'M') > 0 && (m.mamba_num_heads % s.tp_size != 0 || m.mamba_num_groups % s.tp_size != 0))
    report_error(api, "strategy.tp_size",
                 "strategy.tp_size={} must divide model.mamba_num_heads={} and model.mamba_num_groups={} "
                 "(mamba_mixer.py: each tensor-parallel rank holds whole heads and groups)",
                 s.tp_size, m.mamba_num_heads, m.mamba_num_groups);
  if (m.intermediate_size && *m.intermediate_size % s.tp_size != 0)
    report_error(api, "strategy.tp_size", "strategy.tp_size={} must divide model.intermediate_size={}", s.tp_size,
                 *m.intermediate_size);
  if (sequence_parallel_active(s) && !sp_splits_sequence(s.seq_len, s.cp_size, s.tp_size))
    report_error(api, "strategy.tp_size",
                 "with sequence parallelism strategy.tp_size={} must divide the sequence per context-parallel rank, "
                 "seq_len/cp_size={}",
                 s.tp_size, s.seq_len / s.cp_size);
  if (s.fp8) detail::validate_fp8_dims(m, s);
  // Megatron-LM arguments.py: the position table must cover the sequence.
  if (m.position_embedding_type == position_kind::learned_absolute && m.max_position_embeddings &&
      *m.max_position_embeddings < s.seq_len)
    report_error(api, "strategy.seq_len", "strategy.seq_len={} exceeds model.max_position_embeddings={}", s.seq_len,
                 *m.max_position_embeddings);
  // Ulysses all-to-all splits each tp rank's heads over its level (TE AttnFuncWithCPAndQKVOA2A asserts
  // num_heads % cp_size == 0 for Q and for K, V).
  if (const std::int64_t a2a = cp_a2a_size(s); s.cp_size > 1 && a2a > 1) {
    if ((m.head_num / s.tp_size) % a2a != 0)
      report_error(api, "strategy.cp_size",
                   "strategy.cp_comm_type=\"{}\" splits the heads over an all-to-all of {} ranks, which must divide "
                   "model.head_num/tp_size={}",
                   enum_name(s.cp_comm_type), a2a, m.head_num / s.tp_size);
    if (!mla && (m.kv_head_num / s.tp_size) % a2a != 0)
      report_error(api, "strategy.cp_size",
                   "strategy.cp_comm_type=\"{}\" splits the heads over an all-to-all of {} ranks, which must divide "
                   "model.kv_head_num/tp_size={}",
                   enum_name(s.cp_comm_type), a2a, m.kv_head_num / s.tp_size);
  }
  if (is_moe(m)) {
    if (m.expert_num % s.ep_size != 0)
      report_error(api, "strategy.ep_size", "strategy.ep_size={} must divide model.expert_num={}", s.ep_size,
                   m.expert_num);
    if (expert_ffn_size(m) % s.etp_size != 0)
      report_error(api, "strategy.etp_size", "strategy.etp_size={} must divide model.moe_ffn_hidden_size={}",
                   s.etp_size, expert_ffn_size(m));
    // Megatron-LM transformer_config.py: the DeepEP flex dispatcher drops no tokens and pads none.
    if (s.moe_dispatcher_policy == dispatcher_kind::flex && m.moe_pad_expert_input_to_capacity)
      report_error(api, "strategy.moe_dispatcher_policy",
                   "strategy.moe_dispatcher_policy=\"flex\" (DeepEP) cannot pad expert inputs to capacity: set "
                   "model.moe_pad_expert_input_to_capacity=false");
  }  // A dense model ignores ep/etp, as Megatron-LM does: the expert groups exist but hold no experts.
  expert_overlap_model_rules(m, s, [&](std::string_view field, std::string_view rule, const auto&... values) {
    report_error(api, field, rule, values...);
  });
  if (s.cpu_offloading) detail::validate_cpu_offloading(m, s);
  if (s.pipeline_model_parallel_layout.empty())
    detail::validate_pipeline_split(m, s);
  else
    validate_pipeline_layout(m, s);
}

namespace detail {
/// FP8 / FP4 against the GPU (its compute capability, stated or implied by sys_name) and the model:
/// the recipe's `fp8_recipe_min_compute_capability`; with an unknown GPU the recipe's GEMM entry
/// must be in the system file; the bf16 first and last layers must exist.
constexpr void validate_fp8_on_system(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  constexpr std::string_view api = "llmsim::strategy";
  if (!s.fp8) return;
  const double cc = known_compute_capability(sys);
  if (cc > 0 && cc < fp8_recipe_min_compute_capability(fp8_recipe_kind::delayed))
    report_error(api, "strategy.fp8",
                 "strategy.fp8=true needs FP8 tensor cores (compute capability >= 8.9: Ada, Hopper, Blackwell); "
                 "system {} has compute capability {}",
                 sys.sys_name, cc);
  // The Blackwell formats need a GPU known to be one; block scaling is refused on a GPU known to lack it.
  const double need = fp8_recipe_min_compute_capability(s.fp8_recipe);
  if (need >= 10 && cc < need)
    report_error(api, "strategy.fp8_recipe",
                 "strategy.fp8_recipe=\"{}\" needs a Blackwell GPU (compute capability >= 10.0); system {} has "
                 "compute capability {}",
                 enum_name(s.fp8_recipe), sys.sys_name, cc);
  if (need < 10 && cc > 0 && cc < need)
    report_error(api, "strategy.fp8_recipe",
                 "strategy.fp8_recipe=\"{}\" needs compute capability >= 9.0 (TransformerEngine's FP8 block "
                 "scaling); system {} has compute capability {}",
                 enum_name(s.fp8_recipe), sys.sys_name, cc);
  const compute_kind gemm =
      s.fp8_recipe == fp8_recipe_kind::nvfp4 ? compute_kind::fp4_matmul : compute_kind::fp8_matmul;
  if (cc <= 0 && !sys.op(gemm).present)
    report_error(api, "strategy.fp8", "strategy.fp8=true needs system.accelerator.op.{} in system {}",
                 compute_kind_names[static_cast<std::size_t>(gemm)], sys.sys_name);
  if (s.fp8_first_last_layers_bf16 && s.fp8_layers_at_start_in_bf16 + s.fp8_layers_at_end_in_bf16 > m.layer_num)
    report_error(api, "strategy.fp8_layers_at_start_in_bf16",
                 "strategy.fp8_layers_at_start_in_bf16={} + fp8_layers_at_end_in_bf16={} exceeds model.layer_num={}",
                 s.fp8_layers_at_start_in_bf16, s.fp8_layers_at_end_in_bf16, m.layer_num);
}
}  // namespace detail

/// Checks each spec and then the rules between them: `validate(m, s)`, then the rules that need
/// the system (network tier names, the fp8 op). `validate(m, s, sys)` is the gate every estimate
/// passes through.
constexpr void validate(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  validate(m, s);
  validate(sys);
  detail::require_network(sys, "strategy.tp_net", s.tp_net);
  detail::require_network(sys, "strategy.cp_net", s.cp_net);
  detail::require_network(sys, "strategy.pp_net", s.pp_net);
  detail::require_network(sys, "strategy.dp_net", s.dp_net);
  detail::require_network(sys, "strategy.ep_net", s.ep_net);
  detail::require_network(sys, "strategy.etp_net", s.etp_net);
  detail::require_network(sys, "strategy.edp_net", s.edp_net);
  detail::validate_fp8_on_system(m, s, sys);
  if (s.tp_comm_overlap) validate_userbuffers_sms(s, sys);
}

LLMSIM_END_NAMESPACE
