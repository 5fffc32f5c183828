// The llmsim command line tool:
//   llmsim check    [--system S] [--strategy T] [--model M] [--set key=value]... [--strict] [--allow-oom] [--format text|json]
//   llmsim perf     --system S --strategy T --model M [--set key=value]... [--strict] [--allow-oom] [--format text|json]
//   llmsim validate CASES.json [--recipes FILE] [--system [CASE_SYSTEM=]S]... [--format text|json|csv]
//   llmsim report   --system S --strategy T --model M -o REPORT.html [--set key=value]... [--strict] [--allow-oom]
//   llmsim bench    --system S --strategy T --model M [--set key=value]... [--strict] [--iterations N] [--format text|json]
//   llmsim list     [--format text|json]
//   llmsim import-hf CONFIG.json [-o MODEL.json]
//   llmsim llm-analysis train|infer --model_name M --gpu_name G [llm-analysis's flags] [--format text|json]
//   llmsim search   --model M --system S --gpus N (--global-batch B | --tokens-per-step T) --seq L [...]
// S, T, M are config files (SimuMax format) or catalogue names (`llmsim list`). Exit statuses:
// `exit_status_help` below (also in --help and README.md).

#include <llmsim/json.hpp>
#include <llmsim/json/html_report.hpp>
#include <llmsim/json/megatron_bridge.hpp>

#include "infer_command.hpp"
#include "llm_analysis_command.hpp"
#include "search_command.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#ifndef LLMSIM_MB_RECIPES
#define LLMSIM_MB_RECIPES "configs/megatron_bridge/recipes.json"
#endif

namespace {

namespace lj = llmsim::json;
namespace fs = std::filesystem;

/// Shown by --version: a build without optimisation (CMake's empty build type) estimates far slower.
#ifdef __OPTIMIZE__
constexpr const char* build_kind = "optimised build";
#else
constexpr const char* build_kind = "unoptimised build: configure with -DCMAKE_BUILD_TYPE=Release for speed";
#endif

/// Exit statuses; `exit_status_help` documents them (the --help footer, README.md's table).
enum exit_status : int {
  exit_success = 0,
  exit_input_error = 1,
  exit_usage_error = 2,
  exit_does_not_fit = 3,
  exit_internal_error = 4,
  exit_not_all_estimated = 5
};

constexpr const char* exit_status_help =
    "Exit status:\n"
    "  0  success\n"
    "  1  config or input error (the message names the file, the field and the rule)\n"
    "  2  command-line usage error (unknown option, missing argument, malformed --set)\n"
    "  3  the estimated per-GPU peak memory exceeds device memory (perf; report, which still\n"
    "     writes the page; check given --system,\n"
    "     --strategy and --model; llm-analysis train), unless --allow-oom; llm-analysis infer:\n"
    "     the weights, activations or KV cache do not fit; search: no strategy of the space fits (the\n"
    "     message names the smallest shortfall); infer: the batch's weights, KV cache and activations\n"
    "     exceed the usable device memory\n"
    "  4  unexpected internal error\n"
    "  5  validate: some cases could not be estimated (each is listed with its reason; the others\n"
    "     are compared as usual)\n"
    "With --format json an error also prints {\"error\": {\"message\", \"field\", \"file\", ...},\n"
    "\"exit_status\": N} on stdout; the message always goes to stderr.";

/// A command line CLI11 accepted but that cannot run (exit status 2): a malformed --set.
class usage_error : public std::runtime_error {
 public:
  usage_error(std::string field, const std::string& message) : std::runtime_error(message), field_(std::move(field)) {}
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// `infer` takes its numbers from flags, so a rule one breaks (inference.batch=0) is a usage error
/// naming the flag (--batch), not a config error; the model's and system's files keep exit 1.
int run_infer_command(llmsim_cli::infer_args& a) {
  try {
    return llmsim_cli::run_infer(a, exit_does_not_fit);
  } catch (const llmsim::config_error& e) {
    constexpr std::string_view prefix = "inference.";
    if (!e.file().empty() || e.field().rfind(prefix, 0) != 0) throw;
    std::string flag = "--" + e.field().substr(prefix.size());
    std::replace(flag.begin() + 2, flag.end(), '_', '-');
    if (flag == "--cuda-graphs") flag = "--no-cuda-graphs";
    throw usage_error(flag, flag + ": " + e.rule());
  }
}

/// JSON text that stays valid whatever bytes a message quotes.
std::string dump(const lj::value& v, int indent = 2) {
  return v.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// `{"message", "field", "file", "api", "rule"}` of an error: all a config_error carries.
lj::value error_object(const std::exception& e, const std::string& message) {
  lj::value out = {{"message", message}, {"field", ""}, {"file", ""}};
  if (const auto* c = dynamic_cast<const llmsim::config_error*>(&e)) {
    out["field"] = c->field();
    out["file"] = c->file();
    out["api"] = c->api();
    out["rule"] = c->rule();
  } else if (const auto* u = dynamic_cast<const usage_error*>(&e)) {
    out["field"] = u->field();
  }
  return out;
}

/// Reports a failed command: "error: ..." on stderr and, for --format json, the error object on stdout.
int report_failure(bool json_out, int status, const std::exception& e, const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  if (json_out)
    std::printf("%s\n", dump(lj::value{{"error", error_object(e, message)}, {"exit_status", status}}).c_str());
  return status;
}

/// `--set` overrides split by the spec they address: `model.layer_num=12` goes to the model.
struct overrides {
  lj::value model = lj::value::object();
  lj::value strategy = lj::value::object();
  lj::value system = lj::value::object();
};

overrides parse_sets(const std::vector<std::string>& sets) {
  overrides out;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw usage_error("--set", "--set \"" + s + "\" must have the form spec.key=value, e.g. model.layer_num=12");
    const std::string key = s.substr(0, eq);
    lj::value v;
    try {
      v = lj::override_value(std::string_view(s).substr(eq + 1));
    } catch (const llmsim::config_error& e) {  // a JSON value that repeats a key
      throw usage_error("--set", "--set " + key + ": " + e.rule());
    }
    const auto dot = key.find('.');
    const std::string spec = key.substr(0, dot);
    const std::string rest = dot == std::string::npos ? std::string() : key.substr(dot + 1);
    lj::value* target = spec == "model"      ? &out.model
                        : spec == "strategy" ? &out.strategy
                        : spec == "system"   ? &out.system
                                             : nullptr;
    if (target == nullptr || rest.empty())
      throw usage_error("--set", "--set key \"" + key + "\" must start with model., strategy. or system.");
    try {
      lj::merge_path(*target, rest, v, "--set " + key);
    } catch (const llmsim::config_error& e) {  // an empty component, or a path through a value
      throw usage_error("--set", "--set " + key + ": " + e.rule());
    }
  }
  return out;
}

/// Strategy names shown by `llmsim list`.
constexpr std::array<const char*, 4> strategy_examples{"tp2_pp1_dp4", "tp4_pp4_dp4_mbc32", "tp8_dp2_mbs2_seq8192_full",
                                                       "pp16_dp8_ep8_mbc32_first1"};

std::string catalogue_listing() {
  std::string out = "models:";
  for (const auto& m : llmsim::catalogue::models)
    out.append(1, ' ').append(m.name);  // append: GCC 12 -Wrestrict misfires on " " + string
  out += "\nsystems:";
  for (const auto& s : llmsim::catalogue::systems) out.append(1, ' ').append(s.name);
  out += "\nstrategies: compact names such as";
  for (const char* example : strategy_examples) out.append(1, ' ').append(example);
  out += ";\n  tokens separated by '_' or '-', world_size = tp * pp * cp * dp:";
  std::size_t width = 0;  // the longest token and a space: the meanings line up
  for (const auto& t : llmsim::catalogue::strategy_name_tokens) width = std::max(width, t.token.size() + 1);
  for (const auto& t : llmsim::catalogue::strategy_name_tokens) {
    std::string token(t.token);
    token.resize(width, ' ');
    out.append("\n    ").append(token).append(t.meaning);
  }
  return out;
}

/// `llmsim list --format json`: the catalogue's models and systems with their key fields, and the
/// strategy-name grammar.
lj::value catalogue_json() {
  lj::value models = lj::value::array();
  for (const auto& [name, spec] : llmsim::catalogue::models) {
    const lj::value all = lj::to_json(*spec);
    lj::value m = {
        {"name", name}, {"model_name", all["model_name"]}, {"model_type", llmsim::is_moe(*spec) ? "moe" : "dense"}};
    for (const char* key :
         {"attention_type", "hidden_size", "layer_num", "head_num", "kv_head_num", "head_size", "intermediate_size",
          "vocab_size", "expert_num", "topk", "moe_ffn_hidden_size", "dense_layers"})
      m[key] = all[key];
    models.push_back(m);
  }
  lj::value systems = lj::value::array();
  for (const auto& [name, spec] : llmsim::catalogue::systems) {
    const auto& fp8 = spec->op(llmsim::compute_kind::fp8_matmul);
    lj::value networks = lj::value::array();
    for (std::size_t i = 0; i < spec->network_count; ++i)
      networks.push_back(std::string(spec->networks[i].name.view()));
    systems.push_back({{"name", name},
                       {"sys_name", std::string(spec->sys_name.view())},
                       {"backend", std::string(spec->accelerator.backend.view())},
                       {"mem_gbs", spec->accelerator.mem_gbs},
                       {"num_per_node", spec->num_per_node},
                       {"matmul_tflops", spec->op(llmsim::compute_kind::matmul).tflops},
                       {"fp8_matmul_tflops", fp8.present ? lj::value(fp8.tflops) : lj::value(nullptr)},
                       {"hbm_gbps", spec->memory(llmsim::memory_kind::default_kind).gbps},
                       {"networks", networks}});
  }
  lj::value tokens = lj::value::array();
  for (const auto& t : llmsim::catalogue::strategy_name_tokens)
    tokens.push_back({{"token", t.token}, {"meaning", t.meaning}});
  llmsim::strategy_spec defaults{};
  (void)llmsim::catalogue::parse_strategy_name("dp1", defaults);  // every field a name leaves out
  lj::value strategy_names = {{"separators", {"_", "-"}},
                              {"world_size", "tp * pp * cp * dp"},
                              {"tokens", tokens},
                              {"defaults",
                               {{"seq_len", defaults.seq_len},
                                {"micro_batch_size", defaults.micro_batch_size},
                                {"micro_batch_num", defaults.micro_batch_num},
                                {"zero_state", defaults.zero_state},
                                {"enable_sequence_parallel", defaults.enable_sequence_parallel}}},
                              {"examples", strategy_examples}};
  return {{"models", models}, {"systems", systems}, {"strategy_names", strategy_names}};
}

void print_fields(const lj::value& obj, const std::string& prefix) {
  for (const auto& item : obj.items()) {
    if (item.value().is_object())
      print_fields(item.value(), prefix + item.key() + ".");
    else
      std::printf("  %s%s = %s\n", prefix.c_str(), item.key().c_str(), item.value().dump().c_str());
  }
}

/// The system printed without its efficiency tables (their size is shown instead).
lj::value system_summary(const llmsim::system_spec& sys) {
  lj::value v = lj::to_json(sys);
  for (auto& op : v["accelerator"]["op"].items()) {
    auto& o = op.value();
    const auto n = o.contains("accurate_efficient_factor") ? o["accurate_efficient_factor"].size() : 0;
    o.erase("accurate_efficient_factor");
    o["accurate_efficient_factor_entries"] = n;
  }
  return v;
}

struct spec_args {
  std::optional<std::string> system, strategy, model;
  std::vector<std::string> sets;
  bool strict = false;
  bool allow_oom = false;
  std::string format = "text";
  std::optional<std::string> trace_file;
  std::optional<double> tokens, usd_per_gpu_hour;  ///< perf: price a training run on that many tokens
};

void add_spec_options(CLI::App* cmd, spec_args& a, bool required) {
  auto* s = cmd->add_option("--system", a.system, "System: config file (SimuMax format) or catalogue name");
  auto* t = cmd->add_option("--strategy", a.strategy, "Strategy: config file or compact name (tp2_pp1_dp4_mbc8)");
  auto* m = cmd->add_option("--model", a.model, "Model: config file or catalogue name");
  if (required) {
    s->required();
    t->required();
    m->required();
  }
  cmd->add_option("--set", a.sets,
                  "Override a field: model.layer_num=12, strategy.tp_size=2, system.accelerator.mem_gbs=141")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--strict", a.strict, "Unknown keys are errors instead of warnings");
  cmd->add_option("--format", a.format, "Output format (text is the default)")->check(CLI::IsMember({"text", "json"}));
}

/// --allow-oom, for the subcommands that judge memory.
void add_allow_oom(CLI::App* cmd, spec_args& a) {
  cmd->add_flag("--allow-oom", a.allow_oom,
                "Exit 0 even when the estimated peak memory exceeds device memory (else exit status 3)");
}

/// The memory verdict of an estimate, in GiB like `mem_result`.
lj::value memory_object(const llmsim::estimate_result& r) {
  return {{"units", "GiB"},
          {"peak_mem", r.mem.peak_mem.gib()},
          {"peak_stage", std::string(llmsim::stage_kind_names[static_cast<std::size_t>(
                             r.stages[static_cast<std::size_t>(r.mem.peak_stage)].kind)])},
          {"device_mem", r.mem.device_mem.gib()},
          {"fits", r.mem.fits},
          {"over_by", r.mem.over_by.gib()},
          {"verdict", llmsim::memory_verdict(r)}};
}

/// Exit status 3 for an estimate that does not fit (unless --allow-oom), with the verdict on stderr.
int memory_status(const llmsim::estimate_result& r, bool allow_oom) {
  if (r.mem.fits || allow_oom) return exit_success;
  std::fprintf(stderr, "llmsim: %s (exit status 3; --allow-oom exits 0)\n", llmsim::memory_verdict(r).c_str());
  return exit_does_not_fit;
}

/// Runs the estimate of validated specs; its refusals (features not modelled yet) are about the strategy.
llmsim::estimate_result estimate_of(const llmsim::model_spec& m, const llmsim::strategy_spec& s,
                                    const llmsim::system_spec& sys, const std::string& strategy_arg) {
  try {
    return llmsim::estimate_validated(m, s, sys);
  } catch (const llmsim::config_error& e) {
    if (!e.file().empty()) throw;
    throw e.in_file(strategy_arg);
  }
}

/// `--set` entries for a spec that is not given are a usage error, not silently dropped.
void require_specs_for_sets(const spec_args& a, const overrides& ov) {
  if (!a.model && !ov.model.empty()) throw usage_error("--set", "--set model.* given without --model");
  if (!a.strategy && !ov.strategy.empty()) throw usage_error("--set", "--set strategy.* given without --strategy");
  if (!a.system && !ov.system.empty()) throw usage_error("--set", "--set system.* given without --system");
}

/// `llmsim check`: loads and validates what is given, every error reported (exit 1); given all
/// three specs it also runs the estimate and judges memory (exit 3 when it does not fit).
int run_check(const spec_args& a) {
  const overrides ov = parse_sets(a.sets);  // a malformed --set is a usage error: nothing is loaded
  require_specs_for_sets(a, ov);
  std::vector<std::string> warnings;
  const lj::load_options opt{a.strict, &warnings};
  const bool json_out = a.format == "json";
  lj::value report = lj::value::object();
  lj::value first_error;
  int errors = 0;
  auto fail = [&](const llmsim::config_error& e) {
    ++errors;
    std::fprintf(stderr, "error: %s\n", e.what());
    report["errors"].push_back(e.what());
    if (first_error.is_null()) first_error = error_object(e, e.what());
  };
  std::optional<llmsim::model_spec> model;
  std::optional<llmsim::strategy_spec> strategy;
  std::optional<lj::system_config> system;
  std::optional<llmsim::estimate_result> estimate;
  if (a.model) try {
      model = lj::load_model(*a.model, opt, ov.model);
    } catch (const llmsim::config_error& e) { fail(e); }
  if (a.strategy) try {
      strategy = lj::load_strategy(*a.strategy, opt, ov.strategy);
    } catch (const llmsim::config_error& e) { fail(e); }
  if (a.system) try {
      system = lj::load_system(*a.system, opt, ov.system);
    } catch (const llmsim::config_error& e) { fail(e); }
  if (model && strategy && system) {
    try {
      lj::validate_files(*model, *a.model, *strategy, *a.strategy, system->spec(), *a.system);
      estimate = estimate_of(*model, *strategy, system->spec(), *a.strategy);
    } catch (const llmsim::config_error& e) { fail(e); }
  } else if (model && strategy) {  // the model-strategy rules need no system
    try {
      lj::validate_files(*model, *a.model, *strategy, *a.strategy);
    } catch (const llmsim::config_error& e) { fail(e); }
  }
  if (model) report["model"] = lj::to_json(*model);
  if (strategy) {
    report["strategy"] = lj::to_json(*strategy);
    report["strategy"]["dp_size"] = llmsim::dp_size(*strategy);
    report["strategy"]["edp_size"] = llmsim::edp_size(*strategy);
    report["strategy"]["global_batch_size"] = llmsim::global_batch_size(*strategy);
  }
  if (system) report["system"] = system_summary(system->spec());
  if (estimate) report["memory"] = memory_object(*estimate);
  for (const auto& w : warnings) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
    report["warnings"].push_back(w);
  }
  const int status = errors > 0 ? exit_input_error : estimate ? memory_status(*estimate, a.allow_oom) : exit_success;
  report["error_count"] = errors;
  report["warning_count"] = warnings.size();
  if (!first_error.is_null()) report["error"] = first_error;
  report["exit_status"] = status;
  if (json_out) {
    std::printf("%s\n", dump(report).c_str());
  } else {
    for (const char* spec : {"model", "strategy", "system"}) {
      if (!report.contains(spec)) continue;
      std::printf("%s:\n", spec);
      print_fields(report[spec], "");
    }
    if (estimate) std::printf("memory: %s\n", llmsim::memory_verdict(*estimate).c_str());
    std::printf("%d error(s), %zu warning(s)\n", errors, warnings.size());
  }
  return status;
}

/// Loads the three specs into a perf_llm; warnings go to stderr and into `warnings`.
lj::perf_llm configured(const spec_args& a, std::vector<std::string>& warnings) {
  const lj::load_options opt{a.strict, &warnings};
  const overrides ov = parse_sets(a.sets);
  const auto model = lj::load_model(*a.model, opt, ov.model);
  const auto strategy = lj::load_strategy(*a.strategy, opt, ov.strategy);
  const auto system = lj::load_system(*a.system, opt, ov.system);
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  lj::validate_files(model, *a.model, strategy, *a.strategy, system.spec(), *a.system);
  lj::perf_llm perf;
  perf.configure(strategy, model, system);
  return perf;
}

/// Writes the timeline of the configured job to `file` (an input error if it cannot be written).
void write_trace(const lj::perf_llm& perf, const std::string& file) {
  const auto trace = llmsim::trace_iteration(perf.model(), perf.strategy(), perf.system());
  std::ofstream out(file, std::ios::binary);
  if (out) lj::write_chrome_trace(out, trace);
  if (!out) throw llmsim::config_error("llmsim perf", "--trace", "cannot write the trace file", file);
}

/// The document `perf --format json` prints.
lj::value perf_document(const lj::perf_llm& perf, const spec_args& a, const std::vector<std::string>& warnings,
                        int status) {
  lj::value out = lj::perf_document(perf, warnings);
  if (a.tokens)
    out["training_cost"] =
        lj::to_json(llmsim::training_cost(perf.result(), perf.strategy(), *a.tokens, a.usd_per_gpu_hour));
  out["exit_status"] = status;
  return out;
}

int run_perf(const spec_args& a) {
  std::vector<std::string> warnings;
  auto perf = configured(a, warnings);
  perf.run_estimate(*a.strategy);
  const int status = memory_status(perf.result(), a.allow_oom);
  if (a.trace_file) write_trace(perf, *a.trace_file);
  if (a.format == "json") {
    std::printf("%s\n", dump(perf_document(perf, a, warnings, status)).c_str());
  } else {
    std::printf("%s", llmsim::to_text(perf.result(), perf.model(), perf.strategy(), perf.system()).c_str());
    if (a.tokens)
      std::printf("%s",
                  llmsim::to_text(llmsim::training_cost(perf.result(), perf.strategy(), *a.tokens, a.usd_per_gpu_hour))
                      .c_str());
  }
  return status;
}

/// `llmsim report`: the perf estimate and its timeline as one HTML page (`json::html::perf_report`).
int run_report(const spec_args& a, const std::string& file) {
  std::vector<std::string> warnings;
  auto perf = configured(a, warnings);
  perf.run_estimate(*a.strategy);
  const int status = memory_status(perf.result(), a.allow_oom);
  const auto timeline = lj::html::timeline_of(perf.model(), perf.strategy(), perf.system());
  const std::string html =
      lj::html::perf_report(perf_document(perf, a, warnings, status), timeline.get(), timeline.refusal);
  std::ofstream out(file, std::ios::binary);
  if (out) out.write(html.data(), static_cast<std::streamsize>(html.size()));
  if (!out)
    throw llmsim::config_error("llmsim report", "--output",
                               std::string("--output: cannot write the HTML report: ") + std::strerror(errno), file);
  const std::string verdict = llmsim::memory_verdict(perf.result());
  if (a.format == "json")
    std::printf("%s\n",
                dump(lj::value{{"report", file}, {"bytes", html.size()}, {"memory", verdict}, {"exit_status", status}})
                    .c_str());
  else
    std::printf("wrote %s (%zu bytes); memory: %s\n", file.c_str(), html.size(), verdict.c_str());
  return status;
}

int run_bench(const spec_args& a, int iterations) {
  std::vector<std::string> warnings;
  auto perf = configured(a, warnings);
  perf.run_estimate(*a.strategy);  // refusals are reported once, as perf reports them
  std::vector<double> ns;
  ns.reserve(static_cast<std::size_t>(iterations));
  double sink = 0;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    perf.run_estimate();
    sink += perf.analysis_cost().duration_time_per_iter.value + perf.analysis_mem().peak_mem.gib();
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  const double median = ns[ns.size() / 2];
  if (a.format == "json") {
    std::printf("%s\n", dump(lj::value{{"estimate_ns_median", median}, {"iterations", iterations}}, -1).c_str());
  } else {
    std::printf(
        "median %.2f us per estimate (run_estimate + analysis_cost + analysis_mem) over %d iterations (checksum "
        "%.6g)\n",
        median / 1e3, iterations, sink);
  }
  return exit_success;
}

/// The fields of one validation case the report reads, checked before any is estimated so that a
/// malformed case is an input error (exit 1) naming its JSON path, not a failure of the tool.
void check_case_shape(const lj::value& c, const std::string& at, const std::string& file) {
  const auto refuse = [&](const std::string& key, const std::string& rule) {
    throw llmsim::config_error("llmsim validate", at + key, at + key + ": " + rule, file);
  };
  using lj::detail::describe;  // short, and safe for any nesting depth
  if (!c.is_object()) refuse("", "expected an object, got " + describe(c));
  for (const char* key : {"name", "model", "strategy", "system"})
    if (c.contains(key) && !c[key].is_string())
      refuse(std::string("/") + key, "expected a string, got " + describe(c[key]));
  for (const char* key : {"name", "model", "strategy", "system"})
    if (!c.contains(key)) refuse(std::string("/") + key, "required field is missing");
  for (const char* key : {"model_overrides", "strategy_overrides", "system_overrides", "real"})
    if (c.contains(key) && !c[key].is_object())
      refuse(std::string("/") + key, "expected an object, got " + describe(c[key]));
  if (!c.contains("real")) return;  // estimated, nothing compared
  const auto& real = c["real"];
  for (const char* key : {"iter_time_ms", "peak_alloc_gib"})
    if (real.contains(key) && !(real[key].is_number() && real[key].get<double>() > 0 && real[key].get<double>() < 1e30))
      refuse(std::string("/real/") + key, "expected a measured value (a positive number), got " + describe(real[key]));
  if (!real.contains("iter_time_ms") && !real.contains("peak_alloc_gib"))
    refuse("/real", "states neither iter_time_ms nor peak_alloc_gib: nothing to compare");
  if (real.contains("memory_verified") && !real["memory_verified"].is_boolean())
    refuse("/real/memory_verified", "expected true or false, got " + describe(real["memory_verified"]));
}

/// The recipe file of Megatron-Bridge rows (configs/megatron_bridge/recipes.json), checked for its format.
lj::value read_recipes(const std::string& file) {
  const lj::value recipes = lj::read_file(file);
  constexpr std::string_view format = "llmsim Megatron-Bridge recipe settings";
  if (!recipes.is_object() || !recipes.contains("format") || !recipes["format"].is_string() ||
      recipes["format"].get<std::string>().rfind(format, 0) != 0)
    throw llmsim::config_error(
        "llmsim validate", "/format",
        "/format: expected a recipe file whose format starts with \"" + std::string(format) + "\"", file);
  return recipes;
}

/// Mean and largest |error| of one group of rows, and how many rows it has and estimated.
struct error_stats {
  std::size_t rows = 0, estimated = 0;
  double tokens_sum = 0, tokens_max = 0, tflops_sum = 0, tflops_max = 0;
  void add(const lj::value& row) {
    ++rows;
    if (row["tokens_err"].is_null()) return;
    ++estimated;
    const double t = std::fabs(row["tokens_err"].get<double>()), f = std::fabs(row["tflops_err"].get<double>());
    tokens_sum += t;
    tflops_sum += f;
    tokens_max = std::max(tokens_max, t);
    tflops_max = std::max(tflops_max, f);
  }
  [[nodiscard]] lj::value json() const {
    const double n = estimated ? static_cast<double>(estimated) : 1.0;
    return {{"rows", rows},
            {"estimated", estimated},
            {"tokens_mean_abs_err", tokens_sum / n},
            {"tokens_max_abs_err", tokens_max},
            {"tflops_mean_abs_err", tflops_sum / n},
            {"tflops_max_abs_err", tflops_max}};
  }
};

/// One Megatron-Bridge row's report entry.
lj::value mb_row_json(const lj::value& row, const lj::megatron_bridge::row_result& r) {
  const double real_gflop = r.real_model_tflops_per_sec_per_gpu * 1e3 / r.real_tokens_per_sec_per_gpu;
  lj::value out = {{"name", r.job.id},
                   {"model", row["model"]},
                   {"gpu_type", row["gpu_type"]},
                   {"precision", row["precision"]},
                   {"release", row["release"]},
                   {"catalogue_model", r.job.model},
                   {"system", r.job.system.empty() ? lj::value(nullptr) : lj::value(r.job.system)},
                   {"real",
                    {{"tokens_per_sec_per_gpu", r.real_tokens_per_sec_per_gpu},
                     {"model_tflops_per_sec_per_gpu", r.real_model_tflops_per_sec_per_gpu},
                     {"model_gflop_per_token", real_gflop}}},
                   {"predicted", nullptr},
                   {"tokens_err", nullptr},
                   {"tflops_err", nullptr},
                   {"flop_formula", r.job.formula == llmsim::megatron_bridge::flop_formula::current
                                        ? "current (baa0259bd on)"
                                        : "silu_gated_only (to 71768cde2)"},
                   {"model_gflop_per_token", r.job.flops ? lj::value(r.model_gflop_per_token) : lj::value(nullptr)},
                   {"flop_err", r.job.flops ? lj::value(r.model_gflop_per_token / real_gflop - 1) : lj::value(nullptr)},
                   {"error", r.estimated() ? lj::value(nullptr) : lj::value(r.error)},
                   {"refused", !r.job.refused.empty()},
                   {"not_modelled", r.job.not_modelled},
                   {"strategy", r.job.strategy},
                   {"model_overrides", r.job.model_overrides}};
  if (r.estimated()) {
    out["predicted"] = {{"iter_time_s", r.iter_time_s},
                        {"tokens_per_sec_per_gpu", r.tokens_per_sec_per_gpu},
                        {"model_tflops_per_sec_per_gpu", r.model_tflops_per_sec_per_gpu},
                        {"peak_mem_gib", r.peak_mem_gib},
                        {"device_mem_gib", r.device_mem_gib},
                        {"fits", r.fits}};
    out["tokens_err"] = r.tokens_per_sec_per_gpu / r.real_tokens_per_sec_per_gpu - 1;
    out["tflops_err"] = r.model_tflops_per_sec_per_gpu / r.real_model_tflops_per_sec_per_gpu - 1;
  }
  return out;
}

/// The summary of Megatron-Bridge rows: by precision, by GPU, by release, refusal reasons grouped.
lj::value mb_summary(const lj::value& rows) {
  std::map<std::string, error_stats> by_precision, by_gpu, by_release;
  error_stats all;
  std::map<std::string, std::size_t> reasons;
  std::size_t flop_n = 0, not_fitting = 0;
  double flop_sum = 0, flop_max = 0;
  for (const auto& r : rows) {
    all.add(r);
    if (r["error"].is_null() && !r["predicted"]["fits"].get<bool>()) ++not_fitting;
    by_precision[r["precision"].get<std::string>()].add(r);
    by_gpu[r["gpu_type"].get<std::string>()].add(r);
    by_release[r["release"].get<std::string>()].add(r);
    if (!r["error"].is_null()) ++reasons[r["reason"].get<std::string>()];
    if (!r["flop_err"].is_null()) {
      ++flop_n;
      flop_sum += std::fabs(r["flop_err"].get<double>());
      flop_max = std::max(flop_max, std::fabs(r["flop_err"].get<double>()));
    }
  }
  lj::value p = lj::value::object(), g = lj::value::object(), rel = lj::value::object(), why = lj::value::object();
  for (const auto& [k, v] : by_precision) p[k] = v.json();
  for (const auto& [k, v] : by_gpu) g[k] = v.json();
  for (const auto& [k, v] : by_release) rel[k] = v.json();
  for (const auto& [k, v] : reasons) why[k] = v;
  return {{"n", all.rows},
          {"n_failed", all.rows - all.estimated},
          {"all", all.json()},
          {"n_estimated_not_fitting", not_fitting},
          {"by_precision", p},
          {"by_gpu", g},
          {"by_release", rel},
          {"not_estimated_reasons", why},
          {"flop_formula",
           {{"rows", flop_n},
            {"mean_abs_err", flop_n ? flop_sum / static_cast<double>(flop_n) : 0.0},
            {"max_abs_err", flop_max}}}};
}

void print_mb_group(const char* title, const lj::value& groups) {
  std::printf("\n%-10s %6s %9s %14s %14s %14s %14s\n", title, "rows", "estimated", "tok/s mean|e|", "tok/s max|e|",
              "TFLOPs mean|e|", "TFLOPs max|e|");
  for (const auto& [k, v] : groups.items())
    std::printf("%-10s %6zu %9zu %13.1f%% %13.1f%% %13.1f%% %13.1f%%\n", k.c_str(), v["rows"].get<std::size_t>(),
                v["estimated"].get<std::size_t>(), 100 * v["tokens_mean_abs_err"].get<double>(),
                100 * v["tokens_max_abs_err"].get<double>(), 100 * v["tflops_mean_abs_err"].get<double>(),
                100 * v["tflops_max_abs_err"].get<double>());
}

void print_mb_text(const lj::value& rows, const lj::value& summary) {
  std::printf("%-58s %9s %9s %8s %7s %7s %8s %7s\n", "row", "tok/s", "real", "err", "TFLOPs", "real", "err", "GF/tok");
  for (const auto& r : rows) {
    const std::string id = r["name"].get<std::string>();
    if (!r["error"].is_null()) {
      std::printf("%-58s not estimated: %s\n", id.c_str(), r["reason"].get<std::string>().c_str());
      continue;
    }
    const auto& p = r["predicted"];
    std::printf("%-58s %9.0f %9.0f %+7.1f%% %7.0f %7.0f %+7.1f%% %7.2f%s\n", id.c_str(),
                p["tokens_per_sec_per_gpu"].get<double>(), r["real"]["tokens_per_sec_per_gpu"].get<double>(),
                100 * r["tokens_err"].get<double>(), p["model_tflops_per_sec_per_gpu"].get<double>(),
                r["real"]["model_tflops_per_sec_per_gpu"].get<double>(), 100 * r["tflops_err"].get<double>(),
                r["model_gflop_per_token"].get<double>(),
                p["fits"].get<bool>() ? "" : "  (estimated peak exceeds memory)");
  }
  print_mb_group("precision", summary["by_precision"]);
  print_mb_group("gpu", summary["by_gpu"]);
  print_mb_group("release", summary["by_release"]);
  const auto& all = summary["all"];
  std::printf(
      "\n%zu rows, %zu estimated, %zu not estimated; tokens/s/GPU |err| mean %.1f%% max %.1f%%; model "
      "TFLOP/s/GPU |err| mean %.1f%% max %.1f%%\n",
      all["rows"].get<std::size_t>(), all["estimated"].get<std::size_t>(), summary["n_failed"].get<std::size_t>(),
      100 * all["tokens_mean_abs_err"].get<double>(), 100 * all["tokens_max_abs_err"].get<double>(),
      100 * all["tflops_mean_abs_err"].get<double>(), 100 * all["tflops_max_abs_err"].get<double>());
  std::printf(
      "%zu estimated rows exceed device memory in the estimate (the published runs fit: a setting the row "
      "lacks, or the memory model)\n",
      summary["n_estimated_not_fitting"].get<std::size_t>());
  const auto& f = summary["flop_formula"];
  std::printf(
      "Megatron-Bridge FLOP formula vs the printed TFLOP/s over tokens/s: %zu rows, |err| mean %.2f%% max "
      "%.2f%%\n",
      f["rows"].get<std::size_t>(), 100 * f["mean_abs_err"].get<double>(), 100 * f["max_abs_err"].get<double>());
  std::printf("not estimated, by reason:\n");
  for (const auto& [k, v] : summary["not_estimated_reasons"].items())
    std::printf("  %3zu  %s\n", v.get<std::size_t>(), k.c_str());
}

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break, quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
/// A JSON value as a CSV field: numbers to 17 significant digits (they read back exactly), strings
/// quoted as needed, booleans as true/false, null or absent as an empty field.
std::string csv_value(const lj::value& v) {
  if (v.is_number()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v.get<double>());
    return text;
  }
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return "";
}
/// `object[key]`, or null when `object` is not an object or lacks it.
lj::value member(const lj::value& object, const char* key) {
  return object.is_object() && object.contains(key) ? object[key] : lj::value(nullptr);
}
/// Prints one CSV line of fields.
void print_csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
  std::printf("%s\n", line.c_str());
}

/// `validate --format csv` of Megatron-Bridge rows: one line per row.
void print_mb_csv(const lj::value& rows) {
  print_csv_line({"name", "model", "gpu_type", "precision", "predicted_tokens_per_sec_per_gpu",
                  "real_tokens_per_sec_per_gpu", "tokens_err", "predicted_model_tflops_per_sec_per_gpu",
                  "real_model_tflops_per_sec_per_gpu", "tflops_err", "predicted_peak_mem_gib", "device_mem_gib",
                  "not_estimated_reason"});
  for (const auto& r : rows) {
    const lj::value p = member(r, "predicted");
    print_csv_line({csv_value(r["name"]), csv_value(r["model"]), csv_value(r["gpu_type"]), csv_value(r["precision"]),
                    csv_value(member(p, "tokens_per_sec_per_gpu")), csv_value(r["real"]["tokens_per_sec_per_gpu"]),
                    csv_value(r["tokens_err"]), csv_value(member(p, "model_tflops_per_sec_per_gpu")),
                    csv_value(r["real"]["model_tflops_per_sec_per_gpu"]), csv_value(r["tflops_err"]),
                    csv_value(member(p, "peak_mem_gib")), csv_value(member(p, "device_mem_gib")),
                    csv_value(member(r, "reason"))});
  }
}

/// `llmsim validate` of a Megatron-Bridge cases document: each row's tokens/s/GPU and model
/// TFLOP/s/GPU predicted and compared with the printed ones.
int run_validate_mb(const lj::value& doc, const std::string& file, const std::string& format,
                    const std::string& recipes_file, const lj::system_choice& price_on,
                    const std::function<void()>& check_before_report) {
  namespace mbj = lj::megatron_bridge;
  mbj::check_document(doc, file);
  const lj::value recipes = read_recipes(recipes_file);
  lj::value rows = lj::value::array();
  for (const auto& row : doc["rows"]) {
    const auto r = mbj::estimate_row(row, recipes, price_on);
    lj::value out = mb_row_json(row, r);
    out["reason"] = r.estimated() ? lj::value(nullptr) : lj::value(r.reason);
    rows.push_back(std::move(out));
  }
  check_before_report();
  const lj::value summary = mb_summary(rows);
  // A row llmsim refuses is a gap in the comparison, not a pass: it decides the exit status.
  const int status = summary["n_failed"].get<std::size_t>() > 0 ? exit_not_all_estimated : exit_success;
  if (format == "json")
    std::printf("%s\n", dump(lj::value{{"cases", rows}, {"summary", summary}, {"exit_status", status}}).c_str());
  else if (format == "csv")
    print_mb_csv(rows);
  else
    print_mb_text(rows, summary);
  return status;
}

/// A JSON number printed with `format`, or "-" when it is absent or not a number (a case may give
/// a real time without a real memory, or the reverse).
std::string number_or_dash(const lj::value& v, const char* format) {
  if (!v.is_number()) return "-";
  char text[64];
  std::snprintf(text, sizeof text, format, v.get<double>());
  return text;
}
std::string number_or_dash(const lj::value& object, const char* key, const char* format) {
  return object.is_object() && object.contains(key) ? number_or_dash(object[key], format) : "-";
}

/// Reads an inference recipe file (configs/inference/validation.json), checking its shape.
lj::value read_inference_recipes(const std::string& file) {
  const lj::value r = lj::read_file(file);
  const std::string format(lj::inference_cases::recipes_format);
  auto refuse = [&](const std::string& at, const std::string& rule) {
    throw llmsim::config_error("llmsim validate", at, at + ": " + rule, file);
  };
  if (!r.is_object() || !r.contains("format") || !r["format"].is_string() ||
      r["format"].get<std::string>().rfind(format, 0) != 0)
    refuse("/format", "expected a recipe file whose format starts with \"" + format + "\"");
  if (!r.contains("models") || !r["models"].is_object()) refuse("/models", "expected an object");
  for (const auto& [key, entry] : r["models"].items())
    if (!entry.is_object() || (!(entry.contains("catalogue") && entry["catalogue"].is_string()) &&
                               !(entry.contains("spec") && entry["spec"].is_object())))
      refuse("/models/" + key, "expected {\"catalogue\": name} or {\"spec\": {...}}");
  if (r.contains("gpt_style") && !r["gpt_style"].is_object()) refuse("/gpt_style", "expected an object");
  if (!r.contains("systems") || !r["systems"].is_array()) refuse("/systems", "expected an array");
  for (std::size_t i = 0; i < r["systems"].size(); ++i) {
    const lj::value& rule = r["systems"][i];
    if (!rule.is_object() || !rule.contains("contains") || !rule["contains"].is_array() || !rule.contains("system") ||
        !rule["system"].is_string())
      refuse("/systems/" + std::to_string(i), "expected {\"contains\": [words], \"system\": name}");
    for (const auto& w : rule["contains"])
      if (!w.is_string()) refuse("/systems/" + std::to_string(i) + "/contains", "expected strings");
  }
  return r;
}

/// Mean and largest |error| of a group of compared figures.
struct inference_error_stats {
  std::size_t figures = 0;
  double sum = 0, max = 0;
  void add(double err) {
    ++figures;
    sum += std::fabs(err);
    max = std::max(max, std::fabs(err));
  }
  [[nodiscard]] lj::value json() const {
    return {{"figures", figures},
            {"mean_abs_err", figures ? sum / static_cast<double>(figures) : 0.0},
            {"max_abs_err", max}};
  }
};

/// `llmsim validate` of an inference cases document: every printed figure llmsim predicts (TTFT,
/// TPOT, end-to-end latency, tokens/s, memory) against its prediction, summarised by regime.
int run_validate_inference(const lj::value& doc, const std::string& file, const std::string& format,
                           const std::string& recipes_file, const lj::system_choice& price_on,
                           const std::function<void()>& check_before_report) {
  namespace ic = lj::inference_cases;
  if (!doc.contains("rows") || !doc["rows"].is_array())
    throw llmsim::config_error("llmsim validate", "/rows", "/rows: expected an array", file);
  if (!doc.contains("metric_fields") || !doc["metric_fields"].is_array())
    throw llmsim::config_error("llmsim validate", "/metric_fields", "/metric_fields: expected an array", file);
  std::vector<std::string> metrics;
  for (std::size_t k = 0; k < doc["metric_fields"].size(); ++k) {
    const auto& m = doc["metric_fields"][k];
    if (!m.is_string())
      throw llmsim::config_error(
          "llmsim validate", "/metric_fields/" + std::to_string(k),
          "/metric_fields/" + std::to_string(k) + ": expected a figure's name, got " + lj::detail::describe(m), file);
    metrics.push_back(m.get<std::string>());
  }
  const lj::value recipes = read_inference_recipes(recipes_file);
  lj::value rows = lj::value::array(), refused = lj::value::object();
  std::map<std::string, inference_error_stats> by_regime;
  inference_error_stats all;
  std::size_t n_refused = 0;
  for (std::size_t k = 0; k < doc["rows"].size(); ++k) {
    const auto& row = doc["rows"][k];
    const std::string at = "/rows/" + std::to_string(k);
    if (!row.is_object())
      throw llmsim::config_error("llmsim validate", at,
                                 at + ": expected a row object, got " + lj::detail::describe(row), file);
    if (!row.contains("id") || !row["id"].is_string() || row["id"].get<std::string>().empty())
      throw llmsim::config_error("llmsim validate", at + "/id",
                                 at + "/id: expected the row's name (a non-empty string)", file);
    const ic::row_result r = ic::estimate_row(row, recipes, metrics, price_on);
    // Shaped as a training case: real and predicted figures, a FIGURE_err for each compared one.
    lj::value out{{"name", r.job.id},
                  {"regime", r.job.regime},
                  {"model", r.job.model_name},
                  {"system", r.job.system_name},
                  {"error", nullptr}};
    if (!r.estimated()) {
      ++n_refused;
      out["error"] = r.error;
      out["real"] = out["predicted"] = nullptr;
      refused[r.error] = refused.value(r.error, 0) + 1;
    } else {
      out["inference"] = lj::to_json(r.job.spec);
      out["real"] = lj::value::object();
      out["predicted"] = lj::value::object();
      for (const auto& m : r.metrics) {
        out["real"][m.name] = m.real;
        out["predicted"][m.name] = m.predicted;
        by_regime[r.job.regime].add(m.error());
        all.add(m.error());
      }
      for (const auto& m : r.metrics) out[m.name + "_err"] = m.error();
    }
    rows.push_back(out);
  }
  check_before_report();
  lj::value regimes = lj::value::object();
  for (const auto& [k, v] : by_regime) regimes[k] = v.json();
  const lj::value summary{{"n", rows.size()},
                          {"n_failed", n_refused},
                          {"all", all.json()},
                          {"by_regime", regimes},
                          {"not_estimated_reasons", refused}};
  const int status = n_refused > 0 ? exit_not_all_estimated : exit_success;
  if (format == "json") {
    std::printf("%s\n", dump(lj::value{{"cases", rows}, {"summary", summary}, {"exit_status", status}}).c_str());
    return status;
  }
  if (format == "csv") {  // one line per compared figure; a row not estimated has one line with its reason
    print_csv_line({"name", "regime", "model", "system", "figure", "real", "predicted", "err", "not_estimated_reason"});
    for (const auto& row : rows) {
      const std::vector<std::string> head{csv_value(row["name"]), csv_value(row["regime"]), csv_value(row["model"]),
                                          csv_value(row["system"])};
      if (!row["error"].is_null()) {
        print_csv_line({head[0], head[1], head[2], head[3], "", "", "", "", csv_value(row["error"])});
        continue;
      }
      for (const auto& [metric, real] : row["real"].items())
        print_csv_line({head[0], head[1], head[2], head[3], csv_value(metric), csv_value(real),
                        csv_value(row["predicted"][metric]), csv_value(row[metric + "_err"]), ""});
    }
    return status;
  }
  std::printf("%-6s %-24s %-14s %-28s %12s %12s %8s\n", "name", "model", "system", "figure", "real", "predicted",
              "error");
  for (const auto& row : rows) {
    const std::string name = row["name"].get<std::string>();
    if (!row["error"].is_null()) {
      std::printf("%-6s not estimated: %s\n", name.c_str(), row["error"].get<std::string>().c_str());
      continue;
    }
    for (const auto& [metric, real] : row["real"].items())
      std::printf("%-6s %-24s %-14s %-28s %12.2f %12.2f %+7.1f%%\n", name.c_str(),
                  row["model"].get<std::string>().c_str(), row["system"].get<std::string>().c_str(), metric.c_str(),
                  real.get<double>(), row["predicted"][metric].get<double>(), 100 * row[metric + "_err"].get<double>());
  }
  std::printf("\nmean |error| by regime:\n");
  for (const auto& [k, v] : by_regime)
    std::printf("  %-62s %4zu figures  mean %5.1f%%  max %6.1f%%\n", k.c_str(), v.figures,
                100 * v.sum / static_cast<double>(v.figures), 100 * v.max);
  std::printf("  %-62s %4zu figures  mean %5.1f%%  max %6.1f%%\n", "all", all.figures,
              all.figures ? 100 * all.sum / static_cast<double>(all.figures) : 0.0, 100 * all.max);
  std::printf("rows %zu, not estimated %zu\n", rows.size(), n_refused);
  return status;
}

/// The system a training case is priced on: the case's own file, unless `--system` replaces it.
/// Each replacement is `S` (every case) or `CASE_SYSTEM=S` (cases whose system path ends with
/// CASE_SYSTEM); S is a system file or catalogue name. The last matching replacement wins.
fs::path case_system(const fs::path& root, const std::string& own, const std::vector<std::string>& replacements) {
  fs::path chosen = root / own;
  for (const auto& r : replacements) {
    const auto eq = r.find('=');
    if (eq == std::string::npos) {
      chosen = r;
      continue;
    }
    const std::string suffix = r.substr(0, eq);
    if (own.ends_with(suffix)) chosen = r.substr(eq + 1);
  }
  return chosen;
}

/// Refuses a `--system` replacement with an empty part.
void check_system_replacement_syntax(const std::vector<std::string>& replacements) {
  for (const auto& r : replacements) {
    const auto eq = r.find('=');
    if ((eq == std::string::npos ? r : r.substr(eq + 1)).empty() || eq == 0)
      throw usage_error("--system", "--system \"" + r + "\": expected S or CASE_SYSTEM=S, both parts non-empty");
  }
}

/// Refuses a CASE_SYSTEM=S replacement that matches none of `systems`, the cases' own (a typo would
/// otherwise leave every case on its own system, silently).
void check_system_replacements_match(const std::set<std::string>& systems,
                                     const std::vector<std::string>& replacements) {
  for (const auto& r : replacements) {
    const auto eq = r.find('=');
    if (eq == std::string::npos) continue;
    const std::string suffix = r.substr(0, eq);
    std::string listed;
    bool matched = false;
    for (const auto& own : systems) {
      matched = matched || own.ends_with(suffix);
      listed += (listed.empty() ? "" : ", ") + own;
    }
    if (!matched)
      throw usage_error("--system", "--system " + r + ": no case's system ends with \"" + suffix +
                                        "\" (the cases' systems: " + listed + ")");
  }
}

/// `llmsim validate`: predicted vs real for each case of a validation-cases file.
int run_validate(const std::string& file, const std::string& format, const std::string& recipes_file,
                 const std::vector<std::string>& system_replacements) {
  const lj::value doc = lj::read_file(file);
  check_system_replacement_syntax(system_replacements);
  const bool mb_rows = lj::megatron_bridge::is_cases_document(doc);
  if (mb_rows || lj::inference_cases::is_cases_document(doc)) {
    // Rows name the catalogue system their recipe maps them to; --system replaces it as a case's file.
    std::set<std::string> recipe_systems;
    const lj::system_choice price_on = [&](const std::string& own) {
      recipe_systems.insert(own);
      return case_system(fs::path(), own, system_replacements).string();
    };
    const auto check = [&] { check_system_replacements_match(recipe_systems, system_replacements); };
    if (mb_rows) return run_validate_mb(doc, file, format, recipes_file, price_on, check);
    return run_validate_inference(doc, file, format,
                                  recipes_file == LLMSIM_MB_RECIPES ? LLMSIM_INFERENCE_RECIPES : recipes_file, price_on,
                                  check);
  }
  if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_array())
    throw llmsim::config_error("llmsim validate", "/cases", "/cases: expected an object with a \"cases\" array", file);
  if (doc.contains("config_root") && !doc["config_root"].is_string())
    throw llmsim::config_error("llmsim validate", "/config_root",
                               "/config_root: expected a string, got " + lj::detail::describe(doc["config_root"]),
                               file);
  if (doc["cases"].empty())
    throw llmsim::config_error("llmsim validate", "/cases", "/cases: no case to compare (an empty array)", file);
  for (std::size_t i = 0; i < doc["cases"].size(); ++i)
    check_case_shape(doc["cases"][i], "/cases/" + std::to_string(i), file);
  std::set<std::string> case_systems;
  for (const auto& c : doc["cases"]) case_systems.insert(c.at("system").get<std::string>());
  check_system_replacements_match(case_systems, system_replacements);
  const fs::path root = fs::path(file).parent_path() / doc.value("config_root", std::string("."));
  lj::value cases = lj::value::array();
  std::size_t n_failed = 0, mem_n = 0, time_n = 0;
  double time_sum = 0, time_max = 0, mem_sum = 0, mem_max = 0;
  for (const auto& c : doc["cases"]) {
    lj::value row = {{"name", c.value("name", std::string("?"))}};
    row["real"] = c.value("real", lj::value::object());
    row["system"] = case_system(root, c.at("system").get<std::string>(), system_replacements).string();
    row["predicted"] = nullptr;
    row["time_err"] = nullptr;
    row["mem_err"] = nullptr;
    row["error"] = nullptr;
    try {
      lj::perf_llm perf;
      perf.configure(root / c.at("strategy").get<std::string>(), root / c.at("model").get<std::string>(),
                     case_system(root, c.at("system").get<std::string>(), system_replacements), {},
                     c.value("strategy_overrides", lj::value::object()),
                     c.value("model_overrides", lj::value::object()), c.value("system_overrides", lj::value::object()));
      perf.run_estimate();
      const double t = perf.analysis_cost().duration_time_per_iter.ms();
      const double m = perf.analysis_mem().peak_mem.gib();
      row["predicted"] = {{"iter_time_ms", t}, {"peak_alloc_gib", m}};
      const auto& real = row["real"];
      if (real.contains("iter_time_ms") && real["iter_time_ms"].is_number()) {
        const double e = (t - real["iter_time_ms"].get<double>()) / real["iter_time_ms"].get<double>();
        row["time_err"] = e;
        time_sum += std::fabs(e);
        time_max = std::max(time_max, std::fabs(e));
        ++time_n;
      }
      if (real.contains("peak_alloc_gib") && real["peak_alloc_gib"].is_number()) {
        const double e = (m - real["peak_alloc_gib"].get<double>()) / real["peak_alloc_gib"].get<double>();
        row["mem_err"] = e;
        if (real.value("memory_verified", false)) {
          mem_sum += std::fabs(e);
          mem_max = std::max(mem_max, std::fabs(e));
          ++mem_n;
        }
      }
    } catch (const std::exception& e) {
      row["error"] = e.what();
      ++n_failed;
    }
    cases.push_back(row);
  }
  lj::value summary = {{"n", cases.size()},
                       {"n_failed", n_failed},
                       {"time_n", time_n},
                       {"time_mean_abs_err", time_n ? time_sum / static_cast<double>(time_n) : 0.0},
                       {"time_max_abs_err", time_max},
                       {"mem_n", mem_n},
                       {"mem_mean_abs_err", mem_n ? mem_sum / static_cast<double>(mem_n) : 0.0},
                       {"mem_max_abs_err", mem_max}};
  // A case llmsim refuses is a gap in the comparison, not a pass: it decides the exit status.
  const int status = n_failed > 0 ? exit_not_all_estimated : exit_success;
  if (format == "json") {
    std::printf("%s\n", dump(lj::value{{"cases", cases}, {"summary", summary}, {"exit_status", status}}).c_str());
    return status;
  }
  if (format == "csv") {  // one line per case
    print_csv_line({"name", "system", "predicted_iter_time_ms", "real_iter_time_ms", "time_err",
                    "predicted_peak_alloc_gib", "real_peak_alloc_gib", "mem_err", "memory_verified",
                    "not_estimated_reason"});
    for (const auto& r : cases) {
      const lj::value p = member(r, "predicted");
      print_csv_line({csv_value(r["name"]), csv_value(r["system"]), csv_value(member(p, "iter_time_ms")),
                      csv_value(member(r["real"], "iter_time_ms")), csv_value(r["time_err"]),
                      csv_value(member(p, "peak_alloc_gib")), csv_value(member(r["real"], "peak_alloc_gib")),
                      csv_value(r["mem_err"]), r["real"].value("memory_verified", false) ? "true" : "false",
                      csv_value(r["error"])});
    }
    return status;
  }
  std::printf("%-46s %12s %12s %8s %10s %10s %8s\n", "case", "time ms", "real ms", "err", "peak GiB", "real GiB",
              "err");
  for (const auto& r : cases) {
    if (!r["error"].is_null()) {
      std::printf("%-46s not estimated: %s\n", r["name"].get<std::string>().c_str(),
                  r["error"].get<std::string>().c_str());
      continue;
    }
    const bool verified = r["real"].value("memory_verified", false);
    const auto& real = r["real"];
    const auto percent = [](const lj::value& e) { return e.is_number() ? lj::value(100 * e.get<double>()) : e; };
    std::printf("%-46s %12.1f %12s %8s %10.3f %10s %8s%s\n", r["name"].get<std::string>().c_str(),
                r["predicted"]["iter_time_ms"].get<double>(), number_or_dash(real, "iter_time_ms", "%.1f").c_str(),
                number_or_dash(percent(r["time_err"]), "%+.2f%%").c_str(),
                r["predicted"]["peak_alloc_gib"].get<double>(), number_or_dash(real, "peak_alloc_gib", "%.2f").c_str(),
                number_or_dash(percent(r["mem_err"]), "%+.2f%%").c_str(), verified ? "" : " (memory unverified)");
  }
  std::printf(
      "\n%zu cases, %zu not estimated; time (%zu compared) |err| mean %.2f%% max %.2f%%; memory (%zu verified) |err| "
      "mean %.2f%% max %.2f%%\n",
      cases.size(), n_failed, time_n, 100 * summary["time_mean_abs_err"].get<double>(), 100 * time_max, mem_n,
      100 * summary["mem_mean_abs_err"].get<double>(), 100 * mem_max);
  return status;
}

/// `llmsim import-hf`: the model a Hugging Face config.json gives, in the SimuMax format (every
/// field, defaults written out), with what it does not model on stderr.
int run_import_hf(const std::string& config, const std::string& output) {
  if (!lj::hf::is_hf_config(lj::read_file(config)))
    throw llmsim::config_error("llmsim import-hf", "/model_type",
                               "not a Hugging Face config.json (needs a string model_type and num_hidden_layers)",
                               config);
  std::vector<std::string> notes;
  const llmsim::model_spec m = lj::load_model(config, {.strict = false, .warnings = &notes});
  for (const auto& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  const std::string text = dump(lj::to_json(m)) + "\n";
  if (output.empty()) {
    std::printf("%s", text.c_str());
    return exit_success;
  }
  std::ofstream out(output, std::ios::binary);
  if (out) out << text;
  if (!out) throw llmsim::config_error("llmsim import-hf", "--output", "cannot write the model file", output);
  return exit_success;
}

/// Whether the raw command line asks for JSON, known before CLI11 has parsed it so that a usage
/// error can answer in JSON too.
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--format=json" || (arg == "--format" && i + 1 < argc && std::string_view(argv[i + 1]) == "json"))
      return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"llmsim " LLMSIM_VERSION_STRING
               ": predicts iteration time, MFU and per-GPU memory of LLM training jobs on GPU clusters "
               "from SimuMax-format model, strategy and system configs.",
               "llmsim"};
  app.set_version_flag("--version", std::string("llmsim ") + LLMSIM_VERSION_STRING + " (" + build_kind + ")");
  app.require_subcommand(1);

  spec_args check_args, perf_args, bench_args, report_args;
  auto* check =
      app.add_subcommand("check", "Load, validate and print the resolved configs; given all three, also judge memory.");
  add_spec_options(check, check_args, false);
  add_allow_oom(check, check_args);
  check->callback([&] {
    if (!check_args.system && !check_args.strategy && !check_args.model)
      throw CLI::ValidationError("check", "give at least one of --system, --strategy, --model");
  });
  auto* perf = app.add_subcommand(
      "perf", "Estimate one training iteration: time breakdown, MFU, memory per stage and its peak.");
  add_spec_options(perf, perf_args, true);
  add_allow_oom(perf, perf_args);
  perf->add_option("--trace", perf_args.trace_file,
                   "Also write the iteration's timeline as Chrome trace-event JSON (Perfetto, chrome://tracing): "
                   "a process per pipeline rank; threads for micro-batch passes, compute, tensor- and "
                   "expert-parallel comm, pipeline p2p and data-parallel comm; a span per pass and per op (module, "
                   "pass, shape, FLOPs, bytes, micro-batch, chunk, layer); memory per rank")
      ->type_name("FILE");
  llmsim_cli::add_training_cost_options(perf, perf_args.tokens, perf_args.usd_per_gpu_hour);
  auto* report = app.add_subcommand(
      "report",
      "Write the perf estimate as one self-contained HTML page with SVG charts: key figures, the iteration "
      "breakdown of every stage, every stage's memory against device memory, the pipeline timeline.");
  add_spec_options(report, report_args, true);
  add_allow_oom(report, report_args);
  std::string report_file;
  report->add_option("-o,--output", report_file, "The HTML file to write")->required()->type_name("FILE.html");
  auto* bench = app.add_subcommand("bench", "Median wall time of one complete estimate (configs already loaded).");
  add_spec_options(bench, bench_args, true);
  int iterations = 1000;
  bench->add_option("--iterations", iterations, "Estimates to time")->check(CLI::Range(1, 10000000));
  std::string cases_file, validate_format = "text";
  auto* validate =
      app.add_subcommand("validate", "Predict each case of a validation-cases file and compare with its real run.");
  validate
      ->add_option("cases", cases_file,
                   "Cases file: training cases (shaped like shared/validation/training_cases.json), Megatron-Bridge "
                   "rows (megatron_bridge_cases.json) or inference rows (inference_cases.json). Every kind reports "
                   "{cases: [{name, real, predicted, ..._err, error}], summary: {n, n_failed, ...}, exit_status} "
                   "with --format json, an _err = predicted / real - 1 for each compared figure")
      ->required();
  std::string recipes_file = LLMSIM_MB_RECIPES;
  validate
      ->add_option("--recipes", recipes_file,
                   "Recipe settings for the rows of a Megatron-Bridge cases file (for inference rows the default is "
                   "configs/inference/validation.json)")
      ->default_str(recipes_file)
      ->type_name("FILE");
  std::vector<std::string> validate_systems;
  validate
      ->add_option("--system", validate_systems,
                   "Price cases on another system: S (a system file or catalogue name) for every case, or "
                   "CASE_SYSTEM=S for the cases whose system ends with CASE_SYSTEM: a training case's system file, "
                   "the catalogue system a row's recipe names (repeatable, e.g. --system a100_pcie.json=a100-pcie "
                   "--system b200_bf16_ceperm.json=b200, or --system h100-sxm=my_h100.json)")
      ->type_name("[CASE_SYSTEM=]S");
  validate
      ->add_option("--format", validate_format,
                   "Output format: text (the default), json, or csv (a line per case, row or compared figure)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  std::string list_format = "text";
  auto* list = app.add_subcommand("list", "List the catalogue models, systems and the strategy-name grammar.");
  list->add_option("--format", list_format, "Output format (text is the default)")
      ->check(CLI::IsMember({"text", "json"}));
  std::string hf_config, hf_output;
  auto* import_hf = app.add_subcommand(
      "import-hf", "Write the SimuMax-format model JSON of a Hugging Face config.json (what --model reads from it).");
  import_hf->add_option("config", hf_config, "Hugging Face config.json")->required();
  import_hf->add_option("-o,--output", hf_output, "Write the model JSON here instead of standard output")
      ->type_name("FILE");
  llmsim_cli::llm_analysis_args llma_args;
  auto* llma = llmsim_cli::add_llm_analysis(app, llma_args);
  llmsim_cli::search_args search_args;
  auto* search = llmsim_cli::add_search_command(app, search_args);
  llmsim_cli::infer_args infer_args;
  auto* infer = llmsim_cli::add_infer_command(app, infer_args);
  app.footer(exit_status_help);
  for (auto* sub :
       {check, perf, report, bench, validate, list, llma, llma_args.train, llma_args.infer, search, infer, import_hf})
    sub->footer(exit_status_help);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    (void)app.exit(e);                               // the message and "Run with --help" on stderr
    if (wants_json(argc, argv))
      std::printf("%s\n",
                  dump(lj::value{{"error", error_object(e, e.what())}, {"exit_status", exit_usage_error}}).c_str());
    return exit_usage_error;
  }
  const bool json_out =
      (check->parsed() && check_args.format == "json") || (perf->parsed() && perf_args.format == "json") ||
      (report->parsed() && report_args.format == "json") || (bench->parsed() && bench_args.format == "json") ||
      (validate->parsed() && validate_format == "json") || (list->parsed() && list_format == "json") ||
      (llma->parsed() && llma_args.format == "json") || (search->parsed() && search_args.format == "json") ||
      (infer->parsed() && infer_args.format == "json");
  try {
    // Lets the test suite reach exit status 4, which no input should reach.
    if (const char* what = std::getenv("LLMSIM_TEST_INTERNAL_ERROR"); what != nullptr) throw std::logic_error(what);
    if (check->parsed()) return run_check(check_args);
    if (perf->parsed()) return run_perf(perf_args);
    if (report->parsed()) return run_report(report_args, report_file);
    if (bench->parsed()) return run_bench(bench_args, iterations);
    if (validate->parsed()) return run_validate(cases_file, validate_format, recipes_file, validate_systems);
    if (llma->parsed()) return llmsim_cli::run_llm_analysis(llma_args, exit_does_not_fit);
    if (search->parsed()) return llmsim_cli::run_search(search_args);
    if (infer->parsed()) return run_infer_command(infer_args);
    if (import_hf->parsed()) return run_import_hf(hf_config, hf_output);
    if (list->parsed()) {
      if (json_out)
        std::printf("%s\n", dump(catalogue_json()).c_str());
      else
        std::printf("%s\n", catalogue_listing().c_str());
      return exit_success;
    }
  } catch (const usage_error& e) {
    return report_failure(json_out, exit_usage_error, e, e.what());
  } catch (const llmsim_cli::search_usage_error& e) {
    return report_failure(json_out, exit_usage_error, usage_error(e.field(), e.what()), e.what());
  } catch (const llmsim::config_error& e) {
    return report_failure(json_out, exit_input_error, e, e.what());
  } catch (const std::exception& e) {
    return report_failure(json_out, exit_internal_error, e, std::string("internal error: ") + e.what());
  } catch (...) {
    const std::runtime_error unknown("an exception that is not a std::exception");
    return report_failure(json_out, exit_internal_error, unknown,
                          "internal error: an exception that is not a std::exception");
  }
  return exit_success;
}
