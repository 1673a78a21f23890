"""Splitting a sample budget across groups (pure): proportional to a weight, capped, in whole samples.

`water_fill` is the one proportional split of the project: `allocate` rounds it to whole samples for the
preference rounds' replay quota (comlrl/learn/replay.py); the trained subsample's inclusion probabilities
(comlrl/learn/subsample.py) are it, unrounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

K = TypeVar("K", int, str)


def water_fill(caps: Mapping[K, int], weights: Mapping[K, float], size: float) -> dict[K, float]:
    """min(size, the caps of every key of positive weight) split in proportion to weight x cap, no key above its
    cap: a capped key's excess goes to the others (water-filling). Real-valued; keys of zero weight or cap get 0."""
    keys = sorted(k for k in caps if caps[k] > 0 and weights.get(k, 0.0) > 0)
    target = {k: 0.0 for k in caps}
    free, budget = list(keys), float(min(max(0.0, size), sum(caps[k] for k in keys)))
    while free and budget > 1e-12:
        mass = sum(weights[k] * caps[k] for k in free)
        share = {k: budget * weights[k] * caps[k] / mass for k in free}
        full = [k for k in free if target[k] + share[k] >= caps[k] - 1e-12]
        if not full:
            for k in free:
                target[k] += share[k]
            break
        for k in full:
            budget -= caps[k] - target[k]
            target[k] = float(caps[k])
            free.remove(k)
    return target


def allocate(caps: Mapping[K, int], weights: Mapping[K, float], size: int, newer_first: bool = True) -> dict[K, int]:
    """`water_fill`'s split rounded to whole units by largest remainder (ties: the larger key first with
    `newer_first`, else the smaller). Keys given 0 are left out."""
    keys = sorted(k for k in caps if caps[k] > 0 and weights.get(k, 0.0) > 0)
    left = min(max(0, size), sum(caps[k] for k in keys))
    target = water_fill(caps, weights, left)
    quota = {k: min(caps[k], math.floor(target[k] + 1e-9)) for k in keys}
    order = sorted(list(reversed(keys)) if newer_first else keys, key=lambda k: -(target[k] - quota[k]))  # stable
    for k in order[:left - sum(quota.values())]:
        quota[k] += 1
    return {k: q for k, q in quota.items() if q}
