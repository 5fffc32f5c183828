// `llmsim search`: the exhaustive strategy search on the command line (llmsim/search.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmsim_cli {

/// A command line CLI11 accepted but that cannot run (exit status 2), e.g. a malformed --fix.
class search_usage_error : public std::runtime_error {
 public:
  search_usage_error(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

struct search_args {
  std::string model, system;
  std::int64_t gpus = 0;
  std::optional<std::int64_t> global_batch, tokens_per_step;
  std::int64_t seq_len = 0;
  std::size_t top = 10;
  double memory_margin = 0.05;
  std::string objective = "time";
  std::vector<std::string> fix, allow;
  std::string format = "text";
  bool pareto = false;
  unsigned threads = 2;
  std::optional<double> tokens, usd_per_gpu_hour;  ///< price a training run per candidate
  std::optional<std::string> html_file;            ///< -o: also write the HTML report there
};

/// Refuses nan and inf, which CLI::Range lets through (its comparisons are false for nan).
inline const CLI::Validator finite_number(
    [](std::string& text) -> std::string {
      try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        return std::isfinite(v) ? std::string{} : "must be a finite number, got " + text;
      } catch (const std::exception&) { return "must be a number, got " + text; }
    },
    "FINITE");

/// --tokens N and --usd-per-gpu-hour X (perf and search): a training run's days, GPU-hours and,
/// with the user's price (there is no default), dollars.
inline void add_training_cost_options(CLI::App* cmd, std::optional<double>& tokens, std::optional<double>& usd) {
  auto* t = cmd->add_option("--tokens", tokens,
                            "Also price a training run on this many tokens (e.g. 15e12): steps of the global batch, "
                            "wall-clock days, GPU-hours")
                ->check(finite_number)
                ->check(CLI::Range(1.0, 1e18));
  cmd->add_option("--usd-per-gpu-hour", usd,
                  "Price of one GPU-hour in US dollars, for the run's cost (no default: a price is always yours)")
      ->check(finite_number)
      ->check(CLI::Range(0.0, 1e4))
      ->needs(t);
}

/// Adds the `search` subcommand to `app`, filling `a`.
CLI::App* add_search_command(CLI::App& app, search_args& a);

/// Runs it: 0 found, 3 nothing fits (exit statuses of main.cpp). Throws llmsim::config_error
/// (bad model or system, exit 1) and search_usage_error (exit 2).
int run_search(const search_args& a);

}  // namespace llmsim_cli
