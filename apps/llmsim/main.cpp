// The llmsim command line tool.
//   llmsim check --system S --strategy T --model M [--set key=value]... [--strict] [--format text|json]
// loads the SimuMax-format config files, applies overrides, validates each spec and the three
// together, and prints the resolved configs.

#include <llmsim/json.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace lj = llmsim::json;

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
    if (eq == std::string::npos || eq == 0) throw llmsim::config_error("llmsim check", s, "--set \"" + s + "\" must have the form spec.key=value, e.g. model.layer_num=12", "--set");
    const std::string key = s.substr(0, eq);
    const auto v = lj::override_value(std::string_view(s).substr(eq + 1));
    const auto dot = key.find('.');
    const std::string spec = key.substr(0, dot);
    const std::string rest = dot == std::string::npos ? std::string() : key.substr(dot + 1);
    lj::value* target = spec == "model" ? &out.model : spec == "strategy" ? &out.strategy : spec == "system" ? &out.system : nullptr;
    if (target == nullptr || rest.empty()) throw llmsim::config_error("llmsim check", key, "--set key \"" + key + "\" must start with model., strategy. or system.", "--set");
    lj::set_path(*target, rest, v, "--set " + key);
  }
  return out;
}

void print_fields(const lj::value& obj, const std::string& prefix) {
  for (const auto& item : obj.items()) {
    if (item.value().is_object()) {
      print_fields(item.value(), prefix + item.key() + ".");
    } else {
      std::printf("  %s%s = %s\n", prefix.c_str(), item.key().c_str(), item.value().dump().c_str());
    }
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

int run_check(const std::optional<std::string>& system_file, const std::optional<std::string>& strategy_file,
              const std::optional<std::string>& model_file, const std::vector<std::string>& sets, bool strict,
              const std::string& format) {
  std::vector<std::string> warnings;
  const lj::load_options opt{strict, &warnings};
  const bool json_out = format == "json";
  lj::value report = lj::value::object();
  int errors = 0;
  auto fail = [&](const std::exception& e) {
    ++errors;
    if (!json_out) std::fprintf(stderr, "error: %s\n", e.what());
    report["errors"].push_back(e.what());
  };
  try {
    const overrides ov = parse_sets(sets);
    std::optional<llmsim::model_spec> model;
    std::optional<llmsim::strategy_spec> strategy;
    std::optional<lj::system_config> system;
    if (model_file) try { model = lj::load_model(*model_file, opt, ov.model); } catch (const llmsim::config_error& e) { fail(e); }
    if (strategy_file) try { strategy = lj::load_strategy(*strategy_file, opt, ov.strategy); } catch (const llmsim::config_error& e) { fail(e); }
    if (system_file) try { system = lj::load_system(*system_file, opt, ov.system); } catch (const llmsim::config_error& e) { fail(e); }
    if (!model_file && ov.model.size() != 0) throw llmsim::config_error("llmsim check", "model", "--set model.* given without --model", "--set");
    if (!strategy_file && ov.strategy.size() != 0) throw llmsim::config_error("llmsim check", "strategy", "--set strategy.* given without --strategy", "--set");
    if (!system_file && ov.system.size() != 0) throw llmsim::config_error("llmsim check", "system", "--set system.* given without --system", "--set");
    if (model && strategy && system) {
      try { lj::validate_files(*model, *model_file, *strategy, *strategy_file, system->spec(), *system_file); } catch (const llmsim::config_error& e) { fail(e); }
    }
    if (model) report["model"] = lj::to_json(*model);
    if (strategy) {
      report["strategy"] = lj::to_json(*strategy);
      report["strategy"]["dp_size"] = llmsim::dp_size(*strategy);
      report["strategy"]["edp_size"] = llmsim::edp_size(*strategy);
      report["strategy"]["global_batch_size"] = llmsim::global_batch_size(*strategy);
    }
    if (system) report["system"] = system_summary(system->spec());
  } catch (const llmsim::config_error& e) {
    fail(e);
  }
  for (const auto& w : warnings) {
    if (!json_out) std::fprintf(stderr, "warning: %s\n", w.c_str());
    report["warnings"].push_back(w);
  }
  report["error_count"] = errors;
  report["warning_count"] = warnings.size();
  if (json_out) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    for (const char* spec : {"model", "strategy", "system"}) {
      if (!report.contains(spec)) continue;
      std::printf("%s:\n", spec);
      print_fields(report[spec], "");
    }
    std::printf("%d error(s), %zu warning(s)\n", errors, warnings.size());
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"llmsim " LLMSIM_VERSION_STRING
               ": predicts iteration time, MFU and per-GPU memory of LLM training jobs on GPU clusters "
               "from SimuMax-format model, strategy and system configs.",
               "llmsim"};
  app.set_version_flag("--version", std::string("llmsim ") + LLMSIM_VERSION_STRING);
  app.require_subcommand(1);

  std::optional<std::string> system_file, strategy_file, model_file;
  std::vector<std::string> sets;
  bool strict = false;
  std::string format = "text";
  auto* check = app.add_subcommand("check", "Load, validate and print the resolved configs (exit 1 on any error).");
  check->add_option("--system", system_file, "System config file (SimuMax format)");
  check->add_option("--strategy", strategy_file, "Strategy config file (SimuMax format)");
  check->add_option("--model", model_file, "Model config file (SimuMax format)");
  check->add_option("--set", sets, "Override a field before validation: model.layer_num=12, strategy.tp_size=2, system.accelerator.mem_gbs=141")->type_name("KEY=VALUE");
  check->add_flag("--strict", strict, "Unknown keys are errors instead of warnings");
  check->add_option("--format", format, "Output format")->check(CLI::IsMember({"text", "json"}));
  check->callback([&] {
    if (!system_file && !strategy_file && !model_file) throw CLI::ValidationError("check", "give at least one of --system, --strategy, --model");
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (check->parsed()) return run_check(system_file, strategy_file, model_file, sets, strict, format);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
