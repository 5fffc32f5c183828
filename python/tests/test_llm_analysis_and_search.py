"""llm-analysis's train() / infer() and SimuMax's strategy search from Python."""

import json

import pytest

import llmsim
import llmsim.llm_analysis
from llmsim import PerfLLM


def test_llm_analysis_oracle(shared_dir):
    # llm-analysis's own outputs (../shared/validation/llm_analysis_oracle.json), through Python.
    doc = json.loads((shared_dir / "validation" / "llm_analysis_oracle.json").read_text())
    cases = doc["cases"] if isinstance(doc, dict) else doc
    configs = shared_dir / "reference" / "llm-analysis"
    checked = 0
    for case in cases:
        kwargs = dict(case["kwargs"])
        run = llmsim.llm_analysis.train if case["function"] == "train" else llmsim.llm_analysis.infer
        got = run(configs=configs, **kwargs)
        for key, want in case["output"].items():
            if isinstance(want, float):
                assert got[key] == pytest.approx(want, rel=1e-9, abs=1e-12), (case.get("name"), key)
            else:
                assert got[key] == want, (case.get("name"), key)
            checked += 1
    assert checked > 500


def test_search_best_parallel_strategy_with_recompute():
    perf = PerfLLM()
    perf.configure(strategy_config="tp1_mbc8", model_config="llama3-8b", system_config="h100-sxm")
    best = perf.search_best_parallel_strategy_with_recompute(world_size=8, gmi_error=10, micro_batch_size=1,
                                                             global_batch_size=32, tp_search_list=[1, 2, 4])
    assert best["found"] and best["candidates_fitting"] >= 1
    s = best["strategy"]
    assert s["world_size"] == 8 and s["tp_size"] in (1, 2, 4)
    # global batch 32 = dp x micro-batch size 1 x micro-batches
    assert (8 // (s["tp_size"] * s["pp_size"])) * s["micro_batch_num"] == 32
    # The winner, estimated on its own, gives the time and MFU the search reported.
    again = PerfLLM()
    again.configure(strategy_config=s, model_config="llama3-8b", system_config="h100-sxm")
    again.run_estimate()
    assert again.analysis_cost()["duration_time_per_iter"] == pytest.approx(best["duration_time_per_iter"], rel=1e-9)
    assert again.analysis_cost()["mfu"] == pytest.approx(best["mfu"], rel=1e-9)
