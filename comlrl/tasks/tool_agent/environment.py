"""The Python tool's environment: a problem's full test suite and sandboxed runs of the agent's code.

Tests come from three places and the reward uses all of them: the dataset's test code (`check` or plain
asserts), the `>>>` examples of the prompt's docstring (`doctest_tests`), and edge-case tests where the
task provides them (a dataset record's `edge_tests` field, or a JSONL file keyed by task id). Duplicates
(the docstring example is often also the dataset's first assert) are counted once.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import prompt_preamble
from comlrl.tasks.dataset_files import parsed_tests
from comlrl.tasks.tool_agent.doctest_tests import extract_doctest_tests
from sandbox.untrusted_source import parse

EdgeTests = Mapping[str, Sequence[str] | str]


@dataclass(frozen=True)
class TestSuite:
    """The parsed tests of one problem (`sandbox.testparse.ParsedTests`) and where each assert came from."""

    tests: Any
    sources: tuple[str, ...]  # "dataset" | "doctest" | "edge", one per assert unit

    def count(self, source: str) -> int:
        """Number of assert units from one source."""
        return sum(s == source for s in self.sources)


class EdgeTestError(ValueError):
    """A bad edge-test file or record; the message names the file and line."""


def _normalize_tests(value: Any, where: str) -> list[str] | str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise EdgeTestError(f"{where}: 'tests' must be a string of test code or a list of assert strings")


def load_edge_tests(path: str | Path) -> dict[str, list[str] | str]:
    """`{task_id: tests}` from a JSONL file of `{"task_id": ..., "tests": [...] | "test code"}` lines."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise EdgeTestError(f"{p}: edge-test file does not exist")
    out: dict[str, list[str] | str] = {}
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EdgeTestError(f"{p}:{lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("task_id"), str):
            raise EdgeTestError(f"{p}:{lineno}: expected an object with a string 'task_id'")
        out[record["task_id"]] = _normalize_tests(record.get("tests"), f"{p}:{lineno}")
    return out


def record_edge_tests(path: str | Path) -> dict[str, list[str] | str]:
    """The optional `edge_tests` field of the records of a HumanEval-format JSONL data set."""
    out: dict[str, list[str] | str] = {}
    p = Path(path)
    if not p.is_file() or p.suffix == ".gz":
        return out
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        if '"edge_tests"' not in line:
            continue
        record = json.loads(line)
        if isinstance(record, dict) and record.get("edge_tests") is not None:
            out[str(record["task_id"])] = _normalize_tests(record["edge_tests"], f"{p}:{lineno}")
    return out


def _key(source: str) -> str:
    """Formatting-independent identity of an assert unit (for de-duplication)."""
    try:
        return ast.dump(parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source.strip()


def _edge_units(edge: list[str] | str, entry_point: str, candidate: str) -> tuple[str, list[str]]:
    """(setup, assert units) of edge tests; asserts may call `candidate` or the entry point by name."""
    from sandbox.testparse import parse_tests

    if isinstance(edge, list):
        edge = "\n".join(edge)
    parsed = parse_tests(edge, entry_point)
    setup = parsed.setup
    if parsed.candidate_name != candidate:  # a `check(f)` of its own: bind its name too
        setup = f"{parsed.candidate_name} = {candidate}\n{setup}"
    return setup, list(parsed.asserts)


def build_test_suite(problem: Problem, *, doctests: bool = True, edge: list[str] | str | None = None) -> TestSuite:
    """All tests of a problem: the dataset's, then new docstring examples, then new edge cases."""
    from sandbox.testparse import ParsedTests

    base = parsed_tests(problem.test, problem.entry_point, problem.prompt)  # parsed when the data set loaded
    cand = base.candidate_name
    units = list(base.asserts)
    sources = ["dataset"] * len(units)
    seen = {_key(u) for u in units}
    setup = [base.setup] if base.setup else []
    if cand != "candidate":  # doctest and edge asserts call `candidate`
        setup.append(f"candidate = {cand}")
    extra: list[tuple[str, str]] = []
    if doctests:
        extra += [("doctest", t) for t in extract_doctest_tests(problem.prompt, problem.entry_point)]
    if edge:
        edge_setup, edge_units = _edge_units(edge, problem.entry_point, "candidate")
        if edge_setup.strip():
            setup.append(edge_setup)
        extra += [("edge", u) for u in edge_units]
    for source, unit in extra:
        key = _key(unit)
        if key not in seen:
            seen.add(key)
            units.append(unit)
            sources.append(source)
    tests = ParsedTests("\n".join(setup), tuple(units), problem.entry_point, cand)
    return TestSuite(tests, tuple(sources))


class ToolEnvironment:
    """Runs the agent's code against a problem's full test suite in the sandbox (batched, never raises).

    `sandbox` is a `sandbox.executor.Sandbox`; `edge_tests` maps task ids to extra tests.
    """

    def __init__(self, sandbox: Any, *, doctests: bool = True, edge_tests: EdgeTests | None = None) -> None:
        self.sandbox = sandbox
        self.doctests = doctests
        self.edge_tests: dict[str, Any] = dict(edge_tests or {})
        self._suites: dict[tuple[str, str, str, str], TestSuite] = {}

    def add_edge_tests(self, edge_tests: EdgeTests) -> None:
        """Merge more edge tests (a task id already present keeps its first tests)."""
        for key, value in edge_tests.items():
            self.edge_tests.setdefault(key, value)
        self._suites.clear()

    def suite(self, problem: Problem) -> TestSuite:
        """The problem's test suite, built once."""
        key = (problem.task_id, problem.prompt, problem.entry_point, problem.test)
        if key not in self._suites:
            self._suites[key] = build_test_suite(
                problem, doctests=self.doctests, edge=self.edge_tests.get(problem.task_id)
            )
        return self._suites[key]

    def program(self, problem: Problem, code: str) -> str:
        """What runs: the prompt's imports and helpers, then the agent's code."""
        preamble = prompt_preamble(problem.prompt, problem.entry_point)
        return f"{preamble}\n{code}" if preamble.strip() else code

    def run(self, jobs: Sequence[tuple[Problem, str]]) -> list[Any]:
        """One `sandbox.results.ExecResult` per (problem, code) job, executed in parallel."""
        if not jobs:
            return []
        if self.sandbox is None:
            raise RuntimeError("ToolEnvironment.run needs a sandbox")
        return list(self.sandbox.run_many([(self.program(p, c), self.suite(p).tests) for p, c in jobs]))
