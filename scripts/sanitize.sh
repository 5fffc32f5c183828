#!/usr/bin/env bash
# Builds llmsim's runtime tests and CLI with -fsanitize=address,undefined in a nested build and runs
# them once:
#   scripts/sanitize.sh <build-dir> <cxx-compiler> <shared-dir>
# The ctest sanitize.runtime_tests calls it. The test binary runs directly, not through ctest: the
# nested build is configured with LLMSIM_SANITIZE=ON, which keeps it from registering
# sanitize.runtime_tests again (tests/CMakeLists.txt), and running it directly keeps it that way.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 <build-dir> <cxx-compiler> <shared-dir>" >&2
  exit 2
fi
build=$1
cxx=$2
shared=$3
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

step() { echo "== sanitize: $*"; }
die() { echo "sanitize.sh: error: $*" >&2; exit 1; }

step "configure $build (compiler $cxx)"
cmake -S "$source_dir" -B "$build" \
  -DLLMSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
  -DLLMSIM_BUILD_EXAMPLES=OFF -DLLMSIM_INSTALL=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" -DLLMSIM_SHARED_DIR="$shared" >/dev/null \
  || die "configuring the sanitizer build failed"

step "build llmsim_runtime_tests and llmsim_cli"
cmake --build "$build" --target llmsim_runtime_tests llmsim_cli -j2 \
  || die "building the sanitizer build failed"

# Set by CMAKE_RUNTIME_OUTPUT_DIRECTORY in the top-level CMakeLists.txt.
tests="$build/bin/llmsim_runtime_tests"
cli="$build/bin/llmsim"
[ -x "$tests" ] || die "$tests was not built"
[ -x "$cli" ] || die "$cli was not built"

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The search tests price up to millions of candidates (brute force against the pruned search, a
# search per visible real run): at -O0 under the sanitizers they take tens of minutes. The GCC
# Release and Clang passes run them; here the search runs in its cheap tests only.
heavy="Search.RealRunsLayoutsAreMatchedOrBeaten:Search.PruningEqualsBruteForce*:Search.MoeSpaceEqualsBruteForce"
heavy="$heavy:Search.FitsNowhereNamesTheSmallestShortfall:Search.EveryFittingCandidateEqualsAFreshEstimate:CliSearch.*"
step "run $tests (without $heavy)"
rc=0
"$tests" --gtest_filter="-$heavy" || rc=$?
[ "$rc" -eq 0 ] || die "the runtime tests failed under the sanitizers (exit $rc)"

configs="$shared/reference/simumax/configs"
if [ -d "$configs" ]; then
  step "run llmsim check on shared configs"
  rc=0
  "$cli" check --system "$configs/system/a100_pcie.json" --strategy "$configs/strategy/tp2_pp1_dp4_mbs1.json" \
    --model "$configs/models/llama2-7b.json" >"$build/check.out" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$build/check.out"; die "llmsim check failed under the sanitizers (exit $rc)"; }
  tail -n 1 "$build/check.out"
else
  step "skip llmsim check: no shared configs at $configs"
fi
step "passed"
