"""task.name=bfcl: N agents answer BFCL v4's single-turn entries, judged by BFCL's own AST checker.

Each agent sees BFCL's system prompt with the entry's function documents, optionally a worked example of
the call format, and the question; it answers with calls (comlrl/tasks/bfcl/calls.py: the Python-call form
or JSON). The union of the agents' calls is judged by `bfcl_eval`'s `ast_checker` against the entry's
`possible_answer` (or by BFCL's relevance rule), so the pass of a joint action, and every evaluation's
accuracy, is the benchmark's verdict; the reward adds small shaping terms (comlrl/tasks/bfcl/reward.py).
With N >= 2 each agent writes its share of the calls (parallel categories: the reference library's
native-parallel task). Later turns (magrpo.num_turns > 1) show each agent its answer and the checker's
error type (never its message, which quotes the gold values) and ask again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.bfcl import prompts
from comlrl.tasks.bfcl.data import (
    RELEVANCE_CATEGORIES,
    SINGLE_TURN_CATEGORIES,
    BfclProblem,
    answer_groups,
    gold_answer,
    load_category,
)
from comlrl.tasks.bfcl.reward import BfclReward, ShapingWeights, score
from comlrl.tasks.datasets import DatasetConfig, split_problems
from comlrl.tree.contracts import Continuation, Messages, Task, TaskConfig, Transition


@dataclass
class BfclTaskConfig:
    """Options of task.name=bfcl (docs/bfcl.md)."""

    categories: list[str] = field(default_factory=lambda: ["simple_python"])  # BFCL single-turn categories
    roles: list[str] = field(default_factory=lambda: ["caller"])  # one per agent (= magrpo.num_agents)
    docs: str = "compact"  # compact: one-line signatures in the reply's syntax | json: BFCL's own documents
    examples: int = 1  # solved training entries of the same category shown before the question (0 = none)
    name_prefix: bool = True  # the reply starts with the function's name where the entry offers only one
    format_reward: float = 0.1  # BFCL's decoder read every reply and found a call
    lenient_reward: float = 0.0  # the project's lenient decoder found a call (shaping only; never accuracy)
    count_reward: float = 0.1  # as many distinct calls as the gold
    schema_reward: float = 0.1  # the calls fit the documents (required parameters given, no undocumented ones)
    argument_reward: float = 0.4  # the share of gold parameters whose value BFCL's checker accepts judged alone
    duplicate_penalty: float = 0.1  # per repeated call, per gold call
    lazy_penalty: float = 0.1  # agents of a team that wrote no call when the gold has one per agent


def check_roles_and_weights(where: str, roles: Sequence[str], weights: dict[str, float]) -> None:
    """`<where>.roles`: distinct non-empty names; every weight a finite number >= 0 (both BFCL tasks)."""
    if not roles or not all(isinstance(r, str) and r.strip() for r in roles) or len(set(roles)) != len(roles):
        raise ConfigError(f"config error: {where}.roles={list(roles)!r} is not allowed; expected a non-empty list of "
                          "distinct role names (one per agent)")
    for key, value in weights.items():
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"config error: {where}.{key}={value!r} is not allowed; expected a finite number >= 0")


class BfclTask(TaskDefaults):
    """BFCL v4 single-turn categories, judged by BFCL's AST checker (docs/bfcl.md)."""

    needs_sandbox = False  # replies are decoded as literals and judged by BFCL's checker: no model code runs
    num_agents = 1
    role_names = ["caller"]
    outcome_names = ("decoded", "decoded_lenient")
    options_type = BfclTaskConfig  # task.bfcl.*
    centralizable = True  # the agents' calls only meet in the checker

    def __init__(self, options: BfclTaskConfig | None = None) -> None:
        self.cfg = options or BfclTaskConfig()
        self.role_names = list(self.cfg.roles)
        self.num_agents = len(self.role_names)
        self.weights = ShapingWeights(self.cfg.format_reward, self.cfg.count_reward, self.cfg.schema_reward,
                                      self.cfg.argument_reward, self.cfg.duplicate_penalty, self.cfg.lazy_penalty,
                                      self.cfg.lenient_reward)
        self.reward_range = self.weights.reward_range
        self.examples: dict[str, list[BfclProblem]] = {}  # per category, its worked examples (set by `load`)

    @classmethod
    def validate_options(cls, options: BfclTaskConfig) -> None:
        """task.bfcl.*: known single-turn categories, a role per agent, weights >= 0."""
        o = options
        bad = [c for c in o.categories if c not in SINGLE_TURN_CATEGORIES]
        if not o.categories or bad:
            raise ConfigError(f"config error: task.bfcl.categories={list(o.categories)!r} is not allowed; expected "
                              f"some of: {', '.join(SINGLE_TURN_CATEGORIES)} (multi-turn: task.name=bfcl_multi_turn)")
        if o.docs not in prompts.DOC_STYLES:
            raise ConfigError(f"config error: task.bfcl.docs={o.docs!r} is not allowed; expected one of: "
                              f"{', '.join(prompts.DOC_STYLES)}")
        if o.examples < 0:
            raise ConfigError(f"config error: task.bfcl.examples={o.examples!r} is not allowed; "
                              "expected an integer >= 0")
        check_roles_and_weights("task.bfcl", o.roles, {"format_reward": o.format_reward, "count_reward": o.count_reward,
                                             "schema_reward": o.schema_reward, "argument_reward": o.argument_reward,
                                             "duplicate_penalty": o.duplicate_penalty, "lazy_penalty": o.lazy_penalty,
                                             "lenient_reward": o.lenient_reward})

    @classmethod
    def agents_for(cls, task_cfg: TaskConfig) -> int:
        return len((task_cfg.options() or BfclTaskConfig()).roles)

    @classmethod
    def roles_for(cls, task_cfg: TaskConfig) -> list[str]:
        return list((task_cfg.options() or BfclTaskConfig()).roles)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> BfclTask:
        return cls(task_cfg.options())

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[BfclProblem], list[BfclProblem]]:
        """The chosen categories' entries; dataset.eval_size / max_problems / seed split them (name/path unused).
        Each category is split on its own, so the held-out set holds every category in proportion, and by
        answer groups: entries with the same question or the same gold land on the same side."""
        train: list[BfclProblem] = []
        evals: list[BfclProblem] = []
        categories = list(dict.fromkeys(self.cfg.categories))
        for i, category in enumerate(categories):
            problems = load_category(category)
            size = (int(dataset_cfg.eval_size) * (i + 1) // len(categories)
                    - int(dataset_cfg.eval_size) * i // len(categories))
            tr, ev = split_problems(problems, size, int(dataset_cfg.seed), answer_groups(problems))  # type: ignore[arg-type]
            self.examples[category] = self._solved(tr, self.cfg.examples + 1)  # type: ignore[arg-type]
            train += tr  # type: ignore[arg-type]
            evals += ev  # type: ignore[arg-type]
        if dataset_cfg.max_problems is not None:
            train = train[: int(dataset_cfg.max_problems)]
        return train, evals

    def _solved(self, problems: list[BfclProblem], count: int) -> list[BfclProblem]:
        """The first `count` training entries whose gold, written as a reply, BFCL's checker accepts (one
        more than shown, so an entry never sees itself as its example)."""
        out = []
        for p in problems:
            if len(out) >= count or p.category in RELEVANCE_CATEGORIES or self.cfg.examples == 0:
                break
            answer = gold_answer(p)
            if answer is not None and score(p, [answer], self.weights).all_passed:
                out.append(p)
        return out

    def example_chats(self, problem: BfclProblem) -> list[list[dict[str, str]]]:
        """The worked examples shown before `problem` (never itself)."""
        shown = [p for p in self.examples.get(problem.category, []) if p.task_id != problem.task_id]
        return [prompts.worked_example(p.functions, p.prompt, gold_answer(p) or "", self.cfg.docs)
                for p in shown[: self.cfg.examples]]

    def role_instructions(self, agent: int) -> str:
        return prompts.share_instruction(agent, self.num_agents)

    def initial_messages(self, problem: BfclProblem) -> list[Messages]:
        examples = self.example_chats(problem)
        return [prompts.first_turn(problem.functions, problem.turns[0], docs=self.cfg.docs, examples=examples,
                                   agent=a, num_agents=self.num_agents) for a in range(self.num_agents)]

    def answer_prefix(self, agent: int, problem: BfclProblem) -> str:
        """Replies start with the call list's bracket (BFCL's format), so a small model cannot miss it; with
        `name_prefix`, also with the function's name where the entry offers only one (not on the relevance
        categories, whose test is whether a call is made)."""
        if self.cfg.name_prefix and len(problem.functions) == 1 and problem.category not in RELEVANCE_CATEGORIES:
            return f"[{problem.functions[0]['name']}("
        return "["

    def score(self, items: list[tuple[Any, list[str]]]) -> list[BfclReward]:
        return [score(problem, texts, self.weights) for problem, texts in items]

    def outcome_counts(self, reward: BfclReward) -> dict[str, float]:
        return {"decoded": reward.components["decoded"], "decoded_lenient": reward.components["decoded_lenient"]}

    def problem_id(self, problem: BfclProblem) -> str:
        return problem.task_id

    def problem_category(self, problem: BfclProblem) -> str:
        return problem.category

    def reward_inputs(self, problem: BfclProblem) -> tuple[Any, dict[str, Any]]:
        return problem.prompt, {"task_id": problem.task_id, "category": problem.category, "gold": problem.gold}

    def transition(self, configured: Transition) -> Transition:
        return self  # the checker's error type and a retry, not the code feedback modes

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """Per agent: its first chat, its last answer, and whether BFCL accepted the team's calls."""
        out = []
        for path in paths:
            verdict = path.reward.verdict
            note = ("BFCL accepted the calls. Answer again with the same calls." if verdict.valid else
                    f"BFCL did not accept the team's calls ({verdict.error_type}). Answer again with corrected calls.")
            out.append([[*first, {"role": "assistant", "content": path.history[a][-1]},
                         {"role": "user", "content": note}]
                        for a, first in enumerate(self.initial_messages(path.problem))])
        return out
