"""The end-of-run report: Wilson intervals, the before/after lines and the verdict (pure, no model)."""

from __future__ import annotations

import math

import pytest

from comlrl.run_report import EvalPoint, eval_points, summary_lines, verdict, wilson_interval


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.277533),  # textbook values of the 95% Wilson interval
    (5, 10, 0.236593, 0.763407),
    (12, 32, 0.229339, 0.547456),
    (10, 10, 0.722467, 1.0),
])
def test_wilson_interval_known_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-6)


def test_wilson_interval_narrows_with_n_and_contains_p() -> None:
    widths = []
    for n in (8, 32, 128):
        lo, hi = wilson_interval(n // 2, n)
        assert lo < 0.5 < hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


@pytest.mark.parametrize(("k", "n"), [(1, 0), (-1, 4), (5, 4)])
def test_wilson_interval_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="wilson_interval"):
        wilson_interval(k, n)


def _steps(*evals: tuple[int, float, int, float]) -> dict[int, dict[str, float]]:
    steps: dict[int, dict[str, float]] = {1: {"reward_mean": 1.0}}
    for step, p, n, r in evals:
        steps.setdefault(step, {}).update({"eval/pass_at_1": p, "eval/problems": n, "eval/reward_mean": r,
                                           "eval/helper_called": 0.25})
    return steps


def test_eval_points_take_only_records_with_an_evaluation() -> None:
    pts = eval_points(_steps((0, 0.375, 32, 2.0), (10, 0.5, 32, 2.3)))
    assert [(p.step, p.solved, p.problems) for p in pts] == [(0, 12, 32), (10, 16, 32)]


def test_summary_lines_before_after_and_verdict() -> None:
    lines = summary_lines(_steps((0, 0.375, 32, 2.0), (10, 0.75, 32, 2.5)))
    assert lines[0] == ("held-out pass@1 before: 37.5% (12/32, 95% CI 22.9%-54.7%), reward 2.000, "
                        "main calls the helper in 25.0%")
    assert lines[1].startswith("held-out pass@1 after 10 steps: 75.0% (24/32, 95% CI ")
    assert lines[2] == ("improved: held-out pass@1 +37.5 points (12 -> 24 of 32 problems), beyond the 95% "
                        "interval of the start")


def test_summary_needs_two_evaluations() -> None:
    assert summary_lines(_steps((0, 0.5, 8, 2.0))) == []
    assert summary_lines({}) == []


@pytest.mark.parametrize(("after", "expected"), [
    (0.5, "improved: held-out pass@1 +12.5 points (12 -> 16 of 32 problems), within the 95% interval"),
    (0.25, "not improved: held-out pass@1 -12.5 points (12 -> 8 of 32 problems), within noise"),
    (0.0, "not improved: held-out pass@1 -37.5 points (12 -> 0 of 32 problems), below the start's 95%"),
    (0.375, "no change in held-out pass@1 (12 of 32); held-out reward +0.100"),
])
def test_verdict_says_direction_and_noise(after: float, expected: str) -> None:
    before = EvalPoint(0, 0.375, 32, 2.0)
    assert verdict(before, EvalPoint(10, after, 32, 2.1)).startswith(expected)


def test_eval_point_interval_is_of_its_own_counts() -> None:
    p = EvalPoint(3, 0.5, 10, math.nan)
    assert p.solved == 5 and p.interval() == pytest.approx(wilson_interval(5, 10))
