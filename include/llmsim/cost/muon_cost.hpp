/// \file llmsim/cost/muon_cost.hpp
/// The Muon optimizer step (Megatron-LM --optimizer muon / dist_muon; megatron/core/optimizer/
/// emerging_optimizers.py TensorParallelMuon over NVIDIA-NeMo/Emerging-Optimizers
/// orthogonalized_optimizers): per 2-D weight matrix, a momentum update, the Newton-Schulz
/// orthogonalisation of the momentum (GEMMs), and the weight update; Adam for the rest.
#pragma once

#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/kernel_model.hpp>
#include <llmsim/program/shape_key.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace parameters {
/// Optimizer state bytes per parameter (fp32 throughout: the Kimi K2 recipe sets main_params_dtype,
/// exp_avg_dtype and exp_avg_sq_dtype to float32, Megatron-Bridge recipes/kimi/h100/kimi_k2.py
/// _apply_kimi_k2_optimizer): Adam keeps the fp32 master weight, m and v (3 x 4 bytes); Muon the
/// fp32 master weight and one momentum buffer (orthogonalized_optimizer.py: `momentum_buffer =
/// zeros_like(p)` of the fp32 main parameter): 2 x 4 bytes.
inline constexpr double adam_state_bytes_per_param = 12.0;
inline constexpr double muon_state_bytes_per_param = 8.0;
/// Newton-Schulz runs its GEMMs in bf16: Megatron's default --muon-fp32-matmul-prec "medium" makes
/// emerging_optimizers muon_utils.py newton_schulz cast X to bfloat16 before the iterations.
inline constexpr double muon_ns_element_bytes = 2.0;
}  // namespace parameters

/// FLOPs of one Newton-Schulz iteration on an `rows` x `cols` matrix (muon_utils.py
/// newton_schulz transposes so that the short side m = min(rows, cols) comes first, n the long
/// side; newton_schulz_step): A = X·Xᵀ (m×n by n×m: 2·m²·n), B = b·A + c·A·A (m×m by m×m: 2·m³),
/// X = a·X + B·X (m×m by m×n: 2·m²·n): 4·m²·n + 2·m³ in all.
constexpr double muon_ns_iteration_flops(std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(rows < cols ? rows : cols);
  const double n = static_cast<double>(rows < cols ? cols : rows);
  return 4.0 * m * m * n + 2.0 * m * m * m;
}

/// Time of orthogonalising one `rows` x `cols` matrix with `steps` Newton-Schulz iterations, each
/// iteration's three GEMMs priced on the system's matmul entry (shape-keyed like the model's GEMMs,
/// else the kernel model)
/// with their bf16 operand traffic, plus the memory passes around them: the Frobenius
/// normalisation (reads the fp32 momentum, writes bf16 X: muon_utils.py normalize, then the cast)
/// and the cast of the result back to fp32.
constexpr seconds muon_ns_time(const system_spec& sys, std::int64_t rows, std::int64_t cols, std::int64_t steps) {
  if (rows <= 0 || cols <= 0 || steps <= 0) return {};
  const std::int64_t m = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
  const double E = parameters::muon_ns_element_bytes;
  const double mn = static_cast<double>(m) * static_cast<double>(n),
               mm = static_cast<double>(m) * static_cast<double>(m);
  auto gemm = [&](const gemm_shape& g, double traffic) {
    const double modelled = modelled_efficiency(sys, compute_kind::matmul, gemm_op(pass_kind::forward, g, traffic));
    return kernel_time(sys, compute_kind::matmul, g.flop_count(), g.key().view(), memory_kind::default_kind, traffic,
                       modelled, 1, true)
        .time;
  };
  const seconds gram = gemm({1, m, n, m, gemm_layout::nt, false, dtype_kind::bf16}, (2 * mn + mm) * E);
  const seconds poly = gemm({1, m, m, m, gemm_layout::nn, false, dtype_kind::bf16}, 4 * mm * E);
  const seconds apply = gemm({1, m, m, n, gemm_layout::nn, false, dtype_kind::bf16}, (mm + 3 * mn) * E);
  const seconds iteration = gram + poly + apply;
  return iteration * static_cast<double>(steps) + memory_time(sys, memory_kind::default_kind, mn * (4.0 + E)) +
         memory_time(sys, memory_kind::default_kind, mn * (E + 4.0));
}

/// Muon step of one stage's local parameters besides the Newton-Schulz GEMMs (`ns`), memory-bound
/// passes on the default bandwidth entry (orthogonalized_optimizer.py step): zero the grad buffer,
/// scale by 1/dp, NaN/norm check and grad-norm over all gradients (as Megatron does for Adam); then
/// over this rank's `muon_local` Muon parameters the momentum lerp (reads grad and momentum, writes
/// momentum), the Nesterov lerp (reads grad and momentum, writes the update) and the weight update
/// (reads the fp32 master and the orthogonalised update, writes the master); over its `adam_local`
/// parameters the Adam step; then the copy of all local master weights to the 16-bit parameters.
/// The layer-wise distributed optimizer owns whole parameters per data-parallel rank, but every
/// rank holds the whole all-reduced gradient buffer.
constexpr seconds muon_step_time(const system_spec& sys, const strategy_spec& s, double params, double muon_local,
                                 double adam_local, double grad_bytes_per_param) {
  if (params <= 0) return {};
  const double grads = params * grad_bytes_per_param, local = muon_local + adam_local;
  auto pass = [&](double b) { return memory_time(sys, memory_kind::default_kind, b); };
  seconds t = pass(grads) + pass(grads);
  if (dp_size(s) * s.cp_size > 1) t += pass(2 * grads);
  t += pass(local * grad_bytes_per_param);
  constexpr double fp32 = 4.0;  // bytes of an fp32 master weight or state element (parameters:: above)
  const double lerp = muon_local * (grad_bytes_per_param + 2 * fp32);  // momentum, then Nesterov
  t += pass(lerp) + pass(lerp);
  t += pass(muon_local * 3 * fp32);  // master read, update read, master written
  t += pass(adam_local * grad_bytes_per_param + 2 * parameters::adam_state_bytes_per_param * adam_local);
  t += pass(local * (fp32 + static_cast<double>(dtype_bytes(s.dtype))));
  return t;
}

LLMSIM_END_NAMESPACE
