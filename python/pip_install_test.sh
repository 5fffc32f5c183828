#!/usr/bin/env bash
# `pip install --no-build-isolation` of the repository into a fresh venv of PYTHON (Debian's python3,
# with --system-site-packages for its setuptools and pybind11; --no-index: nothing is downloaded),
# then SimuMax's workflow from outside the source tree.
#   python/pip_install_test.sh PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
python="$1" source="$2" work="$3"
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv --system-site-packages "$work/venv"
# pip builds in place: give it a copy of what the package needs, so the checkout stays untouched.
mkdir -p "$work/src"
cp -r "$source/include" "$source/python" "$source/configs" "$source/setup.py" "$source/pyproject.toml" \
  "$source/README.md" "$source/LICENSE" "$work/src/"
"$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps --quiet "$work/src"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import llmsim
from llmsim.core.config import ModelConfig, StrategyConfig, SystemConfig
from llmsim.core.perf_llm import PerfLLM
from llmsim.utils import get_simu_model_config, get_simu_strategy_config, get_simu_system_config

assert llmsim.__file__.startswith(__import__("sys").prefix), llmsim.__file__
perf = PerfLLM()
perf.configure(strategy_config=StrategyConfig.init_from_config_file(get_simu_strategy_config("tp2_pp1_dp4_mbs1")),
               model_config=ModelConfig.init_from_config_file(get_simu_model_config("llama3-8b")),
               system_config=SystemConfig.init_from_config_file(get_simu_system_config("h100_sxm")))
perf.run_estimate()
cost = perf.analysis_cost()
assert cost["duration_time_per_iter"] > 0, cost
print("pip-installed llmsim", llmsim.__version__, "duration_time_per_iter", cost["duration_time_per_iter"], "ms")
PY
