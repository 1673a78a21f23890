"""Callbacks written the transformers way (`transformers.TrainerCallback`), called the way they expect:
`hook(args, state, control, **kwargs)`, where this project's own hooks take `(state, control, metrics)`.

The run keeps one `TrainerState` and one `TrainerControl` (comlrl/run/run_state.py); a transformers callback
gets views of them shaped like transformers': `state.global_step` is the run's, `state.log_history` the
same list, and `control.should_training_stop = True` is the run's own stop, with the same meaning. Which
convention a callback follows is decided once, when the run's callback list is built.

    class Report(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            print(state.global_step, logs["reward_mean"])
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comlrl.config.schema import RunConfig
    from comlrl.run.run_state import TrainerControl, TrainerState

__all__ = ["HOOKS", "ControlView", "RunArgs", "StateView", "TransformersHooks", "transformers_style"]

# the transformers hooks a run calls; the others (epochs, substeps, predictions, ...) have no moment here
HOOKS = ("on_train_begin", "on_step_begin", "on_step_end", "on_log", "on_evaluate", "on_save", "on_train_end")


@dataclass(frozen=True)
class RunArgs:
    """The `args` a transformers callback gets: the run's settings under `TrainingArguments`' names (it is not
    a `TrainingArguments`): output_dir, max_steps (training.steps), learning_rate (magrpo.learning_rate),
    seed (training.seed), num_generations, logging_steps (1: every step is logged), eval_steps
    (training.eval_every; 0 = before and after training only), save_steps (training.save_every) and
    save_total_limit."""

    output_dir: str
    max_steps: int
    learning_rate: float
    seed: int
    num_generations: int
    logging_steps: int = 1
    eval_steps: int = 0
    save_steps: int = 1
    save_total_limit: int | None = None

    @classmethod
    def of(cls, cfg: RunConfig) -> RunArgs:
        t = cfg.training
        return cls(str(t.output_dir), t.steps, cfg.magrpo.learning_rate, t.seed, cfg.magrpo.num_generations,
                   eval_steps=t.eval_every, save_steps=t.save_every, save_total_limit=t.save_total_limit)


class StateView:
    """transformers' `TrainerState` over the run's state: `global_step` (the steps done), `max_steps`,
    `log_history` (metrics.jsonl's lines so far, the run's own list) and `output_dir` are the run's;
    `is_world_process_zero` / `is_local_process_zero` this process's; logging/eval/save steps the args'.
    Any other field reads as a fresh transformers `TrainerState`'s default (`epoch`, `best_metric`, ...)."""

    def __init__(self, state: TrainerState, args: RunArgs) -> None:
        self._state = state
        self.is_world_process_zero = os.environ.get("RANK", "0") == "0"  # set by accelerate launch / torchrun
        self.is_local_process_zero = os.environ.get("LOCAL_RANK", "0") == "0"
        self.logging_steps, self.eval_steps, self.save_steps = args.logging_steps, args.eval_steps, args.save_steps

    @property
    def global_step(self) -> int:
        return self._state.global_step

    @property
    def max_steps(self) -> int:
        return self._state.max_steps

    @property
    def log_history(self) -> list[dict[str, Any]]:
        return self._state.log_history

    @property
    def output_dir(self) -> Path:
        return self._state.output_dir

    def __getattr__(self, name: str) -> Any:  # only for names not set above
        from transformers import TrainerState as Defaults

        return getattr(Defaults(), name)


class ControlView:
    """transformers' `TrainerControl` over the run's control: `should_training_stop` is the run's stop. The
    other flags (`should_save`, `should_evaluate`, `should_log`, `should_epoch_stop`) may be set and are not
    acted on: this run logs every step and evaluates and saves as `training.*` says."""

    def __init__(self, control: TrainerControl) -> None:
        self._control = control
        self.should_epoch_stop = self.should_save = self.should_evaluate = self.should_log = False

    @property
    def should_training_stop(self) -> bool:
        return self._control.should_training_stop

    @should_training_stop.setter
    def should_training_stop(self, value: bool) -> None:
        self._control.should_training_stop = bool(value)


def transformers_style(callback: Any) -> bool:
    """Whether `callback`'s hooks take `(args, state, control, **kwargs)`: a `transformers.TrainerCallback`,
    or an object that is neither kind's subclass whose hooks each name `args` first (checked here, once)."""
    hf = sys.modules.get("transformers")  # not imported: nothing can be its subclass, and a refusal stays cheap
    if hf is not None and isinstance(callback, hf.TrainerCallback):
        return True
    hooks = _hooks(callback).values()
    return bool(hooks) and all(_first_parameter(hook) == "args" for hook in hooks)


def _hooks(callback: Any) -> dict[str, Callable[..., Any]]:
    """The hooks of HOOKS that `callback` has (a duck-typed one may lack some), by name."""
    return {name: getattr(callback, name) for name in HOOKS if callable(getattr(callback, name, None))}


def _first_parameter(hook: Any) -> str | None:
    try:
        params = list(inspect.signature(hook).parameters)
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


class TransformersHooks:
    """One transformers-style callback, with its hooks looked up once (a duck-typed one may lack some)."""

    def __init__(self, callback: Any, state: TrainerState, control: TrainerControl, args: RunArgs) -> None:
        self.callback, self.args = callback, args
        self.state, self.control, self._control = StateView(state, args), ControlView(control), control
        self.hooks = _hooks(callback)

    def _call(self, name: str, **kwargs: Any) -> None:
        hook = self.hooks.get(name)
        if hook is None:
            return
        returned = hook(self.args, self.state, self.control, **kwargs)
        # transformers lets a hook return the control: a stop asked on a returned one counts (a stop is never
        # taken back this way: another callback may have asked for it)
        if returned is not None and returned is not self.control and getattr(returned, "should_training_stop", False):
            self._control.should_training_stop = True

    def train_begin(self) -> None:
        self._call("on_train_begin")

    def step_begin(self) -> None:
        self._call("on_step_begin")

    def step_end(self, metrics: dict[str, Any]) -> None:
        self._call("on_step_end")

    def log(self, line: dict[str, Any]) -> None:
        self._call("on_log", logs=dict(line))

    def evaluate(self, metrics: dict[str, Any]) -> None:
        self._call("on_evaluate", metrics=metrics)

    def save(self, checkpoint: Path) -> None:
        self._call("on_save", checkpoint=checkpoint)

    def train_end(self) -> None:
        self._call("on_train_end")
