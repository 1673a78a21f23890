"""The run's state and control, which every callback convention sees (comlrl/run/callbacks.py for this
project's own, comlrl/run/hf_callbacks.py for transformers'), and a finished step as the run's own parts see it
(comlrl/run/run_parts.py): one module below them all, so none imports another for them."""

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


@dataclass
class FinishedStep:
    """A trained step on its way through the run's parts: they add its evaluation and whether the run ends
    after it."""

    done: int  # steps finished, this one included
    metrics: dict[str, Any]
    records: list[Any]  # this rank's tree records
    asked: bool  # a stop asked for in on_step_end (or before): this step is the last, evaluated and saved
    last: bool  # training.steps reached or `asked`
    eval_records: list[Any] = field(default_factory=list)
    stop_after: bool = False  # a stop asked for later (on_evaluate, on_log, on_save): saved, then the run ends
