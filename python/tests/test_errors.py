"""Bad input raises llmsim.ConfigError naming the file, the field and the rule."""

import pytest

import llmsim
from llmsim import ConfigError, PerfLLM


def test_a_rule_broken_across_specs_names_field_and_rule():
    perf = PerfLLM()
    perf.configure(strategy_config="tp3", model_config="llama3-8b", system_config="h100-sxm")
    with pytest.raises(ConfigError) as e:
        perf.run_estimate()
    assert e.value.field == "strategy.tp_size"
    assert e.value.rule == "strategy.tp_size=3 must divide model.head_num=32"
    assert e.value.file == "tp3"
    assert str(e.value) == "tp3: llmsim::strategy: strategy.tp_size=3 must divide model.head_num=32"
    assert isinstance(e.value, ValueError)


def test_a_bad_field_value_names_its_source(tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text('{"hidden_size": 256, "head_num": 3, "kv_head_num": 2, "layer_num": 2, "vocab_size": 1000}')
    perf = PerfLLM()
    perf.configure(strategy_config="tp1", model_config=str(bad), system_config="h100-sxm")
    with pytest.raises(ConfigError) as e:
        perf.run_estimate()
    assert e.value.file == str(bad)
    assert e.value.field.startswith("model.")
    assert "kv_head_num=2 must divide" in e.value.rule


def test_unknown_names_are_refused():
    with pytest.raises(ConfigError) as e:
        llmsim.ModelConfig.init_from_config_file("no-such-model")
    assert "is neither a file nor a catalogue model name" in str(e.value)


def test_order_of_calls():
    perf = PerfLLM()
    with pytest.raises(RuntimeError):
        perf.run_estimate()
    perf.configure(strategy_config="tp1", model_config="llama3-8b", system_config="h100-sxm")
    with pytest.raises(RuntimeError):
        perf.analysis_cost()
    with pytest.raises(TypeError):
        perf.configure(strategy_config=3, model_config="llama3-8b", system_config="h100-sxm")


def test_llm_analysis_refuses_unknown_keywords(shared_dir):
    with pytest.raises(ConfigError) as e:
        llmsim.llm_analysis.train(configs=shared_dir / "reference" / "llm-analysis", no_such_argument=1)
    assert e.value.field == "/no_such_argument"


def test_search_arguments_are_checked():
    perf = PerfLLM()
    perf.configure(strategy_config="tp1_mbc8", model_config="llama3-8b", system_config="h100-sxm")
    with pytest.raises(ConfigError) as e:
        perf.search_best_parallel_strategy_with_recompute(2**62, 10, 1, 32)  # once looped forever
    assert e.value.field == "world_size"
    with pytest.raises(ConfigError) as e:
        perf.search_best_parallel_strategy_with_recompute(8, float("nan"), 1, 32)
    assert e.value.field == "gmi_error"
    with pytest.raises(ConfigError) as e:
        perf.search_best_parallel_strategy_with_recompute(8, 10, 1, 32, tp_search_list=[0])
    assert e.value.field == "tp_search_list"
    with pytest.raises(ConfigError):
        perf.search_best_parallel_strategy_with_recompute(8, 10, 0, 32)
    with pytest.raises(TypeError):
        perf.search_best_parallel_strategy_with_recompute(True, 10, 1, 32)
    with pytest.raises(ValueError):
        perf.search_best_parallel_strategy_with_recompute(8, 10, 1, 32, recompute_search_type=["no_recompute"])


class _Int64:
    """Stands for numpy.int64: an integer type json.dumps does not know, with __index__."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_numpy_style_numbers_are_numbers():
    # A value of an integer type json does not know estimates as that integer; an object that is
    # no number is refused naming its type.
    perf = PerfLLM()
    perf.configure(strategy_config="tp1_pp2_dp4_mbs1", model_config="llama3-8b", system_config="h100-sxm")
    plain = perf.run_estimate()["cost_result"]["duration_time_per_iter"]
    perf.model_config.layer_num = _Int64(32)
    assert perf.run_estimate()["cost_result"]["duration_time_per_iter"] == plain
    perf.model_config.layer_num = {1, 2}
    with pytest.raises(TypeError, match="a config value of type set is not a number"):
        perf.run_estimate()
