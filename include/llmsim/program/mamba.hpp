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
/// `mamba_scan_flops_per_token`; the backward's are in `mamba_ssd_kernels`).
constexpr double mamba_scan_flops(const mamba_local_sizes& l, double tokens) {
  return tokens * mamba_scan_flops_per_token(l.heads, l.groups, l.state, l.head_dim);
}

/// One Triton kernel of the SSD scan on one rank: the tensor-core FLOPs of its block products and
/// the bytes it reads and writes. Each is priced as its own kernel (its own roofline and launch).
struct ssd_kernel {
  double flops = 0, bytes = 0;
};
/// The SSD scan's kernels on one rank in the order mamba_ssm runs them (ops/triton/ssd_combined.py;
/// Dao & Gu 2024, "Transformers are SSMs", §6 and appendix: the chunked algorithm's four steps
/// and their gradients). Megatron's mixer trains through mamba_ssm's `mamba_split_conv1d_scan_combined`
/// (megatron/core/ssm/mamba_mixer.py `_ssm_training`).
struct ssd_kernels {
  /// `_mamba_chunk_scan_combined_fwd`: chunk_cumsum, chunk_state, state_passing, bmm_chunk, chunk_scan.
  std::array<ssd_kernel, 5> forward{};
  /// `_mamba_chunk_scan_combined_bwd`: dt.clone(), the first four forward kernels again (their
  /// outputs are not saved), then chunk_scan_bwd_dz, chunk_scan_bwd_dstates, state_passing_bwd,
  /// chunk_scan_chunk_state_bwd_dx, chunk_state_bwd_db, chunk_scan_bwd_dC, chunk_scan_bwd_dcb,
  /// bmm_chunk_bwd twice (dB and dC from dCB), chunk_scan_bwd_ddAcs_stable, chunk_cumsum_bwd.
  std::array<ssd_kernel, 16> backward{};
};
/// The kernels of `ssd_kernels` over T tokens, activations of E bytes. Tensors: x and z (and out,
/// out_x, dout, dx, dz) of T·d_inner, B and C (dB, dC) of T·G·N, dt of T·H in E bytes; dt after
/// softplus, its cumulative sum dA and their gradients in fp32 (T·H each); the chunk states and
/// their gradients in fp32 (P x N per head and chunk of Q tokens); C·Bᵀ and its gradient in fp32
/// (G·Q·Q per chunk, i.e. T·G·Q). Products, per token: C·Bᵀ 2·G·Q·N; a state product (Bᵀ·x, C·state,
/// and in backward dstates, dB, dC and dx's state term) 2·H·N·P; an intra-chunk product ((C·Bᵀ ∘
/// decay)·x, and in backward dx's intra term, dCB, ddA) 2·H·Q·P, the kernels computing whole Q x Q
/// blocks. Backward totals 3 C·Bᵀ products, 5 state products and 3 intra-chunk products.
constexpr ssd_kernels mamba_ssd_kernels(const mamba_local_sizes& n, double T, double E) {
  const double Q = static_cast<double>(mamba_chunk_size), N = static_cast<double>(n.state);
  const double P = static_cast<double>(n.head_dim), H = static_cast<double>(n.heads);
  const double G = static_cast<double>(n.groups);
  const double x = T * static_cast<double>(n.inner) * E;
  const double b = T * G * N * E;
  const double dt = T * H * E;
  const double f = T * H * 4.0;
  const double st = T / Q * H * P * N * 4.0;
  const double cb = T * G * Q * 4.0;
  const double cb_f = T * G * 2 * Q * N, state_f = T * H * 2 * N * P, intra_f = T * H * 2 * Q * P;
  const ssd_kernel cumsum{0, dt + 2 * f};                     // dt -> dt (fp32), dA
  const ssd_kernel chunk_state{state_f, b + x + 2 * f + st};  // B, x, dt, dA -> states
  const ssd_kernel passing{0, 2 * st};                        // states -> states
  const ssd_kernel bmm{cb_f, 2 * b + cb};                     // C, B -> CB
  ssd_kernels k;
  // chunk_scan: CB, x, dt, dA, C, states, z -> out, out_x.
  k.forward = {cumsum, chunk_state, passing, bmm, {intra_f + state_f, cb + x + 2 * f + b + st + x + 2 * x}};
  k.backward = {ssd_kernel{0, 2 * dt},  // dt_in = dt.clone()
                cumsum,
                bmm,
                chunk_state,
                passing,
                {0, 5 * x},                                        // dout, out_x, z -> dz, gated dout
                {state_f, b + x + f + st},                         // C, dout, dA -> dstates
                {0, 3 * st},                                       // states, dstates -> dstates
                {intra_f + state_f, 3 * x + cb + 3 * f + b + st},  // x, CB, dout, dt, dA, B, dstates -> dx, ddt
                {state_f, x + 2 * f + st + 2 * b},                 // x, dt, dA, dstates, B -> dB
                {state_f, st + x + f + 2 * b},                     // states, dA, dout, C -> dC
                {intra_f, 2 * x + 2 * f + cb},                     // x, dt, dA, dout -> dCB
                {cb_f, cb + 3 * b},                                // C, dCB, dB -> dB
                {cb_f, cb + 3 * b},                                // B, dCBᵀ, dC -> dC
                {intra_f, 2 * x + 4 * f},                          // x, dt, dA, dout, CB -> ddA
                {0, 2 * f + 2 * dt}};                              // ddA, ddt, dt_in -> ddt
  return k;
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
  const ssd_kernels kernels = mamba_ssd_kernels(n, T, E);
  // With more than one sequence per micro-batch the mixer's layout changes copy: _ssm_training's
  // rearrange(zxBCdt, "l b d -> b l d").contiguous() before the scan and rearrange(y, "b l d ->
  // l b d").contiguous() after it; in backward the gradient reaching in_proj is the permuted view,
  // which TE's linear makes contiguous. With one sequence the permutes are already contiguous.
  const bool layout_copies = c.s().micro_batch_size > 1;
  if (layout_copies) c.memory(l, pass_kind::forward, 2 * zxbcdt);
  // Forward: the conv (causal_conv1d_fwd) reads xBC and writes its output, then the scan kernels.
  c.memory(l, pass_kind::forward, 2 * xbc);
  for (const ssd_kernel& k : kernels.forward) c.emit(l, unkeyed_gemm_op(pass_kind::forward, k.flops, k.bytes));
  if (layout_copies) c.memory(l, pass_kind::forward, 2 * y);
  // Backward: the conv is recomputed, the scan's backward kernels run, then the conv's backward
  // reads xBC and the gradient of its output and writes the gradient of xBC.
  c.memory(l, pass_kind::backward_input, 2 * xbc);
  for (const ssd_kernel& k : kernels.backward) c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, k.flops, k.bytes));
  c.memory(l, pass_kind::backward_input, 3 * xbc);
  if (layout_copies) c.memory(l, pass_kind::backward_input, 2 * zxbcdt);
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
  // Every module but "layernorm" where the layer's norm is fused into its first linear.
  if (symbol == 'M' || symbol == '-' || (symbol == '*' && !mla))
    own.megatron_recompute_modules.erase(recompute_module::layernorm);
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
