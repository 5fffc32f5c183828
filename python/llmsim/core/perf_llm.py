"""``PerfLLM``: SimuMax's workflow (configure, run_estimate, analysis_mem, analysis_cost, the
strategy search) on llmsim's C++ estimate."""

import json
import os
import warnings

from .. import _core
from .config import ModelConfig, StrategyConfig, SystemConfig


def _as_config(cls, value):
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls.init_from_dict(value)
    if isinstance(value, (str, os.PathLike)):
        return cls.init_from_config_file(value)
    raise TypeError(f"expected a {cls.__name__}, a dict, a file path or a catalogue name, got {type(value).__name__}")


class PerfLLM:
    """One training job: ``configure`` it, ``run_estimate``, then read ``analysis_cost()`` and
    ``analysis_mem()`` (dicts with SimuMax's keys, as ``llmsim perf --format json`` prints them)."""

    def __init__(self):
        self.model_config = None
        self.strategy = None
        self.system = None
        self._result = None

    def configure(self, strategy_config, model_config, system_config):
        """Takes the three configs: config objects, dicts, file paths or catalogue names."""
        self.strategy = _as_config(StrategyConfig, strategy_config)
        self.model_config = _as_config(ModelConfig, model_config)
        self.system = _as_config(SystemConfig, system_config)
        self._result = None

    def _require_configured(self):
        if self.strategy is None:
            raise RuntimeError("PerfLLM: configure() first")

    def run_estimate(self):
        """Estimates the configured job as its configs stand now; raises llmsim.ConfigError."""
        self._require_configured()
        self._result = _core.estimate(self.strategy.to_dict(), self.model_config.to_dict(), self.system.to_dict(),
                                      self.strategy.source, self.model_config.source, self.system.source)
        for message in self._result["warnings"]:  # unknown keys, what a Hugging Face config leaves out
            warnings.warn(message, stacklevel=2)
        return self._result

    def _require_result(self):
        if self._result is None:
            raise RuntimeError("PerfLLM: run_estimate() first")
        return self._result

    def analysis_cost(self):
        """Iteration time, MFU, throughput and the breakdown (SimuMax's cost_result keys; times in ms)."""
        return self._require_result()["cost_result"]

    def analysis_mem(self):
        """Per-stage memory and its peak (SimuMax's mem_result keys; GiB)."""
        return self._require_result()["mem_result"]

    def report_html(self, path):
        """Writes ``llmsim report``'s self-contained HTML page of the configured job, as its configs
        stand now (estimated again, as ``run_estimate`` does; charts of the breakdown, memory per
        stage and the pipeline timeline) to ``path``; returns ``path``."""
        self._require_result()
        page = _core.html_report(self.strategy.to_dict(), self.model_config.to_dict(), self.system.to_dict(),
                                 self.strategy.source, self.model_config.source, self.system.source)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return path

    def analysis(self, save_path=None, console_log=True):
        """SimuMax's ``analysis``: prints the text report (``llmsim perf``'s) when ``console_log``;
        with ``save_path``, writes the whole result as ``<save_path>/llmsim_result.json``, the
        report as ``llmsim_report.txt`` and the HTML page as ``llmsim_report.html``; returns the
        result dict."""
        result = self._require_result()
        if console_log:
            print(result["report"], end="")
        if save_path:
            os.makedirs(save_path, exist_ok=True)
            with open(os.path.join(save_path, "llmsim_result.json"), "w", encoding="utf-8") as f:
                json.dump(result, f, indent=2)
            with open(os.path.join(save_path, "llmsim_report.txt"), "w", encoding="utf-8") as f:
                f.write(result["report"])
            self.report_html(os.path.join(save_path, "llmsim_report.html"))
        return result

    def search_best_parallel_strategy_with_recompute(self, world_size, gmi_error, micro_batch_size,
                                                     global_batch_size, all_search_result=None, tp_search_list=None,
                                                     ep_search_list=None, pp_search_list=None, use_etp=False,
                                                     use_reserved_memory=True, recompute_search_type=None,
                                                     dump_path=None, verbose=False):
        """SimuMax's search with its parameter names: tp, ep, pp and recompute (none, selective,
        full over 1..L layers) over ``world_size`` GPUs; the configured strategy gives every other
        field. Returns a dict: ``found``, the best ``strategy`` (by MFU), its ``mfu``,
        ``duration_time_per_iter`` (ms), ``peak_mem`` (GiB) and ``candidates_fitting``; the same
        goes into ``all_search_result`` (a dict) and, with ``dump_path``, into that JSON file.
        Out-of-range arguments raise llmsim.ConfigError naming them."""
        self._require_configured()
        if recompute_search_type is not None and sorted(recompute_search_type) != sorted(
                ["no_recompute", "selective_recompute", "full_recompute"]):
            raise ValueError("llmsim searches every recompute type (no_recompute, selective_recompute, "
                             f"full_recompute); recompute_search_type={recompute_search_type!r} is not supported")
        for name, value in (("world_size", world_size), ("micro_batch_size", micro_batch_size),
                            ("global_batch_size", global_batch_size)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        result = _core.search_best_parallel_strategy_with_recompute(
            self.strategy.to_dict(), self.model_config.to_dict(), self.system.to_dict(), self.strategy.source,
            self.model_config.source, self.system.source, world_size, float(gmi_error), micro_batch_size,
            global_batch_size, list(tp_search_list or []), list(ep_search_list or []), list(pp_search_list or []),
            bool(use_etp), bool(use_reserved_memory))
        for message in result.pop("warnings"):
            warnings.warn(message, stacklevel=2)
        if isinstance(all_search_result, dict):
            all_search_result.update(result)
        if dump_path:
            with open(dump_path, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=2)
        if verbose:
            print(json.dumps(result, indent=2))
        return result
