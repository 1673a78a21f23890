"""Callbacks, as TRL and transformers users write them: hooks at the end of a step, after an evaluation and
after a checkpoint, which see the run's state and may stop it (`control.should_training_stop = True`).

    class StopWhenSolved(TrainerCallback):
        def on_step_end(self, state, control, metrics):
            if metrics.get("turn_1/pass_rate", 0) >= 0.9:
                control.should_training_stop = True

A `transformers.TrainerCallback` works too, called the transformers way (`on_step_end(args, state, control,
**kwargs)`, and `on_train_begin`, `on_step_begin`, `on_log`, `on_evaluate`, `on_save`, `on_train_end`):
comlrl/run/hf_callbacks.py.

A stop asked for in `on_step_end` (or before it: in `on_step_begin`, or before the first step) makes that
step the last: it is evaluated (when the run evaluates) and checkpointed, and `final/` is written, as at
`training.steps`. Asked for in `on_evaluate`, `on_log` or `on_save`, the run ends once the step's outputs are
written, with a checkpoint of it. Every rank calls its callbacks; a stop asked for on any rank stops all of
them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from comlrl.errors import ConfigError
from comlrl.run.hf_callbacks import RunArgs, TransformersHooks, transformers_style
from comlrl.run.run_state import FinishedStep, TrainerControl, TrainerState

if TYPE_CHECKING:
    from comlrl.config.schema import RunConfig

__all__ = ["CallbackList", "TimeBudget", "TrainerCallback", "TrainerControl", "TrainerState", "check_callbacks"]

log = logging.getLogger("comlrl")


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


def check_callbacks(callbacks: Sequence[Any]) -> list[Any]:
    """The callbacks, each a comlrl `TrainerCallback` or a transformers-style one (comlrl/run/hf_callbacks.py);
    anything else is one config error naming it."""
    for cb in callbacks:
        if not isinstance(cb, TrainerCallback) and not transformers_style(cb):
            raise ConfigError(f"config error: callbacks: {type(cb).__name__} is not a comlrl TrainerCallback or a "
                              "transformers one (subclass comlrl.TrainerCallback and override on_step_end, "
                              "on_evaluate or on_save, or subclass transformers.TrainerCallback)")
    return list(callbacks)


class Hooks(Protocol):
    """One callback as the run calls it, whichever convention it follows."""

    def train_begin(self) -> None: ...
    def step_begin(self) -> None: ...
    def step_end(self, metrics: dict[str, Any]) -> None: ...
    def log(self, line: dict[str, Any]) -> None: ...
    def evaluate(self, metrics: dict[str, Any]) -> None: ...
    def save(self, checkpoint: Path) -> None: ...
    def train_end(self) -> None: ...


class OwnHooks:
    """A comlrl `TrainerCallback`: its three hooks, each called `(state, control, what the hook is about)`."""

    def __init__(self, callback: TrainerCallback, state: TrainerState, control: TrainerControl) -> None:
        self.callback, self.state, self.control = callback, state, control

    def train_begin(self) -> None:
        pass

    def step_begin(self) -> None:
        pass

    def step_end(self, metrics: dict[str, Any]) -> None:
        self.callback.on_step_end(self.state, self.control, metrics)

    def log(self, line: dict[str, Any]) -> None:
        pass

    def evaluate(self, metrics: dict[str, Any]) -> None:
        self.callback.on_evaluate(self.state, self.control, metrics)

    def save(self, checkpoint: Path) -> None:
        self.callback.on_save(self.state, self.control, checkpoint)

    def train_end(self) -> None:
        pass


class Part(Protocol):
    """One of the run's own parts on its callback list (the evaluation, the outputs, the checkpoints and stops,
    the progress: comlrl/run/run_parts.py), acting after the users' hooks of the same moment."""

    def before_training(self, calls: CallbackList) -> None: ...
    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None: ...
    def close(self) -> None: ...


class CallbackList:
    """The run's callbacks, called in order, each in its own convention (decided here, once: a comlrl
    `TrainerCallback` gets `(state, control, ...)`, a transformers-style one `(args, state, control, **kwargs)`
    on views of the same state and control, so a stop asked either way is the same stop)."""

    def __init__(self, callbacks: Sequence[Any], state: TrainerState, cfg: RunConfig | None = None) -> None:
        self.callbacks = tuple(check_callbacks(callbacks))
        self.state = state
        self.control = TrainerControl()
        # without a config (a list built by hand): the state's folder and steps, the rest zero
        args = RunArgs.of(cfg) if cfg is not None else RunArgs(str(state.output_dir), state.max_steps, 0.0, 0, 0)
        self.hooks: tuple[Hooks, ...] = tuple(
            OwnHooks(cb, state, self.control) if isinstance(cb, TrainerCallback)
            else TransformersHooks(cb, state, self.control, args) for cb in self.callbacks)
        self.parts: list[Part] = []  # the run's own, in the order they act (run() adds them)

    def stop_asked(self, agree: Callable[[bool], bool]) -> bool:
        """Whether a callback asked to stop, agreed over the ranks by `agree` (not called without callbacks:
        a run without them pays no collective per step)."""
        return bool(self.callbacks) and agree(self.control.should_training_stop)

    def train_begin(self) -> None:
        """Before the evaluation before training (or the first step, resumed) and after the models loaded."""
        for h in self.hooks:
            h.train_begin()

    def step_begin(self) -> None:
        """Before a step's rollout; `state.global_step` is still the steps done."""
        for h in self.hooks:
            h.step_begin()

    def logged(self, line: dict[str, Any]) -> None:
        """A metrics.jsonl line was written (the step's, with its evaluation)."""
        self.state.log_history.append(dict(line))
        for h in self.hooks:
            h.log(line)

    def step_end(self, step: int, metrics: dict[str, Any]) -> None:
        self.state.global_step = step
        for h in self.hooks:
            h.step_end(metrics)

    def evaluate(self, metrics: dict[str, Any]) -> None:
        for h in self.hooks:
            h.evaluate(metrics)

    def save(self, checkpoint: Path) -> None:
        for h in self.hooks:
            h.save(checkpoint)

    def train_end(self) -> None:
        """After `final/` is written (not after a failure)."""
        for h in self.hooks:
            h.train_end()

    def before_training(self) -> None:
        """The parts' work before the first step (after train_begin): e.g. the evaluation of the untrained policy."""
        for part in self.parts:
            part.before_training(self)

    def finish_step(self, step: FinishedStep) -> None:
        """A trained step, after step_end and the stop agreed on it: evaluated, written, saved, shown."""
        for part in self.parts:
            part.finish_step(step, self)

    def close(self) -> None:
        """The parts' end, also after a failure."""
        for part in self.parts:
            part.close()
