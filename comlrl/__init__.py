"""comlrl: tree-search multi-agent GRPO for language models that collaborate over several turns.

The Python API (docs/python-api.md), and the extension API (`register_*`, `Task`, `Reward`: docs/architecture.md):

    from comlrl import load_config, train

    result = train(load_config("configs/align_T2_G4.yaml", ["training.steps=2"]), dataset=rows)

Names load on first use, so `import comlrl` stays light: torch and the models load when a run starts.
"""

from __future__ import annotations

from typing import Any

REGISTER = ("register_algorithm", "register_estimator", "register_loss", "register_provider", "register_reward",
            "register_task", "register_transition")
CONTRACTS = ("Reward", "Task", "TaskConfig", "Transition")
CALLBACKS = ("TrainerCallback", "TrainerControl", "TrainerState")
__all__ = ["ConfigError", "RunConfig", "TrainResult", "Trainer", "load_config", "train", *CALLBACKS, *REGISTER,
           *CONTRACTS]


def __getattr__(name: str) -> Any:
    """The API names, imported on first use (explicit imports, so the import contracts see them)."""
    if name in ("ConfigError", "RunConfig", "load_config"):
        from comlrl.config import schema

        return vars(schema)[name]
    if name in ("TrainResult", "Trainer", "train"):
        from comlrl import api

        return vars(api)[name]
    if name in CALLBACKS:
        from comlrl.run import callbacks

        return vars(callbacks)[name]
    if name in REGISTER:
        from comlrl.config import registry

        return vars(registry)[name]
    if name in CONTRACTS:
        from comlrl.tree import contracts

        return vars(contracts)[name]
    raise AttributeError(f"module 'comlrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
