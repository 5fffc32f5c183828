/// \file llmsim/llm_analysis.hpp
/// `llmsim::llm_analysis`: llm-analysis (github.com/cli99/llm-analysis, commit d841e40) reproduced
/// as constexpr C++ — its model / GPU / data-type configs, `training(...)` and `inference(...)` with
/// its parameter names, returning its summary with its keys. It is a separate analysis, kept as
/// llm-analysis computes it (its quirks included, marked "llm-analysis quirk"); llmsim's own
/// estimate does not use it. Config files load with <llmsim/json/llm_analysis.hpp>.
#pragma once

#include <llmsim/llm_analysis/analysis.hpp>
#include <llmsim/llm_analysis/configs.hpp>
#include <llmsim/llm_analysis/inference.hpp>
#include <llmsim/llm_analysis/latency.hpp>
#include <llmsim/llm_analysis/setup.hpp>
#include <llmsim/llm_analysis/summary.hpp>
#include <llmsim/llm_analysis/training.hpp>
