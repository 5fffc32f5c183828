/// \file llmsim/program/dense.hpp
/// The leaves of a dense Megatron-LM + TransformerEngine training step, per pipeline stage:
/// embedding, decoder layers (input norm, QKV, flash attention, output projection, pre-MLP norm,
/// fc1, SwiGLU/GeLU, fc2), final norm, LM head and the vocabulary-parallel cross entropy.
///
/// Conventions (b micro-batch, s sequence, h hidden, t tensor-parallel size, E = 2 bytes of bf16):
/// - Column-parallel linears (QKV, fc1, LM head) see the full sequence; with sequence parallelism
///   their input is all-gathered in forward and again in backward for the weight gradient, and
///   the input gradient is reduce-scattered (Megatron `LinearWithGradAccumulationAndAsyncCommunication`).
///   Row-parallel linears (proj, fc2) reduce-scatter their output (all-reduce without SP).
/// - Three GEMMs per linear: forward TN, input gradient NN, weight gradient NT accumulated into the
///   fp32 main gradient (Megatron `gradient_accumulation_fusion`).
/// - Memory-bound kernels are priced by bytes moved on the accelerator's `bandwidth` entries.
/// - Saved tensors follow what the modules keep for backward (SP: the local s/t shard of a
///   column-parallel input; flash attention: q, k, v and the log-sum-exp).
#pragma once

#include <llmsim/program/leaf.hpp>
#include <llmsim/program/op.hpp>
#include <llmsim/program/quantize.hpp>
#include <llmsim/program/shape_key.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <vector>

LLMSIM_BEGIN_NAMESPACE

struct build_context;
/// Prices one op into a leaf's pass times and returns its time; cost/op_cost.hpp `price_op`,
/// installed with the context by `make_build_context` (programs never price).
using op_pricing = seconds (*)(const build_context&, leaf&, const op&);

/// One emitted op with the time its pricing gave it, and the leaf that emitted it.
struct priced_op {
  std::int32_t leaf_id = -1;  ///< `leaf::record_id` of its leaf
  op o{};
  seconds time{};
};

/// An optional sink of every priced op (what the trace shows per op): the trace's build context
/// installs `record_op` as its pricing and points `build_context::record` here; `estimate` does
/// neither, so recording costs it nothing.
struct op_record {
  std::vector<priced_op> ops;
  std::int32_t leaves = 0;  ///< record ids handed out

  /// Stores `o` of leaf `l`, giving the leaf its record id at its first op.
  constexpr void add(leaf& l, const op& o, seconds time) {
    if (l.record_id < 0) l.record_id = leaves++;
    ops.push_back({l.record_id, o, time});
  }
};

/// What an inference forward (estimate/inference.hpp) changes in the programs: only forward ops
/// run; every sequence already has `kv_cached` tokens in the KV cache, which its attention reads
/// besides the forward's own (q = s over kv = kv_cached + s, the pairs a causal mask keeps); the
/// decoder linears' weights and the cached K/V are read at the widths they are stored in.
struct inference_forward {
  std::int64_t kv_cached = 0;
  double weight_bytes =
      2;  ///< bytes per decoder-linear weight element (int4 with a bf16 scale and zero per g: 0.5 + 4/g)
  double expert_weight_bytes = 2;  ///< ... per routed-expert weight element (gpt-oss: MXFP4, 0.53125)
  double kv_bytes = 2;             ///< bytes per cached K or V element
  /// Tokens routed by the whole expert-parallel group in this forward: a rank's grouped GEMMs read
  /// only the experts they activate (`expected_active_experts`).
  double routed_tokens = 0;
  /// Times attention streams each KV head's cache (estimate/inference.hpp
  /// `decode_kv_read_repeats`: a GQA group's query heads read it each, or once together).
  double kv_read_repeats = 1;
};

/// Everything a leaf builder needs: the three specs, the tiers the groups use, and where ops go.
struct build_context {
  const model_spec* model = nullptr;
  const strategy_spec* strategy = nullptr;
  const system_spec* system = nullptr;
  const network_tier* tp_tier = nullptr;
  std::int64_t vocab = 0;                  ///< padded vocabulary
  const network_tier* ep_tier = nullptr;   ///< expert-parallel all-to-all (MoE)
  const network_tier* etp_tier = nullptr;  ///< expert tensor parallel (MoE)
  op_pricing pricing = nullptr;
  op_record* record = nullptr;  ///< where `record_op` keeps every priced op (llmsim::trace_iteration)
  /// The linears built with this context run the job's low-precision recipe (decoder layers of an
  /// fp8 job, but not the bf16 first/last layers, the embedding, the output layer or the router).
  bool quantized = false;
  /// The leaves built with this context belong to a layer the recompute plan applies to.
  bool recomputed_layer = false;
  /// An inference forward (nullptr: a training step).
  const inference_forward* inference = nullptr;

  [[nodiscard]] constexpr const model_spec& m() const { return *model; }
  [[nodiscard]] constexpr const strategy_spec& s() const { return *strategy; }
  [[nodiscard]] constexpr const system_spec& sys() const { return *system; }
  /// Tokens of one sequence on this rank: seq_len / cp_size under context parallelism (Megatron
  /// get_batch_on_this_cp_rank); every module but core attention sees only these.
  [[nodiscard]] constexpr std::int64_t sequence() const { return s().seq_len / s().cp_size; }
  [[nodiscard]] constexpr double tokens() const { return static_cast<double>(s().micro_batch_size * sequence()); }
  /// Tokens of the residual stream on one rank: s/t under sequence parallelism.
  [[nodiscard]] constexpr double local_tokens() const {
    return tokens() / static_cast<double>(sequence_parallel_active(s()) ? s().tp_size : 1);
  }
  [[nodiscard]] constexpr bool sequence_parallel() const { return sequence_parallel_active(s()); }
  [[nodiscard]] constexpr double element_bytes() const { return static_cast<double>(dtype_bytes(s().dtype)); }
  /// Bytes per element of the main gradient: fp32 unless gradients are reduced in bf16.
  [[nodiscard]] constexpr double main_grad_bytes() const {
    return (s().grad_reduce_in_bf16 || !s().use_fp32_accum_grad) ? 2.0 : 4.0;
  }
  /// The recipe's byte figures on this system (meaningful when `quantized`).
  [[nodiscard]] constexpr quantized_format format() const {
    quantized_format f = quantized_format_of(s(), sys());
    if (inference != nullptr) {
      f.copies = 1;  // only the forward GEMM reads a cast: no transposed copy
      // A served checkpoint carries each activation's calibrated global scale (ModelOpt NVFP4's
      // input_scale): the cast needs no amax kernel first.
      f.amax_pass = false;
    }
    return f;
  }
  /// Hands `o` of leaf `l` to the pricing (which adds its time to the leaf's pass).
  constexpr void emit(leaf& l, const op& o) const {
    if (pricing == nullptr)
      detail::report_error("llmsim::program", "", "a build_context needs its op pricing (use make_build_context)");
    if (inference != nullptr && o.pass != pass_kind::forward) return;  // inference runs no backward
    (void)pricing(*this, l, o);
  }
  /// A memory-bound kernel of `pass` moving `bytes`.
  constexpr void memory(leaf& l, pass_kind pass, double bytes, memory_kind kind = memory_kind::default_kind) const {
    emit(l, memory_op(pass, bytes, kind));
  }
  /// A collective of `pass` over `group` on a buffer of `bytes` (free for a group of one).
  constexpr void collective(leaf& l, pass_kind pass, comm_group group, collective_kind kind, double bytes) const {
    emit(l, collective_op(pass, kind, group, bytes));
  }
};

namespace detail {
/// A GEMM op of this block's precision (the recipe's fp8 or fp4 kind in quantized layers).
constexpr op job_gemm(const build_context& c, pass_kind pass, const gemm_shape& g, double traffic) {
  return gemm_op(pass, g, traffic, c.quantized ? c.format().gemm : compute_kind::matmul);
}
/// A TE quantize of `elements` bf16 values in `pass` writing `copies` copies of `copy_bytes` per
/// element: with current scaling / NVFP4 first an amax kernel reading the tensor, then the cast
/// (reads bf16, writes the copies; fp8_current_scaling.rst Figure 4).
constexpr void quantize(const build_context& c, leaf& l, pass_kind pass, double elements, double copy_bytes,
                        double copies) {
  const double E = c.element_bytes();
  if (c.format().amax_pass) c.memory(l, pass, elements * E);
  c.memory(l, pass, elements * E + elements * copy_bytes * copies);
}
/// The per-iteration quantization of a linear's weight, spread over the micro-batches: Megatron
/// passes `is_first_microbatch` to TE, which casts the weight on the first micro-batch and reuses
/// the cached copies (TE module `get_weight_workspace`). With fp8_param_gather the optimizer step
/// writes the quantized parameter; only a tensor-scaled transpose (Hopper) is made per iteration.
/// (Each micro-batch still pays the kernel's latency: a small over-count.)
constexpr void quantize_weight(const build_context& c, leaf& l, double w) {
  if (c.inference != nullptr) return;  // served from a checkpoint already quantized (TRT-LLM, vLLM)
  const quantized_format f = c.format();
  const double m = static_cast<double>(c.s().micro_batch_num);
  if (!c.s().fp8_param_gather)
    quantize(c, l, pass_kind::forward, w / m, f.weight, f.copies);
  else if (f.tensor_scaled && f.copies == 2)
    c.memory(l, pass_kind::forward, 2 * w * f.weight / m);
}
/// Whether TE linear `id` keeps its bf16 input for backward instead of a quantized copy (TE
/// `save_original_input`). Megatron sets it under FP8/FP4 on the linears that read the output of
/// a recomputed norm (megatron/core/transformer/transformer_layer.py: the attention's
/// `set_for_recompute_input_layernorm`, the MoE layer's `set_for_recompute_pre_mlp_layernorm`, a
/// dense MLP's linear_fc1) and on the experts' fc2 under moe_act recompute (moe/experts.py):
/// CheckpointWithoutOutput frees that bf16 output and re-creates it in backward, so the linear
/// casts only the row-wise copy its forward GEMM reads and re-quantizes the re-created input
/// column-wise for its weight gradient (TE module/linear.py, grouped_linear.py).
constexpr bool saves_original_input(const build_context& c, leaf_id id) {
  const strategy_spec& s = c.s();
  if (!c.quantized || !c.recomputed_layer || !s.megatron_recompute ||
      s.recompute_granularity != recompute_kind::selective_recompute)
    return false;
  const auto& mods = s.megatron_recompute_modules;
  if (mods.contains(recompute_module::layernorm) &&
      (id == leaf_id::linear_qkv || id == leaf_id::linear_q_down_proj || id == leaf_id::linear_kv_down_proj ||
       id == leaf_id::linear_fc1 || id == leaf_id::shared_experts_linear_fc1))
    return true;
  return id == leaf_id::experts_linear_fc2 && mods.contains(recompute_module::moe_act) &&
         !mods.contains(recompute_module::moe);
}

/// What one linear's three GEMMs see on this rank: the geometry shared by `linear_leaf`,
/// `quantized_linear_leaf` and `duplicated_linear_leaf`, so that one emitter serves all three.
/// `tp_comm`: the tensor-parallel collectives of Megatron's
/// `LinearWithGradAccumulationAndAsyncCommunication` (false for a duplicated weight, which runs on
/// the rank's own tokens alone).
/// `quantized`: operands cast and read at the recipe's sizes (`quantized_linear_leaf`).
struct linear_geometry {
  bool column = true, tp_comm = true, quantized = false;
  std::int64_t in = 0, out = 0, b = 0, s = 0;  ///< weight in x out; GEMM rows b x s
  double E = 0, qa = 0, qw = 0;                ///< bf16 and quantized activation / weight bytes
  double x = 0, y = 0, w = 0;                  ///< input, output and weight elements the GEMMs see
  double t = 1, x_local = 0, y_local = 0;      ///< tp; the input / output gradient before a gather
  bool gathered_x = false, gathered_dy = false;
  /// strategy.tp_comm_overlap on one of the linears TE's userbuffers serve (`userbuffers_linear`):
  /// each TP collective runs beside a GEMM of its pass (`overlapped_tp_collective`).
  bool userbuffers = false;
  double x_copies = 1, dy_copies = 1;  ///< quantized copies each cast writes
  /// TE `save_original_input` (`saves_original_input`): backward keeps the bf16 input, forward
  /// casts only the row-wise copy and the weight-gradient pass re-casts the re-created input.
  bool original_input = false;
  quantized_format f{};

  /// Bytes of `elements` of an activation as a gather moves it (quantized row-wise data, else bf16).
  [[nodiscard]] constexpr double moved(double elements) const { return quantized ? elements * qa : elements * E; }
};

/// The geometry of a linear over `tokens` rows per rank (`s` of them per sample).
constexpr linear_geometry linear_geometry_of(const build_context& c, bool column, bool tp_comm, bool quantized,
                                             std::int64_t in_features, std::int64_t out_features, std::int64_t s,
                                             double tokens) {
  linear_geometry g{.column = column,
                    .tp_comm = tp_comm,
                    .quantized = quantized,
                    .in = in_features,
                    .out = out_features,
                    .b = c.s().micro_batch_size,
                    .s = s};
  g.E = c.element_bytes();
  g.x = tokens * static_cast<double>(in_features);
  g.y = tokens * static_cast<double>(out_features);
  g.w = static_cast<double>(in_features) * static_cast<double>(out_features);
  const bool sp = tp_comm && c.sequence_parallel();
  g.t = static_cast<double>(c.s().tp_size);
  g.gathered_x = sp && column;
  g.gathered_dy = sp && !column;
  g.x_local = g.gathered_x ? g.x / g.t : g.x;
  g.y_local = g.gathered_dy ? g.y / g.t : g.y;
  if (quantized) {
    g.f = c.format();
    g.qa = g.f.activation;
    g.qw = g.f.weight;
    // Tensor scaling gathers row-wise data only; Hopper then transposes the gathered tensor.
    g.x_copies = g.f.tensor_scaled && g.gathered_x ? 1 : g.f.copies;
    g.dy_copies = g.f.tensor_scaled && g.gathered_dy ? 1 : g.f.copies;
  }
  return g;
}

/// The reduction of a linear's partial sums over tp (reduce-scatter under SP, else all-reduce).
constexpr void linear_reduce(const build_context& c, leaf& l, pass_kind pass, double bytes) {
  c.collective(l, pass, comm_group::tp,
               c.sequence_parallel() ? collective_kind::reduce_scatter : collective_kind::all_reduce, bytes);
}

/// Whether TE's userbuffers overlap the TP collectives of linear `id` (strategy.tp_comm_overlap):
/// the linears Megatron names qkv, proj, fc1 or fc2 (tp_comm_buffer_name; TE module/base.py
/// `initialize_ub` has buffers for these only): attention's, the MLP's and the shared experts'
/// (transformer/mlp.py) and the Mamba mixer's in / out projections (ssm/mamba_mixer.py), in
/// training's sequence-parallel linears only. (MLA's and DeepSeek-V4's other names make Megatron
/// turn the overlap off for the whole model: validation refuses those.)
constexpr bool userbuffers_linear(const build_context& c, leaf_id id, const linear_geometry& g) {
  using enum leaf_id;
  const bool named = id == linear_qkv || id == linear_proj || id == linear_fc1 || id == linear_fc2 ||
                     id == shared_experts_linear_fc1 || id == shared_experts_linear_fc2 || id == mamba_in_proj ||
                     id == mamba_out_proj;
  return c.s().tp_comm_overlap && named && g.tp_comm && c.sequence_parallel() && c.inference == nullptr;
}

/// A TP collective of a userbuffers linear, beside the GEMM emitted just before it. TE pairs the
/// forward's input gather and the row-parallel input-gradient's gather with their own GEMM (ring
/// exchange over tp chunks), the forward's reduce-scatter with its own GEMM (`rs_method`), and in
/// backward the column-parallel input gather with the dgrad GEMM and the dgrad's reduce-scatter with
/// the wgrad GEMM (bulk); llmsim pairs each bulk collective with the GEMM of its own pass instead
/// (the same FLOPs), which keeps the input- and weight-gradient passes apart for the schedules (the
/// trace shows this pairing: a gather beside the GEMM that reads what it gathers).
constexpr void overlapped_tp_collective(const build_context& c, leaf& l, pass_kind pass, collective_kind kind,
                                        double bytes, userbuffers_method method) {
  op o = collective_op(pass, kind, comm_group::tp, bytes);
  o.beside_previous = true;
  o.userbuffers = method;
  o.userbuffers_chunks = method == userbuffers_method::ring_exchange ? c.s().tp_size
                         : method == userbuffers_method::pipeline    ? c.s().tp_comm_overlap_num_splits
                                                                     : 1;
  o.userbuffers_sms = method == userbuffers_method::ring_exchange ? 0 : c.s().tp_comm_overlap_num_sm;
  o.userbuffers_sm_margin = method != userbuffers_method::bulk || c.s().tp_comm_overlap_bulk_sm_margin;
  c.emit(l, o);
}

/// Forward and input-gradient passes, in the order Megatron runs them: a column-parallel linear
/// gathers its input before the GEMM and reduces its input gradient after the dgrad GEMM; a
/// row-parallel one reduces its output after the GEMM and gathers the output gradient before the
/// dgrad GEMM. Quantized: the local input / output gradient is cast before its gather. With
/// userbuffers each collective follows the GEMM it runs beside (`overlapped_tp_collective`).
constexpr void emit_linear_data_passes(const build_context& c, leaf& l, const linear_geometry& g) {
  const double E = g.E;
  constexpr auto fwd = pass_kind::forward, bwd = pass_kind::backward_input;
  constexpr auto ring = userbuffers_method::ring_exchange;
  if (g.quantized) {
    quantize(c, l, fwd, g.x_local, g.qa, g.original_input ? 1 : g.x_copies);
    quantize_weight(c, l, g.w);
  }
  if (g.gathered_x && !g.userbuffers) c.collective(l, fwd, comm_group::tp, collective_kind::all_gather, g.moved(g.x));
  double fwd_bytes = g.quantized ? g.x * g.qa + g.w * g.qw + g.y * E : (g.x + g.y + g.w) * E;
  if (c.inference != nullptr)  // the weight as stored: the whole read of a decode step's GEMV
    fwd_bytes = g.x * (g.quantized ? g.qa : E) + g.w * c.inference->weight_bytes + g.y * E;
  c.emit(l, job_gemm(c, fwd, {g.b, g.s, g.in, g.out, gemm_layout::tn, false, dtype_kind::bf16}, fwd_bytes));
  if (g.gathered_x && g.userbuffers)
    overlapped_tp_collective(c, l, fwd, collective_kind::all_gather, g.moved(g.x), ring);
  if (g.tp_comm && !g.column && g.userbuffers)
    overlapped_tp_collective(c, l, fwd, collective_kind::reduce_scatter, g.y * E, c.s().tp_comm_overlap_rs_method);
  else if (g.tp_comm && !g.column)
    linear_reduce(c, l, fwd, g.y * E);
  if (g.quantized) quantize(c, l, bwd, g.y_local, g.qa, g.dy_copies);
  if (g.gathered_dy && !g.userbuffers) c.collective(l, bwd, comm_group::tp, collective_kind::all_gather, g.moved(g.y));
  const double dgrad_bytes = g.quantized ? g.y * g.qa + g.w * g.qw + g.x * E : (g.x + g.y + g.w) * E;
  c.emit(l, job_gemm(c, bwd, {g.b, g.s, g.out, g.in, gemm_layout::nn, false, dtype_kind::bf16}, dgrad_bytes));
  if (g.gathered_dy && g.userbuffers)
    overlapped_tp_collective(c, l, bwd, collective_kind::all_gather, g.moved(g.y), ring);
  if (g.tp_comm && g.column && g.userbuffers)
    overlapped_tp_collective(c, l, bwd, collective_kind::reduce_scatter, g.x * E, userbuffers_method::bulk);
  else if (g.tp_comm && g.column)
    linear_reduce(c, l, bwd, g.x * E);
}

/// Weight-gradient pass: with SP the input is re-gathered (and, quantized on Hopper, transposed);
/// the GEMM reads input and output gradient (column also the weight shard layout) and accumulates
/// into the main grad (TE gradient_accumulation_fusion). Without the fusion it is written in bf16
/// and Megatron's grad hook adds it into the main grad (`main_grad.add_(grad)`).
constexpr void emit_linear_weight_pass(const build_context& c, leaf& l, const linear_geometry& g) {
  const double E = g.E;
  if (g.original_input) quantize(c, l, pass_kind::backward_weight, g.x_local, g.qa, 1);  // the re-created input
  if (g.gathered_x && !g.userbuffers)
    c.collective(l, pass_kind::backward_weight, comm_group::tp, collective_kind::all_gather, g.moved(g.x));
  if (g.quantized && g.f.copies > g.x_copies)
    c.memory(l, pass_kind::backward_weight, 2 * g.x * g.qa);  // transpose of the gathered input
  if (g.quantized && g.f.copies > g.dy_copies)
    c.memory(l, pass_kind::backward_weight, 2 * g.y * g.qa);  // ... of the gathered gradient
  double inputs = (g.column ? (g.x + g.y + g.w) : (g.x + g.y)) * E;
  if (g.quantized) inputs = (g.x + g.y) * g.qa + (g.column ? g.w * g.qw : 0);
  const double grad_w_bytes = g.w * c.main_grad_bytes();
  const dtype_kind wgrad_out = c.main_grad_bytes() == 4.0 ? dtype_kind::fp32 : dtype_kind::bf16;
  const bool fused = c.s().use_fused_grad_accumulation;
  if (fused)
    c.emit(l, job_gemm(c, pass_kind::backward_weight, {1, g.out, g.b * g.s, g.in, gemm_layout::nt, true, wgrad_out},
                       inputs + grad_w_bytes));
  else
    c.emit(l, job_gemm(c, pass_kind::backward_weight,
                       {1, g.out, g.b * g.s, g.in, gemm_layout::nt, false, dtype_kind::bf16}, inputs + g.w * E));
  if (g.gathered_x && g.userbuffers)  // beside the wgrad GEMM
    overlapped_tp_collective(c, l, pass_kind::backward_weight, collective_kind::all_gather, g.moved(g.x),
                             userbuffers_method::bulk);
  if (!fused) c.memory(l, pass_kind::backward_weight, g.w * E + 2 * grad_w_bytes);
}

/// The leaf of one linear: its three GEMMs with their collectives and casts, and what it keeps.
/// Saved for backward: the local input (SP: the s/t shard a column-parallel linear re-gathers;
/// quantized: one quantized copy, TE `update_usage(rowwise_usage=False, columnwise_usage=True)`).
constexpr leaf linear_gemms(const build_context& c, leaf_id id, linear_geometry g) {
  g.userbuffers = userbuffers_linear(c, id, g);
  leaf l;
  l.id = id;
  l.kind = g.column ? leaf_kind::linear_column : leaf_kind::linear_row;
  emit_linear_data_passes(c, l, g);
  emit_linear_weight_pass(c, l, g);
  const double E = g.E;
  l.params = g.w;
  if (g.quantized) {
    l.quantized_params = g.w;
    l.quantized_weight_bytes = g.w * g.qw * g.f.copies;
    l.input = g.x_local * E;  // a recompute segment starting here keeps the bf16 input
    l.cache = g.original_input ? g.x_local * E : g.x_local * g.qa;
  } else {
    l.input = g.x * E / (g.gathered_x ? g.t : 1.0);
    l.cache = l.input;  // column: the local (SP) input, re-gathered for wgrad; row: its full input
  }
  l.tp_duplicated = !g.tp_comm && c.sequence_parallel();
  l.fwd_peak = (g.x + g.y) * E + (g.quantized ? g.x_local * g.qa * (g.original_input ? 1 : g.x_copies) : 0);
  l.bwd_peak = (g.x + g.y) * E + (g.quantized ? g.y_local * g.qa * g.f.copies : 0) +
               (c.s().use_fused_grad_accumulation ? 0 : g.w * E);  // the unfused bf16 weight gradient
  l.weight_rows = g.out;
  l.weight_cols = g.in;
  return l;
}
}  // namespace detail

/// A linear of a quantized layer (TE Linear under an FP8/FP4 recipe, transformer_engine/pytorch/
/// module/linear.py), the same collectives and GEMMs as `linear_leaf` with:
/// - casts: the input (local shard under SP, cast before the all-gather) in forward, the output
///   gradient (local shard under SP for a row-parallel linear) in backward, the weight once per
///   iteration (`detail::quantize_weight`). A tensor-scaled input that is all-gathered is cast
///   row-wise only ("All-gather is not supported with FP8 column-wise data"); where the GEMMs need
///   a transpose (Hopper) it is made after the backward's gather.
/// - the all-gathers move the quantized row-wise data; reductions stay bf16;
/// - GEMM operands read at the quantized size, outputs bf16 (fp32 main grad);
/// - saved for backward: one quantized copy of the local input (TE keeps only the usage backward
///   needs: `update_usage(rowwise_usage=False, columnwise_usage=True)`), not the bf16 input;
/// - kept across micro-batches: the quantized weight copies (`quantized_weight_bytes`).
constexpr leaf quantized_linear_leaf(const build_context& c, leaf_id id, bool column, std::int64_t in_features,
                                     std::int64_t out_features) {
  auto g = detail::linear_geometry_of(c, column, true, true, in_features, out_features, c.sequence(), c.tokens());
  g.original_input = detail::saves_original_input(c, id);
  return detail::linear_gemms(c, id, g);
}

/// A linear layer with local weight `in_features` x `out_features` (already split by tp).
/// `column`: column-parallel (QKV, fc1, LM head); else row-parallel (proj, fc2). The full
/// sequence, with Megatron's `LinearWithGradAccumulationAndAsyncCommunication` collectives.
constexpr leaf linear_leaf(const build_context& c, leaf_id id, bool column, std::int64_t in_features,
                           std::int64_t out_features) {
  if (c.quantized) return quantized_linear_leaf(c, id, column, in_features, out_features);
  return detail::linear_gemms(
      c, id, detail::linear_geometry_of(c, column, true, false, in_features, out_features, c.sequence(), c.tokens()));
}

/// A norm over `width` features of the local tokens, TE fused kernels: forward reads x and writes
/// y; backward computes the input gradient, then the weight gradient. RMSNorm keeps rstd;
/// LayerNorm adds a bias and the mean.
constexpr leaf norm_leaf(const build_context& c, leaf_id id, std::int64_t width, norm_kind kind) {
  leaf l;
  l.id = id;
  l.kind = leaf_kind::norm;
  const double E = c.element_bytes();
  const double n = static_cast<double>(width);
  const double parameters = kind == norm_kind::layernorm ? 2 * n : n;
  const double X = c.local_tokens() * n * E;
  const double w = parameters * E;
  const double stats = c.local_tokens() * E * (kind == norm_kind::layernorm ? 2 : 1);  // rstd (and mean)
  c.memory(l, pass_kind::forward, 2 * X + w);
  c.memory(l, pass_kind::backward_input, 2 * X + w + stats);
  c.memory(l, pass_kind::backward_weight, X + 2 * w);
  l.params = parameters;
  // Under SP each rank normalises its s/tp tokens with the whole weight: TE marks the norm weights
  // sequence_parallel (LayerNormLinear / LayerNormMLP / LayerNorm) and Megatron's
  // finalize_model_grads sums their gradients over tp.
  l.tp_duplicated = c.sequence_parallel();
  l.input = X;
  l.cache = X;
  l.fwd_peak = 2 * X;
  l.bwd_peak = 2 * X + stats;
  return l;
}
/// The model's norm over the hidden size.
constexpr leaf norm_leaf(const build_context& c, leaf_id id) {
  return norm_leaf(c, id, c.m().hidden_size, c.m().norm_type);
}

/// Query and key/value lengths of one attention call, and which score pairs its FLOPs count.
struct attention_lengths {
  std::int64_t q = 0, kv = 0;
  attention_pairs pairs = attention_pairs::all;
};
/// Training self-attention: the whole sequence attends over itself; the causal mask is counted as
/// SimuMax counts it, all s² pairs (see attention_pairs::all). Inference: the s new tokens of each
/// sequence attend over the cached ones and themselves, the pairs the causal mask keeps (the
/// kernels skip masked blocks: FlashAttention causal, TRT-LLM / vLLM paged attention).
constexpr attention_lengths self_attention(const build_context& c) {
  if (c.inference != nullptr) return {c.s().seq_len, c.inference->kv_cached + c.s().seq_len, attention_pairs::causal};
  return {c.s().seq_len, c.s().seq_len};
}
/// Bytes of one K or V element as attention reads it (the KV cache's width in inference).
constexpr double kv_element_bytes(const build_context& c) {
  return c.inference != nullptr ? c.inference->kv_bytes : c.element_bytes();
}

/// The share of `len`'s score pairs attention skips: the strategy's declared sparsity (SimuMax
/// attention_sparse_ratio) and the pairs the model's sliding window leaves out (FlashAttention
/// skips the blocks outside the window).
constexpr double skipped_pair_share(const build_context& c, const attention_lengths& len) {
  return 1 - (1 - c.s().attention_sparse_ratio) * window_kept_share(c.m(), len.q, len.kv);
}

/// Flash attention over this rank's heads (TE DotProductAttention, flash backend) of `len.q`
/// queries over `len.kv` keys and values. FLOPs as the system tables are measured against
/// (attention_shape::forward_flop_count): forward 2 GEMMs (QKᵀ, PV) over the counted score pairs,
/// backward 5 (dV, dP, dQ, dK plus the recomputed QKᵀ). Q, the output and the log-sum-exp have the
/// query length; K and V the key length.
constexpr leaf math_attention_leaf(const build_context& c, const attention_lengths& len);

constexpr leaf attention_leaf(const build_context& c, const attention_lengths& len) {
  if (!c.s().use_flash_sdp) return math_attention_leaf(c, len);
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const std::int64_t heads = m.head_num / t, kv_heads = kv_heads_per_rank(m, t);
  const std::int64_t d = head_dim(m);
  const double E = c.element_bytes();
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(len.q), skv = static_cast<double>(len.kv);
  const double q = b * sq * static_cast<double>(heads * d);      // Q, and the output as large
  const double k = b * skv * static_cast<double>(kv_heads * d);  // K, and V as large
  const double lse = b * sq * static_cast<double>(heads);
  const attention_shape shape{.batch = c.s().micro_batch_size,
                              .q_len = len.q,
                              .kv_len = len.kv,
                              .head_num = heads,
                              .kv_head_num = kv_heads,
                              .qk_head_dim = d,
                              .v_head_dim = d,
                              .qkv_contiguous = true,
                              .pairs = len.pairs};
  const double sparse = skipped_pair_share(c, len);
  // Inference reads the cache; a windowed layer only the keys its queries' windows reach.
  const double fwd_bytes = c.inference != nullptr ? (2 * q + lse) * E + 2 * k * kv_element_bytes(c) *
                                                                            window_read_share(c.m(), len.q, len.kv) *
                                                                            c.inference->kv_read_repeats
                                                  : (q + 2 * k + q + lse) * E;
  c.emit(l, attention_op(pass_kind::forward, shape, fwd_bytes, sparse));
  c.emit(l, attention_op(pass_kind::backward_input, shape, (2 * q + 4 * k + q + lse) * E, sparse));
  l.input = (q + 2 * k) * E;
  l.cache = (q + 2 * k) * E + lse * E;
  // Flash attention's backward reads its output O. In bf16 it is the tensor linear_proj keeps; in a
  // quantized layer linear_proj keeps an FP8 copy instead, so O is held on its own (SimuMax
  // `cache_outputs = use_flash_sdp and fp8`, dense_module.py).
  if (c.quantized) l.cache += q * E;
  l.fwd_peak = (q + 2 * k + lse + q) * E;
  l.bwd_peak = (2 * q + 4 * k + lse + q) * E;
  return l;
}
/// The decoder layer's self-attention in training.
constexpr leaf attention_leaf(const build_context& c) { return attention_leaf(c, self_attention(c)); }

/// Attention without a fused kernel (`use_math_sdp`; Megatron's unfused `DotProductAttention`):
/// Q·Kᵀ and P·V as batched GEMMs over every (batch, head) with the full q x kv score matrix,
/// a fused scale-mask-softmax pass, and with dropout a dropout pass over the probabilities.
/// The GEMMs compute every pair (the mask is applied to their output), so FLOPs count all pairs;
/// backward is twice forward (dV, dP, dQ, dK; the probabilities are kept, nothing recomputed).
/// Kept for backward (Korthikanti et al. 2022, §4.1): Q, K, V, the softmax output, and with
/// dropout its keep-mask and output; the score matrices are the transient peak.
constexpr leaf math_attention_leaf(const build_context& c, const attention_lengths& len) {
  leaf l;
  l.id = leaf_id::core_attention;
  l.kind = leaf_kind::attention;
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const double heads = static_cast<double>(m.head_num / t), kv_heads = static_cast<double>(kv_heads_per_rank(m, t));
  const double d = static_cast<double>(head_dim(m)), E = c.element_bytes();
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double sq = static_cast<double>(len.q), skv = static_cast<double>(len.kv);
  // Grouped-query K and V are repeated to every query head before the batched GEMMs (Megatron
  // `DotProductAttention`), so the saved K and V are as wide as Q.
  const double q = b * sq * heads * d, k = b * skv * heads * d;
  const double kv_in = b * skv * kv_heads * d;  // what the layer hands in
  const double P = b * heads * sq * skv;        // elements of one score matrix over all heads
  const attention_shape counted{.batch = c.s().micro_batch_size,
                                .q_len = len.q,
                                .kv_len = len.kv,
                                .head_num = m.head_num / t,
                                .qk_head_dim = head_dim(m),
                                .v_head_dim = head_dim(m)};
  const double gemm_flops = counted.forward_flop_count(c.s().attention_sparse_ratio);  // Q·Kᵀ and P·V
  const double dropout_mask = c.s().enable_dropout ? P : 0, dropout_out = c.s().enable_dropout ? P * E : 0;
  c.emit(l, unkeyed_gemm_op(pass_kind::forward, gemm_flops, (q + 2 * k + 2 * P + q) * E));
  c.memory(l, pass_kind::forward, 2 * P * E);  // softmax: read scores, write probabilities
  c.emit(l, unkeyed_gemm_op(pass_kind::backward_input, 2 * gemm_flops, (2 * q + 4 * k + 4 * P + q) * E));
  c.memory(l, pass_kind::backward_input, 3 * P * E);  // read probabilities and gradient, write gradient
  if (c.s().enable_dropout) {
    c.memory(l, pass_kind::forward, 2 * P * E + dropout_mask);
    c.memory(l, pass_kind::backward_input, 2 * P * E + dropout_mask);
  }
  l.input = (q + 2 * kv_in) * E;
  l.cache = (q + 2 * k) * E + P * E + dropout_mask + dropout_out;
  l.fwd_peak = 2 * P * E + dropout_mask + dropout_out + q * E;  // scores and probabilities (and dropout) live together
  l.bwd_peak = 2 * P * E + (q + 2 * k) * E;                     // gradients of probabilities and scores, of Q, K, V
  return l;
}

/// SwiGLU (TE fused: reads both halves, writes one) or GeLU over `tokens` rows with `width`
/// outputs each. `weights_read`: bytes of routing weights each pass also reads (MoE experts with
/// dispatch_probs apply them inside the activation), `weights_transient`: their working copy.
constexpr leaf activation_leaf(const build_context& c, leaf_id id, double tokens, std::int64_t width, bool swiglu,
                               double weights_read = 0, double weights_transient = 0) {
  leaf l;
  l.id = id;
  l.kind = leaf_kind::activation;
  const double E = c.element_bytes();
  const double out = tokens * static_cast<double>(width) * E;
  const double in = swiglu ? 2 * out : out;
  if (swiglu && !c.s().use_fused_swiglu) {
    // Unfused (Megatron --no-bias-swiglu-fusion): SiLU of the gate half, then the product with the
    // up half, two kernels each way; autograd keeps the gate half, the SiLU output and the up half.
    const double half = out;
    c.memory(l, pass_kind::forward, 2 * half + weights_read);
    c.memory(l, pass_kind::forward, 3 * half);
    c.memory(l, pass_kind::backward_input, 5 * half + weights_read);
    c.memory(l, pass_kind::backward_input, 3 * half);
    l.fwd_peak = l.bwd_peak = in + 2 * half + weights_transient;
    l.input = in;
    l.cache = in + half;
    return l;
  }
  if (swiglu) {
    c.memory(l, pass_kind::forward, in + out + weights_read);
    c.memory(l, pass_kind::backward_input,
             2 * in + out + weights_read);  // reads both halves and the output gradient, writes both input gradients
    l.fwd_peak = l.bwd_peak = in + out + weights_transient;
  } else {
    c.memory(l, pass_kind::forward, 2 * in + weights_read);
    c.memory(l, pass_kind::backward_input,
             3 * in + weights_read);  // reads input and output gradient, writes input gradient
    l.fwd_peak = l.bwd_peak = 2 * in + weights_transient;
  }
  l.input = in;
  l.cache = in;  // SwiGLU keeps both halves of the fc1 output, GeLU its input
  return l;
}
/// The dense MLP's activation on this rank's share of the intermediate size.
constexpr leaf activation_leaf(const build_context& c) {
  return activation_leaf(c, c.m().use_swiglu ? leaf_id::swiglu : leaf_id::gelu, c.tokens(),
                         *c.m().intermediate_size / c.s().tp_size, c.m().use_swiglu);
}

/// Learned absolute positions (Megatron LanguageModelEmbedding): a serial table of
/// max_position_embeddings x h on every TP rank. The word embeddings are then all-reduced in full
/// (`reduce_scatter_embeddings` is off with position embeddings), the looked-up positions added,
/// the sum made [s, b, h]-contiguous and, with sequence parallelism, this rank's slice cloned out
/// of it (scatter_to_sequence_parallel_region + clone); backward gathers the slices' gradients and
/// adds them into the table's fp32 main gradient.
constexpr void add_learned_positions(leaf& l, const build_context& c, double out) {
  const double E = c.element_bytes();
  const double h = static_cast<double>(c.m().hidden_size);
  const double table_rows = static_cast<double>(c.m().max_position_embeddings.value_or(0));
  const double local = c.sequence_parallel() ? out / static_cast<double>(c.s().tp_size) : out;
  c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_reduce, out);
  c.memory(l, pass_kind::forward, 2 * out);  // position rows gathered
  c.memory(l, pass_kind::forward, 3 * out);  // word + position
  c.memory(l, pass_kind::forward, 2 * out);  // transpose to [s, b, h]
  if (c.sequence_parallel()) {
    c.memory(l, pass_kind::forward, 2 * local);  // clone of this rank's slice
    c.collective(l, pass_kind::backward_input, comm_group::tp, collective_kind::all_gather, out);
  }
  c.memory(l, pass_kind::backward_weight, out + 2 * table_rows * h * c.main_grad_bytes());
  l.params += table_rows * h;
  l.fwd_peak += 2 * out;
  l.bwd_peak += table_rows * h * E;  // the table's dense bf16 gradient
}

/// Vocabulary-parallel embedding (first stage): a row gather in forward; in backward the dense
/// table gradient is built and added into the fp32 main gradient. Partial sums over the vocabulary
/// shards are combined by a reduce-scatter into the sequence-parallel region (all-reduce without SP).
constexpr leaf embedding_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::embedding;
  l.kind = leaf_kind::embedding;
  const double E = c.element_bytes();
  const double h = static_cast<double>(c.m().hidden_size);
  const double rows = static_cast<double>(c.vocab / c.s().tp_size);
  const double ids = c.tokens() * 4;  // int32 token ids
  const double out = c.tokens() * h * E;
  const double table = rows * h * E;
  c.memory(l, pass_kind::forward, ids + 2 * out);
  c.memory(l, pass_kind::backward_weight, 2 * rows * h * c.main_grad_bytes());
  l.params = rows * h;
  l.input = ids;
  l.fwd_peak = ids + out;
  l.bwd_peak = table;  // the dense bf16 gradient of the table shard
  if (c.m().position_embedding_type == position_kind::learned_absolute) {
    add_learned_positions(l, c, out);
  } else if (c.sequence_parallel()) {
    c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::reduce_scatter, out);
    c.collective(l, pass_kind::backward_input, comm_group::tp, collective_kind::all_gather, out);
  } else {
    c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_reduce, out);
  }
  if (c.s().enable_dropout) {
    // Megatron's LanguageModelEmbedding applies hidden dropout to its (sequence-parallel local)
    // output: one pass writing the result and a one-byte keep-mask that backward reads.
    const double local = c.local_tokens() * h;
    c.memory(l, pass_kind::forward, 2 * local * E + local);
    c.memory(l, pass_kind::backward_input, 2 * local * E + local);
    l.cache += local;
  }
  return l;
}

/// Vocabulary-parallel cross entropy over the LM head's logits (Megatron `VocabParallelCrossEntropy`,
/// or the fused kernel with `cross_entropy_loss_fusion`): max, sum-exp and target-logit all-reduces
/// over tp; the logits (fp32 unfused, bf16 fused) are kept for backward.
constexpr leaf cross_entropy_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::cross_entropy;
  l.kind = leaf_kind::cross_entropy;
  const double E = c.element_bytes();
  const double bs = c.tokens();
  const double b = static_cast<double>(c.s().micro_batch_size);
  const double logits = bs * static_cast<double>(c.vocab / c.s().tp_size);
  const std::int64_t t = c.s().tp_size;
  if (c.s().cross_entropy_loss_fusion) {
    // One pass over bf16 logits each way (SimuMax's measured `ce_fusion` bandwidth entry).
    c.memory(l, pass_kind::forward, 2 * logits * E + bs * 4, memory_kind::ce_fusion);
    c.memory(l, pass_kind::backward_input, 2 * logits * E + bs * 4, memory_kind::ce_fusion);
    l.cache = logits * E;
    // Transients besides the kept logits: int32 targets, three fp32 per-token reductions (max,
    // sum-exp, target logit) and, under tp, their all-reduce buffers gathered over the tp ranks.
    l.fwd_peak = l.cache + bs * 4 + 3 * bs * 4 + (t > 1 ? 3 * bs * static_cast<double>(t) * 4 : 0);
    c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_reduce, bs * 4);
    c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_reduce, 2 * bs * 4);
  } else {
    // Unfused: upcast to fp32, subtract max, exp, sum, log, gather target; ~38 bytes per logit forward
    // and ~14 backward (softmax minus one-hot, downcast), as SimuMax counts Megatron's kernels.
    c.memory(l, pass_kind::forward, 38 * logits + 8 * bs + 8 * b, memory_kind::ce);
    c.memory(l, pass_kind::backward_input, 14 * logits + 4 * b, memory_kind::ce);
    l.cache = logits * 4;
    l.fwd_peak = l.cache + logits * E;
    for (int i = 0; i < 3; ++i)
      c.collective(l, pass_kind::forward, comm_group::tp, collective_kind::all_reduce, bs * 4);
  }
  l.input = logits * E;
  return l;
}

/// Megatron's unfused RoPE on one tensor T of this rank's queries or keys (rope_utils.py
/// `_apply_rotary_pos_emb_bshd`, taken under YaRN: see model_spec::yarn_rotary_scaling_factor), the
/// rotary part the whole head. Forward: the cos and sin tables of the [s, d]
/// fp32 frequencies (each cos or sin, times mscale, cast: three small kernels), then T·cos, the
/// rotated half (a negation of one half and a cat), its product with sin, the sum, and the final
/// cat with the empty pass-through part: 12 T of bytes in six kernels. Backward (autograd): the
/// products' gradients (grad·sin, grad·cos), the negation's, the chunk's cat, their sum into T's
/// gradient, then the empty pass-through slice's gradient (a zero-filled T, PyTorch's
/// slice_backward) added in: 14 T in seven kernels. The full-width slice is T itself (PyTorch's
/// indexing returns self for a whole-range slice): no kernel.
constexpr void add_unfused_rope(leaf& l, const build_context& c, double T) {
  const double table = static_cast<double>(c.sequence() * head_dim(c.m())) * 4;  // fp32 [s, d] frequencies
  for (int trig = 0; trig < 2; ++trig) {
    c.memory(l, pass_kind::forward, 2 * table);    // cos or sin
    c.memory(l, pass_kind::forward, 2 * table);    // times mscale
    c.memory(l, pass_kind::forward, 1.5 * table);  // cast to the activations' 16 bits
  }
  c.memory(l, pass_kind::forward, 2 * T);         // T·cos
  c.memory(l, pass_kind::forward, T);             // minus the second half
  c.memory(l, pass_kind::forward, 2 * T);         // cat: the rotated half
  c.memory(l, pass_kind::forward, 2 * T);         // times sin
  c.memory(l, pass_kind::forward, 3 * T);         // sum
  c.memory(l, pass_kind::forward, 2 * T);         // cat with the pass-through part
  c.memory(l, pass_kind::backward_input, 2 * T);  // grad·sin
  c.memory(l, pass_kind::backward_input, T);      // negation's gradient
  c.memory(l, pass_kind::backward_input, 2 * T);  // chunk's gradient: cat
  c.memory(l, pass_kind::backward_input, 2 * T);  // grad·cos
  c.memory(l, pass_kind::backward_input, 3 * T);  // the two gradients of T summed
  c.memory(l, pass_kind::backward_input, T);      // the pass-through slice's zero-filled gradient
  c.memory(l, pass_kind::backward_input, 3 * T);  // ... added in
}

/// Rotary position embedding applied to this rank's queries and keys (TE fused RoPE: one kernel
/// for q and one for k, each reading and writing its tensor; the same in backward). It keeps
/// nothing for backward beyond the shared frequency table. Under YaRN Megatron runs the unfused
/// RoPE in training (`add_unfused_rope`), whose temporaries for the larger tensor, the product with
/// cos, the one with sin and their sum (3 T), live at once; serving engines fuse it.
constexpr leaf rotary_leaf(const build_context& c) {
  leaf l;
  l.id = leaf_id::rotary_pos_emb;
  l.kind = leaf_kind::activation;
  const auto& m = c.m();
  const std::int64_t t = c.s().tp_size;
  const double E = c.element_bytes();
  const double q = c.tokens() * static_cast<double>(m.head_num / t * head_dim(m)) * E;
  const double k = c.tokens() * static_cast<double>(kv_heads_per_rank(m, t) * head_dim(m)) * E;
  const bool unfused = m.yarn_rotary_scaling_factor && c.inference == nullptr;
  if (unfused) {
    add_unfused_rope(l, c, q);
    add_unfused_rope(l, c, k);
  } else {
    for (const pass_kind pass : {pass_kind::forward, pass_kind::backward_input}) {
      c.memory(l, pass, 2 * q);
      c.memory(l, pass, 2 * k);
    }
  }
  l.input = q + k;
  l.fwd_peak = l.bwd_peak = q + k + (unfused ? 3 * (q > k ? q : k) : 0);
  return l;
}

/// A residual connection on the local residual stream: forward adds the branch output to the
/// stream (reads two, writes one); backward sums the two gradients where the stream forked.
/// With `enable_dropout` it is Megatron's bias-dropout-add (`fused_bias_dropout.py`): dropout on
/// the branch output writes a one-byte keep-mask per element that backward reads, so the mask is
/// kept (Korthikanti et al. 2022, §4.1: "sbh" bytes per dropout mask).
/// `dropout = false` for a plain sum with no dropout before it (MoE's shared + routed outputs,
/// Megatron `moe_layer.py`).
constexpr leaf residual_leaf(const build_context& c, leaf_id id, bool dropout = true) {
  leaf l;
  l.id = id;
  l.kind = leaf_kind::activation;
  const double elements = c.local_tokens() * static_cast<double>(c.m().hidden_size);
  const double X = elements * c.element_bytes();
  const double mask = dropout && c.s().enable_dropout ? elements : 0;  // torch.bool keep-mask
  c.memory(l, pass_kind::forward, 3 * X + mask);
  c.memory(l, pass_kind::backward_input, 3 * X + mask);
  l.input = 2 * X;
  l.cache = mask;
  l.fwd_peak = X + mask;
  l.bwd_peak = X;
  return l;
}

LLMSIM_END_NAMESPACE
