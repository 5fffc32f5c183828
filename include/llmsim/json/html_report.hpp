/// \file llmsim/json/html_report.hpp
/// One self-contained HTML page (no script, no network: its Content-Security-Policy forbids both)
/// with SVG charts of an estimate: the key figures, the iteration breakdown of every pipeline
/// stage, every stage's memory stacked against device memory, the pipeline timeline from the
/// engine's trace; and for a strategy search the memory-vs-time scatter of the fitting candidates
/// with the Pareto front and the chosen strategy, then the winner's report.
///
/// The page is drawn from the JSON documents `llmsim perf --format json` and `llmsim search
/// --format json` print, which it also embeds (`<script type="application/json"
/// id="llmsim-data">`, inert, '<' written as \u003c). Every number shown carries `data-field` (its path in that document,
/// dotted, list indices as numbers) with `data-scale` and `data-decimals`: the text is
/// `printf("%.*f", decimals, value * scale)`. Every bar, segment and point of a chart carries
/// `data-field` (or `data-fields="A-B"`, a difference) so that its extent can be checked against
/// the document: a bar's length is proportional to its value within a chart (`data-axis`).
///
/// ```cpp
/// const auto trace = llmsim::trace_iteration(model, strategy, system);
/// llmsim::json::value doc = llmsim::json::to_json(trace.estimate);
/// std::ofstream("report.html") << llmsim::json::html::perf_report(doc, &trace);
/// ```
#pragma once

#include <llmsim/estimate/trace.hpp>
#include <llmsim/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace json::html {

/// A fitting candidate of a search, as the scatter plots it.
struct scatter_point {
  double step_time_s = 0;
  double peak_mem_gib = 0;
};

/// Candidates a scatter draws one by one; more are drawn as counts on a grid (every candidate
/// counted; a page of 200,000 circles would take seconds to open).
inline constexpr std::size_t max_scatter_points = 4000;
/// Pipeline passes a timeline draws; a longer trace is summarised in a sentence instead.
inline constexpr std::size_t max_timeline_spans = 20000;

namespace detail {

/// Text safe inside an element or a quoted attribute.
inline std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// `value` with `decimals` digits after the point (C locale, as the tests format it).
inline std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

/// The member at a dotted path ("cost_result.mfu", "top.0.layout"); null when absent.
inline const value& at_path(const value& doc, std::string_view path) {
  static const value null_value;
  const value* v = &doc;
  while (!path.empty()) {
    const auto dot = path.find('.');
    const std::string key(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
    if (v->is_object() && v->contains(key)) {
      v = &(*v)[key];
    } else if (v->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoull(key) < v->size()) {
      v = &(*v)[std::stoull(key)];
    } else {
      return null_value;
    }
  }
  return *v;
}

inline double number_at(const value& doc, std::string_view path) {
  const value& v = at_path(doc, path);
  return v.is_number() ? v.get<double>() : 0.0;
}

inline std::string text_at(const value& doc, std::string_view path) {
  const value& v = at_path(doc, path);
  if (v.is_string()) return v.get<std::string>();
  return v.is_null() ? std::string() : v.dump();
}

/// A number of the document as shown: `<span data-field=…>` with its scale and decimals.
inline std::string shown(const value& doc, const std::string& path, int decimals, double scale = 1.0,
                         std::string_view unit = {}) {
  const value& v = at_path(doc, path);
  if (!v.is_number()) return "<span class=\"absent\">&ndash;</span>";
  std::string out = "<span class=\"num\" data-field=\"" + escape(path) + "\" data-scale=\"" + fixed(scale, 6) +
                    "\" data-decimals=\"" + std::to_string(decimals) + "\">" +
                    fixed(v.get<double>() * scale, decimals) + "</span>";
  if (!unit.empty()) out.append("&nbsp;").append(escape(unit));
  return out;
}

/// One series of a stacked chart: the document path of its value (relative to the item), a
/// label, a colour; `minus` makes it the difference of two paths (`peak_mem - model_mem`).
struct series {
  std::string_view field;
  std::string_view label;
  std::string_view colour;
  std::string_view minus{};
};

/// The iteration breakdown's parts, as `to_text` lists them (they sum to duration_time_per_iter).
inline constexpr std::array<series, 9> time_series{{
    {"fwd_compute_time", "forward compute", "#4e79a7"},
    {"bwd_compute_time", "backward compute", "#a0cbe8"},
    {"recompute_time", "recompute", "#86bcb6"},
    {"intra_exposed_time", "exposed tensor/expert/context-parallel comm", "#f28e2b"},
    {"inter_exposed_time", "exposed pipeline p2p", "#ffbe7d"},
    {"bubble_time", "waiting (bubble)", "#bab0ac"},
    {"dp_exposed_time", "exposed data-parallel sync", "#e15759"},
    {"optim_time", "optimizer step", "#59a14f"},
    {"straggler_time", "straggler wait", "#b07aa1"},
}};

/// A stage's memory at its peak: model state by kind, then what the peak adds, then the
/// allocator's reserve (together peak_mem_with_reserved).
inline constexpr std::array<series, 9> memory_series{{
    {"weight_mem", "weights", "#4e79a7"},
    {"grad_mem", "gradients", "#a0cbe8"},
    {"optimizer_state_mem", "optimizer state", "#59a14f"},
    {"te_dummy_wgrad_mem", "TE dummy wgrad", "#8cd17d"},
    {"workspace_mem", "workspace", "#b6992d"},
    {"gathered_param_mem", "gathered parameters (ZeRO-3)", "#79706e"},
    {"unsharded_grad_mem", "unsharded gradients (ZeRO-2/3)", "#d37295"},
    {"peak_mem", "activations and transients at the peak", "#f28e2b", "model_mem"},
    {"peak_mem_with_reserved", "allocator reserve", "#bab0ac", "peak_mem"},
}};

inline double series_value(const value& item, const series& s) {
  return number_at(item, s.field) - (s.minus.empty() ? 0.0 : number_at(item, s.minus));
}

/// The data attributes of a chart mark drawn from `prefix + s.field` (minus `prefix + s.minus`).
inline std::string mark_fields(const std::string& prefix, const series& s) {
  if (s.minus.empty()) return " data-field=\"" + escape(prefix + std::string(s.field)) + "\"";
  return " data-fields=\"" + escape(prefix + std::string(s.field)) + "-" + escape(prefix + std::string(s.minus)) + "\"";
}

/// A step of 1, 2 or 5 x 10^k giving about `ticks` intervals over [0, top].
inline double tick_step(double top, int ticks) {
  if (!(top > 0) || !std::isfinite(top)) return 1.0;
  const double raw = top / ticks;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (raw <= m * decade) return m * decade;
  return 10.0 * decade;
}

/// Decimals that tell ticks `step` apart.
inline int tick_decimals(double step) { return step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step))); }

inline std::string legend(const series* first, std::size_t count) {
  std::string out = "<ul class=\"legend\">";
  for (std::size_t i = 0; i < count; ++i)
    out += "<li><span class=\"swatch\" style=\"background:" + std::string(first[i].colour) + "\"></span>" +
           escape(first[i].label) + "</li>";
  return out + "</ul>";
}

inline std::string rect(double x, double y, double w, double h, std::string_view colour, const std::string& attrs,
                        const std::string& title) {
  return "<rect x=\"" + fixed(x, 2) + "\" y=\"" + fixed(y, 2) + "\" width=\"" + fixed(w, 3) + "\" height=\"" +
         fixed(h, 3) + "\" fill=\"" + std::string(colour) + "\"" + attrs + "><title>" + escape(title) +
         "</title></rect>";
}

inline std::string line(double x1, double y1, double x2, double y2, std::string_view style) {
  return "<line x1=\"" + fixed(x1, 2) + "\" y1=\"" + fixed(y1, 2) + "\" x2=\"" + fixed(x2, 2) + "\" y2=\"" +
         fixed(y2, 2) + "\" " + std::string(style) + "/>";
}

inline std::string text(double x, double y, std::string_view anchor, const std::string& content,
                        std::string_view cls = "tick") {
  return "<text class=\"" + std::string(cls) + "\" x=\"" + fixed(x, 2) + "\" y=\"" + fixed(y, 2) + "\" text-anchor=\"" +
         std::string(anchor) + "\">" + escape(content) + "</text>";
}

/// Most ticks an axis draws (tick_step aims at 5 or 6; 1-2-5 rounding gives at most 2.5 x that).
inline constexpr int max_ticks = 20;

/// The first tick of a [lo, hi] axis and its step.
inline std::pair<double, double> ticks_of(double lo, double hi, int ticks) {
  const double step = tick_step(hi - lo, ticks);
  return {std::ceil(lo / step - 1e-9) * step + 0.0, step};  // + 0.0: no "-0" label
}

/// Vertical grid lines and labels of a horizontal axis from `lo` to `hi` over [x0, x0 + width].
inline std::string x_axis(double x0, double width, double y_top, double y_bottom, double lo, double hi,
                          std::string_view unit) {
  std::string out;
  const auto [first, step] = ticks_of(lo, hi, 6);
  for (int k = 0; k <= max_ticks; ++k) {  // counted: a step below the values' resolution cannot loop
    const double t = first + k * step;
    if (t > hi + (hi - lo) * 1e-9) break;
    const double x = x0 + width * (t - lo) / (hi - lo);
    out += line(x, y_top, x, y_bottom, "class=\"grid\"");
    out += text(x, y_bottom + 14, "middle", fixed(t, tick_decimals(step)));
  }
  return out + text(x0 + width, y_bottom + 28, "end", std::string(unit), "axis");
}

/// Horizontal grid lines and labels of a vertical axis from `lo` to `hi` over [y0 - height, y0].
inline std::string y_axis(double x_left, double x_right, double y0, double height, double lo, double hi,
                          std::string_view unit) {
  std::string out;
  const auto [first, step] = ticks_of(lo, hi, 5);
  for (int k = 0; k <= max_ticks; ++k) {
    const double t = first + k * step;
    if (t > hi + (hi - lo) * 1e-9) break;
    const double y = y0 - height * (t - lo) / (hi - lo);
    out += line(x_left, y, x_right, y, "class=\"grid\"");
    out += text(x_left - 6, y + 4, "end", fixed(t, tick_decimals(step)));
  }
  return out + text(x_left - 6, y0 - height - 10, "end", std::string(unit), "axis");
}

inline std::string svg_open(std::string_view id, double width, double height, std::string_view description) {
  return "<svg id=\"" + std::string(id) + "\" class=\"chart\" role=\"img\" width=\"" + fixed(width, 0) +
         "\" height=\"" + fixed(height, 0) + "\" viewBox=\"0 0 " + fixed(width, 0) + " " + fixed(height, 0) +
         "\" xmlns=\"http://www.w3.org/2000/svg\"><desc>" + escape(description) + "</desc>";
}

/// The stages of a result object (`chunk_time` or `mem_result`): its members that are objects.
inline std::vector<std::string> stage_names(const value& stages) {
  std::vector<std::string> out;
  if (!stages.is_object()) return out;
  for (const auto& [key, v] : stages.items())
    if (v.is_object()) out.push_back(key);
  return out;
}

/// One stacked horizontal bar per stage: its iteration breakdown, all stages on one time axis.
inline std::string breakdown_chart(const value& doc, const std::string& prefix) {
  const std::string stages_path = prefix + "cost_result.chunk_time";
  const auto names = stage_names(at_path(doc, stages_path));
  double top = number_at(doc, prefix + "cost_result.duration_time_per_iter");
  for (const auto& n : names) {
    double sum = 0;
    for (const auto& s : time_series) sum += series_value(at_path(doc, stages_path + "." + n + ".breakdown_result"), s);
    top = std::max(top, sum);
  }
  if (!(top > 0)) return "<p>No iteration time to chart.</p>";
  const double left = 150, width = 760, bar = 26, gap = 14, y0 = 20;
  const double height = y0 + static_cast<double>(names.size()) * (bar + gap) + 40;
  std::string out =
      svg_open("breakdown-chart", left + width + 30, height, "Iteration time of every pipeline stage by part, in ms");
  out += x_axis(left, width, y0 - 6, height - 34, 0, top, "ms");
  double y = y0;
  for (const auto& n : names) {
    const std::string base = stages_path + "." + n + ".breakdown_result.";
    out += text(left - 8, y + bar / 2 + 4, "end", n, "label");
    double x = left;
    for (const auto& s : time_series) {
      const double v = series_value(at_path(doc, stages_path + "." + n + ".breakdown_result"), s);
      if (!(v > 0)) continue;
      const double w = width * v / top;
      out += rect(x, y, w, bar, s.colour, mark_fields(base, s) + " data-chart=\"breakdown\" data-axis=\"x\"",
                  n + ": " + std::string(s.label) + " " + fixed(v, 3) + " ms");
      x += w;
    }
    y += bar + gap;
  }
  return out + "</svg>" + legend(time_series.data(), time_series.size());
}

/// The bounding stage's breakdown as a table (the figures the text report lists).
inline std::string breakdown_table(const value& doc, const std::string& prefix) {
  const std::string base = prefix + "cost_result.breakdown_result.";
  std::string out = "<table class=\"figures\"><tr><th>part</th><th>time (bounding stage)</th></tr>";
  for (const auto& s : time_series)
    out += "<tr><td>" + escape(s.label) + "</td><td>" + shown(doc, base + std::string(s.field), 3, 1.0, "ms") +
           "</td></tr>";
  return out + "</table>";
}

/// One stacked column per stage: its memory at the peak, against the device memory line.
inline std::string memory_chart(const value& doc, const std::string& prefix) {
  const std::string mem_path = prefix + "mem_result";
  const auto names = stage_names(at_path(doc, mem_path));
  const double device = number_at(doc, mem_path + ".device_mem");
  double top = device;
  for (const auto& n : names) top = std::max(top, number_at(doc, mem_path + "." + n + ".peak_mem_with_reserved"));
  if (!(top > 0)) return "<p>No memory to chart.</p>";
  top *= 1.08;
  const double left = 70, plot = 300, column = 70, gap = 50, y0 = 30 + plot;
  const double width = left + gap + static_cast<double>(names.size()) * (column + gap) + 120;
  std::string out = svg_open("memory-chart", width, y0 + 40, "Memory of every pipeline stage at its peak, in GiB");
  out += y_axis(left, width - 110, y0, plot, 0, top, "GiB");
  double x = left + gap;
  for (const auto& n : names) {
    const value& item = at_path(doc, mem_path + "." + n);
    double y = y0;
    for (const auto& s : memory_series) {
      const double v = series_value(item, s);
      if (!(v > 0)) continue;
      const double h = plot * v / top;
      y -= h;
      out += rect(x, y, column, h, s.colour,
                  mark_fields(mem_path + "." + n + ".", s) + " data-chart=\"memory\" data-axis=\"y\"",
                  n + ": " + std::string(s.label) + " " + fixed(v, 3) + " GiB");
    }
    out += text(x + column / 2, y0 + 16, "middle", n, "label");
    x += column + gap;
  }
  const double device_y = y0 - plot * device / top;
  out += "<g data-chart=\"memory\" data-field=\"" + escape(mem_path) + ".device_mem\" data-level=\"" +
         fixed(device_y, 2) + "\">" + line(left, device_y, width - 110, device_y, "class=\"limit\"") +
         text(width - 106, device_y + 4, "start", "device " + fixed(device, 1) + " GiB", "label") + "</g>";
  return out + "</svg>" + legend(memory_series.data(), memory_series.size());
}

/// Every stage's memory figures as a table.
inline std::string memory_table(const value& doc, const std::string& prefix) {
  const std::string mem_path = prefix + "mem_result";
  const auto names = stage_names(at_path(doc, mem_path));
  std::string out = "<table class=\"figures\"><tr><th>GiB</th>";
  for (const auto& n : names) out += "<th>" + escape(n) + "</th>";
  out += "</tr>";
  constexpr std::array<std::pair<std::string_view, std::string_view>, 11> rows{{
      {"weight_mem", "weights"},
      {"grad_mem", "gradients"},
      {"optimizer_state_mem", "optimizer state"},
      {"te_dummy_wgrad_mem", "TE dummy wgrad"},
      {"workspace_mem", "workspace"},
      {"gathered_param_mem", "gathered parameters (ZeRO-3)"},
      {"unsharded_grad_mem", "unsharded gradients (ZeRO-2/3)"},
      {"model_mem", "model memory"},
      {"fwd_activation_cache_per_micro_batch", "activations / micro-batch"},
      {"peak_mem", "peak allocated"},
      {"peak_mem_with_reserved", "peak with allocator reserve"},
  }};
  for (const auto& [field, label] : rows) {
    out += "<tr><td>" + escape(label) + "</td>";
    for (const auto& n : names) out += "<td>" + shown(doc, mem_path + "." + n + "." + std::string(field), 3) + "</td>";
    out += "</tr>";
  }
  out += "<tr><td>micro-batches in flight</td>";
  for (const auto& n : names) out += "<td>" + shown(doc, mem_path + "." + n + ".micro_batches_in_flight", 0) + "</td>";
  out += "</tr><tr><td>peak at</td>";
  for (const auto& n : names)
    out += "<td class=\"path\">" + escape(text_at(doc, mem_path + "." + n + ".peak_path")) + "</td>";
  return out + "</tr></table>";
}

/// The colour of a timeline span by its name (passes, then the iteration tail).
inline std::string_view span_colour(std::string_view name) {
  if (name == "forward") return "#4e79a7";
  if (name == "backward") return "#f28e2b";
  if (name == "backward input") return "#ffbe7d";
  if (name == "backward weight") return "#e15759";
  if (name == "gradient sync") return "#b07aa1";
  if (name == "optimizer step") return "#59a14f";
  return "#bab0ac";  // straggler wait
}

inline bool timeline_span(const trace_span& sp) {
  return sp.stream == trace_stream::passes || sp.micro_batch < 0;  // passes and the iteration tail
}

/// Every pipeline rank's passes (micro-batch numbers inside) and the iteration tail, over time.
inline std::string timeline_chart(const iteration_trace& t, const value& doc, const std::string& prefix) {
  const auto count = static_cast<std::size_t>(std::count_if(t.spans.begin(), t.spans.end(), timeline_span));
  if (count > max_timeline_spans)
    return "<p>The timeline has " + std::to_string(count) + " spans, more than the " +
           std::to_string(max_timeline_spans) + " a page draws; see <code>llmsim perf --trace FILE</code>.</p>";
  const double top = number_at(doc, prefix + "cost_result.duration_time_per_iter");
  if (!(top > 0)) return "<p>No timeline to chart.</p>";
  const double left = 80, width = 900, row = 22, y0 = 16;
  const auto ranks = static_cast<double>(t.rank_stage.size());
  const double height = y0 + ranks * (row + 6) + 40;
  std::string out = svg_open("timeline-chart", left + width + 20, height,
                             "Pipeline timeline: every rank's forward and backward passes and the iteration tail, ms");
  out += x_axis(left, width, y0 - 4, height - 34, 0, top, "ms");
  for (std::size_t r = 0; r < t.rank_stage.size(); ++r)
    out += text(left - 8, y0 + static_cast<double>(r) * (row + 6) + row / 2 + 4, "end", "rank " + std::to_string(r),
                "label");
  for (const trace_span& sp : t.spans) {
    if (!timeline_span(sp)) continue;
    const double x = left + width * sp.start * 1e3 / top, w = width * (sp.end - sp.start) * 1e3 / top;
    const double y = y0 + static_cast<double>(sp.rank) * (row + 6);
    std::string title = std::string(sp.name);
    if (sp.micro_batch >= 0) title += " of micro-batch " + std::to_string(sp.micro_batch);
    if (sp.chunk > 0) title += ", chunk " + std::to_string(sp.chunk);
    title += ": " + fixed(sp.start * 1e3, 3) + " to " + fixed(sp.end * 1e3, 3) + " ms";
    out += "<g class=\"span\" data-span=\"" + escape(sp.name) + "\" data-rank=\"" + std::to_string(sp.rank) +
           "\" data-start-ms=\"" + fixed(sp.start * 1e3, 6) + "\" data-end-ms=\"" + fixed(sp.end * 1e3, 6) + "\">" +
           rect(x, y, w, row, span_colour(sp.name), "", title);
    if (sp.micro_batch >= 0 && w > 14)
      out += text(x + w / 2, y + row / 2 + 4, "middle", std::to_string(sp.micro_batch), "in-bar");
    out += "</g>";
  }
  constexpr std::array<series, 7> keys{{{"", "forward", "#4e79a7"},
                                        {"", "backward", "#f28e2b"},
                                        {"", "backward input (zero bubble)", "#ffbe7d"},
                                        {"", "backward weight (zero bubble)", "#e15759"},
                                        {"", "gradient sync (exposed)", "#b07aa1"},
                                        {"", "optimizer step", "#59a14f"},
                                        {"", "straggler wait", "#bab0ac"}}};
  return out + "</svg>" + legend(keys.data(), keys.size());
}

/// The note beside an MFU above 1 (estimate.hpp `mfu_above_one_reason`), else nothing.
inline std::string mfu_note(const value& mfu) {
  if (!mfu.is_number() || mfu.get<double>() <= 1) return {};
  return " <span class=\"note\">(above 100 %: " + std::string(mfu_above_one_reason) + ")</span>";
}

/// The headline figures of an estimate.
inline std::string key_figures(const value& doc, const std::string& prefix) {
  const std::string c = prefix + "cost_result.", m = prefix + "mem_result.";
  std::string out = "<table class=\"figures key\">";
  out += "<tr><td>iteration time</td><td>" + shown(doc, c + "duration_time_per_iter", 2, 1.0, "ms") + "</td></tr>";
  out +=
      "<tr><td>MFU</td><td>" + shown(doc, c + "mfu", 2, 100.0, "%") + mfu_note(at_path(doc, c + "mfu")) + "</td></tr>";
  out += "<tr><td>tokens/s per GPU</td><td>" + shown(doc, c + "throughput_per_accelerator", 1) + "</td></tr>";
  out += "<tr><td>tokens per iteration</td><td>" + shown(doc, c + "all_tokens_per_iter", 0) + "</td></tr>";
  out += "<tr><td>peak memory</td><td>" + shown(doc, m + "peak_mem", 2, 1.0, "GiB") + " on " +
         escape(text_at(doc, m + "peak_stage")) + " (with allocator reserve " +
         shown(doc, m + "peak_mem_with_reserved", 2, 1.0, "GiB") + ")</td></tr>";
  out += "<tr><td>device memory</td><td>" + shown(doc, m + "device_mem", 2, 1.0, "GiB") + "</td></tr>";
  out += "<tr><td>memory verdict</td><td>" + escape(text_at(doc, m + "verdict")) + "</td></tr>";
  out += "<tr><td>bounding stage</td><td>" + escape(text_at(doc, c + "bounding_stage")) + " (critical rank " +
         shown(doc, c + "critical_rank", 0) + ", stream " + escape(text_at(doc, c + "critical_stream")) + ")</td></tr>";
  return out + "</table>";
}

/// Notes and warnings of the document, as a list (nothing when there are none).
inline std::string notes(const value& doc, const std::string& path, std::string_view title) {
  const value& list = at_path(doc, path);
  if (!list.is_array() || list.empty()) return {};
  std::string out = "<h3>" + escape(title) + "</h3><ul class=\"notes\">";
  for (const auto& n : list) out += "<li>" + escape(n.is_string() ? n.get<std::string>() : n.dump()) + "</li>";
  return out + "</ul>";
}

/// The estimate's sections (the figures, the charts, the timeline when a trace is given).
inline std::string estimate_sections(const value& doc, const std::string& prefix, const iteration_trace* trace,
                                     std::string_view no_trace) {
  std::string out = "<section><h2>Key figures</h2>" + key_figures(doc, prefix) + notes(doc, prefix + "notes", "Notes") +
                    notes(doc, prefix + "warnings", "Warnings") + "</section>";
  out += "<section><h2>Iteration breakdown</h2>" + breakdown_chart(doc, prefix) + breakdown_table(doc, prefix) +
         "</section>";
  out += "<section><h2>Memory per stage</h2>" + memory_chart(doc, prefix) + memory_table(doc, prefix) + "</section>";
  if (trace != nullptr)
    out += "<section><h2>Pipeline timeline</h2>" + timeline_chart(*trace, doc, prefix) + "</section>";
  else if (!no_trace.empty())
    out += "<section><h2>Pipeline timeline</h2><p>No timeline: " + escape(no_trace) + "</p></section>";
  return out;
}

inline constexpr std::string_view style =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table.figures{border-collapse:collapse;margin:10px 0}table.figures td,table.figures th{padding:3px 10px;"
    "border-bottom:1px solid #eee;text-align:left}.num{font-variant-numeric:tabular-nums}"
    ".legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px}"
    ".swatch{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px}"
    "svg.chart{display:block;margin:8px 0}.grid{stroke:#e5e5e5}.limit{stroke:#c00;stroke-width:2;"
    "stroke-dasharray:6 4}.tick{font-size:11px;fill:#555}.axis{font-size:11px;fill:#333}"
    ".label{font-size:12px;fill:#222}.in-bar{font-size:10px;fill:#fff}.path{font-family:monospace;font-size:12px}"
    ".front{fill:none;stroke:#c00;stroke-width:1.5}";

/// The page around `body`, with the document embedded (inert; '<' only occurs in JSON strings,
/// where `\u003c` spells it, so nothing in it can end or open a script).
inline std::string page(const std::string& title, const std::string& body, const value& doc) {
  std::string data;
  for (const char c : doc.dump(-1, ' ', false, value::error_handler_t::replace))
    data += c == '<' ? std::string_view("\\u003c") : std::string_view(&c, 1);
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
         "<title>" +
         escape(title) + "</title><style>" + std::string(style) + "</style></head><body>" + body +
         "<script type=\"application/json\" id=\"llmsim-data\">" + data + "</script></body></html>\n";
}

/// A linear map of [lo, hi] onto [from, to] (pixels).
struct axis_map {
  double lo = 0, hi = 1, from = 0, to = 1;
  double operator()(double v) const { return from + (to - from) * (v - lo) / (hi - lo); }
};

/// The range a scatter axis shows: the data's, widened by 5 % and to a budget line, never empty.
/// The padding is at least 10^-6 of the values' size, so near-equal values still span an axis whose
/// ticks the doubles can tell apart.
inline std::pair<double, double> padded_range(double lo, double hi, double must_show) {
  lo = std::min(lo, must_show);
  hi = std::max(hi, must_show);
  const double pad = std::max({0.05 * (hi - lo), 1e-6 * std::max(std::abs(lo), std::abs(hi)), 1e-3});
  return {std::max(0.0, lo - pad), hi + pad};
}

/// The fitting candidates: one circle each, or counts on a grid beyond `max_scatter_points`.
inline std::string candidate_marks(const std::vector<scatter_point>& points, const axis_map& x, const axis_map& y) {
  std::string out = "<g class=\"candidates\">";
  if (points.size() <= max_scatter_points) {
    for (const auto& p : points)
      out += "<circle cx=\"" + fixed(x(p.step_time_s), 2) + "\" cy=\"" + fixed(y(p.peak_mem_gib), 2) +
             "\" r=\"2.5\" fill=\"#4e79a7\" fill-opacity=\"0.35\" data-x=\"" + fixed(p.step_time_s, 9) +
             "\" data-y=\"" + fixed(p.peak_mem_gib, 9) + "\"/>";
    return out + "</g>";
  }
  constexpr std::size_t columns = 120, rows = 60;
  std::vector<std::size_t> counts(columns * rows, 0);
  const auto cell = [](double v, const axis_map& a, std::size_t n) {
    const double f = (v - a.lo) / (a.hi - a.lo) * static_cast<double>(n);
    return static_cast<std::size_t>(std::clamp(f, 0.0, static_cast<double>(n - 1)));
  };
  for (const auto& p : points) ++counts[cell(p.peak_mem_gib, y, rows) * columns + cell(p.step_time_s, x, columns)];
  const double most = static_cast<double>(*std::max_element(counts.begin(), counts.end()));
  const double w = (x.to - x.from) / columns, h = (y.from - y.to) / rows;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < columns; ++c) {
      const std::size_t n = counts[r * columns + c];
      if (n == 0) continue;
      const double shade = 0.15 + 0.85 * std::log1p(static_cast<double>(n)) / std::log1p(most);
      out += "<rect x=\"" + fixed(x.from + w * static_cast<double>(c), 2) + "\" y=\"" +
             fixed(y.from - h * static_cast<double>(r + 1), 2) + "\" width=\"" + fixed(w, 3) + "\" height=\"" +
             fixed(h, 3) + "\" fill=\"#4e79a7\" fill-opacity=\"" + fixed(shade, 3) + "\" data-count=\"" +
             std::to_string(n) + "\"><title>" + std::to_string(n) + " candidates</title></rect>";
    }
  return out + "</g>";
}

/// A marked point of the document (a Pareto member, the winner): its position from two fields.
inline std::string field_point(const value& doc, const std::string& row, const axis_map& x, const axis_map& y,
                               std::string_view cls, double radius) {
  const double t = number_at(doc, row + ".step_time"), m = number_at(doc, row + ".peak_mem_gib");
  return "<circle class=\"" + std::string(cls) + "\" cx=\"" + fixed(x(t), 2) + "\" cy=\"" + fixed(y(m), 2) + "\" r=\"" +
         fixed(radius, 1) + "\" data-x-field=\"" + escape(row) + ".step_time\" data-y-field=\"" + escape(row) +
         ".peak_mem_gib\"><title>" + escape(text_at(doc, row + ".layout")) + ": " + fixed(t, 4) + " s, " + fixed(m, 2) +
         " GiB</title></circle>";
}

/// Step time against peak memory of every fitting candidate, the Pareto front, the winner, the budget.
inline std::string scatter_chart(const value& doc, const std::vector<scatter_point>& points) {
  const value& front = at_path(doc, "pareto");
  const double budget = number_at(doc, "memory_budget_gib");
  double t_lo = number_at(doc, "top.0.step_time"), t_hi = t_lo, m_lo = budget, m_hi = budget;
  for (const auto& p : points) {
    t_lo = std::min(t_lo, p.step_time_s), t_hi = std::max(t_hi, p.step_time_s);
    m_lo = std::min(m_lo, p.peak_mem_gib), m_hi = std::max(m_hi, p.peak_mem_gib);
  }
  const auto [x_lo, x_hi] = padded_range(t_lo, t_hi, t_lo);
  const auto [y_lo, y_hi] = padded_range(m_lo, m_hi, budget);
  const double left = 70, width = 820, top = 20, plot = 380;
  const axis_map x{x_lo, x_hi, left, left + width}, y{y_lo, y_hi, top + plot, top};
  std::string out = svg_open("scatter-chart", left + width + 140, top + plot + 44,
                             "Step time against peak memory of every fitting candidate, with the Pareto front");
  out += x_axis(left, width, top, top + plot, x_lo, x_hi, "step time (s)");
  out += y_axis(left, left + width, top + plot, plot, y_lo, y_hi, "peak GiB");
  out += candidate_marks(points, x, y);
  out += "<g data-field=\"memory_budget_gib\" data-level=\"" + fixed(y(budget), 2) + "\">" +
         line(left, y(budget), left + width, y(budget), "class=\"limit\"") +
         text(left + width + 4, y(budget) + 4, "start", "budget " + fixed(budget, 1) + " GiB", "label") + "</g>";
  if (front.is_array() && !front.empty()) {
    std::string path = "<polyline class=\"front\" points=\"";
    std::string marks;
    for (std::size_t i = 0; i < front.size(); ++i) {
      const std::string row = "pareto." + std::to_string(i);
      path += fixed(x(number_at(doc, row + ".step_time")), 2) + "," +
              fixed(y(number_at(doc, row + ".peak_mem_gib")), 2) + " ";
      marks += field_point(doc, row, x, y, "pareto", 3.5);
    }
    out += path + "\"/><g fill=\"#c00\">" + marks + "</g>";
  }
  out += "<g fill=\"#ffbf00\" stroke=\"#000\">" + field_point(doc, "top.0", x, y, "winner", 7) + "</g>";
  constexpr std::array<series, 4> keys{{{"", "fitting candidate (grid: shade by count)", "#4e79a7"},
                                        {"", "Pareto front (memory vs time)", "#c00"},
                                        {"", "chosen strategy", "#ffbf00"},
                                        {"", "memory budget", "#c00"}}};
  return out + "</svg>" + legend(keys.data(), keys.size());
}

/// Rows of a candidate list (`top` or `pareto`) as a table.
inline std::string candidate_table(const value& doc, const std::string& list) {
  const value& rows = at_path(doc, list);
  std::string out =
      "<table class=\"figures\"><tr><th>#</th><th>strategy</th><th>step time (s)</th><th>MFU "
      "(%)</th><th>tokens/s/GPU</th><th>peak GiB</th><th>peak stage</th></tr>";
  bool above_one = false;
  for (std::size_t i = 0; rows.is_array() && i < rows.size(); ++i) {
    const std::string row = list + "." + std::to_string(i);
    const bool above = !mfu_note(at_path(doc, row + ".mfu")).empty();
    above_one = above_one || above;
    out += "<tr><td>" + shown(doc, row + ".rank", 0) + "</td><td class=\"path\">" +
           escape(text_at(doc, row + ".layout")) + "</td><td>" + shown(doc, row + ".step_time", 4) + "</td><td>" +
           shown(doc, row + ".mfu", 2, 100.0) + (above ? "*" : "") + "</td><td>" +
           shown(doc, row + ".tokens_per_s_per_gpu", 1) + "</td><td>" + shown(doc, row + ".peak_mem_gib", 2) +
           "</td><td>" + escape(text_at(doc, row + ".peak_stage")) + "</td></tr>";
  }
  out += "</table>";
  if (above_one) out += "<p class=\"note\">* MFU above 100 %: " + std::string(mfu_above_one_reason) + ".</p>";
  return out;
}

}  // namespace detail

/// A job's timeline for a report, or why there is none (`trace_iteration` refuses jobs of more
/// than `max_traced_passes` passes; the page then says so).
struct report_timeline {
  std::optional<iteration_trace> trace;
  std::string refusal;
  [[nodiscard]] const iteration_trace* get() const { return trace ? &*trace : nullptr; }
};

inline report_timeline timeline_of(const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  report_timeline t;
  try {
    t.trace = trace_iteration(m, s, sys);
  } catch (const config_error& e) { t.refusal = e.what(); }
  return t;
}

/// The report of one estimate: `doc` is what `llmsim perf --format json` prints (`to_json` of the
/// result, with `model`, `strategy`, `system`); `trace` (optional) the same job's timeline, else
/// `no_trace` says why there is none (`trace_iteration` refuses jobs of very many micro-batches).
inline std::string perf_report(const value& doc, const iteration_trace* trace = nullptr,
                               std::string_view no_trace = {}) {
  const std::string model = detail::text_at(doc, "model.model_name"), system = detail::text_at(doc, "system");
  const std::string title = "llmsim: " + model + " on " + system;
  std::string body = "<h1>" + detail::escape(title) + "</h1><p>" + detail::shown(doc, "param_count", 0) +
                     " parameters; world size " + detail::shown(doc, "strategy.world_size", 0) + " (tp " +
                     detail::shown(doc, "strategy.tp_size", 0) + ", pp " + detail::shown(doc, "strategy.pp_size", 0) +
                     ", micro-batches " + detail::shown(doc, "strategy.micro_batch_num", 0) + ")</p>";
  return detail::page(title, body + detail::estimate_sections(doc, "", trace, no_trace), doc);
}

/// The report of a strategy search: `doc` is what `llmsim search --format json --pareto` prints
/// without its `candidates` (the scatter takes them as `points`, all the fitting ones);
/// `winner_trace` (optional) the winner's timeline, else `no_trace` says why there is none.
inline std::string search_report(const value& doc, const std::vector<scatter_point>& points,
                                 const iteration_trace* winner_trace = nullptr, std::string_view no_trace = {}) {
  const std::string title = "llmsim search: " + detail::text_at(doc, "model") + " on " + detail::text_at(doc, "gpus") +
                            " x " + detail::text_at(doc, "system");
  std::string body = "<h1>" + detail::escape(title) + "</h1><p>Global batch " + detail::shown(doc, "global_batch", 0) +
                     " x sequence " + detail::shown(doc, "seq_len", 0) + "; memory budget " +
                     detail::shown(doc, "memory_budget_gib", 2, 1.0, "GiB") + " per GPU. " +
                     detail::shown(doc, "evaluated", 0) + " candidates decided, " + detail::shown(doc, "estimated", 0) +
                     " priced, " + detail::shown(doc, "fitting", 0) + " fit, " + detail::shown(doc, "over_memory", 0) +
                     " over memory, " + detail::shown(doc, "invalid", 0) + " invalid; " +
                     detail::shown(doc, "seconds", 2, 1.0, "s") + ".</p>";
  body += "<section><h2>Memory against time</h2>" + detail::scatter_chart(doc, points) + "</section>";
  body += "<section><h2>Best strategies</h2>" + detail::candidate_table(doc, "top") + "</section>";
  if (const value& front = detail::at_path(doc, "pareto"); front.is_array())
    body += "<section><h2>Pareto front (fastest first)</h2><details" + std::string(front.size() <= 20 ? " open" : "") +
            "><summary>" + std::to_string(front.size()) + " strategies: none is both faster and lighter</summary>" +
            detail::candidate_table(doc, "pareto") + "</details></section>";
  body += "<h1>Winner: " + detail::escape(detail::text_at(doc, "top.0.layout")) + "</h1>" +
          detail::estimate_sections(doc, "winner.", winner_trace, no_trace);
  return detail::page(title, body, doc);
}

}  // namespace json::html
LLMSIM_END_NAMESPACE
