#!/usr/bin/env bash
# Builds llmsim with GCC 12 and with Clang 14 (warnings as errors) and runs every test:
# the source format (clang-format), static, runtime, compile_fail, bad-input corpus, consumers,
# single-header staleness, examples; the GCC pass (Release) also runs the sanitizer build, the
# consumer builds, the per-header build, the Python package (pytest, pip install into a venv) and
# the HTML report in headless Chromium,
# the Clang pass (-O1) the rest; then 60 s of libFuzzer
# (scripts/fuzz.sh). Installs missing Debian packages first (needs root).
# This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ clang libclang-rt-14-dev clang-format-14 python3 libboost-dev nlohmann-json3-dev libgtest-dev
  libcli11-dev pybind11-dev python3-pybind11 python3-dev python3-pytest python3-venv python3-setuptools chromium
  python3-pil)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

bash scripts/check_format.sh  # clang-format-14 with .clang-format (120 columns)

jobs=$(nproc)
for compiler in g++ clang++; do
  dir="build/test-${compiler%++}"
  echo "=== ${compiler}: configure, build, test (${dir}) ==="
  if [ "$compiler" = g++ ]; then
    flags=(-DLLMSIM_BUILD_PYTHON=ON)  # Release (-O3): what users build; and the Python package
    skip=()    # everything, the sanitizer build, the consumers and the Python tests included
  else
    # Clang checks that the library compiles and constant-evaluates the same way under a second
    # compiler; -O1 is enough for that and halves its build. The sanitizer build, the consumer
    # builds, the per-header build and the browser test are compiler-independent checks the GCC
    # pass already made.
    flags=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
    skip=(-LE "sanitize|consumer|browser" -E "headers.self_contained")
  fi
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$compiler" -DLLMSIM_WARNINGS_AS_ERRORS=ON \
    "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "${skip[@]}")
done

# libFuzzer over the estimate for a bounded time (tests/fuzz; scripts/fuzz.sh runs it as long as asked).
echo "=== fuzz: 60 s (scripts/fuzz.sh) ==="
bash scripts/fuzz.sh 60
