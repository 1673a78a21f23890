"""Reward functions as TRL users write them: `fn(prompts, completions, **columns) -> list[float | None]`.

`task.reward_funcs` lists them as `module:function` (imported when the config loads, after `plugins`);
`task.reward_weights` weighs them (default 1 each). Every task accepts them: each function's weighted
value is added to the task's own reward of every joint action (the text task has no reward of its own;
the code tasks keep their sandbox reward and gain the terms), kept in the reward's `components` under the
function's name (trees.jsonl) and logged per turn as `reward/<name>` (metrics.jsonl).

How a function is called (TRL's GRPOTrainer convention, with one row per agent of every joint action):
keyword arguments `prompts` (the problem's prompt as the data set has it: a string, or chat messages),
`completions` (the agent's text; for a chat prompt, `[{"role": "assistant", "content": text}]`), every
other column of the problem as a list (code tasks: `task_id`, `entry_point`, `test`, ...), and `agent`
(index), `role` (name) and `scored` (what the task's reward judged for that agent: the extracted code, or
the text when the reward does not say). It returns one number per row, or None where it does not apply;
a joint action's value is the mean over its agents' numbers (no number: 0, and a note says so).

A function that raises, or returns anything else (wrong length, a string, NaN), stops the run with
one line naming it (`RewardFunctionError`): a reward that silently turns into 0 would train on noise.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import numbers
from collections.abc import Callable, Collection, Sequence
from typing import Any

from comlrl.console import plural
from comlrl.errors import ConfigError
from comlrl.tree.contracts import Reward

__all__ = ["RewardFunctionError", "RewardTerm", "RewardTerms", "call_name", "checked_values", "component_name",
           "resolve", "spec_of"]


class RewardFunctionError(ValueError):
    """A user's reward function raised or returned something that is not one score per row (one line)."""


def call_name(fn: Callable[..., Any]) -> str:
    """`module:qualname`, as `task.reward_funcs` names a function."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"


IN_PROCESS = "python"  # the module part of the spec of a function with no importable name, handed to train()
_HELD: dict[str, Callable[..., Any]] = {}  # such functions by spec, for this process's runs


def _own_name(fn: Callable[..., Any]) -> str:
    """What a function is called in metrics: its name; a partial's function's; a callable object's class."""
    if isinstance(fn, functools.partial):
        return _own_name(fn.func)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "lambda" if name == "<lambda>" else name


def spec_of(fn: Callable[..., Any], taken: Collection[str] = ()) -> str:
    """How `task.reward_funcs` names `fn`: `module:function` when that name imports this very function (the
    command line can resume the run), else `python:<name>`, held in this process (a lambda, a partial, a
    callable object, a nested function), with `_2`, `_3` ... where `taken` (the list's earlier specs) has the
    name. A later call may give the name to another function (a notebook cell run again): the latest is held."""
    spec = call_name(fn)
    try:
        if resolve(spec) is fn:
            return spec
    except ConfigError:
        pass
    base = f"{IN_PROCESS}:{_own_name(fn)}"
    names = {component_name(t) for t in taken}  # `f` and partial(f, ...) would both be `f`: the partial is `f_2`
    spec = next(s for s in (base, *(f"{base}_{k}" for k in range(2, len(taken) + 3)))
                if s not in taken and component_name(s) not in names)
    _HELD[spec] = fn
    return spec


def resolve(spec: str, key: str = "task.reward_funcs") -> Callable[..., Any]:
    """The function `module:name` names (imported now), or one `spec_of` holds; a bad spec is one config error
    naming `key`."""
    module, sep, name = str(spec).partition(":")
    if module == IN_PROCESS and sep:
        if spec not in _HELD:
            raise ConfigError(f"config error: {key}: {spec!r} was a function handed to train() in another process "
                              "(a lambda, functools.partial or callable object has no importable name): pass it "
                              "again with train(..., reward_funcs=[...]), or name a module:function to resume from "
                              "the command line")
        return _HELD[spec]
    if not sep or not module.strip() or not name.strip():
        raise ConfigError(f"config error: {key}: {spec!r} is not allowed; expected module:function")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is a config error
        raise ConfigError(f"config error: {key}: cannot import {module!r} (from {spec!r}): "
                          f"{type(exc).__name__}: {exc}") from None
    for part in name.split("."):
        if part not in vars(obj):
            raise ConfigError(f"config error: {key}: {spec!r}: module {module!r} has no {name!r}")
        obj = vars(obj)[part]
    if not callable(obj):
        raise ConfigError(f"config error: {key}: {spec!r} is a {type(obj).__name__}, not a function")
    return obj


def _plain(values: Any, rows: int, who: str) -> Any:
    """A 1-D numpy array or tensor as a list, and one-element tensors or arrays in a list as their numbers (TRL's
    functions may return any of them; numpy scalars already are `numbers.Real`); anything else as it is."""
    import numpy as np
    import torch

    def array(v: Any) -> Any:
        return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v

    values = array(values)
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise RewardFunctionError(f"{who} returned an array of shape {tuple(values.shape)}, "
                                      f"expected {rows} numbers")
        return values.tolist()
    if isinstance(values, list | tuple):
        items = [array(v) for v in values]
        return [v.item() if isinstance(v, np.ndarray) and v.size == 1 else v for v in items]
    return values


def checked_values(values: Any, rows: int, who: str, *, allow_none: bool) -> list[float | None]:
    """`values` as one finite float (or None) per row; anything else is a `RewardFunctionError` naming `who`.
    A list, a 1-D numpy array or tensor; its items numbers, numpy scalars or one-element tensors."""
    values = _plain(values, rows, who)
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise RewardFunctionError(f"{who} returned {type(values).__name__}, expected a list of {rows} numbers")
    if len(values) != rows:
        raise RewardFunctionError(f"{who} returned {len(values)} values for {rows} "
                                  f"{'rows' if allow_none else 'requests'}")
    out: list[float | None] = []
    for i, v in enumerate(values):
        if v is None and allow_none:
            out.append(None)
        elif isinstance(v, numbers.Real) and math.isfinite(float(v)):
            out.append(float(v))
        else:
            raise RewardFunctionError(f"{who} returned {v!r} at index {i}; expected a finite number"
                                      + (" or None" if allow_none else ""))
    return out


WEIGHTED_SUM = "reward/weighted_sum"  # the metric of what the functions added to the total, weights applied


def component_name(spec: str) -> str:
    """The name a function's term has in the rewards' components and metrics: its own name."""
    return spec.rpartition(":")[2].rpartition(".")[2]


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    spec: str  # as configured: module:function
    fn: Callable[..., Any]
    weight: float = 1.0

    @property
    def name(self) -> str:
        return component_name(self.spec)


def validate_specs(funcs: Sequence[str], weights: Sequence[float] | None) -> None:
    """task.reward_funcs import and name distinct functions; task.reward_weights match them."""
    names: dict[str, str] = {}
    for spec in funcs:
        resolve(spec)
        name = component_name(spec)
        if f"reward/{name}" == WEIGHTED_SUM:
            raise ConfigError(f"config error: task.reward_funcs: {spec!r}: a function may not be named {name!r} "
                              f"(metrics.jsonl logs {WEIGHTED_SUM} for the weighted sum of all); rename it")
        if name in names:
            raise ConfigError(f"config error: task.reward_funcs: {spec!r} and {names[name]!r} are both named {name!r} "
                              "(each function's name is its component in the rewards); rename one")
        names[name] = spec
    if weights is not None and (len(weights) != len(funcs) or not all(math.isfinite(w) for w in weights)):
        raise ConfigError(f"config error: task.reward_weights={list(weights)!r} is not allowed; expected "
                          f"{plural(len(funcs), 'finite number')} (one per task.reward_funcs entry) or null")


class RewardTerms:
    """The configured reward functions; `add` puts their weighted terms on a task's scored joint actions."""

    def __init__(self, terms: Sequence[RewardTerm]) -> None:
        self.terms = tuple(terms)

    @classmethod
    def from_config(cls, task_cfg: Any) -> RewardTerms:
        weights = task_cfg.reward_weights or [1.0] * len(task_cfg.reward_funcs)
        return cls([RewardTerm(spec, resolve(spec), float(w))
                    for spec, w in zip(task_cfg.reward_funcs, weights, strict=True)])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """What metrics.jsonl logs per turn: each function's own value (`reward/<name>`, unweighted, as TRL
        logs it) and the weighted sum the functions added to the total."""
        return (*(f"reward/{n}" for n in self.names), WEIGHTED_SUM)

    def metrics(self, reward: Any) -> dict[str, float]:
        """One scored joint action's values of `metric_names`."""
        values = {f"reward/{t.name}": float(reward.components.get(t.name, 0.0)) for t in self.terms}
        values[WEIGHTED_SUM] = sum(t.weight * values[f"reward/{t.name}"] for t in self.terms)
        return values

    def add(self, task: Any, turns: Sequence[Any], scored: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """`scored` (the task's (reward, state) per joint turn) with every function's term added."""
        if not self.terms or not turns:
            return scored
        kwargs, owner = self._rows(task, turns, [r for r, _ in scored])
        per_term = [self._values(term, kwargs, len(owner)) for term in self.terms]
        out = []
        for j, (reward, state) in enumerate(scored):
            if not dataclasses.is_dataclass(reward):
                raise RewardFunctionError(f"task.reward_funcs: the task's reward {type(reward).__name__} is not a "
                                          "dataclass, so no term can be added to it")
            components, notes, total = dict(reward.components), list(reward.notes), float(reward.total)
            for term, values in zip(self.terms, per_term, strict=True):
                if term.name in components:
                    raise RewardFunctionError(f"task.reward_funcs: {term.spec}: the task's reward already has a "
                                              f"component {term.name!r}; rename the function")
                mine = [v for v, o in zip(values, owner, strict=True) if o == j and v is not None]
                value = sum(mine) / len(mine) if mine else 0.0
                if not mine:
                    notes.append(f"{term.name}: no value (None for every agent)")
                components[term.name] = value  # the function's own value; the total gets the weighted term
                total += term.weight * value
            out.append((dataclasses.replace(reward, total=round(total, 10), components=components,
                                            notes=tuple(notes)), state))
        return out

    @staticmethod
    def _rows(task: Any, turns: Sequence[Any], rewards: list[Any]) -> tuple[dict[str, list[Any]], list[int]]:
        """The keyword arguments of one call (one row per agent of every joint turn) and each row's joint turn."""
        rows: list[dict[str, Any]] = []
        owner: list[int] = []
        for j, (turn, reward) in enumerate(zip(turns, rewards, strict=True)):
            prompt, columns = task.reward_inputs(turn.problem)
            # a plugin task's reward may declare less than the whole Reward contract (no `scored`)
            scored = tuple(reward.scored) if isinstance(reward, Reward) else ()
            for a, text in enumerate(turn.texts):
                completion = text if isinstance(prompt, str) else [{"role": "assistant", "content": text}]
                ids = list(turn.completion_ids[a]) if len(turn.completion_ids) == len(turn.texts) else None
                rows.append({**columns, "prompts": prompt, "completions": completion, "completion_ids": ids,
                             "turn": turn.turn, "agent": a, "role": task.role_names[a],
                             "scored": scored[a] if len(scored) == len(turn.texts) else text})
                owner.append(j)
        keys = list(dict.fromkeys(k for row in rows for k in row))
        return {k: [row.get(k) for row in rows] for k in keys}, owner

    @staticmethod
    def _values(term: RewardTerm, kwargs: dict[str, list[Any]], rows: int) -> list[float | None]:
        who = f"task.reward_funcs: {term.spec}"
        try:
            values = term.fn(**kwargs)
        except Exception as exc:  # noqa: BLE001 - a user's function: any failure is one line naming it
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise RewardFunctionError(f"{who} raised {type(exc).__name__}: {first}".rstrip(": ")) from exc
        return checked_values(values, rows, who, allow_none=True)
