/// \file llmsim/llmsim.hpp
/// The llmsim core: units, specs and their validation, the estimate (costs, schedule, memory) and
/// the perf_llm workflow. Needs only the standard library and Boost.Hana; file loading lives in
/// <llmsim/json.hpp>.
#pragma once

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/network_cost.hpp>
#include <llmsim/cost/op_cost.hpp>
#include <llmsim/cost/step_cost.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/estimate/inference.hpp>
#include <llmsim/estimate/model_counts.hpp>
#include <llmsim/estimate/trace.hpp>
#include <llmsim/estimate/training_cost.hpp>
#include <llmsim/llm_analysis.hpp>
#include <llmsim/perf_llm.hpp>
#include <llmsim/program/dense.hpp>
#include <llmsim/program/layer.hpp>
#include <llmsim/program/leaf.hpp>
#include <llmsim/program/moe.hpp>
#include <llmsim/program/op.hpp>
#include <llmsim/program/shape_key.hpp>
#include <llmsim/report.hpp>
#include <llmsim/schedule/dualpipev.hpp>
#include <llmsim/schedule/engine.hpp>
#include <llmsim/schedule/interleaved.hpp>
#include <llmsim/schedule/one_f_one_b.hpp>
#include <llmsim/schedule/pass.hpp>
#include <llmsim/search.hpp>
#include <llmsim/spec/fields.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/spec/validate.hpp>
#include <llmsim/typed.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>
#include <llmsim/version.hpp>
