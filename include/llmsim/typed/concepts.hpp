/// \file llmsim/typed/concepts.hpp
/// The concepts of the typed compile-time API: what may stand in a model (`Layer`), inside a
/// decoder layer (`AttentionKind`, `MlpKind`, `NormKind`), in `llmsim::parallel<...>`
/// (`StrategyOption`), and what can be estimated (`ParallelStrategy`, `Accelerator`).
///
/// A kind says what it is with a `static constexpr kind_role role`; its sizes are data members.
/// Strategies and accelerators are types with a `static constexpr` spec, so the same
/// `strategy_spec` / `system_spec` the runtime path loads from JSON is what the types carry.
///
/// ```cpp
/// static_assert(llmsim::ParallelStrategy<llmsim::parallel<llmsim::tp<8>, llmsim::dp<8>>>);
/// static_assert(llmsim::Accelerator<llmsim::hw::h100_sxm>);
/// static_assert(!llmsim::typed::Layer<int>);
/// ```
#pragma once

#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

LLMSIM_BEGIN_NAMESPACE
namespace typed {

/// What a kind type describes.
enum class kind_role : std::uint8_t { embedding, decoder, lm_head, attention, mlp, norm };

namespace detail {
template <class T, kind_role Role>
concept has_role = requires {
  { std::remove_cvref_t<T>::role } -> std::convertible_to<kind_role>;
}
&&std::remove_cvref_t<T>::role == Role;
}  // namespace detail

/// Self-attention of a decoder layer: `gqa_attention`, `mha_attention`, `mla_attention`.
template <class T>
concept AttentionKind = detail::has_role<T, kind_role::attention>;
/// Feed-forward block of a decoder layer: `swiglu_mlp`, `gelu_mlp`, `moe_mlp`.
template <class T>
concept MlpKind = detail::has_role<T, kind_role::mlp>;
/// Normalisation of a decoder layer: `rms_norm`, `layer_norm`.
template <class T>
concept NormKind = detail::has_role<T, kind_role::norm>;
/// One decoder layer, or a run of identical ones: `decoder_layer<...>`, `repeated<...>`.
template <class T>
concept DecoderLayer = detail::has_role<T, kind_role::decoder>;
/// Anything that may stand in a model: `embedding`, `decoder_layer`, `repeated`, `lm_head`.
template <class T>
concept Layer = detail::has_role<T, kind_role::embedding> || DecoderLayer<T> || detail::has_role<T, kind_role::lm_head>;

}  // namespace typed

/// What the options of `llmsim::parallel<...>` write into: the strategy, and the data-parallel
/// size from which `world_size = tp * pp * cp * dp` is formed at the end.
struct strategy_draft {
  strategy_spec spec{};
  std::int64_t dp = 1;
};

/// Which setting an option of `llmsim::parallel<...>` makes; two options with the same key
/// (other than `custom`) are refused.
enum class option_key : std::uint8_t {
  tp,
  pp,
  dp,
  cp,
  ep,
  etp,
  vpp,
  zero,
  seq,
  micro_batch,
  micro_batches,
  first_stage_layers,
  last_stage_layers,
  recompute,
  sequence_parallel,
  pipeline_schedule,
  fp8,
  custom,
  cp_comm_type,
};

/// An option of `llmsim::parallel<...>`: `tp<8>`, `recompute::selective`, ... A user option is a
/// type with `static constexpr option_key key = option_key::custom;` and
/// `static constexpr void apply(strategy_draft&)`.
template <class T>
concept StrategyOption = requires(strategy_draft& d) {
  { T::key } -> std::convertible_to<option_key>;
  T::apply(d);
};

/// A strategy as a type: `T::spec` is a constant `strategy_spec` (e.g. `llmsim::parallel<...>`).
template <class T>
concept ParallelStrategy = requires {
  { std::remove_cvref_t<T>::spec } -> std::convertible_to<const strategy_spec&>;
  typename std::integral_constant<std::int64_t, std::remove_cvref_t<T>::spec.world_size>;  // a constant
};

/// An accelerator (and its cluster) as a type: `T::spec` is a constant `system_spec` (`llmsim::hw::h100_sxm`).
template <class T>
concept Accelerator = requires {
  { std::remove_cvref_t<T>::spec } -> std::convertible_to<const system_spec&>;
  typename std::integral_constant<std::int64_t, std::remove_cvref_t<T>::spec.num_per_node>;  // a constant
};

LLMSIM_END_NAMESPACE
