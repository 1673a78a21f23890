"""Training a share of each sibling group, unbiased (pure): `magrpo.advantage.train_per_group`.

On this stack the update, not the sampling, sets a step's cost (docs/results.md, issue 39): 0.8-2 s of forward
and backward per trained completion, 70-75% of a step. A group's policy-gradient term is
sum_i A_i grad log pi(y_i), and a completion whose advantage is near 0 adds little to it. So a group trains m of
its completions, each drawn with inclusion probability p_i proportional to |A_i| (capped at 1: probability
proportional to size), and a drawn completion's advantage is divided by p_i (Horvitz-Thompson). The expected
term is the whole group's, for any m: sum_i P(i drawn) (A_i / p_i) g_i = sum_i A_i g_i. A completion of
advantage 0 is never drawn, and leaving it out changes nothing. Madow's systematic sampling draws exactly m
with exactly these probabilities (docs/algorithm.md, "Training a share of each group").
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from comlrl.tree.budget import water_fill


def inclusion_probabilities(advantages: Sequence[float], size: int) -> list[float]:
    """p_i = min(1, c |A_i|), with c such that sum_i p_i = min(size, the advantages that are not 0)."""
    target = water_fill({i: 1 for i in range(len(advantages))}, {i: abs(a) for i, a in enumerate(advantages)}, size)
    return [min(1.0, target[i]) for i in range(len(advantages))]


def systematic_draw(probs: Sequence[float], start: float) -> list[int]:
    """Madow's systematic sample: the indices i whose interval [C_(i-1), C_i) of the running sum C of `probs`
    holds a point start + j (j = 0, 1, ...). With `start` uniform in [0, 1), each i is drawn with probability
    probs[i] (each <= 1), and exactly round(sum(probs)) are drawn."""
    if not 0.0 <= start < 1.0:
        raise ValueError(f"start={start}; expected a number in [0, 1)")
    total = round(sum(probs))
    out, low = [], 0.0
    for i, p in enumerate(probs):
        high = low + p
        # the next point at or above `low`: start + ceil(low - start); drawn when it lies below `high`
        point = start + max(0, math.ceil(low - start - 1e-12))
        if p > 0 and point < high - 1e-12 and len(out) < total:
            out.append(i)
        low = high
    return out


def train_subsample(advantages: Sequence[float], size: int, rng: random.Random) -> list[tuple[int, float]]:
    """(index, A_i / p_i) of the completions one group trains: `size` of them (fewer when fewer advantages are
    not 0), drawn with `inclusion_probabilities` in an order shuffled by `rng` (so which completions are drawn
    together is random too), sorted by index."""
    probs = inclusion_probabilities(advantages, size)
    order = list(range(len(advantages)))
    rng.shuffle(order)
    drawn = systematic_draw([probs[i] for i in order], rng.random())
    return sorted((order[j], advantages[order[j]] / probs[order[j]]) for j in drawn)
