"""SimuMax's ``simumax.utils`` config helpers: a name gives what ``init_from_config_file`` takes."""

import os

_CONFIGS = os.path.join(os.path.dirname(__file__), "configs")


def _named(kind, name):
    """A shipped config file ``configs/<kind>/<name>.json`` if there is one, else the name itself
    (a catalogue model or system, a compact strategy name); SimuMax spells systems with '_'."""
    path = os.path.join(_CONFIGS, kind, f"{name}.json")
    if os.path.isfile(path):
        return path
    return name.replace("_", "-") if kind == "system" else name


def get_simu_model_config(name):
    """``llama3-8b`` -> a model config file or catalogue name."""
    return _named("models", name)


def get_simu_strategy_config(name):
    """``tp1_pp2_dp4_mbs1`` -> a strategy config file or compact strategy name."""
    return _named("strategy", name)


def get_simu_system_config(name):
    """``a100_pcie`` -> a system config file or catalogue name (``a100-pcie``)."""
    return _named("system", name)
