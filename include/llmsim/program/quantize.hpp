/// \file llmsim/program/quantize.hpp
/// What TransformerEngine's low-precision recipes store and move per element: bytes of one
/// quantized copy with its scales, how many copies a tensor that feeds both a forward (or
/// input-gradient) GEMM and a weight-gradient GEMM needs, whether the cast first reads the tensor
/// for its amax, and which `accelerator.op` kinds price the GEMMs. Sources: TransformerEngine's
/// docs/features/low_precision_training (fp8_current_scaling.rst, nvfp4.rst) and
/// transformer_engine/pytorch (utils.py `is_non_tn_fp8_gemm_supported`, tensor/*_tensor.py).
#pragma once

#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

LLMSIM_BEGIN_NAMESPACE

/// Byte figures of one recipe on one GPU generation.
struct quantized_format {
  double activation = 1;   ///< bytes per element of one quantized copy of an activation or gradient, scales included
  double weight = 1;       ///< bytes per element of one quantized copy of a weight, scales included
  double copies = 1;       ///< copies written by a cast whose tensor feeds two GEMMs of different layouts
  bool amax_pass = false;  ///< the cast first reads the bf16 tensor for its amax (a second kernel)
  bool tensor_scaled = false;  ///< one scale per tensor (delayed, tensorwise)
  compute_kind gemm = compute_kind::fp8_matmul;
  compute_kind grouped_gemm = compute_kind::fp8_group_matmul;
};

/// Whether FP8 GEMMs on compute capability `cc` accept every operand layout (TE utils.py
/// `is_non_tn_fp8_gemm_supported`: 10.x, 11.x and >= 13); elsewhere (Ada 8.9, Hopper 9.0) only TN,
/// so a tensor-scaled operand also needs a transposed copy (Float8TensorStorage `_transpose`).
constexpr bool non_tn_fp8_gemm_supported(double cc) { return (cc >= 10 && cc < 12) || cc >= 13; }

/// The byte figures of `recipe` on compute capability `cc`:
/// - delayed / tensorwise: 1-byte E4M3/E5M2 elements, one fp32 scale per tensor (negligible); one
///   copy where non-TN FP8 GEMMs exist, else the data and its transpose. Current scaling
///   (tensorwise) reads the tensor twice, once for the amax and once to cast
///   (fp8_current_scaling.rst, Figure 4); delayed scaling takes the scale from the amax history
///   and records the amax inside the cast kernel.
/// - blockwise: 1 byte plus an fp32 scale per 1x128 block of an activation or gradient (4/128)
///   and per 128x128 block of a weight (4/16384); row-wise and column-wise (transposed) data.
/// - mxfp8: 1 byte plus an E8M0 scale per 32 elements (1/32); the blocks run along the reduction
///   dimension, so each GEMM direction needs its own copy (row-wise and column-wise).
/// - nvfp4: 4-bit E2M1 (0.5 byte) plus an E4M3 scale per 16 elements (1/16); row-wise and
///   column-wise copies; the fp32 global scale needs the tensor's amax first (nvfp4.rst,
///   "hierarchical scaling"); GEMMs on the fp4 op kinds.
constexpr quantized_format quantized_format_of(fp8_recipe_kind recipe, double cc) {
  quantized_format f;
  switch (recipe) {
    case fp8_recipe_kind::tensorwise:
      f.amax_pass = true;
      [[fallthrough]];
    case fp8_recipe_kind::delayed:
      f.tensor_scaled = true;
      f.copies = non_tn_fp8_gemm_supported(cc) ? 1 : 2;
      break;
    case fp8_recipe_kind::blockwise:
      f.activation = 1 + 4.0 / 128;
      f.weight = 1 + 4.0 / (128.0 * 128.0);
      f.copies = 2;
      break;
    case fp8_recipe_kind::mxfp8:
      f.activation = f.weight = 1 + 1.0 / 32;
      f.copies = 2;
      break;
    case fp8_recipe_kind::nvfp4:
      f.activation = f.weight = 0.5 + 1.0 / 16;
      f.copies = 2;
      f.amax_pass = true;
      f.gemm = compute_kind::fp4_matmul;
      f.grouped_gemm = compute_kind::fp4_group_matmul;
      break;
    default:
      break;
  }
  return f;
}

/// The job's recipe on `sys` (an unknown compute capability counts as Hopper, 9.0, as the
/// estimate assumes for TE's workspaces).
constexpr quantized_format quantized_format_of(const strategy_spec& s, const system_spec& sys) {
  const double cc = known_compute_capability(sys);
  return quantized_format_of(s.fp8_recipe, cc > 0 ? cc : 9.0);
}

LLMSIM_END_NAMESPACE
