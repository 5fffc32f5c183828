# A script in the style of SimuMax's examples/perf_llama3_8b_*.py, written for llmsim: with
# `simumax` in place of `llmsim` in its three import lines it is a SimuMax script.
from llmsim.core.config import ModelConfig, StrategyConfig, SystemConfig
from llmsim.core.perf_llm import PerfLLM
from llmsim.utils import get_simu_model_config, get_simu_strategy_config, get_simu_system_config


def set_megatron_config(perf_model: PerfLLM):
    perf_model.model_config.padded_vocab_size = True
    perf_model.model_config.make_vocab_size_divisible_by = 128


def main():
    strategy_config_file = get_simu_strategy_config("tp2_pp1_dp4_mbs1")
    model_config_file = get_simu_model_config("llama3-8b")
    system_config_file = get_simu_system_config("h100_sxm")

    perf_model = PerfLLM()
    perf_model.configure(
        strategy_config=StrategyConfig.init_from_config_file(strategy_config_file),
        model_config=ModelConfig.init_from_config_file(model_config_file),
        system_config=SystemConfig.init_from_config_file(system_config_file),
    )
    model_name = perf_model.model_config.model_name
    system_name = perf_model.system.sys_name
    set_megatron_config(perf_model)
    perf_model.run_estimate()
    perf_model.analysis(f"{model_name}_{system_name}")  # prints the report; writes it into that folder
    cost = perf_model.analysis_cost()
    mem = perf_model.analysis_mem()
    print("duration_time_per_iter", cost["duration_time_per_iter"])
    print("mfu", cost["mfu"])
    print("peak_mem", mem["peak_mem"])


if __name__ == "__main__":
    main()
