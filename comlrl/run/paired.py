"""Paired before/after statistics over problems: the measure every learning claim of a run is judged by.

An evaluation scores each problem on its own (greedy chain, k sampled chains at the training
temperature, always from the same seed), so "before" and "after" are two numbers per problem. Their
per-problem differences carry far less noise than two independent pass rates: problem difficulty cancels.
The interval is the paired Student-t interval over problems (mean difference +- t(0.975, n-1) x sd/sqrt n),
chosen over a bootstrap because it stays honest for a handful of problems, where a percentile bootstrap is
too narrow.

The trained-on problems (the probe) are a different question: not "does training help on problems like
these" but "did the policy get better on these very problems". There the problems are fixed and only the
chains sampled for each are random, so the interval of the sampled figures comes from the spread of the
chains around their problem's mean (pooled over problems, `within_problem_difference`); with the few
problems a short run trains on, a t over problems could not show any change. Pure: no torch, no files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

METHOD = "paired t over problems"
METHOD_FIXED = "over the chains, the problems fixed"
# a sampled per-problem score -> the record field holding its value per chain
CHAINS = {"sampled_pass": "chain_passes", "sampled_reward": "chain_rewards"}


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"t_cdf needs df >= 1, got {df}")
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (bisection on `t_cdf`; exact to ~1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class PairedDiff:
    """Mean of a per-problem score before and after, and the 95% interval of the paired difference."""

    n: int
    before: float
    after: float
    delta: float
    lo: float
    hi: float

    @property
    def has_interval(self) -> bool:
        """False for one problem: a paired interval needs two."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def verdict(self) -> str:
        """`improved` / `worse` when the interval excludes zero, else `within noise` (one problem: none)."""
        if not self.has_interval:  # a paired t over one problem; chains with one sample each (problems fixed)
            return "one problem gives no interval" if self.n == 1 else "one chain per problem gives no interval"
        if self.lo > 0:
            return "improved"
        if self.hi < 0:
            return "worse"
        return "within noise"


def paired_difference(before: Sequence[float], after: Sequence[float], level: float = 0.95) -> PairedDiff:
    """Paired t interval of mean(after - before) over problems (index i is the same problem in both)."""
    if len(before) != len(after):
        raise ValueError(f"paired_difference: {len(before)} scores before, {len(after)} after")
    n = len(before)
    if n == 0:
        raise ValueError("paired_difference needs at least one problem")
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    delta = statistics.fmean(diffs)
    if n == 1:
        half = math.inf
    else:
        half = t_quantile(0.5 + level / 2, n - 1) * statistics.stdev(diffs) / math.sqrt(n)
    return PairedDiff(n, statistics.fmean(before), statistics.fmean(after), delta, delta - half, delta + half)


def within_problem_difference(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                              level: float = 0.95) -> PairedDiff:
    """Mean over problems of (after mean - before mean) of per-chain values, the problems held fixed.

    before[i] and after[i] are problem i's chain values. The chains' variance around their problem's mean is
    pooled over problems (per side), the standard error is sqrt(sum_i s2_b/k_bi + s2_a/k_ai) / P, and the
    quantile is Student's t with the pooled degrees of freedom. Treating before and after as independent is
    conservative: both sample from one seed, which correlates them positively.
    """
    if len(before) != len(after):
        raise ValueError(f"within_problem_difference: {len(before)} problems before, {len(after)} after")
    if not before:
        raise ValueError("within_problem_difference needs at least one problem")
    if any(not chains for chains in (*before, *after)):
        raise ValueError("within_problem_difference needs at least one chain per problem on each side")
    p = len(before)
    b_means = [statistics.fmean(c) for c in before]
    a_means = [statistics.fmean(c) for c in after]
    var, df = [], 0
    for side, means in ((before, b_means), (after, a_means)):
        dof = sum(len(c) - 1 for c in side)
        ss = sum((x - m) ** 2 for c, m in zip(side, means, strict=True) for x in c)
        var.append(ss / dof if dof else math.inf)
        df += dof
    delta = statistics.fmean(a - b for a, b in zip(a_means, b_means, strict=True))
    if math.inf in var or df < 1:
        half = math.inf
    else:
        se = math.sqrt(sum(var[0] / len(b) + var[1] / len(a) for b, a in zip(before, after, strict=True))) / p
        half = t_quantile(0.5 + level / 2, df) * se
    return PairedDiff(p, statistics.fmean(b_means), statistics.fmean(a_means), delta, delta - half, delta + half)


def pair_by_key(before: dict[str, float], after: dict[str, float]) -> tuple[list[float], list[float]]:
    """The scores of the problems present in both evaluations, in the same order (sorted keys)."""
    keys = sorted(before.keys() & after.keys())
    return [before[k] for k in keys], [after[k] for k in keys]


def record_difference(before: Mapping[str, Mapping], after: Mapping[str, Mapping],
                      value: Callable[[Mapping], float | None], field: str = "",
                      fixed: bool = False) -> PairedDiff | None:
    """Before/after of one per-problem score of two evaluations' records (keyed by problem).

    `fixed` (the trained-on probe) with a sampled `field` whose records hold their chains
    (`CHAINS`) uses `within_problem_difference`; otherwise the paired t over problems (one problem: the
    figures without an interval). None where nothing can be paired.
    """
    chains = CHAINS.get(field) if fixed else None
    keys = sorted(k for k in before.keys() & after.keys()
                  if value(before[k]) is not None and value(after[k]) is not None)
    if chains and keys and all(before[k].get(chains) and after[k].get(chains) for k in keys):
        return within_problem_difference([before[k][chains] for k in keys], [after[k][chains] for k in keys])
    if not keys:
        return None
    return paired_difference([value(before[k]) for k in keys], [value(after[k]) for k in keys])
