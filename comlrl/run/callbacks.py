"""Callbacks, as TRL and transformers users write them: hooks at the end of a step, after an evaluation and
after a checkpoint, which see the run's state and may stop it (`control.should_training_stop = True`).

    class StopWhenSolved(TrainerCallback):
        def on_step_end(self, state, control, metrics):
            if metrics.get("turn_1/pass_rate", 0) >= 0.9:
                control.should_training_stop = True

A stop asked for in `on_step_end` makes that step the last: it is evaluated (when the run evaluates) and
checkpointed, and `final/` is written, as at `training.steps`. Asked for in `on_evaluate` or `on_save`, the
run ends once the step's outputs are written, with a checkpoint of it. Every rank calls its callbacks; a stop
asked for on any rank stops all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.errors import ConfigError

__all__ = ["CallbackList", "TimeBudget", "TrainerCallback", "TrainerControl", "TrainerState", "check_callbacks"]

log = logging.getLogger("comlrl")


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


class TrainerCallback:
    """Override the hooks you need; each gets the state, the control and what the hook is about."""

    def on_step_end(self, state: TrainerState, control: TrainerControl, metrics: dict[str, Any]) -> None:
        """After a training step's update, before its evaluation and checkpoint: the step's metrics."""

    def on_evaluate(self, state: TrainerState, control: TrainerControl, metrics: dict[str, Any]) -> None:
        """After an evaluation (step 0: the untrained policy's): its `eval/...` figures."""

    def on_save(self, state: TrainerState, control: TrainerControl, checkpoint: Path) -> None:
        """After `checkpoints/step-<k>/` is written whole."""


class TimeBudget(TrainerCallback):
    """`training.time_budget_minutes`: the step at which the steps' summed `step_seconds` (rollout and update;
    evaluations, checkpoints and start-up are not steps) reach the budget is the last, so two settings can be
    compared at equal training time with the same evaluation after. `spent` carries the steps before a
    resume. Every rank adds its own step time; a rank that reaches the budget stops them all."""

    def __init__(self, minutes: float, spent_seconds: float = 0.0) -> None:
        self.budget = 60.0 * minutes
        self.spent = spent_seconds

    def on_step_end(self, state: TrainerState, control: TrainerControl, metrics: dict[str, Any]) -> None:
        self.spent += float(metrics["step_seconds"])
        if self.spent >= self.budget and not control.should_training_stop:
            control.should_training_stop = True
            log.info("training.time_budget_minutes=%g reached at step %d (%.1f minutes of training steps): "
                     "this step is the last", self.budget / 60.0, state.global_step, self.spent / 60.0)


def check_callbacks(callbacks: Sequence[Any]) -> list[TrainerCallback]:
    """The callbacks, each a `TrainerCallback`; anything else is one config error naming it."""
    for cb in callbacks:
        if not isinstance(cb, TrainerCallback):
            raise ConfigError(f"config error: callbacks: {type(cb).__name__} is not a comlrl TrainerCallback "
                              "(subclass comlrl.TrainerCallback and override on_step_end, on_evaluate or on_save)")
    return list(callbacks)


class CallbackList:
    """The run's callbacks, called in order."""

    def __init__(self, callbacks: Sequence[TrainerCallback], state: TrainerState) -> None:
        self.callbacks = tuple(check_callbacks(callbacks))
        self.state = state
        self.control = TrainerControl()

    def stop_asked(self, agree: Callable[[bool], bool]) -> bool:
        """Whether a callback asked to stop, agreed over the ranks by `agree` (not called without callbacks:
        a run without them pays no collective per step)."""
        return bool(self.callbacks) and agree(self.control.should_training_stop)

    def logged(self, line: dict[str, Any]) -> None:
        """A metrics.jsonl line was written (the step's, with its evaluation)."""
        self.state.log_history.append(dict(line))

    def step_end(self, step: int, metrics: dict[str, Any]) -> None:
        self.state.global_step = step
        for cb in self.callbacks:
            cb.on_step_end(self.state, self.control, metrics)

    def evaluate(self, metrics: dict[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_evaluate(self.state, self.control, metrics)

    def save(self, checkpoint: Path) -> None:
        for cb in self.callbacks:
            cb.on_save(self.state, self.control, checkpoint)
