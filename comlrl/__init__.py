"""comlrl: tree-search multi-agent GRPO for language models that collaborate over several turns.

The Python API (docs/python-api.md):

    from comlrl import load_config, train

    result = train(load_config("configs/align_T2_G4.yaml", ["training.steps=2"]), dataset=rows)

Names load on first use, so `import comlrl` stays light: torch and the models load when a run starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "RunConfig", "TrainResult", "load_config", "train"]

def __getattr__(name: str) -> Any:
    """The API names, imported on first use (explicit imports, so the import contracts see them)."""
    if name in ("ConfigError", "RunConfig", "load_config"):
        from comlrl import config

        return vars(config)[name]
    if name in ("TrainResult", "train"):
        from comlrl import api

        return vars(api)[name]
    raise AttributeError(f"module 'comlrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
