"""The extension API: named tasks, transitions (feedback modes), code rewards, model providers, advantage
estimators, losses and algorithms.

Each registry is a view of ONE table that lives with the code it names (`comlrl.tasks.TASKS`,
`feedback.build.MODES`, `comlrl.tasks.code.reward.REWARDS`, `comlrl.llm.factory.REGISTERED`,
`comlrl.learn.advantages.ESTIMATORS`, `comlrl.learn.loss.LOSSES`, `comlrl.learn.algorithms.ALGORITHMS`),
imported here by name like any other module, so config validation, `build_task`, the feedback builder,
`comlrl.llm.make_client`, the advantages and the update read the same names, and adding one is one call:

    from comlrl.config.registry import register_task

    @register_task("my_task")
    class MyTask(TaskDefaults): ...   # comlrl.tasks.base.TaskDefaults: the `Task` protocol with its defaults

User modules that register things are listed in the config's top-level `plugins` key and imported
before the config is validated (`import_plugins`), so their names are accepted like built-in ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from comlrl.errors import ConfigError
from comlrl.learn.advantages import ESTIMATORS as ESTIMATOR_TABLE
from comlrl.learn.advantages import Estimator
from comlrl.learn.algorithms import ALGORITHMS as ALGORITHM_TABLE
from comlrl.learn.algorithms import Algorithm
from comlrl.learn.loss import LOSSES as LOSS_TABLE
from comlrl.learn.loss import LossRule
from comlrl.llm.factory import REGISTERED as PROVIDER_TABLE
from comlrl.llm.spec import PROVIDERS as BUILT_IN_PROVIDERS
from comlrl.tasks import TASKS as TASK_TABLE
from comlrl.tasks.code.reward import REWARDS as REWARD_TABLE
from comlrl.tasks.code.reward import CodeRewardRule, FunctionRule
from comlrl.tree.contracts import TaskDefaults
from feedback.build import MODES as MODE_TABLE

T = TypeVar("T")

__all__ = [
    "ALGORITHMS", "ESTIMATORS", "LOSSES", "PROVIDERS", "REWARDS", "TASKS", "TRANSITIONS", "Registry", "import_plugins",
    "register_algorithm", "register_estimator", "register_loss", "register_provider", "register_reward",
    "register_task", "register_transition",
]


class Registry(Generic[T]):
    """Name -> object for one config key, over the table its owner keeps (built-ins first)."""

    def __init__(self, key: str, table: dict[str, T]) -> None:
        self.key = key  # the config key that selects an entry (named in errors)
        self.table = table

    def register(self, name: str, obj: T) -> T:
        """Add `name`; a name already taken by another object is an error (no silent replacement)."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{self.key}: a registered name must be a non-empty string, got {name!r}")
        table = self.table
        if name in table and table[name] is not obj:
            raise ValueError(f"{self.key}: {name!r} is already registered ({table[name]!r})")
        table[name] = obj
        return obj

    def names(self) -> tuple[str, ...]:
        return tuple(self.table)

    def get(self, name: str) -> T:
        """The entry for `name`, or a one-line error naming the config key and the allowed names."""
        table = self.table
        if name not in table:
            raise ConfigError(f"config error: {self.key}={name!r} is not allowed; expected one of: "
                             f"{', '.join(table)} (or register it from a module listed in `plugins`)")
        return table[name]

    def __contains__(self, name: object) -> bool:
        return name in self.table

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)


TASKS: Registry[type] = Registry("task.name", TASK_TABLE)
TRANSITIONS: Registry[Callable[..., Any]] = Registry("external.mode", MODE_TABLE)
REWARDS: Registry[CodeRewardRule] = Registry("task.reward", REWARD_TABLE)
PROVIDERS: Registry[Callable[..., Any]] = Registry("provider", PROVIDER_TABLE)
ESTIMATORS: Registry[Estimator] = Registry("magrpo.advantage.baseline", ESTIMATOR_TABLE)
LOSSES: Registry[LossRule] = Registry("magrpo.loss.aggregation", LOSS_TABLE)
ALGORITHMS: Registry[Algorithm] = Registry("algorithm.name", ALGORITHM_TABLE)


def _decorator(registry: Registry[Any], name: str, obj: Any) -> Any:
    if obj is not None:
        return registry.register(name, obj)
    return lambda target: registry.register(name, target)


def register_task(name: str, task_type: type | None = None) -> Any:
    """A `comlrl.tasks.base.TaskDefaults` subclass (the required `Task` protocol with the opt-in protocols the
    config and the trainer read: options, counts, problem names) selected by `task.name=<name>`; built with
    `from_config(task_cfg, sandbox)`; `num_agents` is what `magrpo.num_agents` must be. Use as a decorator or
    call directly. A class on the bare `Task` (written before the opt-in protocols) is refused in one line that
    says to change its base."""

    def register(target: type) -> type:
        if isinstance(target, type) and not issubclass(target, TaskDefaults):
            raise TypeError(f"task.name: {name!r}: {target.__name__} must subclass comlrl.tasks.base.TaskDefaults "
                            "(the required Task protocol with the defaults the trainer reads); a task written on "
                            "Task: change its base to TaskDefaults, and add FeedbackPrompts if it uses the feedback "
                            "modes")
        return TASKS.register(name, target)

    return register(task_type) if task_type is not None else register


def register_transition(name: str, builder: Callable[..., Any] | None = None) -> Any:
    """A feedback mode selected by `external.mode=<name>` (and usable as `external.expert_fallback`):
    `builder(ctx: feedback.FeedbackContext, opts: feedback.FeedbackOptions) -> messages per agent`."""
    return _decorator(TRANSITIONS, name, builder)


def register_reward(name: str, score: Any = None, *, reward_range: tuple[float, float] | None = None) -> Any:
    """A code-task reward selected by `task.reward=<name>`: a `CodeRewardRule` (`reward_range` and
    `score_batch`), or a plain function `score(requests, sandbox)` returning one `CodeReward` or number per
    `comlrl.tasks.code.reward.ScoreRequest`, in order; `reward_range=(lo, hi)` bounds a function's totals
    (magrpo.early_termination_threshold is checked against it; without it any threshold is accepted).
    Use as a decorator or call directly; the decorator gives the function back unchanged."""

    def register(target: Any) -> Any:
        if isinstance(target, type):
            raise TypeError(f"task.reward: {name!r}: register an instance of {target.__name__}, not the class")
        if isinstance(target, CodeRewardRule):
            if reward_range is not None:
                raise TypeError(f"task.reward: {name!r}: reward_range is for functions; a rule declares its own")
            return REWARDS.register(name, target)
        if not callable(target):
            raise TypeError(f"task.reward: {name!r} must be a CodeRewardRule (reward_range and score_batch) or a "
                            f"function score(requests, sandbox), got {type(target).__name__}")
        taken = REWARDS.table.get(name)
        if not (isinstance(taken, FunctionRule) and taken.fn is target):  # re-registering the same function is a no-op
            REWARDS.register(name, FunctionRule(name, target, reward_range))
        return target

    return register(score) if score is not None else register


def register_provider(name: str, factory: Callable[..., Any] | None = None) -> Any:
    """A model provider for `<name>:<model>` specs (`comlrl.llm.make_client`: external.expert_edits_model):
    `factory(model, settings: comlrl.llm.LLMSettings, *, metrics) -> comlrl.llm.ChatClient`. The built-in
    providers (openai, anthropic, ...) cannot be replaced."""
    if name in BUILT_IN_PROVIDERS:
        raise ValueError(f"provider: {name!r} is a built-in provider ({', '.join(BUILT_IN_PROVIDERS)})")
    return _decorator(PROVIDERS, name, factory)


def register_estimator(name: str, centre: Callable[..., list[float]] | None = None, *, centres: bool = True,
                       needs: tuple[str, ...] = ()) -> Any:
    """An advantage estimator selected by `magrpo.advantage.baseline=<name>`: `centre(values) -> list[float]`,
    one advantage (before group scaling) per completion of a sibling group, as `comlrl.learn.advantages.Estimator`
    describes (`centres`: it subtracts a baseline, so tied groups carry no signal; `needs`: inputs beyond the
    values, which the trainer must provide). Use as a decorator or call directly; gives the function back."""

    def register(fn: Callable[..., list[float]]) -> Callable[..., list[float]]:
        ESTIMATORS.register(name, Estimator(fn, centres=centres, needs=tuple(needs)))
        return fn

    return register(centre) if centre is not None else register


def register_loss(name: str, rule: LossRule) -> LossRule:
    """A loss selected by `magrpo.loss.aggregation=<name>`: a `comlrl.learn.loss.LossRule` (how a micro-batch's
    token losses are summed, what the step divides by, and what else it `needs`)."""
    if not isinstance(rule, LossRule):
        raise TypeError(f"magrpo.loss.aggregation: {name!r} must be a comlrl.learn.loss.LossRule, "
                        f"got {type(rule).__name__}")
    return LOSSES.register(name, rule)


def register_algorithm(name: str, algorithm: Algorithm) -> Algorithm:
    """An algorithm selected by `algorithm.name=<name>`: a `comlrl.learn.algorithms.Algorithm` (what a step's trees
    become, `units`, and the loss of a micro-batch of them, `loss`), trained by the same update as the
    built-ins (docs/algorithm.md)."""
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm.name: {name!r} must be a comlrl.learn.algorithms.Algorithm, "
                        f"got {type(algorithm).__name__}")
    return ALGORITHMS.register(name, algorithm)


def import_plugins(modules: list[str] | tuple[str, ...], key: str = "plugins") -> None:
    """Import each user module (they register their extensions on import); a failure names the module."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is a config error
            raise ConfigError(f"config error: {key}: cannot import {module!r}: {type(exc).__name__}: {exc}") from None
