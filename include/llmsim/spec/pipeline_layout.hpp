/// \file llmsim/spec/pipeline_layout.hpp
/// Megatron-LM's --pipeline-model-parallel-layout (megatron/core/transformer/
/// pipeline_parallel_layer_layout.py), read and checked at compile time or run time.
///
/// Syntax: stages separated by '|'; in a stage 'E' the embedding, 't' a decoder ("transformer")
/// layer, 'm' a multi-token-prediction layer, 'L' the loss (final norm, output layer, cross
/// entropy); 'X*N' repeats one symbol N times (also '|*N'), '(...)*N' repeats a group (one level,
/// no nesting, as Megatron's two regular expressions expand them); commas are cosmetic.
/// "Et*3|(tt|)*29,m|L" is [E t t t] [t t] x 29 [m] [L]: 32 stages.
/// Stage k of the pp·vp stages runs on pipeline rank k mod pp as its model chunk k / pp (Megatron
/// turns the list into layout[pp_rank][vpp_rank] = list[vpp_rank·pp + pp_rank]); layers are
/// numbered in string order (`get_layer_offset`), so the first 'k' decoder layers of the string
/// are --first-k-dense-replace's dense ones.
///
/// ```cpp
/// static_assert(llmsim::parse_pipeline_layout("Et*3|(tt|)*29,m|L").size() == 32);
/// ```
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// What one of the pp·vp stages of a layout holds.
struct layout_stage {
  std::int64_t layers = 0;  ///< decoder layers ('t')
  std::int64_t mtp = 0;     ///< multi-token-prediction layers ('m')
  std::int64_t embeddings = 0, losses = 0;
  std::int64_t first_layer = 0;  ///< index of its first decoder layer in the model
};

namespace detail {
inline constexpr std::string_view layout_field = "strategy.pipeline_model_parallel_layout";

/// One symbol of the layout repeated `count` times, and where it stood.
struct layout_run {
  char symbol = 't';
  std::int64_t count = 1;
  std::size_t at = 0;
};

/// Reads the digits of N after a '*' at `i` (the '*' itself); returns N and moves `i` past them.
constexpr std::int64_t layout_repeat(std::string_view text, std::size_t& i) {
  const std::size_t star = i++;
  if (i >= text.size() || text[i] < '0' || text[i] > '9')
    report_error("llmsim::strategy", layout_field, "{}=\"{}\": '*' at position {} must be followed by a count N",
                 layout_field, text, star);
  std::int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    n = n * 10 + (text[i++] - '0');
    if (n > 1000000)
      report_error("llmsim::strategy", layout_field, "{}=\"{}\": the count after position {} is too large",
                   layout_field, text, star);
  }
  return n;
}

constexpr bool layout_symbol(char c) { return c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|'; }

/// The layout as runs of symbols, every '*N' applied (Megatron's two expansion passes).
constexpr std::vector<layout_run> layout_runs(std::string_view text) {
  std::vector<layout_run> out;
  std::size_t i = 0;
  auto skip_commas = [&] {
    while (i < text.size() && text[i] == ',') ++i;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == ',') {
      ++i;
      continue;
    }
    if (c == '(') {
      const std::size_t open = i++;
      std::vector<layout_run> group;
      while (i < text.size() && text[i] != ')') {
        const char g = text[i];
        if (g == ',') {
          ++i;
          continue;
        }
        if (g == '(')
          report_error("llmsim::strategy", layout_field,
                       "{}=\"{}\": '(' at position {} inside the group opened at {}: groups do not nest", layout_field,
                       text, i, open);
        if (!layout_symbol(g))
          report_error("llmsim::strategy", layout_field,
                       "{}=\"{}\": '{}' at position {} is not a layout symbol (E, t, m, L, |, (...)*N, X*N, ',')",
                       layout_field, text, std::string_view(&text[i], 1), i);
        group.push_back({g, 1, i++});
        skip_commas();
        if (i < text.size() && text[i] == '*') group.back().count = layout_repeat(text, i);
      }
      if (i >= text.size())
        report_error("llmsim::strategy", layout_field, "{}=\"{}\": the group opened at position {} is not closed",
                     layout_field, text, open);
      if (group.empty())
        report_error("llmsim::strategy", layout_field, "{}=\"{}\": the group at position {} is empty", layout_field,
                     text, open);
      ++i;  // ')'
      if (i >= text.size() || text[i] != '*')
        report_error("llmsim::strategy", layout_field,
                     "{}=\"{}\": the group closed at position {} must be followed by *N", layout_field, text, i - 1);
      const std::int64_t n = layout_repeat(text, i);
      for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), group.begin(), group.end());
      continue;
    }
    if (!layout_symbol(c))
      report_error("llmsim::strategy", layout_field,
                   "{}=\"{}\": '{}' at position {} is not a layout symbol (E, t, m, L, |, (...)*N, X*N, ',')",
                   layout_field, text, std::string_view(&text[i], 1), i);
    out.push_back({c, 1, i++});
    skip_commas();
    if (i < text.size() && text[i] == '*') out.back().count = layout_repeat(text, i);
    if (i < text.size() && text[i] == '*')
      report_error("llmsim::strategy", layout_field, "{}=\"{}\": a second '*' at position {}", layout_field, text, i);
  }
  return out;
}
}  // namespace detail

/// The stages of a layout string in Megatron's list order (index vpp_rank·pp + pp_rank), with
/// each stage's first decoder layer. Syntax errors name the position and the rule.
constexpr std::vector<layout_stage> parse_pipeline_layout(std::string_view text) {
  std::vector<layout_stage> stages(1);
  std::int64_t layer = 0;
  for (const detail::layout_run& r : detail::layout_runs(text)) {
    for (std::int64_t k = 0; k < r.count && r.symbol == '|'; ++k) stages.push_back({.first_layer = layer});
    if (r.symbol == 't') {
      stages.back().layers += r.count;
      layer += r.count;
    }
    if (r.symbol == 'm') stages.back().mtp += r.count;
    if (r.symbol == 'E') stages.back().embeddings += r.count;
    if (r.symbol == 'L') stages.back().losses += r.count;
  }
  return stages;
}

namespace detail {
/// The first and last symbol of a layout other than '|' (Megatron: the flattened layout starts
/// with the embedding and ends with the loss), and whether a 't' follows an 'm'.
struct layout_order {
  char first = 0, last = 0;
  bool decoder_after_mtp = false;
};
constexpr layout_order layout_order_of(std::string_view text) {
  layout_order o;
  bool mtp_seen = false;
  for (const layout_run& r : layout_runs(text)) {
    if (r.symbol == '|' || r.count == 0) continue;
    if (o.first == 0) o.first = r.symbol;
    o.last = r.symbol;
    mtp_seen = mtp_seen || r.symbol == 'm';
    o.decoder_after_mtp = o.decoder_after_mtp || (mtp_seen && r.symbol == 't');
  }
  return o;
}
}  // namespace detail

/// Megatron's rules for a layout (`PipelineParallelLayerLayout.__init__` and
/// `validate_layer_layout`): pp·vp stages; the embedding first and once, the loss last and once;
/// exactly model.layer_num decoder layers and model.mtp_num_layers MTP layers, all MTP layers
/// after the decoder layers, in one stage that is the last model chunk of a rank other than the
/// first. And what llmsim then refuses: the other split settings beside a layout, DualPipeV.
constexpr void validate_pipeline_layout(const model_spec& m, const strategy_spec& s) {
  using detail::layout_field;
  using detail::report_error;
  constexpr std::string_view api = "llmsim::strategy";
  const std::string_view text = s.pipeline_model_parallel_layout.view();
  const std::vector<layout_stage> stages = parse_pipeline_layout(text);
  const auto count = static_cast<std::int64_t>(stages.size());
  const std::int64_t p = s.pp_size, v = s.interleaving_size;
  if (count != p * v)
    report_error(api, layout_field,
                 "{} has {} stages; it needs strategy.pp_size * interleaving_size = {} * {} = {} (Megatron takes vp "
                 "= stages / pp)",
                 layout_field, count, p, v, p * v);
  std::int64_t layers = 0, mtp = 0, embeddings = 0, losses = 0;
  for (const layout_stage& st : stages) {
    layers += st.layers;
    mtp += st.mtp;
    embeddings += st.embeddings;
    losses += st.losses;
  }
  if (layers != m.layer_num)
    report_error(api, layout_field, "{} places {} decoder layers ('t'); model.layer_num={}", layout_field, layers,
                 m.layer_num);
  if (embeddings != 1 || losses != 1)
    report_error(api, layout_field, "{} must hold the embedding 'E' and the loss 'L' exactly once each (got {} and {})",
                 layout_field, embeddings, losses);
  const detail::layout_order order = detail::layout_order_of(text);
  if (order.first != 'E' || order.last != 'L')
    report_error(api, layout_field, "{} must start with the embedding 'E' and end with the loss 'L'", layout_field);
  if (mtp != m.mtp_num_layers)
    report_error(api, layout_field, "{} places {} MTP layers ('m'); model.mtp_num_layers={}", layout_field, mtp,
                 m.mtp_num_layers);
  if (order.decoder_after_mtp)
    report_error(api, layout_field, "{}: decoder layers ('t') must come before the MTP layers ('m')", layout_field);
  for (std::int64_t k = 0; k < count && mtp > 0; ++k) {
    const layout_stage& st = stages[static_cast<std::size_t>(k)];
    if (st.mtp == 0) continue;
    if (st.mtp != mtp) report_error(api, layout_field, "{}: all MTP layers must be in one stage", layout_field);
    if (k / p != v - 1 || k % p == 0)
      report_error(api, layout_field,
                   "{}: the MTP layers must be in the last model chunk of a pipeline rank other than the first (stage "
                   "{} is chunk {} of rank {})",
                   layout_field, k, k / p, k % p);
  }
  if (s.num_layers_in_first_pipeline_stage || s.num_layers_in_last_pipeline_stage ||
      s.account_for_embedding_in_pipeline_split || s.account_for_loss_in_pipeline_split)
    report_error(api, layout_field,
                 "{} cannot be combined with strategy.num_layers_in_first/last_pipeline_stage or "
                 "account_for_embedding/loss_in_pipeline_split (Megatron-LM refuses both)",
                 layout_field);
  if (pipeline_schedule_of(s) == pipeline_schedule_kind::dualpipev)
    report_error(api, layout_field, "{} with the DualPipeV schedule is not modelled (its V split is even)",
                 layout_field);
  if (v > 1 && s.micro_batch_num % p != 0)
    report_error(api, "strategy.micro_batch_num",
                 "the interleaved schedule needs strategy.micro_batch_num={} to be a multiple of strategy.pp_size={}",
                 s.micro_batch_num, p);
}

LLMSIM_END_NAMESPACE
