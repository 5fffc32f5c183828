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

#include <utility>

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
/// The exposed part of a copy of `copy` time that runs beside `beside` of compute.
constexpr seconds exposed_beyond(seconds copy, seconds beside) { return copy > beside ? copy - beside : seconds{}; }

/// Marks the bytes the leaves `which` selects send to the host (`leaf::offloaded`, what each holds
/// under the recompute plan) and appends an `activation_offload` leaf whose forward / backward are
/// what `exposed(copy, layer forward, layer backward with its replays)` returns; `copy`: those
/// bytes at the host link bandwidth. A layer that offloads nothing is left as it is.
template <typename Which, typename Exposed>
constexpr void offload_leaves(leaf_block& b, const build_context& c, Which which, Exposed exposed) {
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
  const auto [f, g] = exposed(copy, fwd, bwd);
  x.fwd = f;
  x.bwd = g;
  b.push(x);
}
}  // namespace detail

/// Megatron's fine-grained offloading on one decoder layer (see the file comment): the leaves of
/// the named modules, each layer's copies beside its own compute. Run after the recompute plan.
constexpr void plan_activation_offload(leaf_block& b, const build_context& c) {
  if (!activation_offload_active(c.s()) || b.count == 0) return;
  detail::offload_leaves(
      b, c, [&](const leaf& l) { return detail::offloaded_leaf(c.s(), l.id); },
      [](seconds copy, seconds fwd, seconds bwd) {
        return std::pair{detail::exposed_beyond(copy, fwd), detail::exposed_beyond(copy, bwd)};
      });
}

/// TransformerEngine's layer-level activation offloading (Megatron --cpu-offloading with
/// --cpu-offloading-num-layers N; transformer_engine/pytorch/cpu_offload.py, the default
/// scheduling of TE's docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst) on one
/// of the model's first N decoder layers, the ones it offloads:
/// - every tensor the layer saves for backward goes to the host (TE takes any non-parameter of at
///   least 256Ki elements: all of a layer's activations here), queued on one copy stream as it is
///   saved, and comes back for backward;
/// - at most L - N layers' activations are on the GPU (L: model.layer_num): layer i's copy must end
///   before layer L - N + i starts, and its reload starts with the backward of layer L - 1 - N + i
///   (cpu_offload.py's offload / reload maps). Over identical layers (forward f, backward b, copy
///   c) the serial stream's N copies end by N c, against (L - 1) f of forward before the last
///   deadline and (L - 2) b of backward: each offloaded layer is exposed by
///   max(0, c - (L - 1) f / N) forward and max(0, c - (L - 2) b / N) backward.
/// Not modelled: the copies' HBM traffic slowing memory-bound kernels beside them (the docs name
/// it), the host memory they fill and its bandwidth shared with the other GPU of a Grace host,
/// layers of unequal time (the window takes this layer's), MTP layers (outside the decoder block,
/// never offloaded).
constexpr void plan_layer_offload(leaf_block& b, const build_context& c) {
  if (b.count == 0 || c.s().cpu_offloading_num_layers <= 0) return;
  const auto n = static_cast<double>(c.s().cpu_offloading_num_layers);
  const auto l = static_cast<double>(c.m().layer_num);
  detail::offload_leaves(
      b, c, [](const leaf&) { return true; },
      [&](seconds copy, seconds fwd, seconds bwd) {
        return std::pair{detail::exposed_beyond(copy, fwd * ((l - 1) / n)),
                         detail::exposed_beyond(copy, bwd * ((l - 2) / n))};
      });
}

/// Layers below the one in backward whose activations TE has reloaded: L - 1 - N (the reload of
/// layer i starts with the backward of layer L - 1 - N + i, plan_layer_offload), so that L - N
/// layers' activations are on the device.
constexpr std::int64_t reload_ahead(const strategy_spec& s, const model_spec& m) {
  return m.layer_num - 1 - s.cpu_offloading_num_layers;
}

/// Of a stage's `layers` decoder layers (the whole model: layer-level offloading runs without
/// pipeline parallelism, spec/validate.hpp), the first ones TE offloads.
constexpr std::int64_t layer_offloaded_count(const strategy_spec& s, std::int64_t layers) {
  if (!s.cpu_offloading) return 0;
  return s.cpu_offloading_num_layers < layers ? s.cpu_offloading_num_layers : layers;
}

LLMSIM_END_NAMESPACE
