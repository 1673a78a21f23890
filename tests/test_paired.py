"""Paired before/after statistics (comlrl/run/paired.py) and the probe draw (comlrl/run/problem_draw.py): pure."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from comlrl.run.paired import pair_by_key, paired_difference, t_cdf, t_quantile, within_problem_difference
from comlrl.run.problem_draw import probe_indices, step_problems


@pytest.mark.parametrize(("df", "expected"), [  # textbook two-sided 95% critical values of Student's t
    (1, 12.706205), (2, 4.302653), (3, 3.182446), (7, 2.364624), (15, 2.131450), (31, 2.039513), (120, 1.979930),
])
def test_t_quantile_known_values(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-5)


def test_t_cdf_is_symmetric_and_inverts_the_quantile() -> None:
    for df in (1, 4, 30):
        assert t_cdf(0.0, df) == pytest.approx(0.5)
        for p in (0.6, 0.9, 0.99):
            q = t_quantile(p, df)
            assert t_cdf(q, df) == pytest.approx(p, abs=1e-9)
            assert t_quantile(1 - p, df) == pytest.approx(-q, abs=1e-9)


def test_paired_difference_hand_computed() -> None:
    # differences 0.5, 0, 0.25, 0.25: mean 0.25, sd 0.204124, se 0.102062, t(0.975, 3) 3.182446
    d = paired_difference([0, 1, 0.5, 0.25], [0.5, 1, 0.75, 0.5])
    assert (d.n, d.before, d.after, d.delta) == (4, 0.4375, 0.6875, 0.25)
    half = 3.182446 * 0.2041241 / 2
    assert (d.lo, d.hi) == pytest.approx((0.25 - half, 0.25 + half), abs=1e-6)
    assert d.verdict == "within noise"


def test_pairing_removes_problem_difficulty() -> None:
    """A constant +0.1 on problems of very different difficulty: the paired interval is a point, while
    the unpaired spread of the scores would hide it."""
    rng = random.Random(0)
    before = [rng.random() * 0.8 for _ in range(8)]
    d = paired_difference(before, [b + 0.1 for b in before])
    assert d.delta == pytest.approx(0.1) and d.lo == pytest.approx(0.1) and d.verdict == "improved"
    assert 1.96 * math.sqrt(2) * statistics.stdev(before) / math.sqrt(8) > 0.1  # an unpaired interval is wider


def test_paired_difference_verdicts_and_errors() -> None:
    assert paired_difference([1, 1, 1], [0, 0.1, 0]).verdict == "worse"
    assert paired_difference([0, 0.1, 0.2], [0.5, 0.6, 0.75]).verdict == "improved"
    one = paired_difference([0.2], [0.4])
    assert one.delta == pytest.approx(0.2) and math.isinf(one.hi) and one.verdict == "one problem gives no interval"
    with pytest.raises(ValueError, match="3 scores before, 2 after"):
        paired_difference([0, 0, 0], [1, 1])
    with pytest.raises(ValueError, match="at least one problem"):
        paired_difference([], [])


def test_interval_covers_zero_at_the_nominal_rate_under_no_change() -> None:
    """Under 'training changes nothing' (after = before + noise of mean 0) the 95% interval excludes zero
    in about 5% of 2000 simulated evaluations of 16 problems."""
    rng = random.Random(1)
    misses = 0
    for _ in range(2000):
        before = [rng.random() for _ in range(16)]
        after = [b + rng.gauss(0, 0.2) for b in before]
        d = paired_difference(before, after)
        misses += d.lo > 0 or d.hi < 0
    assert 0.035 < misses / 2000 < 0.065


def test_within_problem_difference_hand_computed() -> None:
    # problem 1: [0, 1] -> [1, 1]; problem 2: [2, 2] -> [2, 3]. Pooled SS before 0.5 + 0 over dof 2 = 0.25,
    # after 0 + 0.5 over 2 = 0.25; se = sqrt(2 x (0.25/2 + 0.25/2)) / 2 = 0.353553; df 4; delta 0.5
    d = within_problem_difference([[0, 1], [2, 2]], [[1, 1], [2, 3]])
    assert (d.n, d.before, d.after, d.delta) == (2, 1.25, 1.75, 0.5)
    half = 2.776445 * math.sqrt(0.25) / 2 * math.sqrt(2)
    assert (d.lo, d.hi) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-5)


def test_within_problem_difference_sees_a_change_a_t_over_two_problems_cannot() -> None:
    """Two trained-on problems, 16 chains each, every chain's reward up by about 0.5: the chains say it
    moved; a t over the 2 problems (1 degree of freedom) cannot."""
    rng = random.Random(3)
    before = [[rng.gauss(m, 0.3) for _ in range(16)] for m in (1.0, 2.0)]
    after = [[rng.gauss(m + 0.5, 0.3) for _ in range(16)] for m in (1.0, 2.0)]
    fixed = within_problem_difference(before, after)
    assert fixed.verdict == "improved" and fixed.delta == pytest.approx(0.5, abs=0.15)
    means = [statistics.fmean(c) for c in before], [statistics.fmean(c) for c in after]
    assert paired_difference(*means).lo < 0 < fixed.lo


def test_within_problem_interval_covers_zero_at_most_the_nominal_rate_under_no_change() -> None:
    """No change: 2000 simulated probes of 4 problems x 4 chains (0/1 passes and rewards) exclude zero in
    at most ~5% of cases (fewer where before and after share the seed's draws)."""
    rng = random.Random(2)
    misses = 0
    for _ in range(2000):
        means = [rng.random() for _ in range(4)]
        before = [[float(rng.random() < m) + rng.gauss(0, 0.1) for _ in range(4)] for m in means]
        after = [[float(rng.random() < m) + rng.gauss(0, 0.1) for _ in range(4)] for m in means]
        d = within_problem_difference(before, after)
        misses += d.lo > 0 or d.hi < 0
    assert misses / 2000 < 0.065


def test_within_problem_difference_edges() -> None:
    flat = within_problem_difference([[1.0, 1.0]], [[1.0, 1.0]])
    assert (flat.delta, flat.lo, flat.hi, flat.verdict) == (0.0, 0.0, 0.0, "within noise")
    single = within_problem_difference([[0.0]], [[1.0]])
    assert single.delta == 1.0 and math.isinf(single.hi) and single.verdict == "one problem gives no interval"
    with pytest.raises(ValueError, match="2 problems before, 1 after"):
        within_problem_difference([[0.0], [1.0]], [[1.0]])
    with pytest.raises(ValueError, match="one chain per problem"):
        within_problem_difference([[0.0], []], [[1.0], [1.0]])


def test_pair_by_key_keeps_shared_problems_in_one_order() -> None:
    assert pair_by_key({"b": 2, "a": 1, "x": 9}, {"a": 3, "b": 4, "y": 0}) == ([1, 2], [3, 4])


def test_probe_is_the_first_distinct_problems_the_steps_draw() -> None:
    draws = [i for s in range(4) for r in range(2) for i in step_problems(30, s, 2, r, 2, 7)]
    probe = probe_indices(30, 4, 2, 2, 7, cap=100)
    assert probe == list(dict.fromkeys(draws))
    assert probe_indices(30, 4, 2, 2, 7, cap=3) == probe[:3]
    assert probe_indices(30, 0, 2, 1, 7, cap=8) == [] and probe_indices(30, 4, 2, 1, 7, cap=0) == []
    assert len(probe_indices(3, 10, 2, 1, 0, cap=8)) == 3  # never more problems than exist
