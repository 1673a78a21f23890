"""What the code tasks share: chat messages with a stable prefix, code extraction and sandbox scoring.

Subclasses only say who the agents are (`role_names`, `role_instructions`) and which piece of code each
agent contributes (`agent_codes`). Scoring goes through the `task.reward` rule (default: the levels of
`comlrl.tasks.code.reward`), whose executions run in the sandbox, so untrusted code never runs in the
trainer process.
"""

from __future__ import annotations

import ast
import re
from abc import abstractmethod
from typing import Any

from comlrl.errors import not_allowed
from comlrl.tasks.base import FeedbackPrompts, Problem, TaskDefaults
from comlrl.tasks.code import reward as levels
from comlrl.tasks.code.extract import decorators, extract_code
from comlrl.tasks.code.reward import CodeReward, ScoreRequest
from comlrl.tasks.dataset_files import parsed_tests
from comlrl.tasks.datasets import DatasetConfig, load_dataset
from comlrl.tree.contracts import TaskConfig

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Answer with Python code in a single ```python code block "
    "and no explanation."
)


def prompt_preamble(prompt: str, entry_point: str) -> str:
    """What agents' code may rely on from the prompt: its imports and any other definitions in it.

    HumanEval prompts sometimes define a function the solution must call (e.g. `encode_cyclic` before
    `decode_cyclic`); the entry point itself is left out, since the agents write it.
    """
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        lines = [ln for ln in prompt.split("\n") if re.match(r"^(import|from)\s+\w", ln)]
        return "\n".join(lines) + ("\n" if lines else "")
    lines = prompt.split("\n")
    keep: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == entry_point:
            continue
        if isinstance(node, ast.Expr):  # a module docstring or a stray expression
            continue
        start = min([node.lineno] + [d.lineno for d in decorators(node)])
        keep.append("\n".join(lines[start - 1 : node.end_lineno or node.lineno]))
    return "\n".join(keep) + ("\n" if keep else "")


def problem_text(prompt: str) -> str:
    """The problem as an agent sees it in its first turn: a HumanEval prompt in a code block."""
    return f"Problem:\n```python\n{prompt.strip(chr(10))}\n```"


def path_codes(history: list[list[str]], reward: CodeReward) -> list[list[str]]:
    """Per agent, per turn, the code a next-turn prompt shows for each response in `history`.

    The latest turn's is exactly the code `reward` scored (the role's entry point, excluded names and
    body wrapping applied); earlier turns' are read by the same extractor, without a role's names.
    """
    if len(reward.codes) != len(history):
        raise ValueError(f"the reward scored {len(reward.codes)} agents' code, the history has {len(history)}")
    return [[extract_code(text) for text in turns[:-1]] + [reward.codes[a]] for a, turns in enumerate(history)]


class CodeTask(TaskDefaults, FeedbackPrompts):
    """Base of the code-writing tasks; `sandbox` is a `sandbox.executor.Sandbox` (or anything with its API)."""

    helper_name = "aux"
    # Generation stops after the answer's closing fence: what small models write past it (explanations,
    # "usage" variants) is a third of their tokens, never scored, yet trained on and paid for in rollout.
    stop_strings: tuple[str, ...] = ("```\n\n",)

    def __init__(self, sandbox: Any = None, reward: str = "levels") -> None:
        if reward not in levels.REWARDS:
            raise not_allowed("task.reward", reward, f"one of: {', '.join(levels.REWARDS)} (or register it from a "
                                                     "module listed in `plugins`)")
        self.sandbox = sandbox
        self.rule: levels.CodeRewardRule = levels.REWARDS[reward]
        self._range: tuple[float, float] | None = None

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> CodeTask:
        return cls(sandbox, task_cfg.reward)

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        """The reward range for this many agents (computed once, lazily)."""
        if self._range is None:
            lo, hi = self.rule.reward_range(self.num_agents)
            self._range = (float(lo), float(hi))
        return self._range

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[Problem], list[Problem]]:
        return load_dataset(dataset_cfg)

    @abstractmethod
    def target_line(self, agent: int, problem: Problem) -> str:
        """The problem-specific last line of an agent's first message (what exactly to write)."""

    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        """System, then problem, then role: the prefix shared by agents and turns stays identical."""
        return [
            [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": self.first_request(agent, self.problem_statement(agent, problem),
                                                               self.target_line(agent, problem))},
            ]
            for agent in range(self.num_agents)
        ]

    def first_request(self, agent: int, statement: str, target: str) -> str:
        """An agent's turn-1 user message: the problem's code, its role, then what exactly to write."""
        return f"{problem_text(statement)}\n\n{self.role_instructions(agent)}\n{target}"

    def answer_prefix(self, agent: int, problem: Problem) -> str:
        """A code block that starts the function this agent must define."""
        return f"```python\ndef {self.defined_name(agent, problem)}("

    @abstractmethod
    def defined_name(self, agent: int, problem: Problem) -> str:
        """The function agent `agent` writes."""

    @abstractmethod
    def agent_codes(self, problem: Problem, completions: list[str]) -> tuple[str, ...]:
        """The code each agent contributes, extracted from its completion (never raises)."""

    def shown_codes(self, history: list[list[str]], reward: Any) -> list[list[str]] | None:
        """The code the reward scored, not a second reading of the text (`path_codes`)."""
        return path_codes(history, reward) if isinstance(reward, CodeReward) else None

    def tests_for(self, problem: Problem) -> Any:
        """Parsed tests of a problem: parsed once per process, a loaded data set's at load (`parsed_tests`)."""
        return parsed_tests(problem.test, problem.entry_point, problem.prompt)

    def requests(self, items: list[tuple[Problem, list[str]]]) -> list[ScoreRequest]:
        """`ScoreRequest`s for (problem, completions per agent) items."""
        out = []
        for problem, completions in items:
            if len(completions) != self.num_agents:
                raise ValueError(
                    f"{type(self).__name__}.score: {problem.task_id} has {len(completions)} completions, "
                    f"expected one per agent ({self.num_agents})"
                )
            out.append(
                ScoreRequest(
                    codes=self.agent_codes(problem, list(completions)),
                    entry_point=problem.entry_point,
                    tests=self.tests_for(problem),
                    preamble=prompt_preamble(problem.prompt, problem.entry_point),
                    helper_name=self.helper_name,
                )
            )
        return out

    def score(self, items: list[tuple[Problem, list[str]]]) -> list[CodeReward]:
        """One `CodeReward` per item; executions run in parallel (and cached) in the sandbox pool."""
        if not items:
            return []
        return list(self.rule.score_batch(self.requests(items), self.sandbox))
