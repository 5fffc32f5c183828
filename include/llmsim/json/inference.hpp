/// \file llmsim/json/inference.hpp
/// Serving estimates as JSON, and real inference measurements (an `inference_cases.json`
/// document: rows transcribed from FasterTransformer, gpt-fast and TensorRT-LLM tables) mapped to
/// an `inference_spec` and estimated. A row's model and system come from its text through a recipe
/// file (configs/inference/validation.json): model names matched without case, punctuation or a
/// parenthesised note, first in the recipe, then in the catalogue; GPUs by the words their text
/// contains. A row whose model, GPU or precision cannot be resolved is refused with the reason.
///
/// ```cpp
/// const auto recipes = llmsim::json::read_file("configs/inference/validation.json");
/// const auto r = llmsim::json::inference_cases::estimate_row(doc["rows"][0], recipes);
/// ```
#pragma once

#include <llmsim/estimate/inference.hpp>
#include <llmsim/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace json {

/// The figures of one serving estimate, in the units people quote (ms, tokens/s, GB = 10^9 B).
inline value to_json(const inference_result& r) {
  return {
      // Saturated open loop: a request's wait grows with the run, no figure to give.
      {"ttft_ms", r.saturated ? value(nullptr) : value(r.ttft.value * 1e3)},
      {"tpot_ms", r.tpot.value * 1e3},
      {"e2e_latency_ms", r.saturated ? value(nullptr) : value(r.e2e.value * 1e3)},
      {"first_decode_step_ms", r.first_step.value * 1e3},
      {"last_decode_step_ms", r.last_step.value * 1e3},
      {"decode_kernels_per_step", r.decode_kernels},
      {"prefill_micro_batches", r.prefill_micro_batches},
      {"decode_micro_batches", r.decode_micro_batches},
      {"prefill_tflops_per_gpu", r.in_flight ? value(nullptr) : value(r.prefill_tflops)},
      {"output_tok_s", r.output_tok_s},
      {"output_tok_s_per_gpu", r.output_tok_s_per_gpu},
      {"decode_tok_s_per_user", r.decode_tok_s_per_user},
      {"weight_gb", r.weight_bytes / 1e9},
      {"kv_cache_gb", r.kv_cache_bytes / 1e9},
      {"kv_cache_bytes_per_token", r.kv_bytes_per_token},
      {"activation_gb", r.activation_bytes / 1e9},
      {"peak_gb", r.peak_bytes / 1e9},
      {"capacity_gb", r.capacity_bytes / 1e9},
      {"fits", r.fits},
      {"max_batch", r.max_batch},
      {"max_batch_at_limit", r.max_batch_at_limit},
      {"offline_batch", r.offline_batch},
      {"offline_output_tok_s_per_gpu", r.offline_output_tok_s_per_gpu},
      {"usd_per_million_output_tokens",
       r.usd_per_million_output_tokens > 0 ? value(r.usd_per_million_output_tokens) : value(nullptr)},
      {"offline_usd_per_million_output_tokens",
       r.offline_usd_per_million_output_tokens > 0 ? value(r.offline_usd_per_million_output_tokens) : value(nullptr)},
      {"gpus", r.gpus},
      {"in_flight", r.in_flight},
      {"running", r.running},
      {"mean_running", r.mean_running},
      {"requests_in_system", r.saturated ? value(nullptr) : value(r.in_system)},
      {"saturated", r.saturated},
      {"cap_bound", r.cap_bound},
      {"prefill_tokens_per_step", r.prefill_tokens_per_step},
      {"queue_ms", r.saturated ? value(nullptr) : value(r.queue.value * 1e3)},
      {"request_rate", r.request_rate},
      {"token_budget_bound", r.token_budget_bound}};
}

inline value to_json(const inference_spec& i) {
  return {{"batch", i.batch},
          {"input_len", i.input_len},
          {"output_len", i.output_len},
          {"tp", i.tp},
          {"pp", i.pp},
          {"ep", i.ep},
          {"dp", i.dp},
          {"weights", std::string(enum_name(i.weights))},
          {"expert_weights", i.expert_weights ? value(std::string(enum_name(*i.expert_weights))) : value(nullptr)},
          {"int4_group_size", i.int4_group_size},
          {"activations", std::string(enum_name(i.activations))},
          {"kv_cache", std::string(enum_name(i.kv_cache))},
          {"gqa_decode_reads", std::string(enum_name(i.gqa_decode_reads))},
          {"micro_batching", std::string(enum_name(i.micro_batching))},
          {"micro_batch_token_limit", i.micro_batch_token_limit},
          {"cuda_graphs", i.cuda_graphs},
          {"host_launch_us", i.host_launch_us},
          {"eager_collective_us", i.eager_collective_us},
          {"overlap_scheduling", i.overlap_scheduling},
          {"kernel_latency_us", i.kernel_latency_us},
          {"memory_fraction", i.memory_fraction},
          {"kv_block_tokens", i.kv_block_tokens},
          {"prefill_chunk_tokens", i.prefill_chunk_tokens},
          {"max_batch_limit", i.max_batch_limit},
          {"concurrency", i.concurrency},
          {"max_running", i.max_running},
          {"request_rate", i.request_rate},
          {"usd_per_gpu_hour", i.usd_per_gpu_hour > 0 ? value(i.usd_per_gpu_hour) : value(nullptr)}};
}

namespace inference_cases {

inline constexpr std::string_view cases_format = "llmsim inference validation cases";
inline constexpr std::string_view recipes_format = "llmsim inference validation recipes";

/// Whether `doc` is an inference cases document (its `format` names it).
inline bool is_cases_document(const value& doc) {
  return doc.is_object() && doc.contains("format") && doc["format"].is_string() &&
         doc["format"].get<std::string>().rfind(cases_format, 0) == 0;
}

/// `name` without a parenthesised note, lower-case, letters and digits only ("Llama-2-7B" ->
/// "llama27b", "GPT-20B (GPT-style, FT example config)" -> "gpt20b").
inline std::string normalized_name(std::string_view name) {
  std::string out;
  int depth = 0;
  for (const char ch : name) {
    if (ch == '(') ++depth;
    if (ch == ')' && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0 && std::isalnum(static_cast<unsigned char>(ch)))
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  return out;
}

/// A row mapped to llmsim's inputs, or the reason it cannot be.
struct row_job {
  std::string id, regime, model_name, system_name;
  model_spec model{};
  inference_spec spec{};
  std::string refused;
  bool decode_rates_only = false;  ///< the row gives no output length: throughput figures are decode rates
  bool rates_only = false;         ///< a set of requests offered at once: latencies not compared
  std::int64_t gpus_per_node = 8;  ///< the system's, for the per-node figures
};

namespace detail {
inline std::string text_of(const value& row, const char* key) {
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>() : std::string();
}
/// A positive count the row states under `key`; absent or null: nullopt; anything else: the reason
/// the row is refused, in `refused`.
inline std::optional<std::int64_t> count_of(const value& row, const char* key, std::string& refused) {
  if (!row.contains(key) || row[key].is_null()) return std::nullopt;
  if (!row[key].is_number_integer() || row[key].get<std::int64_t>() < 1) {
    if (refused.empty()) refused = std::string(key) + " must be a positive integer, got " + row[key].dump();
    return std::nullopt;
  }
  return row[key].get<std::int64_t>();
}
/// A positive finite rate (requests/s) stated under `key`, if any; anything else is refused.
inline std::optional<double> rate_of(const value& row, const char* key, std::string& refused) {
  if (!row.contains(key) || row[key].is_null()) return std::nullopt;
  // "inf": every request sent at once (benchmark_serving's default), no arrival rate.
  if (row[key].is_string() && (row[key].get<std::string>() == "inf" || row[key].get<std::string>() == "Infinity"))
    return std::nullopt;
  if (!row[key].is_number() || !(row[key].get<double>() > 0) || !(row[key].get<double>() <= 1e9)) {
    if (refused.empty())
      refused = std::string(key) + " must be a positive number of requests/s, got " + row[key].dump();
    return std::nullopt;
  }
  return row[key].get<double>();
}
inline bool starts_with_word(const std::string& text, std::string_view word) {
  std::string upper;
  for (const char ch : text.substr(0, word.size()))
    upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  return upper == word;
}

/// The model a row names: a recipe entry (a catalogue name or a spec), else the catalogue.
inline std::string resolve_model(row_job& job, const value& row, const value& recipes) {
  const std::string name = text_of(row, "model"), key = normalized_name(name);
  const value& entries = recipes["models"];
  if (entries.contains(key)) {
    const value& e = entries[key];
    if (e.contains("catalogue")) {
      job.model_name = e["catalogue"].get<std::string>();
      job.model = load_model(job.model_name);
      return {};
    }
    value spec = recipes.value("gpt_style", value::object());
    merge_patch(spec, e["spec"]);
    spec["model_name"] = key;
    job.model_name = key;
    job.model = parse_model(spec, "inference recipe model " + key, {.strict = true});
    return {};
  }
  for (const auto& [catalogue_name, spec] : catalogue::models) {
    if (normalized_name(catalogue_name) != key) continue;
    job.model_name = std::string(catalogue_name);
    job.model = *spec;
    return {};
  }
  if (!row.contains("model") || !row["model"].is_string())
    return "model must be the model's name (a string), got " +
           (row.contains("model") ? row["model"].dump() : "nothing");
  return "model \"" + name + "\" is neither in the recipe file nor in the catalogue";
}

/// The system of the first recipe rule whose words the row's gpu text all contains.
inline std::string resolve_system(row_job& job, const value& row, const value& recipes) {
  const std::string gpu = text_of(row, "gpu");
  for (const value& rule : recipes["systems"]) {
    bool all = true;
    for (const value& word : rule["contains"]) all = all && gpu.find(word.get<std::string>()) != std::string::npos;
    if (!all) continue;
    job.system_name = rule["system"].get<std::string>();
    return {};
  }
  if (!row.contains("gpu") || !row["gpu"].is_string())
    return "gpu must be the GPU's description (a string), got " + (row.contains("gpu") ? row["gpu"].dump() : "nothing");
  return "gpu \"" + gpu + "\" matches no system rule of the recipe file";
}

/// The first rule of the recipe list `key` whose `framework` the row's framework text contains
/// and, if the rule lists `versions`, one of which its framework_version starts with; else null.
inline const value* framework_rule(const value& row, const value& recipes, const char* key) {
  if (!recipes.contains(key)) return nullptr;
  const std::string framework = text_of(row, "framework"), version = text_of(row, "framework_version");
  for (const value& rule : recipes[key]) {
    if (framework.find(rule.at("framework").get<std::string>()) == std::string::npos) continue;
    bool listed = !rule.contains("versions");
    if (!listed)
      for (const value& v : rule.at("versions")) listed = listed || version.rfind(v.get<std::string>(), 0) == 0;
    if (listed) return &rule;
  }
  return nullptr;
}

/// Sets `field` from the rule's `name` entry, an enum name; else returns the refusal naming it.
template <typename Enum>
std::string set_from_rule(Enum& field, const value& rule, const char* list, const char* name) {
  const std::string text = rule.at(name).get<std::string>();
  field = enum_from_name<Enum>(text);
  if (enum_name(field) == text) return {};
  std::string names;
  for (const auto& [e, n] : enum_names<Enum>::value) names += (names.empty() ? "" : " or ") + std::string(n);
  return "recipe " + std::string(list) + "." + name + "=\"" + text + "\" must be " + names;
}

/// How the row's framework launches its kernels (`kernel_launch` rules, `cuda_graphs` true or
/// false; none: one CUDA graph per step), reads a grouped-query layer's cache at decode
/// (`decode_attention` rules; none: once per KV head) and splits a pipeline's batch
/// (`pipeline_micro_batching` rules, with the token limit of the framework's version,
/// `micro_batch_token_limit`; none: one micro-batch per stage).
inline std::string resolve_framework(row_job& job, const value& row, const value& recipes) {
  if (const value* rule = framework_rule(row, recipes, "kernel_launch")) {
    if (!rule->contains("cuda_graphs") || !rule->at("cuda_graphs").is_boolean())
      return "recipe kernel_launch.cuda_graphs must be true or false";
    job.spec.cuda_graphs = rule->at("cuda_graphs").get<bool>();
  }
  if (const value* rule = framework_rule(row, recipes, "decode_attention")) {
    std::string why = set_from_rule(job.spec.gqa_decode_reads, *rule, "decode_attention", "gqa_decode_reads");
    if (!why.empty()) return why;
  }
  if (const value* rule = framework_rule(row, recipes, "pipeline_micro_batching")) {
    std::string why = set_from_rule(job.spec.micro_batching, *rule, "pipeline_micro_batching", "micro_batching");
    if (!why.empty() || !rule->contains("micro_batch_token_limit")) return why;
    const value& limit = rule->at("micro_batch_token_limit");
    if (!limit.is_number_integer() || limit.get<std::int64_t>() < 1)
      return "recipe pipeline_micro_batching.micro_batch_token_limit=" + limit.dump() + " must be a positive integer";
    job.spec.micro_batch_token_limit = limit.get<std::int64_t>();
  }
  return {};
}

/// Whether the row's catalogue system has FP4 tensor cores (the rule FP4 GEMMs are priced by).
inline bool fp4_tensor_cores(const row_job& job) {
  const system_spec* sys = catalogue::find_system(job.system_name);
  return sys != nullptr && low_precision_speedup(compute_kind::fp4_matmul, known_compute_capability(*sys)) > 0;
}

/// Weight, activation and KV-cache formats from the row's precision texts ("FP16", "FP8",
/// "INT8 weight-only", "INT4 weight-only, group size 32", "BF16 (assumed)", "NVFP4", "MXFP4"; a bare
/// "FP4" is NVFP4, as TensorRT-LLM's tables write it). NVFP4 weights with no activation format
/// stated run W4A4 on a catalogue GPU with FP4 tensor cores (ModelOpt's NVFP4 checkpoints quantize
/// both), weight-only elsewhere (vLLM's FP4 Marlin kernels on Hopper and older).
inline std::string resolve_precision(row_job& job, const value& row) {
  const std::string w = text_of(row, "precision_weights"), a = text_of(row, "precision_activations"),
                    kv = text_of(row, "precision_kv");
  inference_spec& s = job.spec;
  if (starts_with_word(w, "FP8"))
    s.weights = weight_format::fp8;
  else if (starts_with_word(w, "NVFP4") || starts_with_word(w, "FP4"))
    s.weights = weight_format::nvfp4;
  else if (starts_with_word(w, "MXFP4"))
    s.weights = weight_format::mxfp4;
  else if (starts_with_word(w, "INT8"))
    s.weights = weight_format::int8;
  else if (starts_with_word(w, "INT4"))
    s.weights = weight_format::int4;
  else if (starts_with_word(w, "FP16"))
    s.weights = weight_format::fp16;
  else if (starts_with_word(w, "BF16"))
    s.weights = weight_format::bf16;
  else
    return "precision_weights \"" + w + "\" is not FP16, BF16, FP8, INT8, INT4, NVFP4 (FP4) or MXFP4";
  if (const auto at = w.find("group size "); at != std::string::npos) {
    std::int64_t g = 0;
    for (std::size_t k = at + 11; k < w.size() && std::isdigit(static_cast<unsigned char>(w[k])) && g < (1 << 24); ++k)
      g = g * 10 + (w[k] - '0');
    if (g == 0) return "precision_weights \"" + w + "\" names no group size";
    s.int4_group_size = g;
  }
  if (starts_with_word(a, "INT8") || starts_with_word(a, "INT4"))
    return "precision_activations \"" + a + "\": integer activations (W8A8) are not modelled";
  // Not stated (absent or null): 16-bit, the default of every framework in the file; a text that
  // names no known format is refused rather than read as 16-bit.
  const auto stated = [&row](const char* key) { return row.contains(key) && !row[key].is_null(); };
  if (starts_with_word(a, "FP8"))
    s.activations = activation_format::fp8;
  else if (starts_with_word(a, "NVFP4") || starts_with_word(a, "FP4") ||
           (s.weights == weight_format::nvfp4 && !stated("precision_activations") && fp4_tensor_cores(job)))
    s.activations = activation_format::fp4;
  else if (starts_with_word(a, "FP16"))
    s.activations = activation_format::fp16;
  else if (starts_with_word(a, "BF16") || !stated("precision_activations"))
    s.activations = activation_format::bf16;
  else
    return "precision_activations " + row["precision_activations"].dump() + " is not FP16, BF16, FP8 or NVFP4 (FP4)";
  if (starts_with_word(kv, "FP8"))
    s.kv_cache = kv_cache_format::fp8;
  else if (starts_with_word(kv, "INT8"))
    s.kv_cache = kv_cache_format::int8;
  else if (starts_with_word(kv, "FP16") || starts_with_word(kv, "BF16") || !stated("precision_kv"))
    s.kv_cache = kv_cache_format::bf16;  // 16-bit either way: the same bytes
  else
    return "precision_kv " + row["precision_kv"].dump() + " is not FP16, BF16, FP8 or INT8";
  return {};
}
}  // namespace detail

/// Maps one row: model, system, precision, parallel sizes, batch and lengths.
inline row_job map_row(const value& row, const value& recipes) {
  row_job job;
  job.id = detail::text_of(row, "id");
  job.regime = detail::text_of(row, "regime");
  for (auto step : {detail::resolve_model, detail::resolve_system}) {
    job.refused = step(job, row, recipes);
    if (!job.refused.empty()) return job;
  }
  job.refused = detail::resolve_precision(job, row);
  if (!job.refused.empty()) return job;
  job.refused = detail::resolve_framework(job, row, recipes);
  if (!job.refused.empty()) return job;
  std::string& why = job.refused;
  const auto batch = detail::count_of(row, "batch_size", why), isl = detail::count_of(row, "isl", why);
  const auto osl = detail::count_of(row, "osl", why);
  // In-flight serving: a client count (benchmark_serving --max-concurrency), else a whole set of
  // requests offered at once (benchmark_throughput --num-prompts) to at most max_batch_size slots.
  const auto clients = detail::count_of(row, "concurrency", why);
  const auto requests = detail::count_of(row, "num_requests", why);
  const auto slots = detail::count_of(row, "max_batch_size", why);
  inference_spec& s = job.spec;
  s.tp = detail::count_of(row, "tp", why).value_or(1);
  s.pp = detail::count_of(row, "pp", why).value_or(1);
  s.ep = detail::count_of(row, "ep", why).value_or(1);
  s.dp = detail::count_of(row, "dp", why).value_or(1);
  // Open loop: requests arriving at a mean rate (benchmark_serving --request-rate), at most
  // `concurrency` of them in flight when the row also states one.
  const auto rate = detail::rate_of(row, "request_rate_qps", why);
  if (why.empty() && !batch && !clients && !rate && !(requests && slots))
    why = "the row states no batch_size, concurrency, request_rate_qps, or num_requests with max_batch_size";
  if (why.empty() && !isl) why = "the row states no isl";
  // In flight, a request's rounds are its prompt's and its output's: no output length, no rates.
  if (why.empty() && (clients || rate || !batch) && !osl) why = "the row serves requests in flight but states no osl";
  if (!why.empty()) return job;
  if (rate) {
    s.request_rate = *rate;
    s.concurrency = clients.value_or(0);
    s.max_running = slots.value_or(0);
  } else if (clients || !batch) {
    s.concurrency = clients ? *clients : *requests;
    s.max_running = slots.value_or(0);
    // A whole set offered at once empties as it runs: its rates are the steady state's while the
    // slots stay full (fill and drain not priced), its latencies not (each waits its turn in the set).
    job.rates_only = !clients;
  } else {
    s.batch = *batch;
  }
  s.input_len = *isl;
  job.decode_rates_only = !osl;
  s.output_len = osl ? *osl : 2;  // without one: the first decode step gives the rates
  return job;
}

/// One printed figure next to its prediction.
struct metric {
  std::string name;
  double real = 0, predicted = 0;
  [[nodiscard]] double error() const { return (predicted - real) / real; }
};

/// A row's predictions next to its printed figures.
struct row_result {
  row_job job;
  std::string error;  ///< non-empty: not estimated (a refusal or the estimate's error)
  inference_result result{};
  std::vector<metric> metrics;
  [[nodiscard]] bool estimated() const { return error.empty(); }
};

/// The prediction of the row's metric `name`, if llmsim predicts it.
inline std::optional<double> predicted(const row_job& job, const inference_result& r, std::string_view name) {
  const double per_replica_gpus = static_cast<double>(job.spec.tp * job.spec.pp);
  const double rate_total =
      job.decode_rates_only ? static_cast<double>(job.spec.batch) * r.decode_tok_s_per_user : r.output_tok_s;
  const auto replicas = static_cast<double>(job.spec.dp);
  const auto input = static_cast<double>(job.spec.input_len), output = static_cast<double>(job.spec.output_len);
  // Requests a second of every replica: in flight, their steady state; a static batch, once per e2e.
  const double requests =
      r.in_flight ? r.request_rate * replicas : static_cast<double>(job.spec.batch) * replicas / r.e2e.value;
  const bool latency = name.find("_ms") != std::string_view::npos;
  // Rates only: a set offered at once. Arrivals past what the slots complete: a full batch's steps,
  // but no wait to first token or end (they grow with the run's length).
  if (job.rates_only && latency) return std::nullopt;
  if (r.saturated && (name == "ttft_ms" || name == "prefill_latency_ms" || name == "e2e_latency_ms"))
    return std::nullopt;
  if (name == "ttft_ms" || name == "prefill_latency_ms") return r.ttft.value * 1e3;
  if (name == "tpot_ms" || name == "decode_step_latency_ms" || name == "itl_ms") return r.tpot.value * 1e3;
  if (name == "e2e_latency_ms") return r.e2e.value * 1e3;
  if (name == "output_tok_s_total") return rate_total * static_cast<double>(job.spec.dp);
  // A figure that may be per GPU or per replica: TensorRT-LLM's out tok/s/GPU convention.
  if (name == "output_tok_s_per_gpu" || name == "output_tok_s_ambiguous_norm") return rate_total / per_replica_gpus;
  if (name == "output_tok_s_per_user") return r.decode_tok_s_per_user;
  if (name == "request_throughput_req_s") return requests;
  if (name == "total_tok_s") return requests * (input + output);
  const double per_node = static_cast<double>(job.gpus_per_node) / per_replica_gpus;
  if (name == "output_tok_s_per_node") return rate_total * per_node;
  // Prompt tokens a second: what in-flight serving takes in (a static batch's prefill is its ttft).
  if (r.in_flight && name == "input_tok_s") return requests * input;
  if (r.in_flight && name == "input_tok_s_per_node") return r.request_rate * input * per_node;
  if (name == "memory_usage_gb") return r.peak_bytes / 1e9;
  return std::nullopt;
}

/// Maps and estimates one row; every metric it prints that llmsim predicts is compared. `price_on`
/// replaces the recipe's catalogue system (a system file or another catalogue name).
inline row_result estimate_row(const value& row, const value& recipes, const std::vector<std::string>& metric_names,
                               const system_choice& price_on = {}) {
  row_result out;
  out.job.id = detail::text_of(row, "id");  // named even when mapping throws
  try {
    out.job = map_row(row, recipes);
    if (price_on && !out.job.system_name.empty()) out.job.system_name = price_on(out.job.system_name);
    if (!out.job.refused.empty()) {
      out.error = out.job.refused;
      return out;
    }
    const system_config sys = load_system(out.job.system_name);
    out.job.gpus_per_node = sys.spec().num_per_node;
    out.result = infer(out.job.model, out.job.spec, sys.spec());
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  for (const std::string& name : metric_names) {
    if (!row.contains(name) || row[name].is_null()) continue;
    const auto p = predicted(out.job, out.result, name);
    if (!p) continue;  // a figure llmsim does not predict (percentiles, bandwidths, concurrency)
    // A measured figure is a positive number: anything else is a transcription error, not a 0 % row.
    if (!row[name].is_number() || !(row[name].get<double>() > 0) || !(row[name].get<double>() < 1e30)) {
      out.error = name + " must be a positive number, got " + row[name].dump();
      out.metrics.clear();
      return out;
    }
    out.metrics.push_back({name, row[name].get<double>(), *p});
  }
  if (out.metrics.empty()) out.error = "the row states none of the figures llmsim predicts (metric_fields)";
  return out;
}

}  // namespace inference_cases
}  // namespace json
LLMSIM_END_NAMESPACE
