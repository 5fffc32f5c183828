// Where the shared reference configs live; tests that need them skip with a clear message when absent.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace llmsim_test {

inline std::filesystem::path shared_dir() { return LLMSIM_SHARED_DIR; }
inline std::filesystem::path simumax_configs() { return shared_dir() / "reference" / "simumax" / "configs"; }
inline std::filesystem::path source_dir() { return LLMSIM_SOURCE_DIR; }

#define LLMSIM_REQUIRE_SHARED()                                                                    \
  do {                                                                                             \
    if (!std::filesystem::exists(::llmsim_test::simumax_configs()))                                \
      GTEST_SKIP() << "shared reference configs not found at " << ::llmsim_test::simumax_configs() \
                   << " (tests that read ../shared skip when it is absent)";                       \
  } while (0)

}  // namespace llmsim_test
