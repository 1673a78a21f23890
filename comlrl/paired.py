"""Paired before/after statistics over problems: the measure every learning claim of a run is judged by.

An evaluation scores each problem on its own (greedy chain, k sampled chains at the training
temperature, always from the same seed), so "before" and "after" are two numbers per problem. Their
per-problem differences carry far less noise than two independent pass rates: problem difficulty cancels.
The interval is the paired Student-t interval over problems (mean difference +- t(0.975, n-1) x sd/sqrt n),
chosen over a bootstrap because it stays honest for the 8-problem probe of a short run, where a percentile
bootstrap is too narrow. Pure: no torch, no files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

METHOD = "paired t over problems"


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
    def verdict(self) -> str:
        """`improved` / `worse` when the interval excludes zero, else `within noise`."""
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


def pair_by_key(before: dict[str, float], after: dict[str, float]) -> tuple[list[float], list[float]]:
    """The scores of the problems present in both evaluations, in the same order (sorted keys)."""
    keys = sorted(before.keys() & after.keys())
    return [before[k] for k in keys], [after[k] for k in keys]
