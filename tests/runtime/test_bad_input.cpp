// The bad-input corpus: every file in tests/bad_input/ is a malformed config, and
// tests/bad_input/cases.json names the exact llmsim::config_error it must be refused with.
//
// A case is {"file", "kind": "model"|"strategy"|"system"|"combo", "strict" (optional), "error", "field"}.
// "error" is the exact what() text with the file path written as {file}. A "combo" case also names
// "model", "strategy" and "system" files (paths relative to tests/bad_input, small valid inputs live
// in tests/bad_input/valid/); each loads on its own and llmsim::json::validate_files must refuse
// the three together, naming the file the offending field belongs to: {model}, {strategy} or
// {system} in "error" stand for those paths ({file} for the case's own file).
//
// Each file is its own test (BadInput/BadInputCorpus.IsRefusedWithItsExactError/<file name>), so a
// crash on one input fails that input's ctest entry only.

#include <llmsim/json.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_bad_input {

namespace {

namespace fs = std::filesystem;
namespace lj = llmsim::json;

const fs::path corpus_dir = fs::path(LLMSIM_SOURCE_DIR) / "tests" / "bad_input";
const fs::path manifest_path = corpus_dir / "cases.json";

struct bad_case {
  std::string file;
  std::string kind;
  bool strict = false;
  std::string error;  ///< what() with {file} (and for combos {model}, {strategy}, {system})
  std::string field;
  std::string model, strategy, system;  ///< combo inputs, relative to corpus_dir
};

void PrintTo(const bad_case& c, std::ostream* os) { *os << c.file; }

std::string path_of(const std::string& relative) { return (corpus_dir / relative).string(); }

/// The manifest, or the reason it could not be read (kept for BadInputManifest.Parses: test
/// registration must not throw).
struct manifest {
  std::vector<bad_case> cases;
  std::string problem;
};

const manifest& load_manifest() {
  static const manifest m = [] {
    manifest out;
    try {
      std::ifstream in(manifest_path, std::ios::binary);
      if (!in) {
        out.problem = "cannot open " + manifest_path.string();
        return out;
      }
      const auto doc = nlohmann::json::parse(in);
      if (!doc.is_array()) {
        out.problem = "cases.json must be an array";
        return out;
      }
      for (const auto& entry : doc) {
        bad_case c;
        c.file = entry.at("file").get<std::string>();
        c.kind = entry.at("kind").get<std::string>();
        c.strict = entry.value("strict", false);
        c.error = entry.at("error").get<std::string>();
        c.field = entry.at("field").get<std::string>();
        c.model = entry.value("model", std::string());
        c.strategy = entry.value("strategy", std::string());
        c.system = entry.value("system", std::string());
        out.cases.push_back(c);
      }
    } catch (const std::exception& e) {
      out.problem = std::string("cases.json is malformed: ") + e.what();
      out.cases.clear();
    }
    return out;
  }();
  return m;
}

void replace_all(std::string& text, const std::string& token, const std::string& with) {
  for (auto pos = text.find(token); pos != std::string::npos; pos = text.find(token, pos + with.size()))
    text.replace(pos, token.size(), with);
}

/// The expected what() of `c`, with the tokens replaced by real paths.
std::string expected_what(const bad_case& c) {
  std::string text = c.error;
  replace_all(text, "{file}", path_of(c.file));
  if (c.kind == "combo") {
    replace_all(text, "{model}", path_of(c.model));
    replace_all(text, "{strategy}", path_of(c.strategy));
    replace_all(text, "{system}", path_of(c.system));
  }
  return text;
}

/// Runs the loader `c` names; the config_error it throws is rethrown, anything else escapes as is.
void run_case(const bad_case& c) {
  lj::load_options opt;
  opt.strict = c.strict;
  const std::string file = path_of(c.file);
  if (c.kind == "model") {
    (void)lj::load_model(file, opt);
  } else if (c.kind == "strategy") {
    (void)lj::load_strategy(file, opt);
  } else if (c.kind == "system") {
    (void)lj::load_system(file, opt);
  } else if (c.kind == "combo") {
    const auto model = lj::load_model(path_of(c.model), opt);
    const auto strategy = lj::load_strategy(path_of(c.strategy), opt);
    const auto system = lj::load_system(path_of(c.system), opt);
    lj::validate_files(model, path_of(c.model), strategy, path_of(c.strategy), system.spec(), path_of(c.system));
  } else {
    FAIL() << c.file << ": unknown kind \"" << c.kind << "\"";
  }
}

std::string test_name(const testing::TestParamInfo<bad_case>& info) {
  std::string name = info.param.file;
  for (char& ch : name)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) ch = '_';
  return name;
}

// ---- the manifest itself ---------------------------------------------------------------------------

TEST(BadInputManifest, Parses) {
  const auto& m = load_manifest();
  EXPECT_TRUE(m.problem.empty()) << m.problem;
}

TEST(BadInputManifest, HasAtLeast45Cases) { EXPECT_GE(load_manifest().cases.size(), 45U); }

TEST(BadInputManifest, EntriesAreWellFormed) {
  for (const auto& c : load_manifest().cases) {
    SCOPED_TRACE(c.file);
    EXPECT_TRUE(c.kind == "model" || c.kind == "strategy" || c.kind == "system" || c.kind == "combo") << c.kind;
    EXPECT_FALSE(c.error.empty());
    EXPECT_TRUE(fs::is_regular_file(corpus_dir / c.file));
    if (c.kind == "combo") {
      for (const auto* part : {&c.model, &c.strategy, &c.system})
        EXPECT_TRUE(fs::is_regular_file(corpus_dir / *part)) << *part;
      EXPECT_TRUE(c.file == c.model || c.file == c.strategy || c.file == c.system)
          << "a combo case must use its own file";
    } else {
      EXPECT_TRUE(c.model.empty() && c.strategy.empty() && c.system.empty())
          << "only combo cases name model/strategy/system";
      EXPECT_EQ(c.error.rfind("{file}: ", 0), 0U) << "a single-file error starts with its file";
    }
  }
}

TEST(BadInputManifest, ListsEveryCorpusFileExactlyOnce) {
  std::map<std::string, int> listed;
  for (const auto& c : load_manifest().cases) ++listed[c.file];
  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(corpus_dir)) {
    const std::string name = entry.path().filename().string();
    // valid/: inputs combo cases pair with; megatron_bridge/: malformed Megatron-Bridge rows, with
    // their own manifest (tests/runtime/test_megatron_bridge.cpp)
    if (name == "cases.json" || ((name == "valid" || name == "megatron_bridge") && entry.is_directory())) continue;
    EXPECT_TRUE(entry.is_regular_file()) << name << " is not a regular file";
    on_disk.insert(name);
    EXPECT_EQ(listed[name], 1) << name << " must be listed exactly once in cases.json";
  }
  for (const auto& [name, count] : listed)
    EXPECT_TRUE(on_disk.contains(name)) << name << " is listed but not in tests/bad_input";
}

// The inputs combo cases pair with a bad file are themselves valid, so each combo error is the
// cross-file rule alone.
TEST(BadInputManifest, ValidInputsLoadAndValidateTogether) {
  lj::load_options strict;
  strict.strict = true;
  try {
    const auto dense = lj::load_model(path_of("valid/model_dense.json"), strict);
    const auto moe = lj::load_model(path_of("valid/model_moe.json"), strict);
    const auto mla = lj::load_model(path_of("valid/model_mla.json"), strict);
    const auto strategy = lj::load_strategy(path_of("valid/strategy.json"), strict);
    const auto system = lj::load_system(path_of("valid/system.json"), strict);
    for (const auto* model : {&dense, &moe, &mla})
      lj::validate_files(*model, "model", strategy, path_of("valid/strategy.json"), system.spec(),
                         path_of("valid/system.json"));
  } catch (const std::exception& e) { FAIL() << e.what(); }
}

// ---- one test per corpus file ----------------------------------------------------------------------

class BadInputCorpus : public testing::TestWithParam<bad_case> {};

TEST_P(BadInputCorpus, IsRefusedWithItsExactError) {
  const bad_case& c = GetParam();
  const std::string want = expected_what(c);
  try {
    run_case(c);
    ADD_FAILURE() << c.file << " was accepted; expected: " << want;
  } catch (const llmsim::config_error& e) {
    EXPECT_EQ(std::string(e.what()), want);
    EXPECT_EQ(e.field(), c.field);
    EXPECT_EQ(std::string(e.what()).rfind(e.file() + ": ", 0), 0U) << "what() must start with file(): " << e.file();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.file << " threw a std::exception that is not llmsim::config_error: " << e.what();
  } catch (...) { ADD_FAILURE() << c.file << " threw something that is not a std::exception"; }
}

INSTANTIATE_TEST_SUITE_P(BadInput, BadInputCorpus, testing::ValuesIn(load_manifest().cases), test_name);

// ---- the command line tool ---------------------------------------------------------------------------

struct run_result {
  int exit_code = -1;
  std::string err;  ///< stderr
  std::string out;  ///< stdout
};

#ifndef _WIN32
run_result run_cli(const std::string& args) {
  const fs::path err_file = fs::temp_directory_path() / ("llmsim_bad_input_" + std::to_string(::getpid()) + ".err");
  const std::string command = "'" + std::string(LLMSIM_CLI_PATH) + "' " + args + " 2>'" + err_file.string() + "'";
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  r.err = text.str();
  std::error_code ignored;
  fs::remove(err_file, ignored);
  return r;
}
#endif

const bad_case* find_case(const std::string& file) {
  for (const auto& c : load_manifest().cases)
    if (c.file == file) return &c;
  return nullptr;
}

TEST(BadInputCli, CheckRefusesCorpusModels) {
  if (std::string(LLMSIM_CLI_PATH).empty()) GTEST_SKIP() << "the llmsim command line tool is not built";
#ifdef _WIN32
  GTEST_SKIP() << "needs a POSIX shell";
#else
  for (const char* file :
       {"model_missing_hidden_size.json", "model_invalid_utf8_in_string.json", "model_deeply_nested_value.json"}) {
    SCOPED_TRACE(file);
    const bad_case* c = find_case(file);
    ASSERT_NE(c, nullptr) << "not in cases.json";
    const auto r = run_cli("check --model '" + path_of(c->file) + "'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: " + expected_what(*c)), std::string::npos) << "stderr: " << r.err;
  }
#endif
}

// The JSON report quotes the error; a parse error quoting invalid UTF-8 must not break it.
TEST(BadInputCli, JsonReportCarriesTheErrorOfInvalidUtf8) {
  if (std::string(LLMSIM_CLI_PATH).empty()) GTEST_SKIP() << "the llmsim command line tool is not built";
#ifdef _WIN32
  GTEST_SKIP() << "needs a POSIX shell";
#else
  const bad_case* c = find_case("model_invalid_utf8_in_string.json");
  ASSERT_NE(c, nullptr) << "not in cases.json";
  const auto r = run_cli("check --format json --model '" + path_of(c->file) + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "stdout is not JSON: " << r.out << "\nstderr: " << r.err;
  ASSERT_TRUE(report.contains("errors") && report["errors"].is_array() && report["errors"].size() == 1) << r.out;
  EXPECT_EQ(report["errors"][0].get<std::string>(), expected_what(*c));
#endif
}

}  // namespace

}  // namespace llmsim_test_bad_input
