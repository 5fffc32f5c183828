/// \file llmsim/json/llm_analysis.hpp
/// llm-analysis's config files read unchanged (its model_configs/, gpu_configs/ and dtype_configs/
/// folders, e.g. ../shared/reference/llm-analysis), and its summary written as JSON with its keys.
///
/// ```cpp
/// namespace la = llmsim::json::llm_analysis;
/// const auto model = la::find_model_config(dir, "NousResearch_Llama-2-7b-hf");
/// const auto gpu = la::find_gpu_config(dir, "a100-sxm-80gb");
/// const auto dtype = la::find_dtype_config(dir, "w16a16e16");
/// std::cout << la::to_json(llmsim::llm_analysis::inference(model, gpu, dtype, {})).dump(4);
/// ```
#pragma once

#include <llmsim/json.hpp>
#include <llmsim/llm_analysis.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace json {
namespace llm_analysis {

namespace la = llmsim::llm_analysis;

namespace detail {

using json::detail::location;

/// Reads field `key` of `obj` into `out` when present (null counts as absent for optionals).
template <class T>
void field(const value& obj, const location& at, std::string_view key, T& out, bool required) {
  const std::string k(key);
  if (!obj.contains(k)) {
    if (required) json::detail::fail(at.child(key), "missing (llm-analysis requires it)");
    return;
  }
  json::detail::read(obj[k], at.child(key), out);
}
template <class T>
void field(const value& obj, const location& at, std::string_view key, std::optional<T>& out) {
  const std::string k(key);
  if (!obj.contains(k) || obj[k].is_null()) {
    out.reset();
    return;
  }
  T v{};
  json::detail::read(obj[k], at.child(key), v);
  out = v;
}

/// Refuses keys the config class does not have (config.py builds the dataclass from every key).
inline void only_keys(const value& obj, const location& at, std::initializer_list<std::string_view> keys) {
  if (!obj.is_object()) json::detail::fail(at, "expected an object, got " + json::detail::describe(obj));
  for (const auto& item : obj.items())
    if (std::find(keys.begin(), keys.end(), item.key()) == keys.end())
      json::detail::fail(at.child(item.key()), "unknown key (not a field of llm-analysis's config)");
}

}  // namespace detail

/// A model config object (config.py `ModelConfig` fields).
inline la::model_config read_model_config(const value& v, const std::string& file = {}) {
  const detail::location at{file, ""};
  detail::only_keys(v, at,
                    {"name", "num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len", "num_key_value_heads",
                     "num_key_value_groups", "ffn_embed_dim", "expansion_ratio", "model_type", "moe_num_experts",
                     "moe_top_k", "mlp_gated_linear_units"});
  la::model_config m;
  detail::field(v, at, "name", m.name, true);
  detail::field(v, at, "num_layers", m.num_layers, true);
  detail::field(v, at, "n_head", m.n_head, true);
  detail::field(v, at, "hidden_dim", m.hidden_dim, true);
  detail::field(v, at, "vocab_size", m.vocab_size, true);
  detail::field(v, at, "max_seq_len", m.max_seq_len);
  detail::field(v, at, "num_key_value_heads", m.num_key_value_heads);
  detail::field(v, at, "ffn_embed_dim", m.ffn_embed_dim);
  detail::field(v, at, "expansion_ratio", m.expansion_ratio);
  detail::field(v, at, "model_type", m.model_type, false);
  detail::field(v, at, "moe_num_experts", m.moe_num_experts, false);
  detail::field(v, at, "moe_top_k", m.moe_top_k, false);
  detail::field(v, at, "mlp_gated_linear_units", m.mlp_gated_linear_units, false);
  // num_key_value_groups is recomputed from n_head / num_key_value_heads, as config.py does
  try {
    (void)la::resolve(m);
  } catch (const config_error& e) {
    throw config_error(e.api(), "/" + e.field(), "/" + e.field() + ": " + e.rule(), file);
  }
  return m;
}

/// A GPU config object (config.py `GPUConfig` fields).
inline la::gpu_config read_gpu_config(const value& v, const std::string& file = {}) {
  const detail::location at{file, ""};
  detail::only_keys(v, at,
                    {"name", "mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec", "intra_node_bandwidth_in_GB_per_sec",
                     "intra_node_min_message_latency", "peak_fp16_TFLOPS", "peak_i8_TFLOPS", "peak_i4_TFLOPS",
                     "inter_node_bandwidth_in_GB_per_sec"});
  la::gpu_config g;
  detail::field(v, at, "name", g.name, true);
  detail::field(v, at, "mem_per_GPU_in_GB", g.mem_per_GPU_in_GB, true);
  detail::field(v, at, "hbm_bandwidth_in_GB_per_sec", g.hbm_bandwidth_in_GB_per_sec, true);
  detail::field(v, at, "intra_node_bandwidth_in_GB_per_sec", g.intra_node_bandwidth_in_GB_per_sec, true);
  detail::field(v, at, "intra_node_min_message_latency", g.intra_node_min_message_latency, true);
  detail::field(v, at, "peak_fp16_TFLOPS", g.peak_fp16_TFLOPS, true);
  detail::field(v, at, "peak_i8_TFLOPS", g.peak_i8_TFLOPS);
  detail::field(v, at, "peak_i4_TFLOPS", g.peak_i4_TFLOPS);
  detail::field(v, at, "inter_node_bandwidth_in_GB_per_sec", g.inter_node_bandwidth_in_GB_per_sec, false);
  try {
    la::check(g);
  } catch (const config_error& e) {
    throw config_error(e.api(), "/" + e.field(), "/" + e.field() + ": " + e.rule(), file);
  }
  return g;
}

/// A data-type config object (config.py `DtypeConfig` fields).
inline la::dtype_config read_dtype_config(const value& v, const std::string& file = {}) {
  const detail::location at{file, ""};
  detail::only_keys(v, at, {"name", "weight_bits", "activation_bits", "embedding_bits"});
  la::dtype_config d;
  detail::field(v, at, "name", d.name, false);
  detail::field(v, at, "weight_bits", d.weight_bits, false);
  detail::field(v, at, "activation_bits", d.activation_bits, false);
  detail::field(v, at, "embedding_bits", d.embedding_bits, false);
  try {
    la::check(d);
  } catch (const config_error& e) {
    throw config_error(e.api(), "/" + e.field(), "/" + e.field() + ": " + e.rule(), file);
  }
  return d;
}

namespace detail {

/// The config named `name` in `dir/<kind>`: like config.py, the file whose "name" field is `name`
/// (files are named after it, so that one is tried first). A path to a .json file loads that file.
template <class Read>
auto find_config(const std::filesystem::path& dir, std::string_view kind, const std::string& name, Read read) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (name.size() > 5 && name.ends_with(".json") && fs::is_regular_file(name, ec)) return read(read_file(name), name);
  const fs::path folder = dir / kind;
  if (!fs::is_directory(folder, ec))
    throw config_error("llmsim::json::llm_analysis", std::string(kind),
                       "no folder " + folder.string() +
                           " (give the llm-analysis config folder, e.g. "
                           "../shared/reference/llm-analysis)");
  const fs::path direct = folder / (name + ".json");
  if (fs::is_regular_file(direct, ec)) {
    const value v = read_file(direct);
    if (v.is_object() && v.contains("name") && v["name"] == name) return read(v, direct.string());
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::string known;
  for (const auto& f : files) {
    const value v = read_file(f);
    if (v.is_object() && v.contains("name") && v["name"].is_string()) {
      if (v["name"] == name) return read(v, f.string());
      if (!known.empty()) known.append(", ");
      known.append(v["name"].get<std::string>());
    }
  }
  throw config_error(
      "llmsim::json::llm_analysis", std::string(kind),
      "unknown " + std::string(kind) + " name \"" + name + "\" in " + folder.string() + " (known: " + known + ")");
}

}  // namespace detail

inline la::model_config find_model_config(const std::filesystem::path& dir, const std::string& name) {
  return detail::find_config(dir, "model_configs", name,
                             [](const value& v, const std::string& f) { return read_model_config(v, f); });
}
inline la::gpu_config find_gpu_config(const std::filesystem::path& dir, const std::string& name) {
  return detail::find_config(dir, "gpu_configs", name,
                             [](const value& v, const std::string& f) { return read_gpu_config(v, f); });
}
inline la::dtype_config find_dtype_config(const std::filesystem::path& dir, const std::string& name) {
  return detail::find_config(dir, "dtype_configs", name,
                             [](const value& v, const std::string& f) { return read_dtype_config(v, f); });
}

namespace detail {
/// An enum given as llm-analysis's integer (`ActivationRecomputation`, `DSZeRO`), 0..`last`.
template <class E>
void enum_field(const value& obj, const location& at, std::string_view key, E& out, std::int64_t last) {
  std::optional<std::int64_t> v;
  field(obj, at, key, v);
  if (!v) return;
  if (*v < 0 || *v > last)
    json::detail::fail(at.child(key),
                       std::string(key) + "=" + std::to_string(*v) + " must be in [0, " + std::to_string(last) + "]");
  out = static_cast<E>(*v);
}
/// An optional keyword argument: absent keeps the default, None (null) clears it.
template <class T>
void kwarg(const value& obj, const location& at, std::string_view key, std::optional<T>& out) {
  const std::string k(key);
  if (!obj.contains(k)) return;
  if (obj[k].is_null()) {
    out.reset();
    return;
  }
  T v{};
  json::detail::read(obj[k], at.child(key), v);
  out = v;
}
/// A keyword argument with a value: absent keeps the default.
template <class T>
void kwarg(const value& obj, const location& at, std::string_view key, T& out) {
  field(obj, at, key, out, false);
}
}  // namespace detail

/// `train(**kwargs)`'s parameters from a keyword-argument object (llm-analysis's names; the config
/// names model_name, gpu_name, dtype_name and log_level are skipped); any other key is an error.
inline la::training_params read_training_kwargs(const value& k, const std::string& source = {}) {
  using detail::kwarg;
  const detail::location at{source, ""};
  detail::only_keys(k, at,
                    {"model_name",
                     "gpu_name",
                     "dtype_name",
                     "log_level",
                     "batch_size_per_gpu",
                     "gradient_accumulation_steps",
                     "global_batch_size",
                     "seq_len",
                     "total_num_tokens",
                     "activation_recomputation",
                     "ds_zero",
                     "fwd_prefetch",
                     "bwd_prefetch",
                     "dp_size",
                     "tp_size",
                     "pp_size",
                     "sp_size",
                     "ep_size",
                     "total_num_gpus",
                     "layernorm_dtype_bytes",
                     "master_weights_dtype_bytes",
                     "other_op_bytes",
                     "flash_attn",
                     "softmax_dropout",
                     "mlp_activation_quant_bits",
                     "mlp_1linear_quant_bits",
                     "mlp_gelu_input_quant_bits",
                     "mlp_2linear_quant_bits",
                     "mlp_recompute_gelu",
                     "achieved_tflops",
                     "flops_efficiency",
                     "hbm_memory_efficiency",
                     "intra_node_memory_efficiency",
                     "inter_node_memory_efficiency",
                     "num_gpus_per_node"});
  la::training_params p;
  kwarg(k, at, "batch_size_per_gpu", p.batch_size_per_gpu);
  kwarg(k, at, "gradient_accumulation_steps", p.gradient_accumulation_steps);
  kwarg(k, at, "global_batch_size", p.global_batch_size);
  kwarg(k, at, "seq_len", p.seq_len);
  kwarg(k, at, "total_num_tokens", p.total_num_tokens);
  detail::enum_field(k, at, "activation_recomputation", p.activation_recomputation, 4);
  detail::enum_field(k, at, "ds_zero", p.ds_zero, 3);
  kwarg(k, at, "fwd_prefetch", p.fwd_prefetch);
  kwarg(k, at, "bwd_prefetch", p.bwd_prefetch);
  kwarg(k, at, "dp_size", p.dp_size);
  kwarg(k, at, "tp_size", p.tp_size);
  kwarg(k, at, "pp_size", p.pp_size);
  kwarg(k, at, "sp_size", p.sp_size);
  kwarg(k, at, "ep_size", p.ep_size);
  kwarg(k, at, "total_num_gpus", p.total_num_gpus);
  kwarg(k, at, "layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  kwarg(k, at, "master_weights_dtype_bytes", p.master_weights_dtype_bytes);
  kwarg(k, at, "other_op_bytes", p.other_op_bytes);
  kwarg(k, at, "flash_attn", p.flash_attn);
  kwarg(k, at, "softmax_dropout", p.softmax_dropout);
  kwarg(k, at, "mlp_activation_quant_bits", p.mlp_activation_quant_bits);
  kwarg(k, at, "mlp_1linear_quant_bits", p.mlp_1linear_quant_bits);
  kwarg(k, at, "mlp_gelu_input_quant_bits", p.mlp_gelu_input_quant_bits);
  kwarg(k, at, "mlp_2linear_quant_bits", p.mlp_2linear_quant_bits);
  kwarg(k, at, "mlp_recompute_gelu", p.mlp_recompute_gelu);
  kwarg(k, at, "achieved_tflops", p.achieved_tflops);
  kwarg(k, at, "flops_efficiency", p.flops_efficiency);
  kwarg(k, at, "hbm_memory_efficiency", p.hbm_memory_efficiency);
  kwarg(k, at, "intra_node_memory_efficiency", p.intra_node_memory_efficiency);
  kwarg(k, at, "inter_node_memory_efficiency", p.inter_node_memory_efficiency);
  kwarg(k, at, "num_gpus_per_node", p.num_gpus_per_node);
  return p;
}

/// `infer(**kwargs)`'s parameters, likewise.
inline la::inference_params read_inference_kwargs(const value& k, const std::string& source = {}) {
  using detail::kwarg;
  const detail::location at{source, ""};
  detail::only_keys(k, at,
                    {"model_name",
                     "gpu_name",
                     "dtype_name",
                     "log_level",
                     "batch_size_per_gpu",
                     "ds_zero",
                     "dp_size",
                     "tp_size",
                     "pp_size",
                     "sp_size",
                     "seq_len",
                     "num_tokens_to_generate",
                     "use_kv_cache",
                     "layernorm_dtype_bytes",
                     "kv_cache_dtype_bytes",
                     "achieved_tflops",
                     "achieved_memory_bandwidth_GBs",
                     "flops_efficiency",
                     "hbm_memory_efficiency",
                     "intra_node_memory_efficiency",
                     "inter_node_memory_efficiency",
                     "cost_per_gpu_hour"});
  la::inference_params p;
  kwarg(k, at, "batch_size_per_gpu", p.batch_size_per_gpu);
  detail::enum_field(k, at, "ds_zero", p.ds_zero, 3);
  kwarg(k, at, "dp_size", p.dp_size);
  kwarg(k, at, "tp_size", p.tp_size);
  kwarg(k, at, "pp_size", p.pp_size);
  kwarg(k, at, "sp_size", p.sp_size);
  kwarg(k, at, "seq_len", p.seq_len);
  kwarg(k, at, "num_tokens_to_generate", p.num_tokens_to_generate);
  kwarg(k, at, "use_kv_cache", p.use_kv_cache);
  kwarg(k, at, "layernorm_dtype_bytes", p.layernorm_dtype_bytes);
  kwarg(k, at, "kv_cache_dtype_bytes", p.kv_cache_dtype_bytes);
  kwarg(k, at, "achieved_tflops", p.achieved_tflops);
  kwarg(k, at, "achieved_memory_bandwidth_GBs", p.achieved_memory_bandwidth_GBs);
  kwarg(k, at, "flops_efficiency", p.flops_efficiency);
  kwarg(k, at, "hbm_memory_efficiency", p.hbm_memory_efficiency);
  kwarg(k, at, "intra_node_memory_efficiency", p.intra_node_memory_efficiency);
  kwarg(k, at, "inter_node_memory_efficiency", p.inter_node_memory_efficiency);
  kwarg(k, at, "cost_per_gpu_hour", p.cost_per_gpu_hour);
  return p;
}

/// The summary as llm-analysis's dict: same keys, same order, ints as integers, None as null.
inline value to_json(const la::summary& s) {
  value out = value::object();
  for (const auto& [key, v] : s.items) {
    const std::string k(key);
    switch (v.type) {
      case la::summary_value::kind::null:
        out[k] = nullptr;
        break;
      case la::summary_value::kind::flag:
        out[k] = v.flag;
        break;
      case la::summary_value::kind::integer:
        out[k] = v.integer;
        break;
      case la::summary_value::kind::number:
        out[k] = v.number;
        break;
      case la::summary_value::kind::text:
        out[k] = std::string(v.text);
        break;
    }
  }
  return out;
}

}  // namespace llm_analysis
}  // namespace json
LLMSIM_END_NAMESPACE
