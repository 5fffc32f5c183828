/// \file llmsim/typed/estimate.hpp
/// The typed entry points: lower a typed model, a `parallel<...>` and an `hw::` type into the three
/// specs and call the one `llmsim::estimate` / `llmsim::validate` — no formula of its own. In a
/// constant expression a broken rule is a compile error that shows the rule; `fits_in` and
/// `fits_on` make a memory budget a compile error that shows the bytes needed and available.
///
/// ```cpp
/// constexpr auto r = llmsim::typed::estimate(llama3_70b, llmsim::parallel<llmsim::tp<8>, llmsim::pp<4>>{}, llmsim::hw::h100_sxm{});
/// static_assert(llmsim::fits_in<r.mem.peak_mem, 80_GiB>);        // note: (needed <= available)
/// static_assert(llmsim::fits_on<r.mem.peak_mem, llmsim::hw::h100_sxm>);
/// ```
#pragma once

#include <llmsim/core/units.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/spec/validate.hpp>
#include <llmsim/typed/concepts.hpp>
#include <llmsim/typed/hardware.hpp>
#include <llmsim/typed/model.hpp>
#include <llmsim/typed/parallel.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

LLMSIM_BEGIN_NAMESPACE
namespace typed {

/// The spec a strategy type carries.
template <ParallelStrategy P>
constexpr const strategy_spec& to_spec(const P&) {
  return P::spec;
}
/// The spec an accelerator type carries.
template <Accelerator H>
constexpr const system_spec& to_spec(const H&) {
  return H::spec;
}
constexpr const strategy_spec& to_spec(const strategy_spec& s) { return s; }
constexpr const system_spec& to_spec(const system_spec& s) { return s; }

/// What the typed entry points take: a typed model or a `model_spec`; a strategy type or a
/// `strategy_spec`; an accelerator type or a `system_spec`.
template <class T>
concept ModelDescription = requires(const T& t) {
  { typed::to_spec(t) } -> std::convertible_to<model_spec>;
};
template <class T>
concept StrategyDescription = ParallelStrategy<T> || std::same_as<T, strategy_spec>;
template <class T>
concept SystemDescription = Accelerator<T> || std::same_as<T, system_spec>;

/// `llmsim::estimate` of the lowered specs: `constexpr auto r = typed::estimate(model, parallel<...>{}, hw::h100_sxm{});`
template <ModelDescription M, StrategyDescription S, SystemDescription H>
constexpr estimate_result estimate(const M& model, const S& strategy, const H& system) {
  return llmsim::estimate(typed::to_spec(model), typed::to_spec(strategy), typed::to_spec(system));
}

/// The estimate of a constant model, strategy type and accelerator type as a constant of its own:
/// each specialisation is a separate constant expression with the compilers' full evaluation
/// budget. `Model` is a `constexpr` variable with static storage (a typed model or a `model_spec`).
template <const auto& Model, ParallelStrategy P, Accelerator H>
requires ModelDescription<std::remove_cvref_t<decltype(Model)>>
inline constexpr estimate_result estimate_of = llmsim::estimate(typed::to_spec(Model), P::spec, H::spec);

/// `llmsim::validate` of the lowered specs: `static_assert((typed::validate(model, parallel<...>{}, hw::b200{}), true));`
template <ModelDescription M, StrategyDescription S, SystemDescription H>
constexpr void validate(const M& model, const S& strategy, const H& system) {
  llmsim::validate(typed::to_spec(model), typed::to_spec(strategy), typed::to_spec(system));
}

}  // namespace typed

namespace detail {
/// A budget check whose failure prints both numbers: GCC "the comparison reduces to
/// '(136902082560 <= 85899345920)'", Clang "requirement '136902082560L <= 85899345920L'".
template <std::int64_t Needed, std::int64_t Available>
struct memory_budget {
  static_assert(Needed <= Available, "llmsim::fits_in: the bytes needed (left) exceed the bytes available (right)");
  static constexpr bool value = Needed <= Available;
};
}  // namespace detail

/// `static_assert(llmsim::fits_in<r.mem.peak_mem, 80_GiB>)`: a compile error naming both byte counts when it does not fit.
template <bytes Needed, bytes Available>
inline constexpr bool fits_in = detail::memory_budget<Needed.value, Available.value>::value;

/// `static_assert(llmsim::fits_on<r.mem.peak_mem, llmsim::hw::h100_sxm>)`: fits the accelerator's
/// memory (`hw::device_memory`: mem_gbs GiB).
template <bytes Needed, Accelerator H>
inline constexpr bool fits_on = detail::memory_budget<Needed.value, hw::device_memory(H::spec).value>::value;

LLMSIM_END_NAMESPACE
