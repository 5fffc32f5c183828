"""SimuMax's workflow from Python: configure, run_estimate, analysis_cost / analysis_mem."""

import json
import os
import subprocess
import sys

import pytest

import llmsim
from llmsim.core.config import ModelConfig, StrategyConfig, SystemConfig
from llmsim.core.perf_llm import PerfLLM


def configured(source_dir):
    perf = PerfLLM()
    perf.configure(strategy_config=str(source_dir / "configs/strategy/tp2_pp1_dp4_mbs1.json"),
                   model_config=str(source_dir / "configs/models/llama3-8b.json"),
                   system_config=str(source_dir / "configs/system/h100_sxm.json"))
    return perf


def test_the_estimate_is_the_command_lines(source_dir, cli):
    # Same files, same numbers and keys as `llmsim perf --format json` (the CLI's own JSON writer).
    perf = configured(source_dir)
    perf.run_estimate()
    out = subprocess.run([cli, "perf", "--format", "json",
                          "--system", str(source_dir / "configs/system/h100_sxm.json"),
                          "--strategy", str(source_dir / "configs/strategy/tp2_pp1_dp4_mbs1.json"),
                          "--model", str(source_dir / "configs/models/llama3-8b.json")],
                         check=True, capture_output=True, text=True).stdout
    expected = json.loads(out)
    assert perf.analysis_cost() == expected["cost_result"]
    assert perf.analysis_mem() == expected["mem_result"]


def test_simumax_keys(source_dir):
    perf = configured(source_dir)
    perf.run_estimate()
    cost, mem = perf.analysis_cost(), perf.analysis_mem()
    for key in ("duration_time_per_iter", "mfu", "throughput_per_accelerator", "all_tokens_per_iter",
                "breakdown_result", "comm_result", "chunk_time"):
        assert key in cost, key
    for key in ("first_stage", "peak_mem", "peak_mem_with_reserved", "device_mem"):
        assert key in mem, key
    # Llama 3 8B at tp2 x dp4, seq 4096, 1 x 8 micro-batches (tp2_pp1_dp4_mbs1.json): every
    # iteration takes dp x micro-batches x seq = 4 x 8 x 4096 = 131072 tokens.
    assert cost["all_tokens_per_iter"] == 4 * 8 * 4096
    # throughput per GPU = tokens / (time x 8 GPUs), time in ms.
    assert cost["throughput_per_accelerator"] == pytest.approx(131072 / (cost["duration_time_per_iter"] / 1e3) / 8)


def test_changes_after_configure_count(source_dir):
    # SimuMax's examples set model_config fields after configure(); the next estimate reads them.
    perf = configured(source_dir)
    perf.run_estimate()
    full = perf.analysis_cost()["duration_time_per_iter"]
    perf.model_config.layer_num = 16
    perf.run_estimate()
    half = perf.analysis_cost()["duration_time_per_iter"]
    assert half < full
    assert perf.analysis_mem()["peak_mem"] < configured_peak(source_dir)


def configured_peak(source_dir):
    perf = configured(source_dir)
    perf.run_estimate()
    return perf.analysis_mem()["peak_mem"]


def test_the_simumax_style_script_runs(source_dir, tmp_path):
    script = os.path.join(os.path.dirname(__file__), "perf_llama3_8b_tp2.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, script], check=True, capture_output=True, text=True, cwd=tmp_path,
                         env=env).stdout
    assert "duration_time_per_iter" in out and "mfu" in out and "peak_mem" in out
    assert "llama3_8b" in out  # the report's title names the model
    # analysis(save_path) wrote the result where SimuMax writes its analysis.
    saved = json.loads((tmp_path / "llama3_8b_h100_sxm" / "llmsim_result.json").read_text())
    assert saved["cost_result"]["duration_time_per_iter"] > 0
    assert "memory-chart" in (tmp_path / "llama3_8b_h100_sxm" / "llmsim_report.html").read_text()


def test_names_resolve_to_configs_or_the_catalogue():
    assert os.path.isfile(llmsim.get_simu_model_config("llama3-8b"))  # shipped configs/models/llama3-8b.json
    assert llmsim.get_simu_system_config("a100_pcie") == "a100-pcie"  # the catalogue's spelling
    assert llmsim.get_simu_strategy_config("tp1_pp2_dp4_mbs1") == "tp1_pp2_dp4_mbs1"  # a compact name
    s = StrategyConfig.init_from_config_file("tp1_pp2_dp4_mbs1")
    assert (s.tp_size, s.pp_size, s.world_size, s.micro_batch_size, s.dp_size) == (1, 2, 8, 1, 4)


def test_configs_are_objects_with_fields(source_dir):
    m = ModelConfig.init_from_config_file(str(source_dir / "configs/models/llama3-8b.json"))
    # Llama 3 8B (Meta's config.json): 4096 hidden, 32 layers, 32 heads, 8 KV heads.
    assert (m.hidden_size, m.layer_num, m.head_num, m.kv_head_num) == (4096, 32, 32, 8)
    with pytest.raises(AttributeError):
        _ = m.no_such_field
    d = m.to_dict()
    d["layer_num"] = 1
    assert m.layer_num == 32  # a copy
    assert ModelConfig.init_from_dict(m.to_dict()) == m
    assert StrategyConfig({"world_size": 16, "tp_size": 2, "pp_size": 2}).dp_size == 4


def test_catalogue():
    names = llmsim.catalogue()
    assert "llama3-70b" in names["models"] and "h100-sxm" in names["systems"]
    # Llama 3 70B: 8192 hidden, 80 layers, 64 heads, 8 KV heads (Meta's config.json).
    m = llmsim.catalogue_model("llama3-70b")
    assert (m.hidden_size, m.layer_num, m.head_num, m.kv_head_num) == (8192, 80, 64, 8)
    s = llmsim.catalogue_system("h100-sxm")
    assert s.accelerator["op"]["matmul"]["tflops"] == 989  # H100 SXM dense BF16 (data sheet)


def test_a_hugging_face_config_is_a_model(source_dir, cli):
    # --model takes a Hugging Face config.json; so does PerfLLM, converted to SimuMax's fields when
    # loaded (so they can be set), with a warning for what is not modelled: the CLI's estimate.
    config = str(source_dir / "tests/hf_configs/gemma-2-9b.json")
    perf = PerfLLM()
    with pytest.warns(UserWarning, match=r"sandwich norms\) are not modelled \(301056 parameters"):
        perf.configure(strategy_config="tp4", model_config=config, system_config="h100-sxm")
    assert (perf.model_config.layer_num, perf.model_config.hidden_size) == (42, 3584)
    perf.run_estimate()  # converted once, when loaded: no second warning
    out = subprocess.run([cli, "perf", "--format", "json", "--system", "h100-sxm", "--strategy", "tp4",
                          "--model", config], check=True, capture_output=True, text=True).stdout
    assert perf.analysis_cost() == json.loads(out)["cost_result"]
    full = perf.analysis_cost()["duration_time_per_iter"]
    perf.model_config.layer_num = 14
    perf.run_estimate()
    assert perf.analysis_cost()["duration_time_per_iter"] < full


def test_files_are_read_strictly_and_unknown_keys_warn(source_dir, tmp_path):
    dup = tmp_path / "dup.json"
    dup.write_text('{"layer_num": 2, "layer_num": 4}')
    with pytest.raises(llmsim.ConfigError) as e:
        ModelConfig.init_from_config_file(str(dup))
    assert "duplicate key" in str(e.value) and e.value.file == str(dup)
    perf = configured(source_dir)
    perf.model_config.layer_nun = 16  # a typo: the estimate runs and says so
    with pytest.warns(UserWarning, match="layer_nun: unknown key"):
        perf.run_estimate()


def test_report_html_shows_the_estimate(source_dir, tmp_path):
    perf = configured(source_dir)
    perf.run_estimate()
    page = open(perf.report_html(str(tmp_path / "r.html")), encoding="utf-8").read()
    for chart in ('id="breakdown-chart"', 'id="memory-chart"', 'id="timeline-chart"'):
        assert chart in page
    # The MFU the page shows is analysis_cost()'s, as a percentage to two decimals.
    mfu = "%.2f" % (perf.analysis_cost()["mfu"] * 100)
    assert f'data-field="cost_result.mfu" data-scale="100.000000" data-decimals="2">{mfu}<' in page
