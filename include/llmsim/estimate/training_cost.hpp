/// \file llmsim/estimate/training_cost.hpp
/// What a whole training run costs at the estimated iteration time: steps, wall-clock days,
/// GPU-hours and (with the user's price; there is no default price) dollars to train on N tokens.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/spec/strategy.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

LLMSIM_BEGIN_NAMESPACE

/// Ranges a real run can have: up to 10^18 tokens (a hundred thousand times today's largest
/// pretraining sets) and up to $10,000 per GPU-hour.
namespace training_cost_limits {
inline constexpr double max_tokens = 1e18;
inline constexpr double max_usd_per_gpu_hour = 1e4;
}  // namespace training_cost_limits

/// A training run of `tokens` tokens in steps of the strategy's global batch.
struct training_run_cost {
  double tokens = 0;           ///< asked for
  double tokens_per_step = 0;  ///< seq_len x global batch size
  double steps = 0;      ///< ceil(tokens / tokens_per_step): every token seen, a last partial batch runs a whole step
  double seconds = 0;    ///< steps x iteration time (one job, no restarts or evaluation)
  double days = 0;       ///< seconds / 86,400
  double gpu_hours = 0;  ///< seconds x world_size / 3,600
  std::optional<double> usd_per_gpu_hour;
  std::optional<double> usd;  ///< gpu_hours x usd_per_gpu_hour, only when a price is given
};

/// The run of `tokens` tokens in steps of `tokens_per_step` tokens taking `iteration_seconds` each
/// on `world_size` GPUs. Refuses tokens outside (0, max_tokens] and a price outside
/// [0, max_usd_per_gpu_hour].
constexpr training_run_cost training_cost(double iteration_seconds, std::int64_t world_size, double tokens_per_step,
                                          double tokens, std::optional<double> usd_per_gpu_hour = {}) {
  constexpr std::string_view api = "llmsim::training_cost";
  using namespace training_cost_limits;
  if (!(tokens > 0 && tokens <= max_tokens))
    detail::report_error(api, "tokens", "tokens={} must be in (0, {}]", tokens, max_tokens);
  if (usd_per_gpu_hour && !(*usd_per_gpu_hour >= 0 && *usd_per_gpu_hour <= max_usd_per_gpu_hour))
    detail::report_error(api, "usd_per_gpu_hour", "usd_per_gpu_hour={} must be in [0, {}]", *usd_per_gpu_hour,
                         max_usd_per_gpu_hour);
  training_run_cost c;
  c.tokens = tokens;
  c.tokens_per_step = tokens_per_step;
  const double whole = static_cast<double>(static_cast<std::int64_t>(tokens / tokens_per_step));
  c.steps = whole * tokens_per_step < tokens ? whole + 1 : whole;
  c.seconds = c.steps * iteration_seconds;
  c.days = c.seconds / 86400.0;
  c.gpu_hours = c.seconds * static_cast<double>(world_size) / 3600.0;
  c.usd_per_gpu_hour = usd_per_gpu_hour;
  if (usd_per_gpu_hour) c.usd = c.gpu_hours * *usd_per_gpu_hour;
  return c;
}

/// The same at the iteration time and tokens per iteration of `r`, the estimate of strategy `s`.
constexpr training_run_cost training_cost(const estimate_result& r, const strategy_spec& s, double tokens,
                                          std::optional<double> usd_per_gpu_hour = {}) {
  return training_cost(r.cost.duration_time_per_iter.value, s.world_size, r.cost.all_tokens_per_iter, tokens,
                       usd_per_gpu_hour);
}

LLMSIM_END_NAMESPACE
