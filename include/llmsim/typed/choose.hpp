/// \file llmsim/typed/choose.hpp
/// Compile-time choice of a strategy: the fastest of a list of candidates whose peak memory fits
/// the device, each candidate priced by the one `llmsim::estimate`.
///
/// ```cpp
/// using namespace llmsim;
/// constexpr auto best = fastest_fitting(boost::hana::make_tuple(parallel<tp<8>, dp<8>>{}, parallel<tp<4>, pp<2>, dp<8>>{}),
///                                       llama3_8b, hw::h100_sxm{});
/// static_assert(best.found && best.index == 1);
/// ```
/// Every candidate must be a valid strategy for the model: an invalid one is the same compile
/// error (showing its rule) as estimating it alone. `fastest_fitting(...)` evaluates all
/// candidates in one constant expression, which Clang's default step limit (2^20) allows for a
/// handful of large jobs; `fastest_fitting_of<Model, Gpu, Candidates...>` gives each its own.
#pragma once

#include <llmsim/core/units.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/search/space.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/typed/concepts.hpp>
#include <llmsim/typed/estimate.hpp>
#include <llmsim/typed/hardware.hpp>

#include <boost/hana/tuple.hpp>

#include <array>
#include <cstddef>

LLMSIM_BEGIN_NAMESPACE

/// The result of `fastest_fitting`: whether any candidate fits, which one (index into the
/// candidates), its strategy and its estimate.
struct strategy_choice {
  bool found = false;
  std::size_t index = 0;
  strategy_spec strategy{};
  estimate_result result{};
};

namespace detail {
/// The choice among estimated candidates: the fastest whose peak_mem is at most `budget`.
template <std::size_t N>
constexpr strategy_choice fastest_of(const std::array<strategy_spec, N>& candidates,
                                     const std::array<const estimate_result*, N>& results, bytes budget) {
  strategy_choice best;
  for (std::size_t i = 0; i < N; ++i) {
    const estimate_result& r = *results[i];
    if (r.mem.peak_mem > budget) continue;
    if (best.found && !(r.cost.duration_time_per_iter < best.result.cost.duration_time_per_iter)) continue;
    best = {true, i, candidates[i], r};
  }
  return best;
}
}  // namespace detail

/// The fastest candidate (lowest `duration_time_per_iter`; the earlier one on a tie) whose
/// `peak_mem` is at most `budget`.
template <std::size_t N, typed::ModelDescription M, typed::SystemDescription H>
constexpr strategy_choice fastest_fitting(const std::array<strategy_spec, N>& candidates, const M& model,
                                          const H& system, bytes budget) {
  const model_spec& m = typed::to_spec(model);
  const system_spec& sys = typed::to_spec(system);
  std::array<estimate_result, N> results{};
  std::array<const estimate_result*, N> pointers{};
  for (std::size_t i = 0; i < N; ++i) {
    results[i] = llmsim::estimate(m, candidates[i], sys);
    pointers[i] = &results[i];
  }
  return detail::fastest_of(candidates, pointers, budget);
}

/// The fastest candidate that fits the device's memory (`hw::device_memory`).
template <std::size_t N, typed::ModelDescription M, typed::SystemDescription H>
constexpr strategy_choice fastest_fitting(const std::array<strategy_spec, N>& candidates, const M& model,
                                          const H& system) {
  return fastest_fitting(candidates, model, system, hw::device_memory(typed::to_spec(system)));
}

/// The same over strategy types: `fastest_fitting(boost::hana::make_tuple(parallel<...>{}, ...), model, hw::b200{})`.
template <ParallelStrategy... P, typed::ModelDescription M, typed::SystemDescription H>
constexpr strategy_choice fastest_fitting(const boost::hana::tuple<P...>&, const M& model, const H& system) {
  return fastest_fitting(std::array<strategy_spec, sizeof...(P)>{P::spec...}, model, system);
}
template <ParallelStrategy... P, typed::ModelDescription M, typed::SystemDescription H>
constexpr strategy_choice fastest_fitting(const boost::hana::tuple<P...>&, const M& model, const H& system,
                                          bytes budget) {
  return fastest_fitting(std::array<strategy_spec, sizeof...(P)>{P::spec...}, model, system, budget);
}

/// The same choice with every candidate estimated in a constant expression of its own
/// (`typed::estimate_of`), so that each gets the compilers' full evaluation budget — for large
/// pipelines, where several estimates in one expression pass Clang's default step limit:
/// `constexpr auto best = llmsim::fastest_fitting_of<deepseek_v3, hw::h100_sxm, layout_a, layout_b>;`
template <const auto& Model, Accelerator H, ParallelStrategy... P>
inline constexpr strategy_choice fastest_fitting_of = detail::fastest_of(
    std::array<strategy_spec, sizeof...(P)>{P::spec...},
    std::array<const estimate_result*, sizeof...(P)>{&typed::estimate_of<Model, P, H>...}, hw::device_memory(H::spec));

/// The fastest fitting strategy of a whole `search_space` (search/space.hpp), enumerated in the
/// same canonical order as `llmsim::search` and priced by the one estimate, in a constant
/// expression: build the space inside it (it owns vectors), e.g.
/// `constexpr auto best = [] { search_space sp{.gpus = 8, .global_batch = 8, .seq_len = 4096}; sp.tp = {2, 4};
///                               return fastest_fitting(sp, llama3_8b, hw::h100_sxm{}); }();`
/// For small spaces: every candidate must pass validation (an invalid one is a compile error
/// showing its rule), and each estimate spends the compiler's evaluation budget. The budget is
/// device memory x (1 - memory_margin), as `llmsim::search` applies it; `index` is the
/// candidate's place in the enumeration.
template <typed::ModelDescription M, typed::SystemDescription H>
constexpr strategy_choice fastest_fitting(const search_space& sp, const M& model, const H& system,
                                          double memory_margin = 0.0) {
  const model_spec& m = typed::to_spec(model);
  const system_spec& sys = typed::to_spec(system);
  const double budget = static_cast<double>(hw::device_memory(sys).value) * (1.0 - memory_margin);
  const std::vector<search_layout> layouts = search_layouts(m, sp);
  const std::vector<fp8_recipe_kind> recipes = search_fp8_recipes(sp, sys);
  strategy_choice best;
  std::size_t index = 0;
  for (std::size_t li = 0; li < layouts.size(); ++li) {
    for_each_group(layouts[li], sp, recipes, li, [&](const search_point& g) {
      for (std::int64_t i = 0; i < recompute_variant_count(g, sp); ++i, ++index) {
        const strategy_spec s = to_strategy(recompute_variant(g, i), sp);
        estimate_result r = llmsim::estimate(m, s, sys);
        if (static_cast<double>(r.mem.peak_mem.value) > budget) continue;
        if (best.found && !(r.cost.duration_time_per_iter < best.result.cost.duration_time_per_iter)) continue;
        best.found = true;
        best.index = index;
        best.strategy = s;
        best.result = r;
      }
      return true;
    });
  }
  return best;
}

LLMSIM_END_NAMESPACE
