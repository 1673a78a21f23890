"""BFCL v4's entries as the benchmark ships and loads them (`bfcl_eval.utils.load_dataset_entry`), one
`BfclProblem` each: the question turns, the function documents the prompt shows (with BFCL's language
hints) and the ones its checker reads (without, as BFCL's eval runner loads them), and the gold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.bfcl.checker import bfcl
from comlrl.tasks.datasets import DatasetError

# The categories BFCL scores with its AST checker (gold in possible_answer/), and those it scores by
# whether a call decodes at all (no gold). Java and JavaScript are decoded from the Python-call form.
AST_CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
                  "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
SINGLE_TURN_CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES
# Multi-turn categories on the tree: base and long_context (miss_func and miss_param add or hold back
# functions between turns, which the task does not model yet).
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_long_context")


@dataclass(frozen=True)
class BfclProblem:
    """One BFCL entry: `task_id` is BFCL's id (its category is the id without the trailing number)."""

    task_id: str
    category: str
    turns: tuple[tuple[dict[str, str], ...], ...]  # the question: per user turn, its messages
    functions: tuple[dict, ...]  # the documents the prompt shows
    checker_functions: tuple[dict, ...]  # the documents the checker reads
    gold: Any = None  # AST: possible answers per call; multi-turn: per turn, the ground-truth call strings
    entry: dict = field(default_factory=dict, compare=False, repr=False)  # the raw entry (the multi-turn checker's)

    @property
    def prompt(self) -> str:
        """The first user message (what reward functions and exports see as the prompt)."""
        return next((m["content"] for m in self.turns[0] if m["role"] == "user"), "")


def load_category(category: str) -> list[BfclProblem]:
    """Every entry of one category, in BFCL's file order."""
    if category not in SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES:
        raise DatasetError(f"task.bfcl.categories: unknown category {category!r}; expected some of: "
                           f"{', '.join(SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES)}")
    utils = bfcl().utils
    shown = utils.load_dataset_entry(category, include_prereq=False)
    judged = utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    gold = ({g["id"]: g["ground_truth"] for g in utils.load_ground_truth_entry(category)}
            if category not in RELEVANCE_CATEGORIES else {})
    out = []
    for s, j in zip(shown, judged, strict=True):
        turns = tuple(tuple({"role": m["role"], "content": m["content"]} for m in turn) for turn in s["question"])
        out.append(BfclProblem(s["id"], category, turns, tuple(s["function"]), tuple(j["function"]),
                               gold.get(s["id"]), entry=j))
    return out


def _plain(value: object) -> bool:
    """A gold value an answer can state as is (not a nested dict of allowed values per key)."""
    if isinstance(value, dict):
        return all(not isinstance(v, list) for v in value.values())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return True


def gold_answer(problem: BfclProblem) -> str | None:
    """The gold of a single-turn entry as a reply in BFCL's call format (each parameter's first allowed
    value; parameters whose only allowed value is "" (optional, left out) are left out), or None where the
    gold cannot be written that way (no gold, or nested allowed values)."""
    if not isinstance(problem.gold, list) or not problem.gold:
        return None
    calls = []
    for call in problem.gold:
        for name, params in call.items():
            args = {k: next(v for v in allowed if v != "")
                    for k, allowed in params.items() if any(v != "" for v in allowed)}
            if not all(_plain(v) for v in args.values()):
                return None
            calls.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
    return f"[{', '.join(calls)}]"
