#!/usr/bin/env bash
# Prints the README's Megatron-Bridge tables (markdown): predicted vs printed tokens/s/GPU and model
# TFLOP/s/GPU by precision and by GPU, why rows are not estimated, and the estimated rows.
#   scripts/megatron_bridge_table.sh [LLMSIM [CASES]]
# defaults: build/dev/bin/llmsim and ../shared/validation/megatron_bridge_cases.json
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
llmsim="${1:-$here/build/dev/bin/llmsim}"
cases="${2:-$here/../shared/validation/megatron_bridge_cases.json}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# Status 5 says some rows were not estimated: the tables list them with their reasons.
status=0
"$llmsim" validate "$cases" --recipes "$here/configs/megatron_bridge/recipes.json" --format json >"$out" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
python3 - "$out" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["summary"]

def pct(x, n):
    return "%.1f %%" % (100 * x) if n else "-"

def table(title, groups):
    print("| %s | rows | estimated | tokens/s/GPU mean abs err | max | model TFLOP/s/GPU mean abs err | max |" % title)
    print("|---|---|---|---|---|---|---|")
    for k, v in groups.items():
        n = v["estimated"]
        print("| %s | %d | %d | %s | %s | %s | %s |" % (k, v["rows"], n, pct(v["tokens_mean_abs_err"], n),
              pct(v["tokens_max_abs_err"], n), pct(v["tflops_mean_abs_err"], n), pct(v["tflops_max_abs_err"], n)))
    print()

table("precision", s["by_precision"])
table("GPU", s["by_gpu"])
table("release", s["by_release"])
a = s["all"]
print("All rows: %d, %d estimated; tokens/s/GPU mean abs err %s, max %s; model TFLOP/s/GPU mean abs err %s, max %s"
      % (a["rows"], a["estimated"], pct(a["tokens_mean_abs_err"], a["estimated"]), pct(a["tokens_max_abs_err"], a["estimated"]),
         pct(a["tflops_mean_abs_err"], a["estimated"]), pct(a["tflops_max_abs_err"], a["estimated"])))
print()
late = [r["name"] for r in doc["cases"] if r["error"] is None and not r["predicted"]["fits"]]
print("Estimated rows whose estimated peak memory exceeds the GPU's (the published runs fit): %d%s"
      % (len(late), (" (" + ", ".join(late) + ")") if late else ""))
print()
f = s["flop_formula"]
print("Megatron-Bridge FLOP formula against the printed TFLOP/s over tokens/s: %d rows, mean abs err %.2f %%, max %.2f %%"
      % (f["rows"], 100 * f["mean_abs_err"], 100 * f["max_abs_err"]))
print()
print("| rows not estimated | reason |")
print("|---|---|")
for k, v in sorted(s["not_estimated_reasons"].items(), key=lambda kv: -kv[1]):
    print("| %d | %s |" % (v, k))
print()
print("| estimated row | tokens/s/GPU | printed | err | model TFLOP/s/GPU | printed | err |")
print("|---|---|---|---|---|---|---|")
for r in doc["cases"]:
    if r["error"] is None:
        p, q = r["predicted"], r["real"]
        print("| %s | %.0f | %.0f | %+.1f %% | %.0f | %.0f | %+.1f %% |" % (r["name"], p["tokens_per_sec_per_gpu"],
              q["tokens_per_sec_per_gpu"], 100 * r["tokens_err"], p["model_tflops_per_sec_per_gpu"],
              q["model_tflops_per_sec_per_gpu"], 100 * r["tflops_err"]))
PY
