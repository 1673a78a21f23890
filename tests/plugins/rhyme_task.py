"""A task written outside the package: one agent names words that rhyme with a given word.

Selected with `plugins: [rhyme_task]` and `task.name: rhyme`. The reward needs no sandbox: the share
of distinct answer words that end like the target (plus a small bonus for variety, so siblings differ).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from comlrl.config.registry import register_task
from comlrl.tasks.base import FeedbackPrompts, Problem, TaskDefaults

WORDS = ("cat", "light", "moon", "tree", "rain", "bell")


@dataclass(frozen=True)
class RhymeReward:
    total: float
    components: dict[str, float] = field(default_factory=dict)
    all_passed: bool = False
    notes: tuple[str, ...] = ()  # trees.jsonl records them with the components and the verdict


def rhyme_reward(target: str, text: str) -> RhymeReward:
    words = {w.strip(".,!?:;\"'`").lower() for w in text.split()} - {target}
    rhymes = sum(1 for w in words if len(w) > 2 and w.endswith(target[-2:]))
    share = rhymes / max(1, len(words))
    variety = len(set(text)) / 100.0
    return RhymeReward(share + variety, {"rhymes": share, "variety": variety}, all_passed=rhymes >= 3)


@register_task("rhyme")
class RhymeTask(TaskDefaults, FeedbackPrompts):
    num_agents = 1
    role_names = ["poet"]
    reward_range = (0.0, 2.0)

    def __init__(self, sandbox: Any = None) -> None:
        self.sandbox = sandbox  # unused: nothing here executes code

    def load(self, dataset_cfg: Any) -> tuple[list[Problem], list[Problem]]:
        problems = [Problem(f"rhyme/{w}", w, w, "") for w in WORDS]
        return problems[:-2], problems[-2:]

    def role_instructions(self, agent: int) -> str:
        return "List three words that rhyme with the given word, separated by spaces."

    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        return [[{"role": "user", "content": f"Word: {problem.prompt}\n{self.role_instructions(0)}"}]]

    def score(self, items: list[tuple[Problem, list[str]]]) -> list[RhymeReward]:
        return [rhyme_reward(problem.prompt, texts[0]) for problem, texts in items]
