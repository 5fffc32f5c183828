// llmsim._core: the C++ estimate behind the Python package (python/llmsim). Values cross as JSON:
// Python dicts in, Python dicts out, through the same loaders, validation and JSON writers as the
// command line tool, so a dict holds SimuMax's keys exactly as `llmsim perf --format json` prints
// them. llmsim::config_error becomes llmsim.ConfigError with its file, field, rule and api.
#include <llmsim/json.hpp>
#include <llmsim/json/html_report.hpp>
#include <llmsim/json/llm_analysis.hpp>
#include <llmsim/llm_analysis.hpp>
#include <llmsim/report.hpp>
#include <llmsim/search.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
namespace lj = llmsim::json;

namespace {

/// A number type json does not know (numpy's int64, float32, ...) as the Python int or float it
/// stands for (`__index__`, else `__float__`); anything else stays an error naming its type.
py::object plain_number(const py::handle& o) {
  if (py::hasattr(o, "__index__")) return o.attr("__index__")();
  if (py::hasattr(o, "__float__")) return o.attr("__float__")();
  throw py::type_error("llmsim: a config value of type " +
                       py::str(py::type::of(o).attr("__name__")).cast<std::string>() +
                       " is not a number, string, bool, None, list or dict");
}

/// A Python object (dicts, lists, numbers, strings, None) as JSON, through Python's json module.
lj::value from_python(const py::handle& obj, const std::string& what) {
  const auto text =
      py::module_::import("json")
          .attr("dumps")(obj, py::arg("allow_nan") = false, py::arg("default") = py::cpp_function(plain_number))
          .cast<std::string>();
  return lj::parse_text(text, what);
}

/// JSON as Python objects.
py::object to_python(const lj::value& v) { return py::module_::import("json").attr("loads")(v.dump()); }

/// The three specs of a job from their dicts (`source`: the file or name each came from, for errors),
/// validated together as `llmsim perf` does.
struct job {
  llmsim::model_spec model;
  llmsim::strategy_spec strategy;
  lj::system_config system;
};
job parse_job(const py::dict& strategy, const py::dict& model, const py::dict& system, const std::string& strategy_src,
              const std::string& model_src, const std::string& system_src, std::vector<std::string>& warnings) {
  job j;
  const lj::load_options opt{.strict = false, .warnings = &warnings};  // unknown keys: warnings, as the CLI
  lj::value m = from_python(model, model_src);
  if (lj::hf::is_hf_config(m)) m = lj::hf::to_model_json(m, model_src, &warnings);  // a Hugging Face config.json
  j.model = lj::parse_model(m, model_src, opt);
  j.strategy = lj::parse_strategy(from_python(strategy, strategy_src), strategy_src, opt);
  j.system = lj::parse_system(from_python(system, system_src), system_src, opt);
  lj::validate_files(j.model, model_src, j.strategy, strategy_src, j.system.spec(), system_src);
  return j;
}

/// The estimate of a job; a refused feature is reported against the strategy, as the CLI does.
void run_estimate(lj::perf_llm& perf, const job& j, const std::string& strategy_src) {
  perf.configure(j.strategy, j.model, j.system);
  perf.run_estimate(strategy_src);
}

/// `llmsim perf --format json` of a job: cost_result, mem_result and the rest, plus the text report.
py::object estimate(const py::dict& strategy, const py::dict& model, const py::dict& system,
                    const std::string& strategy_src, const std::string& model_src, const std::string& system_src) {
  std::vector<std::string> warnings;
  const job j = parse_job(strategy, model, system, strategy_src, model_src, system_src, warnings);
  lj::perf_llm perf;
  run_estimate(perf, j, strategy_src);
  lj::value out = lj::perf_document(perf, warnings);
  out["report"] = llmsim::to_text(perf.result(), perf.model(), perf.strategy(), perf.system());
  return to_python(out);
}

/// `llmsim report`'s page of a job (json::html::perf_report, with the timeline when it can be traced).
std::string html_report(const py::dict& strategy, const py::dict& model, const py::dict& system,
                        const std::string& strategy_src, const std::string& model_src, const std::string& system_src) {
  std::vector<std::string> warnings;
  const job j = parse_job(strategy, model, system, strategy_src, model_src, system_src, warnings);
  lj::perf_llm perf;
  run_estimate(perf, j, strategy_src);
  const auto timeline = lj::html::timeline_of(perf.model(), perf.strategy(), perf.system());
  return lj::html::perf_report(lj::perf_document(perf, warnings), timeline.get(), timeline.refusal);
}

/// A catalogue model, system or compact strategy name as its spec dict (what a file would hold).
py::object catalogue_spec(const std::string& kind, const std::string& name) {
  if (kind == "model") return to_python(lj::to_json(lj::load_model(name)));
  if (kind == "strategy") return to_python(lj::to_json(lj::load_strategy(name)));
  if (kind == "system") return to_python(lj::to_json(lj::load_system(name).spec()));
  throw std::invalid_argument("kind must be \"model\", \"strategy\" or \"system\", got \"" + kind + "\"");
}

/// A JSON file through the library's reader (duplicate keys, NaN and invalid UTF-8 refused with
/// the file and the place named), as a Python object.
py::object read_json(const std::string& file) { return to_python(lj::read_file(file)); }

/// A Hugging Face config.json's model in the SimuMax format, and the notes on what it leaves out.
py::object hf_to_model(const py::dict& config, const std::string& source) {
  std::vector<std::string> notes;
  const lj::value m = lj::hf::to_model_json(from_python(config, source), source, &notes);
  return to_python(lj::value{{"model", m}, {"notes", notes}});
}

/// The catalogue's names.
py::object catalogue_names() {
  lj::value models = lj::value::array(), systems = lj::value::array();
  for (const auto& m : llmsim::catalogue::models) models.push_back(std::string(m.name));
  for (const auto& s : llmsim::catalogue::systems) systems.push_back(std::string(s.name));
  return to_python(lj::value{{"models", models}, {"systems", systems}});
}

/// SimuMax's `search_best_parallel_strategy_with_recompute` on a job (its strategy gives the fields
/// the search does not vary): the best strategy by MFU and the candidates that fit, ranked.
py::object search_best(const py::dict& strategy, const py::dict& model, const py::dict& system,
                       const std::string& strategy_src, const std::string& model_src, const std::string& system_src,
                       std::int64_t world_size, double gmi_error, std::int64_t micro_batch_size,
                       std::int64_t global_batch_size, const std::vector<std::int64_t>& tp_search_list,
                       const std::vector<std::int64_t>& ep_search_list, const std::vector<std::int64_t>& pp_search_list,
                       bool use_etp, bool use_reserved_memory) {
  std::vector<std::string> warnings;
  const job j = parse_job(strategy, model, system, strategy_src, model_src, system_src, warnings);
  lj::perf_llm perf;
  perf.configure(j.strategy, j.model, j.system);
  llmsim::best_parallel_strategy best;
  {
    py::gil_scoped_release unlocked;  // the search runs on worker threads
    best = llmsim::search_best_parallel_strategy_with_recompute(perf, world_size, gmi_error, micro_batch_size,
                                                                global_batch_size, tp_search_list, ep_search_list,
                                                                pp_search_list, use_etp, use_reserved_memory);
  }
  lj::value out = {{"found", best.found}, {"candidates_fitting", best.search.fitting.size()}, {"warnings", warnings}};
  if (best.found) {
    out["strategy"] = lj::to_json(best.strategy);
    out["mfu"] = best.mfu;
    out["duration_time_per_iter"] = best.duration_time_per_iter * 1e3;  // ms, as perf reports it
    out["peak_mem"] = best.peak_mem / 1073741824.0;                     // GiB
  }
  return to_python(out);
}

/// llm-analysis's `train(**kwargs)` / `infer(**kwargs)` over its config folder.
py::object llm_analysis_run(bool train, const std::string& configs, const std::string& model_name,
                            const std::string& gpu_name, const std::string& dtype_name, const py::dict& kwargs) {
  namespace lja = lj::llm_analysis;
  namespace la = llmsim::llm_analysis;
  const auto model = lja::find_model_config(configs, model_name);
  const auto gpu = lja::find_gpu_config(configs, gpu_name);
  const auto dtype = lja::find_dtype_config(configs, dtype_name);
  const lj::value k = from_python(kwargs, train ? "train() kwargs" : "infer() kwargs");
  if (train) return to_python(lja::to_json(la::training(model, gpu, dtype, lja::read_training_kwargs(k, "train()"))));
  return to_python(lja::to_json(la::inference(model, gpu, dtype, lja::read_inference_kwargs(k, "infer()"))));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "llmsim's C++ estimate (use the llmsim package, not this module)";
  m.attr("version") = LLMSIM_VERSION_STRING;
  // llmsim.ConfigError(message, file, field, rule, api), defined in Python (llmsim/_errors.py).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const llmsim::config_error& e) {
      const py::object type = py::module_::import("llmsim._errors").attr("ConfigError");
      const py::object err = type(e.what(), e.file(), e.field(), e.rule(), e.api());
      PyErr_SetObject(type.ptr(), err.ptr());
    }
  });
  m.def("estimate", &estimate, py::arg("strategy"), py::arg("model"), py::arg("system"), py::arg("strategy_src"),
        py::arg("model_src"), py::arg("system_src"));
  m.def("html_report", &html_report, py::arg("strategy"), py::arg("model"), py::arg("system"), py::arg("strategy_src"),
        py::arg("model_src"), py::arg("system_src"));
  m.def("catalogue_spec", &catalogue_spec, py::arg("kind"), py::arg("name"));
  m.def("catalogue_names", &catalogue_names);
  m.def("read_json", &read_json, py::arg("file"));
  m.def("hf_to_model", &hf_to_model, py::arg("config"), py::arg("source"));
  m.def("is_hf_config", [](const py::dict& d) { return lj::hf::is_hf_config(from_python(d, "dict")); });
  m.def("search_best_parallel_strategy_with_recompute", &search_best, py::arg("strategy"), py::arg("model"),
        py::arg("system"), py::arg("strategy_src"), py::arg("model_src"), py::arg("system_src"), py::arg("world_size"),
        py::arg("gmi_error"), py::arg("micro_batch_size"), py::arg("global_batch_size"), py::arg("tp_search_list"),
        py::arg("ep_search_list"), py::arg("pp_search_list"), py::arg("use_etp"), py::arg("use_reserved_memory"));
  m.def("llm_analysis", &llm_analysis_run, py::arg("train"), py::arg("configs"), py::arg("model_name"),
        py::arg("gpu_name"), py::arg("dtype_name"), py::arg("kwargs"));
}
