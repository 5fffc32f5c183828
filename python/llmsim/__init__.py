"""llmsim: LLM training and serving on GPU clusters, estimated without running them.

SimuMax's workflow (``PerfLLM``, ``ModelConfig``, ``StrategyConfig``, ``SystemConfig``; also under
SimuMax's module names ``llmsim.core.perf_llm``, ``llmsim.core.config``, ``llmsim.utils``),
llm-analysis's ``train`` / ``infer`` (``llmsim.llm_analysis``) and the catalogue, on the C++
headers' estimate. Bad input raises ``llmsim.ConfigError`` naming the file, the field and the rule.
"""

from . import _core, llm_analysis
from ._errors import ConfigError
from .core.config import ModelConfig, StrategyConfig, SystemConfig
from .core.perf_llm import PerfLLM
from .utils import get_simu_model_config, get_simu_strategy_config, get_simu_system_config

__version__ = _core.version


def catalogue():
    """The catalogue's model and system names: ``{"models": [...], "systems": [...]}``."""
    return _core.catalogue_names()


def catalogue_model(name):
    """A catalogue model as a ModelConfig."""
    return ModelConfig(_core.catalogue_spec("model", name), name)


def catalogue_system(name):
    """A catalogue system as a SystemConfig."""
    return SystemConfig(_core.catalogue_spec("system", name), name)


__all__ = ["ConfigError", "ModelConfig", "StrategyConfig", "SystemConfig", "PerfLLM", "catalogue",
           "catalogue_model", "catalogue_system", "get_simu_model_config", "get_simu_strategy_config",
           "get_simu_system_config", "__version__"]
