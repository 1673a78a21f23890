"""The task a `MAGRPOTrainer` trains: CoMLRL 1.4.3's formatters, reward function and external transition as this
engine's `Task` and `Transition` (comlrl/tree/contracts.py), registered under a name of its own per trainer.

Its rows are the trainer's items, written by `comlrl.api.train` to the run's dataset.jsonl as
`{"split": "train" | "eval", "item": {...}}`. Each agent's prompt is the formatter's string as one user message
(this engine prompts through the chat template). A joint action's reward is one call of the reward function;
a path that continues gets its next prompts from the external transition (through the formatters, as 1.4.3 does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

from comlrl.config.registry import register_task
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.datasets import DatasetError
from comlrl.trainers.callbacks import Formatter, RewardCall, TransitionCall
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Reward, Task, TaskConfig, Transition

SPLITS = ("train", "eval")
_names = count(1)


@dataclass(frozen=True, eq=False)
class ItemProblem:
    """One data item as the trainer was given it, and each agent's first-turn prompt (formatted once)."""

    task_id: str
    item: dict[str, Any]
    first_prompts: tuple[str, ...]

    @property
    def prompt(self) -> str:
        return str(self.item.get("prompt", ""))


@dataclass
class TurnPrompts:
    """The prompts one turn of a path was asked with, per agent: a node's `state`. A child's state is made when
    its parent's joint action is scored, before its prompts exist, so the transition fills it in; the reward call
    (its `prompts`) and later transitions (`prompt_history_per_agent`) read it."""

    per_agent: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ItemReward:
    """One joint action's reward: the function's value after reward_processor (`total`) and before it."""

    total: float
    components: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    @property
    def all_passed(self) -> bool:
        """1.4.3 has no pass verdict: pass rates are 0 (the reward is the measure)."""
        return False

    @property
    def scored(self) -> tuple[str, ...]:
        return self.texts


@dataclass(frozen=True)
class Hooks:
    """What a trainer's task calls: per-agent formatters, the reward call and the transition (None: one turn)."""

    formatters: tuple[Formatter, ...]
    reward: RewardCall
    transition: TransitionCall | None


class ItemTask(TaskDefaults):
    """CoMLRL 1.4.3's task, made of a trainer's callables (`hooks`, set per registered subclass)."""

    hooks: Hooks
    num_agents = 1
    role_names = ["agent_0"]
    reward_range = (-math.inf, math.inf)  # the reward function declares none: any threshold may be reached

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> ItemTask:
        return cls()

    def problem_id(self, problem: ItemProblem) -> str:
        """The item's position in its split, as trees.jsonl and eval.jsonl name it."""
        return problem.task_id

    def load(self, dataset_cfg: Any) -> tuple[list[ItemProblem], list[ItemProblem]]:
        """The trainer's train and eval items from the run's dataset.jsonl, in their order."""
        path = Path(str(dataset_cfg.path))
        out: dict[str, list[ItemProblem]] = {s: [] for s in SPLITS}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(line)
            split, item = row.get("split"), row.get("item")
            if split not in SPLITS or not isinstance(item, dict):
                raise DatasetError(f"{path}: row {n}: expected {{'split': 'train' | 'eval', 'item': {{...}}}}")
            out[split].append(ItemProblem(str(len(out[split])), item, tuple(f.first(item)
                                                                             for f in self.hooks.formatters)))
        return out["train"], out["eval"]

    def role_instructions(self, agent: int) -> str:
        return ""  # the formatters write the whole prompt

    def initial_messages(self, problem: ItemProblem) -> list[Messages]:
        return [[{"role": "user", "content": p}] for p in problem.first_prompts]

    def initial_state(self, problem: ItemProblem) -> TurnPrompts:
        return TurnPrompts(list(problem.first_prompts))

    def score(self, items: list[tuple[Any, list[str]]]) -> list[Reward]:
        return [r for r, _ in self.score_turns([JointTurn(p, tuple(texts), self.initial_state(p))
                                                for p, texts in items])]

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        """One reward call per joint action (its `prompts`: the turn's prompts, agent 0's or every agent's as the
        trainer passes them in 1.4.3: `RewardCall.all_prompts`); each leaves an empty `TurnPrompts` for the next
        turn's transition to fill."""
        out: list[tuple[Reward, Any]] = []
        for turn in turns:
            raw, total = self.hooks.reward(turn.texts, turn.problem.item, turn.state.per_agent)
            out.append((ItemReward(total, {"reward_func": raw}, texts=tuple(turn.texts)), TurnPrompts()))
        return out

    def transition(self, configured: Transition) -> Transition:
        return self  # the external transition makes the next turn, not the feedback modes

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """Per continuing joint action: the transition's prompts (through the formatters), one user message each."""
        if self.hooks.transition is None:
            raise RuntimeError("a turn after the first needs an external_transition")
        out = []
        for path in paths:
            item = path.problem.item
            asked = [node.state.per_agent for node, _ in path.node.path(path.action)]
            history = [list(h) for h in path.history]
            external = self.hooks.transition(str(item.get("prompt", "")), [h[-1] for h in history],
                                             [[turn[a] for turn in asked] for a in range(self.num_agents)], history)
            prompts = [f.later(item, p) for f, p in zip(self.hooks.formatters, external, strict=True)]
            path.state.per_agent[:] = prompts
            out.append([[{"role": "user", "content": p}] for p in prompts])
        return out


def register_item_task(hooks: Hooks, num_agents: int) -> str:
    """A task type for these hooks under a name no other trainer of this process uses; returns the name."""
    name = f"magrpo_compat_{next(_names)}"
    attrs: dict[str, Any] = {"hooks": hooks, "num_agents": num_agents,
                             "role_names": [f"agent_{a}" for a in range(num_agents)]}
    register_task(name, type(f"ItemTask_{name}", (ItemTask,), attrs))
    return name


def task_rows(train: Sequence[Mapping[str, Any]], evals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows `comlrl.api.train` writes to dataset.jsonl: every item with its split."""
    return [{"split": s, "item": dict(item)} for s, items in (("train", train), ("eval", evals)) for item in items]
