"""A plug-in task with options of its own: one agent writes exactly `target` words (`plugins: [count_task]`,
`task.name: count_words`). Its options are the keys `task.count_words.*`, checked when the config loads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from comlrl.config.registry import register_task
from comlrl.errors import require
from comlrl.tasks.base import FeedbackPrompts, Problem, TaskConfig, TaskDefaults


@dataclass
class CountOptions:
    target: int = 5  # words the answer must have


@dataclass(frozen=True)
class CountReward:
    total: float
    components: dict[str, float] = field(default_factory=dict)
    all_passed: bool = False
    notes: tuple[str, ...] = ()


@register_task("count_words")
class CountTask(TaskDefaults, FeedbackPrompts):
    num_agents = 1
    role_names = ["writer"]
    reward_range = (0.0, 1.0)
    options_type = CountOptions

    def __init__(self, options: CountOptions) -> None:
        self.options = options

    @classmethod
    def validate_options(cls, options: CountOptions) -> None:
        require(options.target >= 1, "task.count_words.target", options.target, "an integer >= 1")

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> CountTask:
        return cls(task_cfg.options())

    def load(self, dataset_cfg: Any) -> tuple[list[Problem], list[Problem]]:
        problems = [Problem(f"count/{t}", t, t, "") for t in ("sea", "sky", "snow", "sand")]
        return problems[:-1], problems[-1:]

    def role_instructions(self, agent: int) -> str:
        return f"Write exactly {self.options.target} words about the topic."

    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        return [[{"role": "user", "content": f"Topic: {problem.prompt}\n{self.role_instructions(0)}"}]]

    def score(self, items: list[tuple[Problem, list[str]]]) -> list[CountReward]:
        miss = [abs(len(text.split()) - self.options.target) for _, (text,) in items]
        return [CountReward(1 / (1 + m), {"closeness": 1 / (1 + m)}, all_passed=m == 0) for m in miss]
