/// \file llmsim/estimate/offload.hpp
/// Activation offloading on one decoder layer: which leaves' saved tensors go to the host, and how
/// much of the copies the layer's compute does not hide. Megatron-LM's fine-grained offloading
/// (--fine-grained-activation-offloading, --offload-modules;
/// megatron/core/pipeline_parallel/fine_grained_activation_offload.py) below, TransformerEngine's
/// layer-level offloading (--cpu-offloading) at `plan_layer_offload`.
///
/// What Megatron does, per offload group (one module of one layer):
/// - forward: when the module's forward is done (`on_group_commit_forward`) the D2H stream waits
///   for the compute stream and copies the tensors the module saved for backward to pinned host
///   memory; the device copies are released once the copy is done (`record_stream` on the D2H
///   stream). The compute stream does not wait for it (no in-flight cap by default).
/// - backward: when a group's backward is done (`on_group_start_backward`) the H2D stream reloads
///   the next group in backward order, i.e. the previous layer's (one layer ahead), and the compute
///   stream waits for that reload before the group's backward (`on_group_commit_backward`).
/// The copy streams are serial, so over a run of identical layers each layer's copies run in
/// the time of that layer's compute: a layer's copy is exposed by what exceeds its forward (D2H)
/// or its backward with the recompute replays (H2D). PCIe is full duplex: the two directions do
/// not share bandwidth.
///
/// Not modelled (small or out of the steady state): Megatron keeps the last layer's groups of the
/// last pipeline stage on the device (`should_bulk_offload`, the backward follows at once), the
/// first reload of a chunk (`pre_reload_last_layer`), tensors below `min_offloaded_tensor_size`
/// (1 Mi elements) staying on the device, MTP layers (never offloaded here).
#pragma once

#include <llmsim/cost/step_cost.hpp>
#include <llmsim/program/layer.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace detail {
/// Whether the job offloads the saved input of `mod`: Megatron's --offload-modules, or SimuMax's
/// `offload_groupgemm_col_inputs`, which offloads the grouped fc1's input (Megatron's "expert_fc1").
constexpr bool offloads(const strategy_spec& s, offload_module mod) {
  if (s.fine_grained_activation_offloading && s.offload_modules.contains(mod)) return true;
  return mod == offload_module::expert_fc1 && s.offload_groupgemm_col_inputs;
}

/// The leaf holding what offload group `--offload-modules` names save (transformer_layer.py,
/// attention.py, moe/experts.py: each group wraps the module whose input it offloads).
constexpr bool offloaded_leaf(const strategy_spec& s, leaf_id id) {
  switch (id) {
    case leaf_id::input_layernorm:
      return offloads(s, offload_module::attn_norm);
    case leaf_id::linear_qkv:
      return offloads(s, offload_module::qkv_linear);
    case leaf_id::core_attention:
      return offloads(s, offload_module::core_attn);
    case leaf_id::linear_proj:
      return offloads(s, offload_module::attn_proj);
    case leaf_id::pre_mlp_layernorm:
      return offloads(s, offload_module::mlp_norm);
    case leaf_id::experts_linear_fc1:
      return offloads(s, offload_module::expert_fc1);
    case leaf_id::experts_swiglu:
    case leaf_id::experts_gelu:
      return offloads(s, offload_module::moe_act);
    default:
      return false;
  }
}

/// One GPU's host link, the figure `host_optimizer_time` prices the optimizer offload's copies at
/// (an unknown GPU counts as Hopper: PCIe 5.0 x16).
constexpr double host_link_bytes_per_second(const system_spec& sys) {
  const double cc = known_compute_capability(sys);
  return host_link_bytes_per_second(sys, cc <= 0 || cc >= 9);
}
}  // namespace detail

/// Whether the job offloads any activation to the host.
constexpr bool activation_offload_active(const strategy_spec& s) {
  return s.fine_grained_activation_offloading || s.offload_groupgemm_col_inputs;
}

namespace detail {
/// Marks the bytes the leaves `which` selects send to the host (`leaf::offloaded`, what each holds
/// under the recompute plan) and appends an `activation_offload` leaf with the exposed copy time:
/// each copy of those bytes at the host link bandwidth, less the layer's forward (D2H) or backward
/// with its replays (H2D) that runs beside it, or all of it when `serial` (compute waits for every
/// copy). A layer that offloads nothing is left as it is.
template <typename Which>
constexpr void offload_leaves(leaf_block& b, const build_context& c, Which which, bool serial) {
  double bytes = 0;
  seconds fwd{}, bwd{};
  for (std::size_t i = 0; i < b.count; ++i) {
    leaf& l = b.leaves[i];
    fwd += l.fwd + l.fwd_comm;
    bwd += l.bwd + l.bwd_comm + l.replay() + l.replay_comm();
    if (which(l)) {
      l.offloaded = l.held();
      bytes += l.offloaded;
    }
  }
  if (bytes <= 0) return;
  const seconds copy{bytes / host_link_bytes_per_second(c.sys())};
  leaf x;
  x.id = leaf_id::activation_offload;
  x.fwd = serial ? copy : (copy > fwd ? copy - fwd : seconds{});
  x.bwd = serial ? copy : (copy > bwd ? copy - bwd : seconds{});
  b.push(x);
}
}  // namespace detail

/// Megatron's fine-grained offloading on one decoder layer (see the file comment): the leaves of
/// the named modules, each layer's copies beside its own compute. Run after the recompute plan.
constexpr void plan_activation_offload(leaf_block& b, const build_context& c) {
  if (!activation_offload_active(c.s()) || b.count == 0) return;
  detail::offload_leaves(
      b, c, [&](const leaf& l) { return detail::offloaded_leaf(c.s(), l.id); }, false);
}

/// TransformerEngine's layer-level activation offloading (Megatron --cpu-offloading with
/// --cpu-offloading-num-layers N; transformer_engine/pytorch/cpu_offload.py, default scheduling as
/// TE's docs describe it: docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst) on
/// one of the model's first N decoder layers, the ones it offloads:
/// - every tensor the layer saves for backward goes to the host (TE takes any non-parameter of at
///   least 256Ki elements: all of a layer's activations here) on one copy stream as soon as it is
///   saved, and comes back for the layer's backward, reloaded one layer ahead;
/// - at most L - N layers' activations stay on the GPU (L: model.layer_num). With N <= L - 2 the
///   copies run beside the neighbouring layers' compute, and a layer is exposed by what its copy
///   exceeds its forward (backward); with N = L - 1 one set fits and compute waits for every copy
///   ("compute and transfers cannot overlap", the docs).
/// Not modelled: the copies' HBM traffic slowing memory-bound kernels beside them (the docs name
/// it), the host memory they fill, MTP layers (outside the decoder block, never offloaded).
constexpr void plan_layer_offload(leaf_block& b, const build_context& c) {
  if (b.count == 0) return;
  const bool serial = c.s().cpu_offloading_num_layers >= c.m().layer_num - 1;
  detail::offload_leaves(
      b, c, [](const leaf&) { return true; }, serial);
}

/// Of a stage's `layers` decoder layers (the whole model: layer-level offloading runs without
/// pipeline parallelism, spec/validate.hpp), the first ones TE offloads.
constexpr std::int64_t layer_offloaded_count(const strategy_spec& s, std::int64_t layers) {
  if (!s.cpu_offloading) return 0;
  return s.cpu_offloading_num_layers < layers ? s.cpu_offloading_num_layers : layers;
}

LLMSIM_END_NAMESPACE
