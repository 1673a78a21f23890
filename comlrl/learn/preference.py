"""Preference pairs from the turn tree (pure): sibling completions of a node, ranked by their value.

At every node each agent sampled G completions, and each completion has a value (the mean return of the
joint actions that contain it, `comlrl.learn.advantages.completion_values`; in `align` mode its own joint
action's return). Two siblings whose values differ by at least `min_gap` are a ready-made preference
pair: the same prompt, the better completion chosen. `select_pairs` picks which of a node's pairs train:

- `reward_gap`: the pairs with the largest value gaps first (ties in gap: lower indices first);
- `all`: every pair (winner, loser) in index order;
- `random`: a uniform sample, from the caller's seeded `random.Random`.

`limit` caps the pairs per node and agent (None: no cap). A completion may sit in several pairs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from comlrl.learn.advantages import completion_values
from comlrl.tree.nodes import Node

SELECTIONS = ("reward_gap", "all", "random")


@dataclass(frozen=True)
class Pair:
    """Agent `agent`'s completion `winner` preferred over `loser` at `node` (values differ by `gap` > 0)."""

    node: Node
    agent: int
    winner: int
    loser: int
    gap: float


def candidate_pairs(values: Sequence[float], min_gap: float) -> list[tuple[int, int, float]]:
    """(winner, loser, gap) for every ordered pair whose values differ by at least `min_gap` (> 0), in
    index order of the winner, then the loser."""
    if min_gap <= 0:
        raise ValueError(f"min_gap must be > 0 (equal values carry no preference), got {min_gap}")
    return [(w, lo, values[w] - values[lo]) for w in range(len(values)) for lo in range(len(values))
            if values[w] - values[lo] >= min_gap]


def select_pairs(values: Sequence[float], how: str, limit: int | None, min_gap: float,
                 rng: random.Random | None = None) -> list[tuple[int, int, float]]:
    """The (winner, loser, gap) pairs of one sibling group that train, chosen by `how` (see the module)."""
    if how not in SELECTIONS:
        raise ValueError(f"pair selection {how!r}; expected one of {SELECTIONS}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    pairs = candidate_pairs(values, min_gap)
    if how == "reward_gap":
        pairs = sorted(pairs, key=lambda p: -p[2])  # stable: equal gaps keep index order
    elif how == "random":
        if rng is None:
            raise ValueError("random pair selection needs a seeded random.Random")
        pairs = rng.sample(pairs, len(pairs))
    return pairs if limit is None else pairs[:limit]


def tree_pairs(roots: Sequence[Node], how: str, limit: int | None, min_gap: float, credit: str = "mean",
               rng: random.Random | None = None) -> list[Pair]:
    """Every node's selected pairs, per agent, over completion values (returns must be backed up). Agents
    and samples are counted on each node (a turn may sample fewer)."""
    out = []
    for root in roots:
        for node in root.walk():
            for agent, row in enumerate(node.completions):
                values = completion_values(node.joint, node.returns, agent, len(row), credit)
                out.extend(Pair(node, agent, w, lo, gap)
                           for w, lo, gap in select_pairs(values, how, limit, min_gap, rng))
    return out
