"""The data every task shares (`Problem`) and the interface the trainer drives (`Task`).

Plain data crosses package boundaries: a `Problem` is a frozen record in HumanEval format, and a
`Task` turns problems into chat messages and agent completions into rewards, so the trainer never
needs to know what the agents are asked to do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One function-writing problem in HumanEval format.

    `prompt` holds imports, the signature and a docstring; `test` defines `check(candidate)`;
    `canonical_solution` (a body, HumanEval style) is optional and only used to validate data sets.
    """

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str | None = None


class Task(ABC):
    """Dataset + roles + prompts + scoring for `num_agents` collaborating agents."""

    num_agents: int
    role_names: list[str]
    reward_range: tuple[float, float]
    stop_strings: tuple[str, ...] = ()  # generation of a row ends after one of these (e.g. a closing fence)
    head_messages: int | None = None  # leading messages a history cut keeps (None: system + first user)

    @classmethod
    def from_config(cls, task_cfg: Any, sandbox: Any) -> Task:
        """The task for the `task` config section, scoring through `sandbox` (how `build_task` makes
        every registered task; override to read options such as `task.<name>.*`)."""
        return cls(sandbox)  # type: ignore[call-arg]

    @abstractmethod
    def load(self, dataset_cfg: Any) -> tuple[list[Problem], list[Problem]]:
        """Train and eval problems for a dataset config (name, path, eval_size, max_problems, seed)."""

    @abstractmethod
    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        """First-turn chat messages, one list per agent."""

    @abstractmethod
    def role_instructions(self, agent: int) -> str:
        """What agent `agent` must write; reused by the feedback prompts of later turns."""

    def revise_instructions(self, agent: int) -> str:
        """The role text of the prompts after turn 1, where an agent also sees its teammates' code."""
        return self.role_instructions(agent)

    def answer_prefix(self, agent: int, problem: Problem) -> str:
        """How agent `agent`'s answer must start in every turn ("" = free). The model continues it, so
        small models cannot miss the format the reward checks (the function name, the code fence)."""
        return ""

    def begin_rollout(self) -> None:
        """A new batch of trees starts: drop caches kept for the previous one (environment states)."""
        return None

    outcome_names: tuple[str, ...] = ()  # the keys of `outcome_counts`

    def outcome_counts(self, reward: Any) -> dict[str, float]:
        """0/1 facts about one scored joint action, keyed by `outcome_names`, that the trainer averages
        per turn and logs as rates (`<name>`, `turn_<t>/<name>`, `eval/...`): e.g. helper calls."""
        return {}

    @abstractmethod
    def score(self, items: list[tuple[Problem, list[str]]]) -> list[Any]:
        """One `comlrl.tasks.code.reward.CodeReward` per (problem, completions per agent) item, in order."""
