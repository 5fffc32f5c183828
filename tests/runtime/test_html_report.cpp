// The HTML report (json/html_report.hpp): what each chart draws is read back from the page's SVG
// and compared with geometry worked out by hand from the chart's layout constants (given in each
// test's comment); the text figures are compared with printf of the document's values.

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/json/html_report.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

namespace llmsim_test_html_report {

namespace {

namespace lj = llmsim::json;
namespace html = llmsim::json::html;

/// The attributes of the first element whose text contains `marker` (e.g. a data-field value).
std::string element_with(const std::string& page, const std::string& marker) {
  const auto at = page.find(marker);
  if (at == std::string::npos) return {};
  const auto open = page.rfind('<', at);
  return page.substr(open, page.find('>', at) - open + 1);
}

/// A numeric attribute of an element's text (NaN when absent).
double attribute(const std::string& element, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(element, m, std::regex(" " + name + "=\"([-0-9.e]+)\""))) return std::nan("");
  return std::stod(m[1].str());
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// A perf document with round numbers: one stage (first_stage), 100 ms per iteration.
lj::value small_doc() {
  lj::value breakdown = {{"fwd_compute_time", 10.0},   {"bwd_compute_time", 20.0},  {"recompute_time", 0.0},
                         {"intra_exposed_time", 30.0}, {"inter_exposed_time", 0.0}, {"bubble_time", 15.0},
                         {"dp_exposed_time", 5.0},     {"optim_time", 20.0},        {"straggler_time", 0.0}};
  lj::value doc;
  doc["param_count"] = 1e9;
  doc["cost_result"] = {{"duration_time_per_iter", 100.0},
                        {"mfu", 0.42150571037913487},
                        {"throughput_per_accelerator", 927.9531476641681},
                        {"breakdown_result", breakdown},
                        {"chunk_time", {{"first_stage", {{"breakdown_result", breakdown}}}}}};
  doc["mem_result"] = {{"first_stage",
                        {{"weight_mem", 8.64},
                         {"grad_mem", 17.28},
                         {"optimizer_state_mem", 0.0},
                         {"te_dummy_wgrad_mem", 0.0},
                         {"workspace_mem", 0.0},
                         {"model_mem", 25.92},
                         {"peak_mem", 43.2},
                         {"peak_mem_with_reserved", 50.0}}},
                       {"peak_mem", 43.2},
                       {"device_mem", 80.0}};
  doc["model"] = {{"model_name", "<script>alert(1)</script>"}};
  doc["system"] = "toy";
  doc["warnings"] = {"a </script> in a warning"};
  return doc;
}

TEST(HtmlReport, BreakdownSegmentsAreProportionalToTheirTimes) {
  // The bar is 760 px for the 100 ms iteration and starts at x = 150: forward 10 ms -> 76 px at
  // 150; backward 20 ms -> 152 px at 226; recompute (0) is not drawn; exposed TP comm 30 ms ->
  // 228 px at 378; bubble 15 -> 114 at 606; dp sync 5 -> 38 at 720; optimizer 20 -> 152 at 758.
  const std::string page = html::perf_report(small_doc());
  const std::string base = "data-field=\"cost_result.chunk_time.first_stage.breakdown_result.";
  const std::vector<std::pair<const char*, std::pair<double, double>>> expected{
      {"fwd_compute_time", {150, 76}}, {"bwd_compute_time", {226, 152}}, {"intra_exposed_time", {378, 228}},
      {"bubble_time", {606, 114}},     {"dp_exposed_time", {720, 38}},   {"optim_time", {758, 152}}};
  for (const auto& [field, geometry] : expected) {
    const std::string rect = element_with(page, base + field + "\" data-chart");
    ASSERT_FALSE(rect.empty()) << field;
    EXPECT_NEAR(attribute(rect, "x"), geometry.first, 0.01) << field;
    EXPECT_NEAR(attribute(rect, "width"), geometry.second, 0.001) << field;
  }
  EXPECT_TRUE(element_with(page, base + "recompute_time\" data-chart").empty());
}

TEST(HtmlReport, MemoryColumnsStackAgainstTheDeviceLine) {
  // The axis tops at 1.08 x 80 GiB = 86.4 GiB over 300 px from y = 330: weights 8.64 GiB -> 30 px
  // (y 300), gradients 17.28 -> 60 px (y 240), activations = peak - model = 43.2 - 25.92 = 17.28 ->
  // 60 px (y 180), reserve 50 - 43.2 = 6.8 -> 23.611 px (y 156.389); device line at
  // 330 - 300 x 80 / 86.4 = 52.22.
  const std::string page = html::perf_report(small_doc());
  const std::string weights = element_with(page, "data-field=\"mem_result.first_stage.weight_mem\"");
  EXPECT_NEAR(attribute(weights, "height"), 30.0, 0.001);
  EXPECT_NEAR(attribute(weights, "y"), 300.0, 0.01);
  const std::string grads = element_with(page, "data-field=\"mem_result.first_stage.grad_mem\"");
  EXPECT_NEAR(attribute(grads, "y"), 240.0, 0.01);
  const std::string act =
      element_with(page, "data-fields=\"mem_result.first_stage.peak_mem-mem_result.first_stage.model_mem\"");
  EXPECT_NEAR(attribute(act, "height"), 60.0, 0.001);
  EXPECT_NEAR(attribute(act, "y"), 180.0, 0.01);
  const std::string reserve = element_with(
      page, "data-fields=\"mem_result.first_stage.peak_mem_with_reserved-mem_result.first_stage.peak_mem\"");
  EXPECT_NEAR(attribute(reserve, "height"), 23.611, 0.001);
  const std::string device = element_with(page, "data-field=\"mem_result.device_mem\" data-level");
  EXPECT_NEAR(attribute(device, "data-level"), 52.22, 0.01);
}

TEST(HtmlReport, ZeroShardedModelMemoryIsStackedToo) {
  // ZeRO-3 adds the gathered parameters and unsharded gradients to model memory: 8.64 + 17.28 +
  // 4.32 + 4.32 = 34.56 GiB, the peak 43.2 and 50 with the reserve. On the 86.4 GiB axis over
  // 300 px the column tops at 330 - 300 x 50 / 86.4 = 156.389 and the gathered parameters are
  // 300 x 4.32 / 86.4 = 15 px high.
  lj::value doc = small_doc();
  auto& stage = doc["mem_result"]["first_stage"];
  stage["gathered_param_mem"] = 4.32;
  stage["unsharded_grad_mem"] = 4.32;
  stage["model_mem"] = 34.56;
  const std::string page = html::perf_report(doc);
  EXPECT_NEAR(attribute(element_with(page, "data-field=\"mem_result.first_stage.gathered_param_mem\""), "height"), 15.0,
              0.001);
  const std::string reserve = element_with(
      page, "data-fields=\"mem_result.first_stage.peak_mem_with_reserved-mem_result.first_stage.peak_mem\"");
  EXPECT_NEAR(attribute(reserve, "y"), 156.389, 0.01);
}

TEST(HtmlReport, FiguresArePrintedFromTheDocument) {
  const std::string page = html::perf_report(small_doc());
  // MFU 0.42150571... shown as a percentage with two decimals; tokens/s with one.
  EXPECT_NE(page.find("data-field=\"cost_result.mfu\" data-scale=\"100.000000\" data-decimals=\"2\">42.15<"),
            std::string::npos);
  EXPECT_NE(page.find("data-field=\"cost_result.throughput_per_accelerator\" data-scale=\"1.000000\" "
                      "data-decimals=\"1\">928.0<"),
            std::string::npos);
  // A figure the document lacks is a dash, never a zero.
  EXPECT_EQ(page.find("data-field=\"cost_result.all_tokens_per_iter\""), std::string::npos);
}

TEST(HtmlReport, AnMfuAboveOneSaysWhy) {
  // SimuMax's FLOPs count attention over every query-key pair: a long causal job can pass 100 %.
  // The key figures and a candidate table say why beside such a value, and only there.
  const std::string why = "above 100 %: attention is counted over every query-key pair";
  const lj::value high = {{"cost_result", {{"mfu", 1.18}}}};
  const lj::value low = {{"cost_result", {{"mfu", 0.42}}}};
  EXPECT_NE(html::detail::key_figures(high, "").find(why), std::string::npos);
  EXPECT_EQ(html::detail::key_figures(low, "").find(why), std::string::npos);
  const lj::value top = {{"top", {{{"rank", 1}, {"mfu", 1.2}}, {{"rank", 2}, {"mfu", 0.8}}}}};
  const std::string table = html::detail::candidate_table(top, "top");
  EXPECT_EQ(occurrences(table, ">120.00</span>*<"), 1u);
  EXPECT_EQ(occurrences(table, ">80.00</span><"), 1u);
  EXPECT_NE(table.find("* MFU " + why), std::string::npos);
  const lj::value below = {{"top", {{{"rank", 1}, {"mfu", 0.9}}}}};
  EXPECT_EQ(html::detail::candidate_table(below, "top").find(why), std::string::npos);
}

TEST(HtmlReport, TextIsEscapedAndTheEmbeddedDocumentCannotCloseItsScript) {
  const std::string page = html::perf_report(small_doc());
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // The only "</script>" closes the embedded JSON; in the document's strings '<' is \u003c.
  EXPECT_EQ(occurrences(page, "</script>"), 1u);
  EXPECT_EQ(occurrences(page, "\\u003c/script>"), 2u);
  EXPECT_EQ(occurrences(page, "\\u003cscript>alert"), 1u);
  // No network and no script: the page's policy allows inline style only.
  EXPECT_NE(page.find("content=\"default-src 'none'; style-src 'unsafe-inline'\""), std::string::npos);
}

TEST(HtmlReport, PathsReachListMembersAndMissAbsentOnes) {
  const lj::value doc = {{"top", {{{"layout", "tp2"}}, {{"layout", "tp4"}}}}};
  EXPECT_EQ(html::detail::text_at(doc, "top.1.layout"), "tp4");
  EXPECT_TRUE(html::detail::at_path(doc, "top.2.layout").is_null());
  EXPECT_TRUE(html::detail::at_path(doc, "top.x").is_null());
  EXPECT_TRUE(html::detail::at_path(doc, "top.-1").is_null());
}

/// A search document with two Pareto members, the winner first.
lj::value search_doc() {
  lj::value doc = {{"model", "m"}, {"system", "s"}, {"gpus", 8}, {"memory_budget_gib", 30.0}, {"fitting", 2}};
  doc["top"] = {{{"rank", 1}, {"layout", "fast"}, {"step_time", 1.0}, {"peak_mem_gib", 20.0}}};
  doc["pareto"] = {{{"rank", 1}, {"layout", "fast"}, {"step_time", 1.0}, {"peak_mem_gib", 20.0}},
                   {{"rank", 2}, {"layout", "lean"}, {"step_time", 2.0}, {"peak_mem_gib", 10.0}}};
  return doc;
}

TEST(HtmlReport, ScatterPlacesPointsOnLinearAxes) {
  // Times 1..2 s padded by 5 % of the range: [0.95, 2.05] over x 70..890, so 1 s -> 70 + 820 x
  // 0.05 / 1.1 = 107.27 and 2 s -> 852.73. Memory 10..30 GiB (the budget) padded: [9, 31] over y
  // 400..20, so 20 GiB -> 400 - 380 x 11 / 22 = 210, 10 GiB -> 382.73, the budget 30 -> 37.27.
  const std::vector<html::scatter_point> points{{1.0, 20.0}, {2.0, 10.0}};
  const std::string page = html::search_report(search_doc(), points);
  const std::string winner = element_with(page, "class=\"winner\"");
  EXPECT_NEAR(attribute(winner, "cx"), 107.27, 0.01);
  EXPECT_NEAR(attribute(winner, "cy"), 210.0, 0.01);
  const std::string lean = element_with(page, "data-x-field=\"pareto.1.step_time\"");
  EXPECT_NEAR(attribute(lean, "cx"), 852.73, 0.01);
  EXPECT_NEAR(attribute(lean, "cy"), 382.73, 0.01);
  EXPECT_NEAR(attribute(element_with(page, "data-field=\"memory_budget_gib\" data-level"), "data-level"), 37.27, 0.01);
  EXPECT_EQ(occurrences(page, "<circle cx="), 2u);  // one per candidate
}

TEST(HtmlReport, ManyCandidatesAreCountedOnAGrid) {
  // 5,000 candidates (more than max_scatter_points) on 10 distinct spots: drawn as grid cells
  // whose counts add up to every candidate.
  std::vector<html::scatter_point> points;
  for (int i = 0; i < 5000; ++i) points.push_back({1.0 + 0.1 * (i % 10), 10.0 + (i % 10)});
  const std::string page = html::search_report(search_doc(), points);
  std::size_t total = 0, cells = 0;
  const std::regex count(" data-count=\"([0-9]+)\"");
  for (std::sregex_iterator it(page.begin(), page.end(), count), end; it != end; ++it, ++cells)
    total += std::stoul((*it)[1].str());
  EXPECT_EQ(total, 5000u);
  EXPECT_EQ(cells, 10u);
  EXPECT_EQ(occurrences(page, "<circle cx="), 0u);
}

TEST(HtmlReport, GridCellsSitWhereTheirCandidatesAre) {
  // 4,000 candidates at (1 s, 10 GiB) and one at (2 s, 30 GiB), the budget 30: axes [0.95, 2.05]
  // s over x 70..890 in 120 columns of 6.833 px, [9, 31] GiB over y 400..20 in 60 rows of 6.333
  // px. 1 s falls in column floor(0.05 / 1.1 x 120) = 5 (x = 104.17), 10 GiB in row
  // floor(1 / 22 x 60) = 2 (top y = 400 - 3 x 6.333 = 381); 2 s in column 114 (x = 849), 30 GiB
  // in row 57 (y = 32.67).
  std::vector<html::scatter_point> points(4000, {1.0, 10.0});
  points.push_back({2.0, 30.0});
  const std::string page = html::search_report(search_doc(), points);
  const std::string crowd = element_with(page, "data-count=\"4000\"");
  EXPECT_NEAR(attribute(crowd, "x"), 104.17, 0.01);
  EXPECT_NEAR(attribute(crowd, "y"), 381.0, 0.01);
  const std::string alone = element_with(page, "data-count=\"1\"");
  EXPECT_NEAR(attribute(alone, "x"), 849.0, 0.01);
  EXPECT_NEAR(attribute(alone, "y"), 32.67, 0.01);
}

TEST(HtmlReport, NearlyEqualTimesStillMakeAnAxis) {
  // Two candidates one ulp apart (a search of equivalent layouts): the axis is padded to a span
  // its ticks can step through (a tick step below the doubles' resolution looped forever).
  lj::value doc = search_doc();
  doc["pareto"] = lj::value::array();
  const std::vector<html::scatter_point> points{{1.0, 20.0}, {std::nextafter(1.0, 2.0), 20.0}};
  const std::string page = html::search_report(doc, points);
  EXPECT_EQ(occurrences(page, "<circle cx="), 2u);
  EXPECT_LE(occurrences(page, "class=\"grid\""), 2u * (html::detail::max_ticks + 1));
}

TEST(HtmlReport, TimelineDrawsEveryPassOfEveryRank) {
  // Llama 3 8B at pp 2 with 4 micro-batches: 1F1B runs 4 forwards and 4 backwards on each rank,
  // 16 passes; the first forward of rank 0 starts the iteration (x = 80, the timeline's left edge).
  const llmsim::strategy_spec strategy{
      .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 1, .pp_size = 2};
  const auto trace = llmsim::trace_iteration(llmsim::catalogue::llama3_8b, strategy, llmsim::catalogue::h100_sxm);
  lj::value doc = lj::to_json(trace.estimate);
  const std::string page = html::perf_report(doc, &trace);
  EXPECT_EQ(occurrences(page, "data-span=\"forward\" data-rank=\"0\""), 4u);
  EXPECT_EQ(occurrences(page, "data-span=\"forward\" data-rank=\"1\""), 4u);
  EXPECT_EQ(occurrences(page, "data-span=\"backward\" data-rank=\"1\""), 4u);
  const std::string first = element_with(page, "data-span=\"forward\" data-rank=\"0\" data-start-ms=\"0.000000\"");
  ASSERT_FALSE(first.empty());
  const auto rect_at = page.find("<rect", page.find(first));
  EXPECT_NEAR(attribute(page.substr(rect_at, 200), "x"), 80.0, 0.01);
  // Without a trace the page says why.
  EXPECT_NE(html::perf_report(doc, nullptr, "too many micro-batches").find("No timeline: too many micro-batches"),
            std::string::npos);
}

}  // namespace

}  // namespace llmsim_test_html_report
