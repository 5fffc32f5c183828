/// \file llmsim/perf_llm.hpp
/// `llmsim::perf_llm`: the SimuMax-style workflow — configure a strategy, a model and a system,
/// run the estimate, read the cost and memory analyses.
///
/// ```cpp
/// llmsim::perf_llm perf;
/// perf.configure(strategy, model, system);   // validates once; throws llmsim::config_error
/// perf.run_estimate();
/// auto cost = perf.analysis_cost();          // duration_time_per_iter, mfu_6nd_with_attn, ...
/// auto mem = perf.analysis_mem();            // peak_mem, peak_path per stage, ...
/// ```
/// File paths are accepted by `llmsim::json::perf_llm` in <llmsim/json.hpp>.
#pragma once

#include <llmsim/estimate/estimate.hpp>

LLMSIM_BEGIN_NAMESPACE

class perf_llm {
 public:
  /// Takes the specs (copies) and validates them together. The system's shape tables are views:
  /// their storage must outlive this object (catalogue tables are static; see json::perf_llm).
  constexpr void configure(const strategy_spec& strategy, const model_spec& model, const system_spec& system) {
    validate(model, strategy, system);
    strategy_ = strategy;
    model_ = model;
    system_ = system;
    configured_ = true;
    estimated_ = false;
  }

  /// Runs the estimate of the configured job.
  constexpr void run_estimate() {
    if (!configured_) detail::report_error("llmsim::perf_llm", "", "run_estimate() needs configure() first");
    result_ = estimate_validated(model_, strategy_, system_);
    estimated_ = true;
  }

  /// Iteration time, its breakdown, MFU and throughput.
  [[nodiscard]] constexpr const cost_result& analysis_cost() const { return checked().cost; }
  /// Memory: the largest stage's peak and the reserved ratio; per-stage detail in `stages()`.
  [[nodiscard]] constexpr const mem_result& analysis_mem() const { return checked().mem; }
  /// Everything, per pipeline stage kind (first, middle, last).
  [[nodiscard]] constexpr const estimate_result& result() const { return checked(); }

  [[nodiscard]] constexpr const strategy_spec& strategy() const { return strategy_; }
  [[nodiscard]] constexpr const model_spec& model() const { return model_; }
  [[nodiscard]] constexpr const system_spec& system() const { return system_; }

 private:
  [[nodiscard]] constexpr const estimate_result& checked() const {
    if (!estimated_) detail::report_error("llmsim::perf_llm", "", "analysis needs run_estimate() first");
    return result_;
  }
  strategy_spec strategy_{};
  model_spec model_{};
  system_spec system_{};
  estimate_result result_{};
  bool configured_ = false;
  bool estimated_ = false;
};

LLMSIM_END_NAMESPACE
