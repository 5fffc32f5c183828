// The shipped configs (configs/) and the catalogue describe the same things once: every file under
// configs/system, configs/models and configs/strategy, loaded as llmsim::json::load_* reads it,
// equals its catalogue entry field by field. A difference that is deliberate is explained in
// configs/README.md and listed, exactly, in the table below; anything else fails.
//
// The comparison is on the loaded specs (`==`), with each differing field named by its JSON path
// so a failure says which figure disagrees (e.g. networks.inter_node.bandwidth.gbps).

#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_shipped_configs {

namespace {

namespace fs = std::filesystem;
namespace lj = llmsim::json;

const fs::path configs_dir = fs::path(LLMSIM_SOURCE_DIR) / "configs";

/// One shipped file and the catalogue entry it must equal. `deliberate`: the differing fields,
/// each "path: file X, catalogue Y", that configs/README.md explains (none today).
struct shipped {
  const char* file;       ///< relative to configs/
  const char* catalogue;  ///< catalogue model or system name, or a compact strategy name
  std::vector<std::string> deliberate;
};

const std::vector<shipped> systems = {
    {"system/h100_sxm.json", "h100-sxm", {}},
};
const std::vector<shipped> models = {
    {"models/llama3-8b.json", "llama3-8b", {}},
    {"models/llama3-70b.json", "llama3-70b", {}},
};
const std::vector<shipped> strategies = {
    {"strategy/tp2_pp1_dp4_mbs1.json", "tp2_pp1_dp4_mbs1", {}},
    {"strategy/tp4_pp4_dp4_mbs1.json", "tp4_pp4_dp4_mbs1_mbc32", {}},
};

void flatten(const lj::value& v, const std::string& path, std::map<std::string, std::string>& out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& item : v.items()) flatten(item.value(), path.empty() ? item.key() : path + "." + item.key(), out);
    return;
  }
  out[path] = v.dump();
}

/// The fields where `file` and `catalogue` differ, as "path: file X, catalogue Y" (X or Y is
/// "absent" when one side does not write the field).
std::vector<std::string> differences(const lj::value& file, const lj::value& catalogue) {
  std::map<std::string, std::string> a, b;
  flatten(file, "", a);
  flatten(catalogue, "", b);
  std::vector<std::string> out;
  for (const auto& [path, x] : a) {
    const auto it = b.find(path);
    const std::string y = it == b.end() ? "absent" : it->second;
    if (x != y) out.push_back(path + ": file " + x + ", catalogue " + y);
  }
  for (const auto& [path, y] : b)
    if (a.find(path) == a.end()) out.push_back(path + ": file absent, catalogue " + y);
  return out;
}

std::vector<std::string> json_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(dir.filename().string() + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> files_of(const std::vector<shipped>& table) {
  std::vector<std::string> out;
  for (const auto& s : table) out.emplace_back(s.file);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(ShippedConfigs, EveryFileHasACatalogueEntry) {
  EXPECT_EQ(json_files_in(configs_dir / "system"), files_of(systems));
  EXPECT_EQ(json_files_in(configs_dir / "models"), files_of(models));
  EXPECT_EQ(json_files_in(configs_dir / "strategy"), files_of(strategies));
}

TEST(ShippedConfigs, SystemsEqualTheCatalogue) {
  for (const auto& s : systems) {
    SCOPED_TRACE(s.file);
    const auto loaded = lj::load_system(configs_dir / s.file, {.strict = true});
    const auto* entry = llmsim::catalogue::find_system(s.catalogue);
    ASSERT_NE(entry, nullptr) << s.catalogue;
    EXPECT_EQ(differences(lj::to_json(loaded.spec()), lj::to_json(*entry)), s.deliberate);
    if (s.deliberate.empty()) {
      EXPECT_TRUE(loaded.spec() == *entry) << "the specs differ in a field to_json does not write";
    }
  }
}

TEST(ShippedConfigs, ModelsEqualTheCatalogue) {
  for (const auto& m : models) {
    SCOPED_TRACE(m.file);
    const auto loaded = lj::load_model(configs_dir / m.file, {.strict = true});
    const auto* entry = llmsim::catalogue::find_model(m.catalogue);
    ASSERT_NE(entry, nullptr) << m.catalogue;
    EXPECT_EQ(differences(lj::to_json(loaded), lj::to_json(*entry)), m.deliberate);
    if (m.deliberate.empty()) { EXPECT_TRUE(loaded == *entry) << "the specs differ in a field to_json does not write"; }
  }
}

TEST(ShippedConfigs, StrategiesEqualTheirCompactNames) {
  for (const auto& t : strategies) {
    SCOPED_TRACE(t.file);
    const auto loaded = lj::load_strategy(configs_dir / t.file, {.strict = true});
    llmsim::strategy_spec named{};
    ASSERT_TRUE(llmsim::catalogue::parse_strategy_name(t.catalogue, named)) << t.catalogue;
    EXPECT_EQ(differences(lj::to_json(loaded), lj::to_json(named)), t.deliberate);
    if (t.deliberate.empty()) { EXPECT_TRUE(loaded == named) << "the specs differ in a field to_json does not write"; }
  }
}

#ifndef _WIN32
namespace {
/// stdout of `llmsim <args>`; `status` is pclose's (0: exited with 0). stderr passes through.
std::string run_cli(const std::string& args, int& status) {
  const std::string command = "'" + std::string(LLMSIM_CLI_PATH) + "' " + args;
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  status = ::pclose(pipe);
  return out;
}
}  // namespace

// The command line tool gives one answer whether a job names the catalogue or the shipped files.
TEST(ShippedConfigs, PerfIsTheSameOnTheFileAndOnTheCatalogueName) {
  if (std::string(LLMSIM_CLI_PATH).empty()) GTEST_SKIP() << "the llmsim command line tool is not built";
  const std::string job = " --strategy tp8_pp2_dp8_mbc16 --format json";
  int rc_name = -1, rc_file = -1;
  const auto by_name = run_cli("perf --system h100-sxm --model llama3-70b" + job, rc_name);
  const auto by_file = run_cli("perf --system '" + (configs_dir / "system/h100_sxm.json").string() + "' --model '" +
                                   (configs_dir / "models/llama3-70b.json").string() + "'" + job,
                               rc_file);
  ASSERT_EQ(rc_name, 0) << by_name;
  ASSERT_EQ(rc_file, 0) << by_file;
  const auto a = lj::value::parse(by_name);
  const auto b = lj::value::parse(by_file);
  EXPECT_EQ(b["cost_result"]["duration_time_per_iter"], a["cost_result"]["duration_time_per_iter"]);
  EXPECT_EQ(b["mem_result"]["peak_mem"], a["mem_result"]["peak_mem"]);
  EXPECT_TRUE(a == b) << "outputs differ: " << lj::value::diff(a, b).dump();
}
#endif

}  // namespace llmsim_test_shipped_configs
