"""Branching inside a completion (pure): `rollout.branch`, issue 39's fourth switch.

A last-turn completion (the trunk) is cut after its first surprising token: the first token, at least
`min_prefix` in, that the policy sampled with probability below exp(-surprisal). K more continuations are drawn
from that prefix, so the siblings share what the trunk wrote up to the choice the policy was unsure of and differ
from there on. Where to cut is a stopping rule: it reads the prefix alone (the kept tokens and their log-probs),
never what follows it. So the trunk's own continuation and the K branches are K + 1 independent draws from
pi(. | prefix), and two groups give an unbiased policy gradient (docs/algorithm.md, "Branching inside a
completion"):

* the prefix, trained on its value estimate (the mean of its K + 1 continuations' returns) against the node's
  other trunks (an unbranched trunk's value is its own return);
* each of the K + 1 continuations of a prefix, trained on its return against the other continuations of that
  prefix, weighted 1 / (K + 1) (together they are one sample of the suffix's gradient).

Pure: lists of numbers in, numbers out; the rollout (`comlrl.tree.rollout.draw_branches`) and the update's units
(`comlrl.learn.algorithms`) bind them to samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BranchShape:
    """`rollout.branch`: K continuations from the first surprising token of each last-turn completion."""

    samples: int  # K continuations drawn from each prefix
    surprisal: float  # -log p of the sampled token at which a completion is cut (nats)
    min_prefix: int = 1  # tokens the prefix keeps at least


@dataclass
class Branch:
    """K continuations of agent `agent`'s completion `trunk` (index in its node's row) from its first `prefix`
    tokens, each scored in the trunk's joint action with this agent's completion replaced by it."""

    agent: int
    trunk: int
    prefix: int
    samples: list[Any] = field(default_factory=list)  # the K continuations (their prompt ends with the prefix)
    rewards: list[float] = field(default_factory=list)  # one per continuation: its joint action's return
    # the K + 1 continuations' advantages (the trunk's own first), unweighted; None: they tie (no signal)
    advantages: list[float] | None = None


def branch_point(completion_ids: Sequence[int], logprobs: Sequence[float] | None, shape: BranchShape) -> int | None:
    """The prefix length to branch from: one past the first token at index >= min_prefix - 1 whose -log p is at
    least `shape.surprisal`, provided a token is left after it to draw again; None when no token qualifies or
    the engine gave no log-probs. It reads each token and its log-prob up to the cut only (a stopping rule)."""
    if logprobs is None:
        return None
    for i in range(max(0, shape.min_prefix - 1), len(completion_ids) - 1):
        if -logprobs[i] >= shape.surprisal:
            return i + 1
    return None


@dataclass(frozen=True)
class BranchAdvantages:
    """One agent's group at a node with branches: per trunk, the advantage of its prefix (the whole completion
    for an unbranched trunk), and per branched trunk the advantages of its K + 1 continuations (the trunk's own
    first, then its branches in order; the update weights each 1 / (K + 1)). None: no signal there."""

    prefix: list[float] | None
    continuations: dict[int, list[float] | None]


def trunk_values(values: Sequence[float], branch_returns: dict[int, Sequence[float]]) -> list[float]:
    """Each trunk's value estimate: the mean of its K + 1 continuations' returns where it branched, else its own."""
    return [(v + sum(branch_returns[g])) / (1 + len(branch_returns[g])) if g in branch_returns else float(v)
            for g, v in enumerate(values)]


def branch_advantages(values: Sequence[float], branch_returns: dict[int, Sequence[float]],
                      group_advantages: Any) -> BranchAdvantages:
    """The two groups of a node's agent with branches: `values[g]` is trunk g's return (its completion's value),
    `branch_returns[g]` the returns of its branches' joint actions; `group_advantages(values)` is the run's
    estimator and scaling for one sibling group (None when it carries no signal)."""
    prefix = group_advantages(trunk_values(values, branch_returns))
    continuations: dict[int, list[float] | None] = {}
    for g, more in branch_returns.items():
        continuations[g] = group_advantages([float(values[g]), *map(float, more)])
    return BranchAdvantages(prefix, continuations)
