#!/usr/bin/env bash
# Fuzzes the estimate: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]   (default 60 s)
# Builds tests/fuzz with Clang 14 (-fsanitize=fuzzer,address,undefined) into build/fuzz, makes a seed
# corpus (model / strategy / system documents from configs/, ../shared/reference/simumax/configs
# when present, and the bad-input corpus) and a dictionary of every JSON key they use, then runs
# libFuzzer for SECONDS on one core. Inputs it finds are kept in build/fuzz/corpus; a crash, a
# leak, undefined behaviour or a broken rule (tests/fuzz/fuzz_estimate.cpp) exits non-zero and
# leaves the input as build/fuzz/crash-* (or leak-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
out=build/fuzz
cmake -S tests/fuzz -B "$out" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$out" -j"$(nproc)" >/dev/null
python3 scripts/fuzz_seeds.py "$out/seeds" "$out/fields.dict"
mkdir -p "$out/corpus"
# -timeout: an input over 30 s of wall time counts as a hang (the target itself requires 1 s of
# processor time, 2 under the sanitizers: max_seconds); -rss_limit_mb: 2 GiB of a 24 GiB machine.
"$out/fuzz_estimate" "$out/corpus" "$out/seeds" -dict="$out/fields.dict" -max_total_time="$seconds" \
  -timeout=30 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/" "$@" \
  2>"$out/fuzz.log" || { tail -60 "$out/fuzz.log"; exit 1; }
grep -E "stat::number_of_executed_units|cov:|stat::peak_rss" "$out/fuzz.log" | tail -4
