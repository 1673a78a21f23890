"""Levelled code reward: each component, its gates, the range, and batching through the sandbox."""

from __future__ import annotations

import pytest
from sbx_helpers import check_body

from comlrl.tasks.code.reward import WEIGHTS, ScoreRequest, reward_range, score, score_batch
from sandbox import Sandbox

TESTS = check_body("assert candidate([1, 2, 3]) == 6\nassert candidate([]) == 0\n"
                   "assert candidate([5]) == 5\nassert candidate([-1, 1]) == 0", "total")
HELPER = "def aux(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
MAIN_GOOD = "def total(xs):\n    if not xs:\n        return 0\n    s = aux(xs)\n    return int(s)\n"
MAIN_THIN = 'def total(xs):\n    """Sum."""\n    return aux(xs)\n'
MAIN_IGNORES = "def total(xs):\n    aux(xs)\n    return sum(xs)\n"
MAIN_ALONE = "def total(xs):\n    return sum(xs)\n"


def two(helper: str, main: str, tests=TESTS) -> ScoreRequest:
    return ScoreRequest(codes=(helper, main), entry_point="total", tests=tests, preamble="from typing import List")


def test_ranges() -> None:
    assert reward_range(1) == (0.0, 3.0)
    assert reward_range(2) == (0.0, 4.0)
    with pytest.raises(ValueError):
        reward_range(3)


def test_perfect_collaboration_hits_the_maximum(sb: Sandbox) -> None:
    r = score(two(HELPER, MAIN_GOOD), sb)
    assert r.total == reward_range(2)[1] == 4.0
    assert r.components == WEIGHTS[2]
    assert (r.tests_passed, r.tests_total, r.all_passed) == (4, 4, True)
    assert r.helper_called and r.helper_result_used and not r.thin_wrapper
    assert r.exec is not None and r.exec.status == "passed"


def test_thin_wrapper_loses_its_bonus(sb: Sandbox) -> None:
    r = score(two(HELPER, MAIN_THIN), sb)
    assert r.thin_wrapper and r.helper_result_used and r.all_passed
    assert r.components["not_thin_wrapper"] == 0.0 and r.total == 3.5


def test_ignored_result_and_no_call(sb: Sandbox) -> None:
    r = score(two(HELPER, MAIN_IGNORES), sb)
    assert r.helper_called and not r.helper_result_used and r.total == 3.0
    r = score(two(HELPER, MAIN_ALONE), sb)
    assert not r.helper_called and r.total == 3.0 and "main does not call aux" in r.notes


def test_partial_tests_scale_tests_and_cooperation(sb: Sandbox) -> None:
    wrong = "def total(xs):\n    return aux(xs) + 1 if xs else 0\n"  # passes only the [] case
    r = score(two(HELPER, wrong), sb)
    assert (r.tests_passed, r.tests_total) == (1, 4)
    assert r.components["tests"] == pytest.approx(0.5)
    assert r.components["helper_used"] == pytest.approx(0.125)
    assert r.components["not_thin_wrapper"] == pytest.approx(0.125)
    assert r.total == pytest.approx(0.25 + 0.25 + 0.5 + 0.5 + 0.25)


def test_syntax_errors_are_per_agent_with_position_and_never_run(sb: Sandbox) -> None:
    before = sb.stats["executed"] + sb.stats["cache_hits"]
    r = score(two("def aux(xs):\n    return xs +\n", MAIN_GOOD), sb)
    helper, main = r.analyses
    assert helper.syntax_error is not None and helper.syntax_error.line == 2 and helper.syntax_error.col > 0
    assert main.syntax_error is None and main.defined
    assert r.exec is None and r.components["syntax"] == 0.0 and r.components["tests"] == 0.0
    assert r.total == WEIGHTS[2]["main_defined"]  # the helper is not even recognised as defined
    assert sb.stats["executed"] + sb.stats["cache_hits"] == before  # nothing was sent to the sandbox


def test_return_outside_function_is_a_syntax_error() -> None:
    r = score_batch([ScoreRequest(("return 1\n",), "total", TESTS)], sandbox=None)  # type: ignore[arg-type]
    assert r[0].analyses[0].syntax_error is not None and r[0].total == 0.0


def test_missing_entry_point_does_not_run(sb: Sandbox) -> None:
    r = score(two(HELPER, "def main(xs):\n    return aux(xs)\n"), sb)
    assert r.exec is None and r.total == WEIGHTS[2]["helper_defined"]  # no syntax credit without main (cumulative)
    assert any("no top-level def total" in n for n in r.notes)


def test_single_agent(sb: Sandbox) -> None:
    ok = ScoreRequest(codes=(MAIN_ALONE,), entry_point="total", tests=TESTS)
    r = score(ok, sb)
    assert r.total == reward_range(1)[1] and set(r.components) == set(WEIGHTS[1])
    bad = ScoreRequest(codes=("def total(xs):\n    return 0\n",), entry_point="total", tests=TESTS)
    assert score(bad, sb).total == pytest.approx(0.5 + 0.5 + 2.0 * 2 / 4)


def test_main_redefining_the_helper_gets_no_cooperation_credit(sb: Sandbox) -> None:
    main = "def aux(xs):\n    return sum(xs)\n" + MAIN_GOOD
    r = score(two(HELPER, main), sb)
    assert r.all_passed and not r.helper_called and r.total == 3.0
    assert any("shadowed" in n for n in r.notes)


def test_score_batch_runs_in_parallel_and_reuses_the_cache() -> None:
    with Sandbox(workers=2, timeout_s=3.0) as box:
        reqs = [two(HELPER, MAIN_GOOD), two(HELPER, MAIN_THIN), two(HELPER, MAIN_GOOD), two("x = (", MAIN_GOOD)]
        first = score_batch(reqs, box)
        assert [r.total for r in first] == [4.0, 3.5, 4.0, 0.25]
        assert box.stats["executed"] == 2  # two distinct programs; the duplicate and the broken one did not run
        again = score_batch(reqs, box)
        assert [r.total for r in again] == [r.total for r in first]
        assert box.stats["executed"] == 2 and all(r.exec is None or r.exec.cached for r in again)


def test_reward_uses_all_tests_not_a_slice(sb: Sandbox) -> None:
    r = score(two(HELPER, MAIN_GOOD, TESTS.sliced(1)), sb)
    assert r.tests_total == 1  # the caller decides; score() never slices on its own
    assert score(two(HELPER, MAIN_GOOD), sb).tests_total == 4


DOUBLE_TESTS = check_body("assert candidate([1, 2, 3]) == 12\nassert candidate([]) == 0", "total")
DOUBLE = "def aux(x):\n    return 2 * x\n"


@pytest.mark.parametrize("main", [
    "def total(xs):\n    return sum(map(aux, xs))\n",
    "def total(xs):\n    best = sorted(xs, key=aux)\n    return sum(2 * x for x in best)\n",
    "def total(xs):\n    f = aux\n    return sum(f(x) for x in xs)\n",
])
def test_helper_passed_as_a_function_counts_as_used(sb: Sandbox, main: str) -> None:
    """`map(aux, xs)`, `key=aux` and an alias use the helper as much as `aux(x)` does (code_coop's reference
    solutions need it: they were scored 3.0 of 4.0 and not counted in passed_with_helper)."""
    r = score(ScoreRequest(codes=(DOUBLE, main), entry_point="total", tests=DOUBLE_TESTS), sb)
    assert r.all_passed and r.helper_called and r.helper_result_used and not r.thin_wrapper
    assert r.total == 4.0


def test_helper_referenced_but_thrown_away_is_not_used(sb: Sandbox) -> None:
    main = "def total(xs):\n    map(aux, xs)\n    return sum(2 * x for x in xs)\n"
    r = score(ScoreRequest(codes=(DOUBLE, main), entry_point="total", tests=DOUBLE_TESTS), sb)
    assert r.all_passed and r.helper_called and not r.helper_result_used and r.total == 3.0
