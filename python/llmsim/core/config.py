"""Model, strategy and system configs as SimuMax's ``simumax.core.config`` names them.

Each config is its JSON object with attribute access: ``cfg.tp_size`` reads and ``cfg.tp_size = 2``
sets a field (unknown fields raise AttributeError on reading). The estimate reads the object as it
is when ``PerfLLM.run_estimate()`` runs, so changes after ``configure`` count, as in SimuMax.
"""

import copy
import os
import warnings

from .. import _core


class _Config:
    """A JSON object with attribute access; ``kind`` is model, strategy or system."""

    kind = ""

    def __init__(self, data=None, source=""):
        object.__setattr__(self, "_data", copy.deepcopy(dict(data or {})))
        object.__setattr__(self, "_source", source or f"{self.kind} dict")

    # -- construction, with SimuMax's class-method names --------------------------------------
    @staticmethod
    def read_json_file(path):
        """The JSON object in ``path`` as a dict, read as the command line reads it (a duplicate
        key, NaN or invalid UTF-8 raises llmsim.ConfigError naming the file and the place)."""
        return _core.read_json(os.fspath(path))

    @classmethod
    def _from_data(cls, data, source):
        return cls(data, source)

    @classmethod
    def init_from_config_file(cls, path_or_name):
        """From a SimuMax-format JSON file, or, when no such file exists, a catalogue name (models,
        systems) or a compact strategy name such as ``tp2_pp1_dp4_mbs1``."""
        path = os.fspath(path_or_name)
        if os.path.isfile(path):
            return cls._from_data(cls.read_json_file(path), path)
        return cls(_core.catalogue_spec(cls.kind, path), path)

    @classmethod
    def init_from_dict(cls, data):
        """From a dict shaped like the JSON file."""
        return cls._from_data(data, "")

    # -- the fields ----------------------------------------------------------------------------
    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __setattr__(self, name, value):
        self._data[name] = value

    def __contains__(self, name):
        return name in self._data

    def __eq__(self, other):
        return type(self) is type(other) and self._data == other._data

    def __repr__(self):
        return f"{type(self).__name__}({self._data!r})"

    def fields(self):
        """The names of the fields set."""
        return list(self._data)

    def to_dict(self):
        """A copy of the JSON object."""
        return copy.deepcopy(self._data)

    @property
    def source(self):
        """The file or name this config came from (errors name it)."""
        return self._source


class ModelConfig(_Config):
    """A model (SimuMax model JSON: hidden_size, head_num, layer_num, ...). A Hugging Face
    config.json is converted to these fields when loaded (``init_from_config_file``,
    ``init_from_dict``), with a warning for each thing the estimate does not model."""

    kind = "model"

    @classmethod
    def _from_data(cls, data, source):
        if isinstance(data, dict) and _core.is_hf_config(data):
            converted = _core.hf_to_model(data, source or "Hugging Face config")
            for note in converted["notes"]:
                warnings.warn(note, stacklevel=3)
            data = converted["model"]
        return cls(data, source)


class StrategyConfig(_Config):
    """A parallel strategy (SimuMax strategy JSON: world_size, tp_size, pp_size, ...)."""

    kind = "strategy"

    @property
    def dp_size(self):
        """world_size / (tp_size x pp_size x cp_size), as SimuMax derives it (a ValueError when
        they do not divide it)."""
        d = self._data
        model_parallel = d.get("tp_size", 1) * d.get("pp_size", 1) * d.get("cp_size", 1)
        world = d.get("world_size", 1)
        if not isinstance(model_parallel, int) or model_parallel < 1 or world % model_parallel:
            raise ValueError(f"world_size={world} is not divisible by tp_size x pp_size x cp_size={model_parallel}")
        return world // model_parallel


class SystemConfig(_Config):
    """A cluster (SimuMax system JSON: accelerator, networks)."""

    kind = "system"
