"""A user's algorithm: fine-tune each agent on the best of its siblings (rejection sampling on the tree)."""

from __future__ import annotations

from comlrl.config.registry import register_algorithm
from comlrl.learn.advantages import AdvantageStats, completion_values
from comlrl.learn.algorithms import Algorithm, Unit


def best_units(roots, cfg, values):
    units, groups = [], 0
    for root in roots:
        for node in root.walk():
            for agent, row in enumerate(node.completions):
                groups += 1
                v = completion_values(node.joint, node.returns, agent, len(row))
                if max(v) > min(v):  # a group whose siblings tie teaches nothing
                    units.append(Unit((row[v.index(max(v))],)))
    return units, AdvantageStats(groups=groups, skipped=groups - len(units))


def nll_loss(batch):
    nll = -(batch.logps * batch.mask).sum() / batch.step.tokens
    return nll, {"best/nll_per_token": (float(nll.detach()) * batch.step.tokens, float(batch.mask.sum()))}


register_algorithm("best_sibling", Algorithm(best_units, nll_loss, metrics=("best/nll_per_token",)))
