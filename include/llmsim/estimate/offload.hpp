/// \file llmsim/estimate/offload.hpp
/// Megatron-LM's fine-grained activation offloading (--fine-grained-activation-offloading,
/// --offload-modules; megatron/core/pipeline_parallel/fine_grained_activation_offload.py) on one
/// decoder layer: which leaves' saved tensors go to the host, and how much of the copies the
/// layer's compute does not hide.
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
/// (PCIe 5.0 x16 from compute capability 9, PCIe 4.0 x16 before; an unknown GPU counts as Hopper).
constexpr double host_link_bytes_per_second(const system_spec& sys) {
  const double cc = known_compute_capability(sys);
  return cc <= 0 || cc >= 9 ? parameters::host_link_bytes_per_second_sm90
                            : parameters::host_link_bytes_per_second_older;
}
}  // namespace detail

/// Whether the job offloads any activation to the host.
constexpr bool activation_offload_active(const strategy_spec& s) {
  return s.fine_grained_activation_offloading || s.offload_groupgemm_col_inputs;
}

/// Marks the bytes each leaf of one decoder layer sends to the host (`leaf::offloaded`, what it
/// holds under the recompute plan) and appends an `activation_offload` leaf with the exposed
/// copy time: forward max(0, D2H - layer forward), backward max(0, H2D - layer backward with its
/// replays), both copies of the layer's offloaded bytes at the host link bandwidth. Run after the
/// recompute plan; a layer that offloads nothing is left as it is.
constexpr void plan_activation_offload(leaf_block& b, const build_context& c) {
  if (!activation_offload_active(c.s()) || b.count == 0) return;
  double bytes = 0;
  seconds fwd{}, bwd{};
  for (std::size_t i = 0; i < b.count; ++i) {
    leaf& l = b.leaves[i];
    fwd += l.fwd + l.fwd_comm;
    bwd += l.bwd + l.bwd_comm + l.replay() + l.replay_comm();
    if (detail::offloaded_leaf(c.s(), l.id)) {
      l.offloaded = l.held();
      bytes += l.offloaded;
    }
  }
  if (bytes <= 0) return;
  const seconds copy{bytes / detail::host_link_bytes_per_second(c.sys())};
  leaf x;
  x.id = leaf_id::activation_offload;
  x.fwd = copy > fwd ? copy - fwd : seconds{};
  x.bwd = copy > bwd ? copy - bwd : seconds{};
  b.push(x);
}

LLMSIM_END_NAMESPACE
