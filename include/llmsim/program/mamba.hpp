/// \file llmsim/program/mamba.hpp
/// The layers of a hybrid model (Megatron `--hybrid-override-pattern`): the Mamba-2 mixer layer
/// and the attention-only, MLP-only and MoE-only layers, one symbol each (megatron/core/models/
/// hybrid/hybrid_layer_allocation.py; every layer is a norm, one mixer and a residual add).
///
/// The Mamba-2 mixer as Megatron-LM trains it (megatron/core/ssm/mamba_mixer.py `MambaMixer`,
/// `_ssm_training`), with H heads of head_dim P (d_inner = H·P), G groups of state size N, t
/// tensor-parallel ranks, T = b·s tokens:
/// - `in_proj`: column-parallel h -> [z, x, B, C, dt], (2·d_inner + 2·G·N + H)/t local outputs
///   (heads and groups are split over tp: Megatron asserts t | H and t | G);
/// - `mamba_split_conv1d_scan_combined` (mamba_ssm ssd_combined.py): the depthwise causal conv1d of
///   width d_conv over xBC (d_inner + 2·G·N channels) with SiLU, then the SSD chunked scan (Dao & Gu
///   2024, "Transformers are SSMs", §6: chunks of Q tokens), gated by SiLU(z). It saves the in_proj
///   output zxBCdt and the scan output for backward and recomputes the convolution there;
/// - `norm`: RMSNorm over groups of d_inner/G (norm_before_gate=False: the gate is applied first);
/// - `out_proj`: row-parallel d_inner/t -> h.
/// The mixer sees the full sequence (column-parallel in_proj gathers it under SP; out_proj
/// reduce-scatters it back).
#pragma once

#include <llmsim/program/layer.hpp>

LLMSIM_BEGIN_NAMESPACE

/// Forward FLOPs of the SSD chunked scan of one rank over `tokens` tokens (see
/// `mamba_scan_flops_per_token`; backward is twice this).
constexpr double mamba_scan_flops(const mamba_local_sizes& l, double tokens) {
  return tokens * mamba_scan_flops_per_token(l.heads, l.groups, l.state, l.head_dim);
}

/// Bytes the SSD scan's kernels move on one rank (mamba_ssm ssd_combined.py), forward and
/// backward, from the tensors they read and write: x and z (and out, out_x, dout) of T·d_inner,
/// B and C of T·G·N, dt of T·H in bf16; dt after softplus and its cumulative sum dA (fp32, T·H
/// each); the chunk states (fp32 P x N per head and chunk of Q tokens) and C·Bᵀ per chunk (fp32
/// G·Q·Q per chunk, i.e. T·G·Q).
struct mamba_scan_bytes {
  double forward = 0, backward = 0;
};
constexpr mamba_scan_bytes mamba_scan_traffic(const mamba_local_sizes& n, double T, double E) {
  const double x = T * static_cast<double>(n.inner) * E;             // also z, out, out_x, dout, dx, dz
  const double b = T * static_cast<double>(n.groups * n.state) * E;  // also C, dB, dC
  const double dt = T * static_cast<double>(n.heads) * E;
  const double f = T * static_cast<double>(n.heads) * 4.0;  // dt (fp32) or dA_cumsum
  const double st = T / static_cast<double>(mamba_chunk_size) * static_cast<double>(n.heads * n.head_dim) *
                    static_cast<double>(n.state) * 4.0;
  const double cb = T * static_cast<double>(n.groups * mamba_chunk_size) * 4.0;
  // Forward kernels: chunk_cumsum (dt -> dt, dA), chunk_state (B, x, dt, dA -> states),
  // state_passing (states -> states), bmm_chunk (C, B -> CB), chunk_scan (CB, x, dt, dA, C,
  // states, z -> out, out_x).
  const double cumsum = dt + 2 * f, chunk_state = b + x + 2 * f + st, passing = 2 * st, bmm = 2 * b + cb;
  const double forward = cumsum + chunk_state + passing + bmm + (cb + x + 2 * f + b + st + x + 2 * x);
  // Backward (`_mamba_chunk_scan_combined_bwd`): the first four forward kernels again, then the
  // gradients: dz and the gated dout (dout, out_x, z -> dz, dout), dstates (C, dout, dA -> dstates),
  // state passing backward (states, dstates -> dstates), dx / ddt (x, CB, dout, dt, dA, B, dstates ->
  // dx, ddt), dC (states, dout, C, dA -> dC), dB (x, dt, dA, dstates -> dB), dCB and its bmm
  // backward (x, dout, dt, dA -> dCB; dCB, B, C -> dB, dC), ddA (x, dout, dt, dA -> ddA).
  const double grads = 5 * x + (b + x + f + st) + 3 * st + (3 * x + cb + 3 * f + b + st) + (st + x + f + 2 * b) +
                       (x + 2 * f + st + b) + (2 * x + 2 * f + cb) + (cb + 4 * b) + (2 * x + 4 * f);
  return {forward, cumsum + chunk_state + passing + bmm + grads};
}

/// The conv1d + SSD scan of one rank (`mamba_split_conv1d_scan_combined`).
constexpr leaf mamba_conv_scan_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::mamba_conv_scan;
  l.kind = leaf_kind::activation;
  const mamba_local_sizes n = mamba_local(c.m(), c.s().tp_size);
  const double T = c.tokens(), E = c.element_bytes();
  const double zxbcdt = T * static_cast<double>(n.in_proj_width()) * E;
  const double xbc = T * static_cast<double>(n.conv_channels()) * E;
  const double y = T * static_cast<double>(n.inner) * E;
  const mamba_scan_bytes bytes = mamba_scan_traffic(n, T, E);
  // Forward: the conv (causal_conv1d_fwd) reads xBC and writes its output, then the scan kernels.
  c.memory(l, pass_kind::forward, 2 * xbc);
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, mamba_scan_flops(n, T), bytes.forward));
  // Backward: the conv is recomputed, the scan's backward kernels run, then the conv's backward
  // reads xBC and the gradient of its output and writes the gradient of xBC.
  c.memory(l, pass_kind::backward_input, 2 * xbc);
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, 2 * mamba_scan_flops(n, T), bytes.backward));
  c.memory(l, pass_kind::backward_input, 3 * xbc);
  l.params = mamba_conv_scan_params(n);
  l.input = zxbcdt;
  l.cache = zxbcdt + y;  // ctx.save_for_backward(zxbcdt, ..., out_x, ...)
  l.fwd_peak = xbc + 2 * y;
  l.bwd_peak = xbc + zxbcdt + y;
  return l;
}

/// The mixer's gated group RMSNorm over the rank's d_inner/t channels of the full sequence: it
/// reads its input and writes its output; backward reads input, output gradient and rstd (one per
/// group and token) and writes the input gradient, then reduces the weight gradient.
constexpr leaf mamba_norm_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::mamba_norm;
  l.kind = leaf_kind::norm;
  const mamba_local_sizes n = mamba_local(c.m(), c.s().tp_size);
  const double E = c.element_bytes();
  const double X = c.tokens() * static_cast<double>(n.inner) * E;
  const double w = static_cast<double>(n.inner) * E;
  const double stats = c.tokens() * static_cast<double>(n.groups) * 4.0;  // fp32 rstd per group
  c.memory(l, pass_kind::forward, 2 * X + w + stats);
  c.memory(l, pass_kind::backward_input, 2 * X + w + stats);
  c.memory(l, pass_kind::backward_weight, X + 2 * w);
  l.params = static_cast<double>(n.inner);
  l.input = X;
  l.cache = X + stats;
  l.fwd_peak = X + stats;
  l.bwd_peak = 2 * X + stats;
  return l;
}

/// One Mamba-2 layer (mamba_layer.py `MambaLayer`): norm, mixer, residual add.
constexpr void push_mamba_mixer(leaf_block& b, const build_context& c) {
  const mamba_local_sizes n = mamba_local(c.m(), c.s().tp_size);
  b.push(norm_leaf(c, leaf_id::input_layernorm));
  b.push(linear_leaf(c, leaf_id::mamba_in_proj, true, c.m().hidden_size, n.in_proj_width()));
  b.push(mamba_conv_scan_leaf(c));
  b.push(mamba_norm_leaf(c));
  b.push(linear_leaf(c, leaf_id::mamba_out_proj, false, n.inner, c.m().hidden_size));
  b.push(residual_leaf(c, leaf_id::mamba_residual_add));
}

/// The kinds of hybrid layer, in the order `job_blocks::hybrid_layer` holds them.
inline constexpr std::array<char, 4> hybrid_symbols{'M', '*', '-', 'E'};

/// Megatron-LM's selective recompute (`--recompute-modules`) on one hybrid layer of kind `symbol`.
/// The hybrid stack's layers are TransformerLayers (MambaLayer for 'M') built from
/// megatron/core/models/hybrid/hybrid_layer_specs.py `hybrid_stack_spec`: the Mamba in_proj, the
/// attention's linear_qkv and the MLP layer's linear_fc1 are TELayerNormColumnParallelLinear, i.e.
/// the layer's norm is fused into its first linear and the layer's own norm is IdentityOp; only the
/// MoE layer keeps a separate pre_mlp_layernorm (TENorm), and an MLA attention layer a separate
/// input_layernorm. TransformerLayer recomputes a norm under "layernorm" only when it is not
/// IdentityOp (transformer_layer.py `recompute_input_layernorm` / `recompute_pre_mlp_layernorm`),
/// and MambaLayer has no recompute module at all (ssm/mamba_layer.py). "mlp" checkpoints the MLP
/// layer's whole `mlp` (its fused norm included); "moe" / "moe_act" act in the MoE layer as in a
/// decoder layer.
constexpr void plan_hybrid_selective(leaf_block& b, const strategy_spec& s, char symbol, bool mla) {
  strategy_spec own = s;
  if (symbol == 'M' || symbol == '-' || (symbol == '*' && !mla)) {
    own.megatron_recompute_modules = {};
    for (auto mod :
         {recompute_module::mla_up_proj, recompute_module::moe_act, recompute_module::mlp, recompute_module::moe})
      if (s.megatron_recompute_modules.contains(mod)) own.megatron_recompute_modules.insert(mod);
  }
  plan_recompute(b, own);
  if (symbol == '-' && s.megatron_recompute_modules.contains(recompute_module::mlp)) {
    // The MLP layer's norm is fused into linear_fc1 and so sits inside the checkpointed `mlp`.
    detail::mark(b, {leaf_id::pre_mlp_layernorm});
    b.assign_roles();
  }
}

/// Whether the linears of a recomputed hybrid layer of kind `symbol` see the recompute plan
/// (`saves_original_input`): only where a separate norm is recomputed (see plan_hybrid_selective).
constexpr bool hybrid_recompute_reaches_linears(const model_spec& m, char symbol) {
  return symbol == 'E' || (symbol == '*' && m.attention_type == attention_kind::mla);
}

/// One layer of a hybrid model of kind `symbol`: 'M' a Mamba-2 layer, '*' attention alone, '-' a
/// dense MLP alone, 'E' an MoE alone (hybrid_layer_allocation.py Symbols), each with its norm and
/// residual. A recomputed layer follows Megatron: full recompute replays every leaf (the hybrid
/// stack's `checkpointed_forward`, models/hybrid/hybrid_block.py), selective recompute the modules
/// `plan_hybrid_selective` finds in that kind of layer.
constexpr leaf_block hybrid_layer_leaves(const build_context& job, char symbol, bool recomputed) {
  build_context c = job;
  c.recomputed_layer = recomputed && hybrid_recompute_reaches_linears(c.m(), symbol);
  leaf_block b;
  if (symbol == 'M')
    push_mamba_mixer(b, c);
  else if (symbol == '*')
    push_attention(b, c);
  else if (symbol == '-')
    push_dense_mlp(b, c);
  else
    push_moe_mlp(b, c);
  if (!recomputed)
    b.assign_roles();
  else if (c.s().recompute_granularity == recompute_kind::selective_recompute)
    plan_hybrid_selective(b, c.s(), symbol, c.m().attention_type == attention_kind::mla);
  else
    plan_recompute(b, c.s());
  return b;
}

LLMSIM_END_NAMESPACE
