"""BFCL v4's entries as the benchmark ships and loads them (`bfcl_eval.utils.load_dataset_entry`), one
`BfclProblem` each: the question turns, the function documents the prompt shows (with BFCL's language
hints) and the ones its checker reads (without, as BFCL's eval runner loads them), and the gold."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.bfcl.checker import bfcl
from comlrl.tasks.datasets import DatasetError

# The categories BFCL scores with its AST checker (gold in possible_answer/), and those it scores by
# whether a call decodes at all (no gold). Java and JavaScript replies are decoded by BFCL's tree-sitter parsers.
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


def _java_like(value: object, doc_type: str, language: str) -> str | None:
    """A gold value as Java or JavaScript source that BFCL's tree-sitter decoder and type converter read
    back as the gold (strings quoted where the document's type is a string, else as written), or None
    where this simple rendering cannot say it (collections, long/float suffixes left to the model)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        suffix = {"long": "L", "float": "f"}.get(doc_type, "") if language == "java" else ""
        return f"{value}{suffix}"
    if isinstance(value, str):
        return json.dumps(value) if doc_type in ("String", "string", "char") else value
    return None


def gold_answer(problem: BfclProblem) -> str | None:
    """The gold of a single-turn entry as a reply in BFCL's call format for its category's language (each
    parameter's first allowed value; parameters whose only allowed value is "" (optional, left out) are
    left out), or None where the gold cannot be written that way (no gold, nested allowed values)."""
    if not isinstance(problem.gold, list) or not problem.gold:
        return None
    language = problem.category.rsplit("_", 1)[-1] if problem.category.startswith("simple_j") else "python"
    docs = {f["name"]: f.get("parameters", {}).get("properties", {}) for f in problem.checker_functions}
    calls = []
    for call in problem.gold:
        for name, params in call.items():
            args = {k: next(v for v in allowed if v != "")
                    for k, allowed in params.items() if any(v != "" for v in allowed)}
            if not all(_plain(v) for v in args.values()):
                return None
            if language == "python":
                rendered = {k: repr(v) for k, v in args.items()}
            else:
                rendered = {k: _java_like(v, str(docs.get(name, {}).get(k, {}).get("type", "")), language)
                            for k, v in args.items()}
                if any(v is None for v in rendered.values()):
                    return None
            calls.append(f"{name}({', '.join(f'{k}={v}' for k, v in rendered.items())})")
    return f"[{', '.join(calls)}]"


def question_key(problem: BfclProblem) -> str:
    """The entry's question as compared across entries: its user messages, case and spacing folded."""
    text = "\n".join(m["content"] for turn in problem.turns for m in turn if m["role"] == "user")
    return " ".join(text.lower().split())


def _canonical_call(text: str) -> str:
    """A ground-truth call string written one way (spacing and keyword order folded), else as given."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return "".join(text.split())
    if not isinstance(node, ast.Call):
        return ast.unparse(node)
    keywords = sorted(node.keywords, key=lambda k: k.arg or "")
    return ast.unparse(ast.Call(node.func, node.args, keywords))


def gold_key(problem: BfclProblem) -> str:
    """The entry's gold after canonical formatting: single-turn, its possible answers as sorted JSON;
    multi-turn, per user turn its ground-truth calls written one way ('' where the entry has no gold)."""
    if not problem.gold:
        return ""
    if problem.category.startswith("multi_turn"):
        return json.dumps([[_canonical_call(c) for c in turn] for turn in problem.gold])
    return json.dumps(problem.gold, sort_keys=True, default=str)


def answer_groups(problems: list[BfclProblem]) -> list[str]:
    """A group label per entry: entries with the same question, or the same non-empty gold, share one
    (transitively), so a split by these labels never puts an answer on both sides."""
    parent = list(range(len(problems)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, p in enumerate(problems):
        for key in (("question", question_key(p)), ("gold", gold_key(p))):
            if not key[1]:
                continue
            j = first.setdefault(key, i)
            parent[root(i)] = root(j)
    return [problems[root(i)].task_id for i in range(len(problems))]
