// `llmsim search`: every strategy of the space priced, the fitting ones ranked (llmsim/search.hpp).

#include "search_command.hpp"

#include <algorithm>
#include <llmsim/json.hpp>
#include <llmsim/json/html_report.hpp>
#include <llmsim/search.hpp>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace llmsim_cli {
namespace {

namespace lj = llmsim::json;

/// Set by SIGINT: the workers stop and the best so far is printed.
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted.store(true); }

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

std::int64_t parse_count(const std::string& field, const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) { used = 0; }
  if (used != text.size() || v < 1)
    throw search_usage_error(field, field + "=" + text + ": expected a positive integer");
  return v;
}

/// `--fix tp=8,pp=4 --fix recompute=none`: each key pins one dimension, once (`seen`: the keys of
/// every --fix so far; a repeated key was silently the last one).
void apply_fix(llmsim::search_space& sp, const std::string& entry, std::vector<std::string>& seen) {
  std::size_t start = 0;
  while (start <= entry.size()) {
    const std::size_t comma = entry.find(',', start);
    const std::string item = entry.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? entry.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw search_usage_error("--fix", "--fix " + item +
                                            ": expected KEY=VALUE (tp, pp, cp, ep, etp, vp, mbs, zero, "
                                            "fp8=off, offload=off, recompute=none, schedule=1f1b)");
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    const std::string field = "--fix " + key;
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw search_usage_error(field, field + " is given twice: fix each dimension once");
    seen.push_back(key);
    if (key == "tp") {
      sp.tp = {parse_count(field, val)};
      if (sp.tp[0] > sp.max_tp) sp.max_tp = sp.tp[0];
    } else if (key == "pp") {
      sp.pp = {parse_count(field, val)};
    } else if (key == "cp") {
      sp.cp = {parse_count(field, val)};
    } else if (key == "ep") {
      sp.ep = {parse_count(field, val)};
    } else if (key == "etp") {
      sp.etp = {parse_count(field, val)};
    } else if (key == "vp") {
      sp.vp = {parse_count(field, val)};
    } else if (key == "mbs") {
      sp.mbs = {parse_count(field, val)};
      if (sp.mbs[0] > sp.max_mbs) sp.max_mbs = sp.mbs[0];
    } else if (key == "zero") {
      if (val.size() != 1 || val[0] < '0' || val[0] > '3')
        throw search_usage_error(field, field + "=" + val + ": 0..3");
      sp.zero = {val[0] - '0'};
    } else if (key == "fp8" && val == "off") {
      sp.fp8 = false;
    } else if (key == "offload" && val == "off") {
      sp.offload = false;
    } else if (key == "recompute" && val == "none") {
      sp.recompute = false;
    } else if (key == "schedule" && val == "1f1b") {
      sp.schedules = false;
      sp.vp = {1};
    } else {
      throw search_usage_error("--fix", "--fix " + item + ": unknown key or value");
    }
  }
}

/// `--allow fsdp,wide-tp`: dimensions beyond the default space.
void apply_allow(llmsim::search_space& sp, const std::string& what) {
  if (what == "fsdp")
    sp.fsdp = true;
  else if (what == "wide-tp")
    sp.max_tp = 64;
  else if (what == "ep-overlap")
    sp.expert_comm_overlap = true;
  else if (what == "tp-overlap")
    sp.tp_comm_overlap = true;
  else
    throw search_usage_error("--allow", "--allow " + what +
                                            ": expected fsdp (Megatron-FSDP for ZeRO-2/3), wide-tp "
                                            "(tensor parallelism beyond 8), ep-overlap (Megatron's EP "
                                            "all-to-all overlap for MoE layouts) or tp-overlap (TE's "
                                            "userbuffers TP overlap for layouts with tp > 1)");
}

/// The candidate's compact strategy name (`catalogue::parse_strategy_name` reads it back:
/// `llmsim perf --strategy NAME` prices the same strategy).
std::string layout_name(const llmsim::search_candidate& c, const llmsim::search_space& sp) {
  return std::string(llmsim::search_candidate_name(c, sp).view());
}

const char* recompute_name(llmsim::search_recompute r) {
  if (r == llmsim::search_recompute::none) return "none";
  return r == llmsim::search_recompute::selective ? "selective" : "full";
}

/// With --tokens: what every candidate's training run is priced on.
struct run_pricing {
  double tokens = 0, tokens_per_step = 0;
  std::int64_t gpus = 0;
  std::optional<double> usd_per_gpu_hour;
};

/// The fields of a candidate row in output order (JSON keys, CSV columns): `emit(key, value)` with
/// an integer, a double, a bool or a string; with `pricing`, the training run's days, GPU-hours
/// and dollars last.
template <class Emit>
void for_each_field(const llmsim::search_candidate& c, const llmsim::search_space& sp, std::size_t rank,
                    const std::optional<run_pricing>& pricing, Emit&& emit) {
  const auto& p = c.point;
  const auto& l = p.layout;
  emit("rank", static_cast<std::int64_t>(rank));
  emit("layout", std::string_view(layout_name(c, sp)));
  for (const auto& [key, v] : {std::pair{"tp", l.tp},
                               {"pp", l.pp},
                               {"cp", l.cp},
                               {"dp", l.dp},
                               {"ep", l.ep},
                               {"etp", l.etp},
                               {"vp", l.vp},
                               {"first", l.first},
                               {"last", l.last}})
    emit(key, v);
  emit("schedule", llmsim::enum_name(l.schedule));
  emit("ep_overlap", l.ep_overlap);
  emit("tp_overlap", l.tp_overlap);
  emit("mbs", p.mbs);
  emit("mbc", p.mbn);
  emit("zero", p.zero);
  emit("fsdp", p.fsdp);
  emit("fp8", p.fp8 == llmsim::fp8_recipe_kind::invalid ? std::string_view("off") : llmsim::enum_name(p.fp8));
  emit("optimizer_offload", p.offload);
  emit("recompute", std::string_view(recompute_name(p.recompute)));
  emit("recompute_layers", p.recompute_layers);
  emit("step_time", c.time);
  emit("mfu", c.mfu);
  emit("tokens_per_s_per_gpu", c.tokens_per_gpu);
  emit("peak_mem_gib", c.peak_mem / gib);
  emit("peak_stage", llmsim::stage_kind_names[static_cast<std::size_t>(c.peak_stage)]);
  if (!pricing) return;
  const auto run = llmsim::training_cost(c.time, pricing->gpus, pricing->tokens_per_step, pricing->tokens,
                                         pricing->usd_per_gpu_hour);
  emit("train_days", run.days);
  emit("gpu_hours", run.gpu_hours);
  if (run.usd) emit("usd", *run.usd);
}

lj::value candidate_json(const llmsim::search_candidate& c, const llmsim::search_space& sp, std::size_t rank,
                         const std::optional<run_pricing>& pricing) {
  lj::value out = lj::value::object();
  for_each_field(c, sp, rank, pricing, [&out](const char* key, const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string_view>)
      out[key] = std::string(v);
    else
      out[key] = v;
  });
  return out;
}

/// Appends a number as the shortest text that reads back to it (JSON: null when not finite).
void append_number(std::string& line, double v, bool json) {
  if (!std::isfinite(v)) {
    line += json ? "null" : (std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  line.append(buf, r.ptr);
}
void append_number(std::string& line, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  line.append(buf, r.ptr);
}

/// One candidate as a compact JSON object, or as a CSV row (`json` false). The strings are
/// layout tokens and enum names: letters, digits and '_', nothing to escape or quote.
void append_candidate(std::string& line, const llmsim::search_candidate& c, const llmsim::search_space& sp,
                      std::size_t rank, const std::optional<run_pricing>& pricing, bool json) {
  bool first = true;
  if (json) line += '{';
  for_each_field(c, sp, rank, pricing, [&](const char* key, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if (!first) line += ',';
    first = false;
    if (json) {
      line += '"';
      line += key;
      line += "\":";
    }
    if constexpr (std::is_same_v<T, std::string_view>) {
      if (json) line += '"';
      line += v;
      if (json) line += '"';
    } else if constexpr (std::is_same_v<T, bool>) {
      line += v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, double>) {
      append_number(line, v, json);
    } else {
      append_number(line, static_cast<std::int64_t>(v));
    }
  });
  if (json) line += '}';
}

/// Where the document holds the candidates until they are written (see below).
constexpr std::string_view candidates_placeholder = "@llmsim-candidates@";

/// Prints `document` (indented JSON) with the placeholder string replaced by every fitting
/// candidate, one compact object per line, each written as it is made: a tree of half a million
/// candidates took longer to build and copy than the search took to price them.
void print_json_streaming_candidates(const std::string& document, const std::vector<llmsim::search_candidate>& all,
                                     const llmsim::search_space& sp, const std::optional<run_pricing>& pricing) {
  const std::string quoted = "\"" + std::string(candidates_placeholder) + "\"";
  const std::size_t at = document.find(quoted);
  std::fwrite(document.data(), 1, at, stdout);
  std::fputs(all.empty() ? "[]" : "[\n", stdout);
  std::string line;
  for (std::size_t i = 0; i < all.size(); ++i) {
    line = "    ";
    append_candidate(line, all[i], sp, i + 1, pricing, true);
    line += i + 1 < all.size() ? ",\n" : "\n  ]";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  const std::size_t rest = at + quoted.size();
  std::fwrite(document.data() + rest, 1, document.size() - rest, stdout);
  std::fputs("\n", stdout);
}

/// Why a row ranks where it does: the winner against the runner-up, the others against the winner.
std::string why(const llmsim::search_result& r, std::size_t i) {
  char buf[128];
  if (i == 0) {
    if (r.top.size() < 2) return r.fitting_count > 1 ? "fastest" : "the only fitting strategy";
    std::snprintf(buf, sizeof buf, "fastest; next is %.2f%% slower", (r.top[1].time / r.top[0].time - 1) * 100);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f%% slower than #1", (r.top[i].time / r.top[0].time - 1) * 100);
  }
  return buf;
}

void print_table(const llmsim::search_result& r, const std::vector<llmsim::search_candidate>& rows,
                 const llmsim::search_space& sp) {
  std::printf("%4s  %-72s %9s %6s %10s %20s  %s\n", "rank", "layout", "step (s)", "MFU", "tok/s/GPU",
              "peak GiB (stage)", "why");
  bool above_one = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& c = rows[i];
    const std::string stage(llmsim::stage_kind_names[static_cast<std::size_t>(c.peak_stage)]);
    above_one = above_one || c.mfu > 1;
    std::printf("%4zu  %-72s %9.3f %5.1f%%%s %10.0f %7.2f %-12s %s\n", i + 1, layout_name(c, sp).c_str(), c.time,
                c.mfu * 100, c.mfu > 1 ? "*" : "", c.tokens_per_gpu, c.peak_mem / gib, stage.c_str(),
                &rows == &r.top ? why(r, i).c_str() : "");
  }
  if (above_one) std::printf("* MFU above 100 %%: %s\n", std::string(llmsim::mfu_above_one_reason).c_str());
}

void print_csv(const std::vector<llmsim::search_candidate>& rows, const llmsim::search_space& sp,
               const std::optional<run_pricing>& pricing) {
  std::string line;
  for_each_field(llmsim::search_candidate{.time = 1}, sp, 0, pricing, [&line](const char* key, const auto&) {
    if (!line.empty()) line += ',';
    line += key;
  });
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    line.clear();
    append_candidate(line, rows[i], sp, i + 1, pricing, false);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
}

/// Progress on stderr when it is a terminal and the search has run for more than a second.
void show_progress(const llmsim::search_progress& p) {
  if (p.elapsed < 1.0) return;
  std::fprintf(stderr, "\rsearch: %lld/%lld layouts, %lld candidates, %lld fit, best %.3f s   ",
               static_cast<long long>(p.done_layouts), static_cast<long long>(p.layouts),
               static_cast<long long>(p.evaluated), static_cast<long long>(p.fitting), p.best_time);
}

llmsim::search_space space_of(const search_args& a) {
  llmsim::search_space sp;
  sp.gpus = a.gpus;
  sp.seq_len = a.seq_len;
  if (a.global_batch) sp.global_batch = *a.global_batch;
  if (a.tokens_per_step) {
    if (*a.tokens_per_step % a.seq_len != 0)
      throw search_usage_error("--tokens-per-step", "--tokens-per-step=" + std::to_string(*a.tokens_per_step) +
                                                        " must be a multiple of --seq=" + std::to_string(a.seq_len));
    sp.tokens_per_step = *a.tokens_per_step;
  }
  std::vector<std::string> fixed;
  for (const auto& f : a.fix) apply_fix(sp, f, fixed);
  for (const auto& w : a.allow) apply_allow(sp, w);
  sp.base.seq_len = a.seq_len;
  return sp;
}

lj::value summary_json(const search_args& a, const llmsim::search_result& r, std::int64_t batch) {
  return {{"model", a.model},
          {"system", a.system},
          {"gpus", a.gpus},
          {"global_batch", batch},
          {"seq_len", a.seq_len},
          {"objective", a.objective},
          {"memory_budget_gib", r.budget / gib},
          {"layouts", r.layouts},
          {"evaluated", r.evaluated},
          {"estimated", r.estimated},
          {"invalid", r.invalid},
          {"over_memory", r.over_memory},
          {"bounded_by_time", r.bounded_by_time},
          {"fitting", r.fitting_count},
          {"seconds", r.seconds},
          {"strategies_per_second", r.strategies_per_second},
          {"interrupted", r.interrupted}};
}

/// Nothing fits: the candidate closest to fitting, by how much it misses.
int report_nothing_fits(const search_args& a, const llmsim::search_space& sp, const llmsim::search_result& r,
                        lj::value& out, const std::optional<run_pricing>& pricing) {
  std::string msg = "no strategy of the space fits " + a.model + " on " + std::to_string(a.gpus) + " x " + a.system;
  if (r.smallest_shortfall >= 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  ": the least memory is %.2f GiB over the budget of %.2f GiB (device memory less the %.0f%% margin), "
                  "with %s",
                  r.smallest_shortfall / gib, r.budget / gib, a.memory_margin * 100,
                  layout_name(r.closest, sp).c_str());
    msg += buf;
    out["smallest_shortfall_gib"] = r.smallest_shortfall / gib;
    out["closest"] = candidate_json(r.closest, sp, 0, pricing);
  } else {
    msg += ": no candidate of the space passes validation";
  }
  std::fprintf(stderr, "llmsim: %s (exit status 3)\n", msg.c_str());
  out["error"] = {{"message", msg}};
  out["exit_status"] = 3;
  if (a.format == "json") std::printf("%s\n", out.dump(2).c_str());
  return 3;
}

/// The JSON document of a search (the candidates as a placeholder the printer streams over).
lj::value search_document(lj::value out, const llmsim::search_result& r, const llmsim::search_space& sp,
                          const std::optional<run_pricing>& pricing, const llmsim::strategy_spec& best,
                          const llmsim::estimate_result& winner, const search_args& a, bool with_pareto) {
  lj::value top = lj::value::array(), front = lj::value::array();
  for (std::size_t i = 0; i < r.top.size(); ++i) top.push_back(candidate_json(r.top[i], sp, i + 1, pricing));
  out["top"] = top;
  out["candidates"] = std::string(candidates_placeholder);
  if (with_pareto) {
    for (std::size_t i = 0; i < r.pareto.size(); ++i) front.push_back(candidate_json(r.pareto[i], sp, i + 1, pricing));
    out["pareto"] = front;
  }
  out["winner"] = lj::to_json(winner);
  out["winner"]["strategy"] = lj::to_json(best);
  if (a.tokens)
    out["winner"]["training_cost"] = lj::to_json(llmsim::training_cost(winner, best, *a.tokens, a.usd_per_gpu_hour));
  out["exit_status"] = 0;
  return out;
}

/// Writes the search's HTML report (an input error naming -o if the file cannot be written).
void write_html(const std::string& file, lj::value doc, const llmsim::search_result& r, const llmsim::model_spec& model,
                const llmsim::strategy_spec& best, const llmsim::system_spec& sys) {
  doc.erase("candidates");
  std::vector<lj::html::scatter_point> points;
  points.reserve(r.fitting.size());
  for (const auto& c : r.fitting) points.push_back({c.time, c.peak_mem / gib});
  const auto timeline = lj::html::timeline_of(model, best, sys);
  const std::string html = lj::html::search_report(doc, points, timeline.get(), timeline.refusal);
  std::ofstream out(file, std::ios::binary);
  if (out) out.write(html.data(), static_cast<std::streamsize>(html.size()));
  if (!out)
    throw llmsim::config_error("llmsim search", "--output",
                               std::string("--output: cannot write the HTML report: ") + std::strerror(errno), file);
}

}  // namespace

CLI::App* add_search_command(CLI::App& app, search_args& a) {
  auto* cmd = app.add_subcommand(
      "search",
      "Exhaustive strategy search: every layout, batch split, recompute, ZeRO, FP8 and schedule choice that "
      "fits, ranked by predicted step time; the winner's perf report follows.");
  cmd->add_option("--model", a.model, "Model: config file or catalogue name")->required();
  cmd->add_option("--system", a.system, "System: config file or catalogue name")->required();
  cmd->add_option("--gpus", a.gpus, "GPUs of the job (world size)")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, llmsim::max_search_gpus));
  auto* gb =
      cmd->add_option("--global-batch", a.global_batch, "Sequences per iteration")->check(CLI::Range(1, 1 << 30));
  auto* tps = cmd->add_option("--tokens-per-step", a.tokens_per_step, "Tokens per iteration (a multiple of --seq)")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 50));
  gb->excludes(tps);
  cmd->add_option("--seq", a.seq_len, "Sequence length")->required()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--top", a.top, "Rows of the ranking")->check(CLI::Range(1, 100000));
  cmd->add_option("--memory-margin", a.memory_margin, "Fraction of device memory kept free (default 0.05)")
      ->check(finite_number)
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_option("--objective", a.objective,
                  "Ranking: time (step time), mfu or cost (GPU-seconds per token); for a fixed GPU count and batch "
                  "the three give the same order")
      ->check(CLI::IsMember({"time", "mfu", "cost"}));
  cmd->add_option("--fix", a.fix,
                  "Pin dimensions: tp=8,pp=4 (keys tp pp cp ep etp vp mbs zero; fp8=off offload=off "
                  "recompute=none schedule=1f1b)")
      ->type_name("KEY=VALUE,...");
  cmd->add_option("--allow", a.allow,
                  "Widen the space: fsdp (Megatron-FSDP for ZeRO-2/3), wide-tp (tp beyond 8), ep-overlap (MoE "
                  "layouts also with Megatron's EP all-to-all overlap, overlap_moe_expert_parallel_comm), "
                  "tp-overlap (layouts with tp > 1 also with TE's userbuffers TP overlap, tp_comm_overlap)")
      ->delimiter(',');
  cmd->add_option("--format", a.format, "text (top-K table + winner's report), json or csv (every fitting candidate)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  cmd->add_flag("--pareto", a.pareto, "Also the memory-vs-time Pareto front (prices every fitting candidate)");
  cmd->add_option("--threads", a.threads, "Worker threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("-o,--output", a.html_file,
                  "Also write a self-contained HTML report: the memory-vs-time scatter of every fitting candidate "
                  "with the Pareto front and the winner, the ranking, and the winner's charts and timeline")
      ->type_name("FILE.html");
  add_training_cost_options(cmd, a.tokens, a.usd_per_gpu_hour);
  cmd->callback([&a] {
    if (!a.global_batch && !a.tokens_per_step)
      throw CLI::ValidationError("search", "give --global-batch or --tokens-per-step");
  });
  return cmd;
}

int run_search(const search_args& a) {
  const llmsim::search_space sp = space_of(a);
  const lj::load_options opt{};
  const llmsim::model_spec model = lj::load_model(a.model, opt);
  const lj::system_config system = lj::load_system(a.system, opt);
  // A dense model has no experts to place: a fixed ep or etp above 1 was ignored.
  for (const auto& [key, fixed] : {std::pair{"ep", &sp.ep}, std::pair{"etp", &sp.etp}})
    if (!llmsim::is_moe(model) && !fixed->empty() && (*fixed)[0] > 1)
      throw search_usage_error(std::string("--fix ") + key, std::string("--fix ") + key + "=" +
                                                                std::to_string((*fixed)[0]) + ": " + a.model +
                                                                " is a dense model (no experts to place)");
  llmsim::search_options o;
  o.top_k = a.top;
  o.memory_margin = a.memory_margin;
  o.objective = a.objective == "mfu"    ? llmsim::search_objective::mfu
                : a.objective == "cost" ? llmsim::search_objective::cost
                                        : llmsim::search_objective::time;
  o.threads = a.threads;
  o.keep_all = a.format != "text" || a.pareto || a.html_file;
  o.stop = &interrupted;
#ifndef _WIN32
  if (isatty(STDERR_FILENO) != 0) o.progress = show_progress;
#endif
  const auto previous = std::signal(SIGINT, on_sigint);
  const llmsim::search_result r = llmsim::search(model, system.spec(), sp, o);
  std::signal(SIGINT, previous);
  if (o.progress) std::fprintf(stderr, "\r%80s\r", "");
  if (r.interrupted) std::fprintf(stderr, "llmsim: interrupted: the best so far follows\n");
  const std::int64_t batch = sp.global_batch > 0 ? sp.global_batch : sp.tokens_per_step / sp.seq_len;
  std::optional<run_pricing> pricing;
  if (a.tokens)
    pricing = run_pricing{*a.tokens, static_cast<double>(batch) * static_cast<double>(sp.seq_len), sp.gpus,
                          a.usd_per_gpu_hour};
  lj::value out = summary_json(a, r, batch);
  // No layout at all: the --fix values (or the sequence) break a divisibility rule, an input error.
  if (r.layouts == 0)
    throw search_usage_error(
        "--fix", "the search space of " + a.model + " on " + std::to_string(a.gpus) + " GPUs at seq " +
                     std::to_string(sp.seq_len) +
                     " has no layout: tp must divide the GPUs and model.head_num, cp the GPUs with seq divisible by "
                     "2cp (cp > 1), seq / cp divisible by tp (sequence parallelism), pp the GPUs and at most the "
                     "layers, the global batch divisible by dp, ep and etp a MoE model's experts and ranks");
  if (r.top.empty()) return report_nothing_fits(a, sp, r, out, pricing);
  const llmsim::strategy_spec best = llmsim::strategy_of(r.top[0], sp);
  const llmsim::estimate_result winner = llmsim::estimate(model, best, system.spec());
  if (a.html_file)
    write_html(*a.html_file, search_document(out, r, sp, pricing, best, winner, a, true), r, model, best,
               system.spec());
  if (a.format == "json") {
    const lj::value doc = search_document(out, r, sp, pricing, best, winner, a, a.pareto);
    print_json_streaming_candidates(doc.dump(2), r.fitting, sp, pricing);
  } else if (a.format == "csv") {
    print_csv(a.pareto ? r.pareto : r.fitting, sp, pricing);
  } else {
    std::printf("search: %s on %lld x %s, global batch %lld x seq %lld; memory budget %.2f GiB per GPU\n",
                a.model.c_str(), static_cast<long long>(a.gpus), a.system.c_str(), static_cast<long long>(batch),
                static_cast<long long>(a.seq_len), r.budget / gib);
    std::printf(
        "%lld candidates (%lld layouts) in %.2f s = %.0f strategies/s: %lld priced, %lld fit, %lld over "
        "memory, %lld invalid, %lld cannot enter the top %zu\n\n",
        static_cast<long long>(r.evaluated), static_cast<long long>(r.layouts), r.seconds, r.strategies_per_second,
        static_cast<long long>(r.estimated), static_cast<long long>(r.fitting_count),
        static_cast<long long>(r.over_memory), static_cast<long long>(r.invalid),
        static_cast<long long>(r.bounded_by_time), a.top);
    print_table(r, r.top, sp);
    if (a.pareto) {
      std::printf("\nmemory-vs-time Pareto front (fastest first):\n");
      print_table(r, r.pareto, sp);
    }
    std::printf("\nwinner: %s\n%s", layout_name(r.top[0], sp).c_str(),
                llmsim::to_text(winner, model, best, system.spec()).c_str());
    if (a.tokens)
      std::printf("%s", llmsim::to_text(llmsim::training_cost(winner, best, *a.tokens, a.usd_per_gpu_hour)).c_str());
  }
  return 0;
}

}  // namespace llmsim_cli
