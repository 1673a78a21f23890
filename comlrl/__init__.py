"""comlrl: tree-search multi-agent GRPO for language models that collaborate over several turns.

The Python API (docs/python-api.md):

    from comlrl import load_config, train

    result = train(load_config("configs/align_T2_G4.yaml", ["training.steps=2"]), dataset=rows)

Names load on first use, so `import comlrl` stays light: torch and the models load when a run starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "RunConfig", "TrainResult", "load_config", "train"]

_HOME = {"ConfigError": "comlrl.config", "RunConfig": "comlrl.config", "load_config": "comlrl.config",
         "TrainResult": "comlrl.api", "train": "comlrl.api"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'comlrl' has no attribute {name!r}")
    import importlib

    return vars(importlib.import_module(_HOME[name]))[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
