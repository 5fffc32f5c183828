/// \file llmsim/json/megatron_bridge.hpp
/// Real Megatron-Bridge pre-training runs (a `megatron_bridge_cases.json` document: "rows" copied
/// from that project's performance tables) mapped to llmsim specs and estimated: each row becomes a
/// catalogue model and system plus a strategy written as JSON — the printed parallel sizes, the
/// precision recipe and the secondary settings of Megatron-Bridge's performance recipes
/// (configs/megatron_bridge/recipes.json) — read by the same loader as `--set` overrides, with
/// unknown fields refused, so that a row needing a field llmsim does not have yet is reported with
/// the loader's error instead of estimated without it.
///
/// ```cpp
/// const auto recipes = llmsim::json::read_file("configs/megatron_bridge/recipes.json");
/// const auto job = llmsim::json::megatron_bridge::map_row(doc["rows"][0], recipes);
/// const auto r = llmsim::json::megatron_bridge::estimate_row(doc["rows"][0], recipes);
/// ```
#pragma once

#include <llmsim/json.hpp>
#include <llmsim/validation/megatron_bridge_flops.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace json {
namespace megatron_bridge {

namespace mb = llmsim::megatron_bridge;

/// The start of the "format" string of a Megatron-Bridge cases document.
inline constexpr std::string_view cases_format = "llmsim real-run cases from Megatron-Bridge performance docs";

/// Whether `doc` is a Megatron-Bridge cases document (its "format" string says so).
inline bool is_cases_document(const value& doc) {
  if (!doc.is_object() || !doc.contains("format") || !doc["format"].is_string()) return false;
  return doc["format"].get<std::string>().rfind(cases_format, 0) == 0;
}

namespace detail {
inline bool is_count(const value& v, std::int64_t minimum) {
  return v.is_number_integer() && v.get<std::int64_t>() >= minimum && v.get<std::int64_t>() <= max_dimension;
}
/// A printed size that may be null (not stated): null or a count >= 0.
inline std::int64_t optional_size(const value& row, const char* key) {
  if (!row.contains(key) || row[key].is_null()) return 1;
  return row[key].get<std::int64_t>();
}
}  // namespace detail

/// Checks the fields of row `at` (a JSON pointer such as "/rows/3") that the mapping reads, so
/// that a malformed row is an input error naming its path and rule, not a failure of the tool.
inline void check_row(const value& row, const std::string& at, const std::string& file) {
  const auto refuse = [&](const std::string& key, const std::string& rule) {
    throw config_error("llmsim validate", at + key, at + key + ": " + rule, file);
  };
  using json::detail::describe;
  if (!row.is_object()) refuse("", "expected an object, got " + describe(row));
  for (const char* key : {"id", "model", "gpu_type", "precision", "release"}) {
    if (!row.contains(key)) refuse(std::string("/") + key, "required field is missing");
    if (!row[key].is_string()) refuse(std::string("/") + key, "expected a string, got " + describe(row[key]));
  }
  for (const char* key : {"num_gpus", "gbs", "mbs", "seq_len", "tp", "pp"}) {
    if (!row.contains(key)) refuse(std::string("/") + key, "required field is missing");
    if (!detail::is_count(row[key], 1))
      refuse(std::string("/") + key, "expected an integer in [1, 2^31 - 1], got " + describe(row[key]));
  }
  for (const char* key : {"cp", "vp", "ep", "etp"})
    if (row.contains(key) && !row[key].is_null() && !detail::is_count(row[key], 1))
      refuse(std::string("/") + key, "expected null or an integer in [1, 2^31 - 1], got " + describe(row[key]));
  if (row.contains("fsdp") && !row["fsdp"].is_null() && !detail::is_count(row["fsdp"], 0))
    refuse("/fsdp", "expected null or an integer in [0, 2^31 - 1], got " + describe(row["fsdp"]));
  for (const char* key : {"tokens_per_sec_per_gpu", "model_tflops_per_sec_per_gpu"}) {
    if (!row.contains(key)) refuse(std::string("/") + key, "required field is missing");
    if (!row[key].is_number() || !(row[key].get<double>() > 0))
      refuse(std::string("/") + key, "expected a positive number, got " + describe(row[key]));
  }
}

/// Checks a cases document's "rows" and every row (see `check_row`); `file` names it in errors.
inline void check_document(const value& doc, const std::string& file) {
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array())
    throw config_error("llmsim validate", "/rows", "/rows: expected an array of rows", file);
  for (std::size_t i = 0; i < doc["rows"].size(); ++i) check_row(doc["rows"][i], "/rows/" + std::to_string(i), file);
}

/// The revision of Megatron-Bridge's FLOP formula a release's container ran: NeMo 26.02 and
/// 26.02.01 predate commit baa0259bd (2026-05-28); 26.06 (first published 2026-06-22) and later
/// carry it.
inline mb::flop_formula formula_of_release(std::string_view release) {
  return release.rfind("26.02", 0) == 0 ? mb::flop_formula::silu_gated_only : mb::flop_formula::current;
}

/// One row as llmsim specs: catalogue names, overrides and the complete strategy object; or why not.
struct row_job {
  std::string id;
  std::string refused;  ///< non-empty: the row is not estimated, for this reason
  std::string model;    ///< catalogue model name
  std::string system;   ///< catalogue system name
  value model_overrides = value::object();
  value strategy = value::object();
  std::vector<std::string> not_modelled;  ///< recipe settings llmsim prices differently (shown with the row)
  std::optional<mb::flop_inputs> flops;   ///< the FLOP formula's inputs when the model is in the catalogue
  mb::flop_formula formula = mb::flop_formula::current;
};

namespace detail {
/// `recipes[section][key]`, or null.
inline const value& entry(const value& recipes, const char* section, const std::string& key) {
  static const value none;
  if (!recipes.contains(section) || !recipes[section].is_object() || !recipes[section].contains(key)) return none;
  return recipes[section][key];
}
inline void merge_strategy(value& strategy, const value& from) {
  if (from.is_object() && from.contains("strategy")) strategy.update(from["strategy"]);
}
inline void append_strings(std::vector<std::string>& out, const value& from) {
  if (!from.is_object() || !from.contains("not_modelled")) return;
  for (const auto& s : from["not_modelled"]) out.push_back(s.get<std::string>());
}

/// The parallel sizes and batch of a checked row; an empty string when they are consistent.
inline std::string base_strategy(const value& row, value& s) {
  const std::int64_t gpus = row["num_gpus"].get<std::int64_t>(), tp = row["tp"].get<std::int64_t>();
  const std::int64_t pp = row["pp"].get<std::int64_t>(), cp = optional_size(row, "cp");
  const std::int64_t gbs = row["gbs"].get<std::int64_t>(), mbs = row["mbs"].get<std::int64_t>();
  if (gpus % (tp * pp * cp) != 0)
    return "num_gpus=" + std::to_string(gpus) + " is not a multiple of tp * pp * cp = " + std::to_string(tp * pp * cp);
  const std::int64_t dp = gpus / (tp * pp * cp);  // Megatron's data-parallel size
  if (gbs % (mbs * dp) != 0)
    return "gbs=" + std::to_string(gbs) + " is not a multiple of mbs * dp = " + std::to_string(mbs * dp);
  s.update({{"seq_len", row["seq_len"]},
            {"micro_batch_size", mbs},
            {"micro_batch_num", gbs / (mbs * dp)},  // gradient-accumulation steps
            {"world_size", gpus},
            {"tp_size", tp},
            {"pp_size", pp},
            {"cp_size", cp},
            {"ep_size", optional_size(row, "ep")},
            {"etp_size", optional_size(row, "etp")},
            {"interleaving_size", optional_size(row, "vp")},
            {"enable_sequence_parallel", tp > 1}});  // Megatron-Bridge recipes pair SP with TP > 1
  return {};
}

/// Selective recompute of Megatron modules (--recompute-granularity selective --recompute-modules).
inline value recompute_modules(const value& modules) {
  return {{"enable_recompute", true},
          {"recompute_granularity", "selective_recompute"},
          {"recompute_layer_num", max_dimension},
          {"megatron_recompute", true},
          {"megatron_recompute_modules", modules}};
}

/// The model-specific part: catalogue model, overrides, recompute, layout, FLOP inputs.
inline void model_part(row_job& job, const value& row, const value& m) {
  const std::string gpu = row["gpu_type"].get<std::string>();
  job.model = m["model"].get<std::string>();
  if (m.contains("model_overrides")) job.model_overrides = m["model_overrides"];
  merge_strategy(job.strategy, m);
  append_strings(job.not_modelled, m);
  if (m.contains("recompute_by_gpu") && m["recompute_by_gpu"].contains(gpu))
    job.strategy.update(recompute_modules(m["recompute_by_gpu"][gpu]));
  const std::string precision = row["precision"].get<std::string>();
  if (m.contains("strategy_by_precision") && m["strategy_by_precision"].contains(precision))
    job.strategy.update(m["strategy_by_precision"][precision]);
  const std::string run = row["release"].get<std::string>() + " " + gpu + " " + precision;
  if (m.contains("strategy_by_run") && m["strategy_by_run"].contains(run))
    job.strategy.update(m["strategy_by_run"][run]);
  // Megatron-LM refuses the combined 1F1B step with pp > 1 and no virtual pipeline
  // (transformer_config.py): a row of that layout ran without it.
  if (job.strategy.value("overlap_moe_expert_parallel_comm", false) && row["pp"].get<std::int64_t>() > 1 &&
      optional_size(row, "vp") < 2) {
    job.strategy["overlap_moe_expert_parallel_comm"] = false;
    job.strategy["delay_wgrad_compute"] = false;  // Megatron-LM asserts it needs the overlap
    job.not_modelled.push_back(
        "the current recipe's overlap_moe_expert_parallel_comm left off: Megatron-LM refuses it with pp > 1 and no "
        "virtual pipeline, this row's layout");
  }
  const std::int64_t stages = row["pp"].get<std::int64_t>() * optional_size(row, "vp");
  if (m.contains("pipeline_layouts") && stages > 1) {
    const std::string key = std::to_string(stages);
    if (!m["pipeline_layouts"].contains(key))
      job.refused = "no pipeline layout for " + key + " pipeline stages in the recipe file";
    else
      job.strategy["pipeline_model_parallel_layout"] = m["pipeline_layouts"][key];
  }
  // A recipe's window is the model's (window_attn_skip_freq: every k-th layer full; 1: none
  // windowed), unless the catalogue model has its own.
  const std::int64_t skip = job.flops ? job.flops->window_skip_freq : 0;
  if (job.flops && job.flops->window > 0 && !job.flops->model.sliding_window && skip != 1) {
    job.model_overrides["sliding_window"] = job.flops->window;
    job.model_overrides["sliding_window_pattern"] = skip >= 2 ? skip : 0;
  }
}

/// The FLOP formula's inputs for a row of recipe entry `m` naming a catalogue model (refused
/// models too: their printed FLOPs still check the formula).
inline std::optional<mb::flop_inputs> flop_inputs_of(const value& row, const value& m) {
  if (!m.is_object() || !m.contains("model")) return std::nullopt;
  const model_spec* spec = catalogue::find_model(m["model"].get<std::string>());
  if (spec == nullptr) return std::nullopt;
  mb::flop_inputs in{
      .model = *spec, .seq_len = row["seq_len"].get<std::int64_t>(), .tp_size = row["tp"].get<std::int64_t>()};
  if (m.contains("model_overrides")) in.mtp_num_layers = m["model_overrides"].value("mtp_num_layers", std::int64_t{0});
  if (m.contains("flops")) {
    const value& f = m["flops"];
    in.silu_gated = f.value("silu_gated", true);
    in.window = f.value("window", std::int64_t{0});
    in.window_skip_freq = f.value("window_skip_freq", std::int64_t{0});
  }
  return in;
}
}  // namespace detail

/// Maps a checked row (see `check_row`) with the recipe file `recipes`
/// (configs/megatron_bridge/recipes.json).
inline row_job map_row(const value& row, const value& recipes) {
  row_job job;
  job.id = row["id"].get<std::string>();
  job.formula = formula_of_release(row["release"].get<std::string>());
  const std::string model = row["model"].get<std::string>(), gpu = row["gpu_type"].get<std::string>();
  const std::string precision = row["precision"].get<std::string>();
  const value& m = detail::entry(recipes, "models", model);
  const value& sys = detail::entry(recipes, "systems", gpu);
  const value& prec = detail::entry(recipes, "precisions", precision);
  job.flops = detail::flop_inputs_of(row, m);
  if (m.is_null())
    job.refused = "model \"" + model + "\" has no entry in the recipe file";
  else if (m.contains("refuse"))
    job.refused = m["refuse"].get<std::string>();
  else if (sys.is_null())
    job.refused = "gpu_type \"" + gpu + "\" has no catalogue system in the recipe file";
  else if (prec.is_null())
    job.refused = "precision \"" + precision + "\" has no entry in the recipe file";
  if (!job.refused.empty()) return job;
  job.system = sys.get<std::string>();
  detail::merge_strategy(job.strategy, recipes.value("common", value::object()));
  detail::append_strings(job.not_modelled, recipes.value("common", value::object()));
  job.refused = detail::base_strategy(row, job.strategy);
  if (!job.refused.empty()) return job;
  detail::merge_strategy(job.strategy, prec);
  if (row.value("fsdp", value()).is_number() && row["fsdp"].get<std::int64_t>() > 0)
    detail::merge_strategy(job.strategy, recipes.value("fsdp", value::object()));
  if (detail::optional_size(row, "cp") > 1)
    detail::merge_strategy(job.strategy, recipes.value("context_parallel", value::object()));
  detail::model_part(job, row, m);
  // TE userbuffers TP overlap: the recipe file's settings for the row's precision, on a model that
  // runs it, with tensor parallelism only (comm_overlap.py _get_model_comm_overlap_cfgs turns it
  // off below tp 2).
  const value ub = recipes.value("tp_comm_overlap", value::object());
  const value by_precision = ub.value("by_precision", value::object());
  if (m.value("tp_comm_overlap", false) && row["tp"].get<std::int64_t>() > 1 && by_precision.contains(precision)) {
    job.strategy.update(by_precision[precision]);
    detail::append_strings(job.not_modelled, ub);
  }
  return job;
}

/// A row's prediction next to its printed figures.
struct row_result {
  row_job job;
  std::string error;   ///< non-empty: not estimated (a refusal, or the loader's or the estimate's error)
  std::string reason;  ///< the error without the row's name: the refusal, or the rule (a JSON path names its spec)
  double iter_time_s = 0;
  double tokens_per_sec_per_gpu = 0;        ///< gbs * seq_len / (iteration time * GPUs)
  double model_tflops_per_sec_per_gpu = 0;  ///< tokens/s/GPU x Megatron-Bridge's FLOPs per token
  double model_gflop_per_token = 0;         ///< Megatron-Bridge's formula for this row's release
  double real_tokens_per_sec_per_gpu = 0;
  double real_model_tflops_per_sec_per_gpu = 0;
  /// The estimate's per-GPU peak (allocated) and device memory, GiB: a published run that the
  /// estimate does not fit points at a setting its row lacks, or at the memory model.
  double peak_mem_gib = 0, device_mem_gib = 0;
  bool fits = true;
  [[nodiscard]] bool estimated() const { return error.empty(); }
};

/// Maps and estimates one checked row. Unknown fields (of the recipe file, or features another
/// llmsim version adds) are refused by the loader (strict), so they end in `error`, never ignored.
/// `price_on` replaces the recipe's catalogue system (a system file or another catalogue name).
inline row_result estimate_row(const value& row, const value& recipes, const system_choice& price_on = {}) {
  row_result r;
  r.job = map_row(row, recipes);
  if (price_on && !r.job.system.empty()) r.job.system = price_on(r.job.system);
  r.real_tokens_per_sec_per_gpu = row["tokens_per_sec_per_gpu"].get<double>();
  r.real_model_tflops_per_sec_per_gpu = row["model_tflops_per_sec_per_gpu"].get<double>();
  if (r.job.flops) r.model_gflop_per_token = mb::model_flops_per_token(*r.job.flops, r.job.formula) / 1e9;
  if (!r.job.refused.empty()) {
    r.error = r.reason = r.job.refused;
    return r;
  }
  std::string stage = "model";  // which spec a loader error's JSON path is in
  try {
    const load_options strict{.strict = true};
    const model_spec model = load_model(r.job.model, strict, r.job.model_overrides);
    stage = "strategy";
    const strategy_spec strategy = parse_strategy(r.job.strategy, "megatron-bridge row " + r.job.id, strict);
    stage = "system";
    const system_config system = load_system(r.job.system, strict);
    stage = {};
    perf_llm perf;
    perf.configure(strategy, model, system);
    perf.run_estimate();
    r.iter_time_s = perf.analysis_cost().duration_time_per_iter.value;
    const mem_result& mem = perf.analysis_mem();
    r.peak_mem_gib = mem.peak_mem.gib();
    r.device_mem_gib = mem.device_mem.gib();
    r.fits = mem.fits;
    const double tokens = row["gbs"].get<double>() * row["seq_len"].get<double>();
    r.tokens_per_sec_per_gpu = tokens / (r.iter_time_s * row["num_gpus"].get<double>());
    r.model_tflops_per_sec_per_gpu = r.tokens_per_sec_per_gpu * r.model_gflop_per_token / 1e3;
  } catch (const config_error& e) {
    r.error = e.what();
    r.reason = e.rule().rfind('/', 0) == 0 ? stage + e.rule() : e.rule();
  }
  return r;
}

}  // namespace megatron_bridge
}  // namespace json
LLMSIM_END_NAMESPACE
