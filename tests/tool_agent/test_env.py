"""The tool's test suite (dataset + docstring examples + edge cases) and sandboxed runs of agent code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comlrl.tasks.base import Problem
from comlrl.tasks.tool_agent.environment import (
    EdgeTestError,
    ToolEnvironment,
    build_test_suite,
    load_edge_tests,
    record_edge_tests,
)

PROMPT = (
    "from typing import List\n\n\ndef clip(xs: List[int], hi: int) -> List[int]:\n"
    '    """Values above hi become hi.\n    >>> clip([1, 5, 3], 3)\n    [1, 3, 3]\n'
    "    >>> clip([], 2)\n    []\n    >>> print(clip([9], 1))\n    [1]\n    \"\"\"\n"
)
TEST = "def check(candidate):\n    assert candidate([1, 5, 3], 3) == [1, 3, 3]\n    assert candidate([4], 0) == [0]\n"
PROBLEM = Problem("T/0", PROMPT, "clip", TEST)
GOOD = "def clip(xs: List[int], hi: int) -> List[int]:\n    return [min(x, hi) for x in xs]\n"


def test_suite_merges_sources_without_duplicates() -> None:
    suite = build_test_suite(PROBLEM, edge=["assert candidate([-1], -2) == [-2]", "assert clip([3, 3], 3) == [3, 3]"])
    # the first docstring example repeats the dataset's first assert; the printed one is skipped
    assert suite.sources == ("dataset", "dataset", "doctest", "edge", "edge")
    assert suite.tests.asserts[2] == "assert candidate([], 2) == []"
    assert suite.count("edge") == 2 and suite.tests.entry_point == "clip"
    assert build_test_suite(PROBLEM, doctests=False).sources == ("dataset", "dataset")


def test_edge_tests_as_a_check_function_and_other_candidate_names() -> None:
    prob = Problem("T/1", PROMPT, "clip", "def check(f):\n    assert f([7], 7) == [7]\n")
    suite = build_test_suite(prob, edge="def check(g):\n    assert g([8], 1) == [1]\n")
    assert suite.sources == ("dataset", "doctest", "doctest", "edge")
    assert "candidate = f" in suite.tests.setup and "g = candidate" in suite.tests.setup


def test_edge_files_and_dataset_records(tmp_path: Path) -> None:
    good = tmp_path / "edge.jsonl"
    good.write_text(json.dumps({"task_id": "T/0", "tests": ["assert candidate([], 0) == []"]}) + "\n\n"
                    + json.dumps({"task_id": "T/1", "tests": "assert clip([1], 0) == [0]"}) + "\n")
    assert load_edge_tests(good) == {"T/0": ["assert candidate([], 0) == []"], "T/1": "assert clip([1], 0) == [0]"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "T/0", "tests": 3}\n')
    with pytest.raises(EdgeTestError, match="bad.jsonl:1"):
        load_edge_tests(bad)
    with pytest.raises(EdgeTestError, match="does not exist"):
        load_edge_tests(tmp_path / "missing.jsonl")
    data = tmp_path / "data.jsonl"
    rec = {"task_id": "T/0", "prompt": PROMPT, "entry_point": "clip", "test": TEST, "edge_tests": ["assert 1"]}
    data.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "task_id": "T/9", "edge_tests": None}) + "\n")
    assert record_edge_tests(data) == {"T/0": ["assert 1"]}


def test_runs_use_all_tests_and_the_prompt_imports(sb) -> None:
    env = ToolEnvironment(sb, edge_tests={"T/0": ["assert candidate([10, -10], 0) == [0, -10]"]})
    buggy = "def clip(xs: List[int], hi: int) -> List[int]:\n    return [hi for x in xs]\n"
    crash = "def clip(xs, hi):\n    return [x / 0 for x in xs]\nprint('loaded')\n"
    good, bad, err, syn = env.run([(PROBLEM, GOOD), (PROBLEM, buggy), (PROBLEM, crash), (PROBLEM, "def clip(:\n")])
    assert (good.passed, good.total, good.status) == (4, 4, "passed")  # 2 dataset + 1 doctest + 1 edge
    assert bad.passed == 2 and bad.status == "failed"  # clip([4], 0) and clip([], 2) pass by luck
    assert err.stdout == "loaded\n" and any(a.error_type == "ZeroDivisionError" for a in err.asserts)
    assert syn.status == "syntax_error" and syn.passed == 0
    assert env.program(PROBLEM, GOOD).startswith("from typing import List")
