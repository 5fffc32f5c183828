"""llm-analysis's entry points, ``train(...)`` and ``infer(...)``, with its keyword names and its
summary dict keys (``llmsim llm-analysis train|infer --format json``)."""

import os

from . import _core


def _configs(configs):
    if configs is None:
        configs = os.environ.get("LLMSIM_LLM_ANALYSIS_CONFIGS", "")
    if not configs:
        raise ValueError("give configs= (llm-analysis's folder with model_configs/, gpu_configs/, dtype_configs/) "
                         "or set LLMSIM_LLM_ANALYSIS_CONFIGS")
    return os.fspath(configs)


def train(model_name="facebook_opt-1.3b", gpu_name="a100-sxm-40gb", dtype_name="w16a16e16", configs=None,
          **kwargs):
    """llm-analysis ``train()``: training memory, time and cost; kwargs by llm-analysis's names
    (batch_size_per_gpu, seq_len, tp_size, ds_zero, activation_recomputation, ...)."""
    return _core.llm_analysis(True, _configs(configs), model_name, gpu_name, dtype_name, kwargs)


def infer(model_name="facebook_opt-1.3b", gpu_name="a100-sxm-40gb", dtype_name="w16a16e16", configs=None,
          **kwargs):
    """llm-analysis ``infer()``: prefill and decode latency, KV cache, cost per 1k tokens."""
    return _core.llm_analysis(False, _configs(configs), model_name, gpu_name, dtype_name, kwargs)
