"""Value targets and advantages of the actor-critic algorithms on the turn tree (pure functions).

A critic predicts the value V(s) of a state: a node's prompt, as one agent sees it (`iac`: one value head
per agent) or as the team sees it (`maac`: one value head over every agent's view). Its targets come
from the tree's backed-up returns, as TD(lambda) returns across turns:

    G_j = r_j                                                           (j has no child node)
    G_j = r_j + discount * ((1 - lambda) * V(child_j) + lambda * mean_k G_k)   (over the child's joint actions)

With lambda = 1 this is the backed-up return of `comlrl.tree.nodes.backup_returns` (Monte Carlo, the critic
is only a baseline); with lambda = 0 the child contributes its value alone (TD(0)); between the two it is
GAE's target on the tree, where the next state's "future" is the mean over the child's joint actions.
A completion's target is the mean target of the joint actions containing it (as its value is in
`comlrl.learn.advantages.completion_values`), and its advantage is target - V(state), the state's value taken
before the update.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from comlrl.learn.advantages import completion_values
from comlrl.tree.nodes import Node


def lambda_returns(node: Node, value_of: Callable[[Node], float], discount: float,
                   lam: float) -> dict[str, list[float]]:
    """TD(lambda) target of every joint action of `node` and its descendants, keyed by node id (see module)."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    out: dict[str, list[float]] = {}

    def visit(n: Node) -> list[float]:
        targets = []
        for j, reward in enumerate(n.rewards):
            child = n.children.get(j)
            if child is None:
                targets.append(float(reward))
                continue
            below = visit(child)
            future = (1.0 - lam) * value_of(child) + lam * sum(below) / len(below)
            targets.append(float(reward) + discount * future)
        out[n.id] = targets
        return targets

    visit(node)
    return out


def completion_targets(node: Node, targets: Sequence[float], agent: int, credit: str = "mean") -> list[float]:
    """Each of `agent`'s completions at `node`: the mean (or sum) target of the joint actions containing it."""
    return completion_values(node.joint, list(targets), agent, len(node.completions[agent]), credit)


def whiten(values: Sequence[float], eps: float = 1e-6) -> list[float]:
    """(x - mean) / (std + eps) over a batch; one value (no spread to scale by) is only centred to 0."""
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return [(v - mean) / (std + eps) for v in values]
