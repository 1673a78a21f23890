"""The run's state and control, which every callback convention sees (comlrl/run/callbacks.py for this
project's own, comlrl/run/hf_callbacks.py for transformers'): one module below both, so neither imports the
other for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TrainerState:
    """Where the run stands: the step just finished (0 before training), `training.steps`, the output folder
    and every metrics line so far (metrics.jsonl's, in order)."""

    global_step: int
    max_steps: int
    output_dir: Path
    log_history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TrainerControl:
    """What callbacks ask of the run."""

    should_training_stop: bool = False
