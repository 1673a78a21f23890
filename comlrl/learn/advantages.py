"""Per-node, per-agent credit assignment and normalisation (pure functions).

Each agent's G completions at a node form one sibling group. A completion's value is the mean return
of the joint actions that contain it: in `align` mode that is its own joint action's return; in `cross`
mode the mean over the G^(N-1) joint actions it appears in. Using the mean (not the sum) keeps the
advantage scale the same in both modes; `credit="sum"` is CoMLRL's choice, for reproducing it.
Baseline and scaling are independent switches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from comlrl.tree.contracts import FailedEpisode
from comlrl.tree.nodes import Node, tied

SCALES = ("group", "none")
CREDITS = ("mean", "sum")


def spread(values: Sequence[float]) -> float:
    """Population standard deviation of a sibling group's values: 0 for a tied group."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


@dataclass(frozen=True)
class Estimator:
    """How a sibling group's values become advantages before scaling (`magrpo.advantage.baseline`).

    `centre(values)` gives one number per completion; `centres` says it subtracts a baseline, so a group
    whose values all tie carries no signal. `needs` names inputs beyond the group's values that the
    estimator reads (e.g. "values": a critic's state values); every built-in needs none, and the trainer
    refuses one whose needs it does not provide."""

    centre: Callable[[Sequence[float]], list[float]]
    centres: bool = True
    needs: tuple[str, ...] = ()


def _mean(values: Sequence[float]) -> list[float]:
    mean = sum(values) / len(values)
    return [v - mean for v in values]


def _max(values: Sequence[float]) -> list[float]:  # CoMLRL's "max": every completion but the best is pushed down
    best = max(values)
    return [v - best for v in values]


def _loo(values: Sequence[float]) -> list[float]:  # leave-one-out: the baseline of k is the mean of the other n-1
    total, n = sum(values), len(values)
    return [v - (total - v) / (n - 1) for v in values]


# the one table of estimators (`comlrl.config.registry.register_estimator` adds to it), in the config's order
ESTIMATORS: dict[str, Estimator] = {
    "mean": Estimator(_mean), "loo": Estimator(_loo), "max": Estimator(_max),
    "none": Estimator(list, centres=False),  # REINFORCE on raw values
}


def completion_values(
    joint: Sequence[tuple[int, ...]], returns: Sequence[float], agent: int, num_generations: int,
    credit: str = "mean",
) -> list[float]:
    """Mean (or, `credit="sum"`, sum) of the returns of the joint actions containing each of `agent`'s
    completions."""
    if credit not in CREDITS:
        raise ValueError(f"credit={credit!r}; expected one of {CREDITS}")
    sums = [0.0] * num_generations
    counts = [0] * num_generations
    for action, ret in zip(joint, returns, strict=True):
        k = action[agent]
        sums[k] += ret
        counts[k] += 1
    if 0 in counts:
        raise ValueError(f"agent {agent} has a completion that appears in no joint action: counts {counts}")
    if credit == "sum":
        return sums
    return [s / c for s, c in zip(sums, counts, strict=True)]


def group_advantages(
    values: Sequence[float], baseline: str = "mean", scale: str = "group", eps: float = 1e-6,
) -> list[float] | None:
    """Advantages of one sibling group, or None when the group carries no signal: all values equal with
    a baseline (every advantage would be 0) or with group scaling (no spread to scale by). Without a
    baseline or scaling (REINFORCE on raw returns) equal non-zero values still push their completions."""
    n = len(values)
    if n < 2:
        raise ValueError("a sibling group needs at least 2 completions")
    if baseline not in ESTIMATORS:
        raise ValueError(f"baseline={baseline!r}; expected one of {tuple(ESTIMATORS)}")
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}; expected one of {SCALES}")
    estimator = ESTIMATORS[baseline]
    if tied(values) and (estimator.centres or scale == "group" or not any(values)):
        return None
    centred = estimator.centre(values)
    if scale == "group":
        std = spread(values)
        centred = [c / (std + eps) for c in centred]
    return centred


def kept_advantages(
    joint: Sequence[tuple[int, ...]], returns: Sequence[float], failed: Sequence[bool], agent: int,
    num_generations: int, credit: str = "mean", baseline: str = "mean", scale: str = "group", eps: float = 1e-6,
) -> list[float] | None:
    """`agent`'s group without the joint actions whose episode failed: the values come from the other joint
    actions only, a completion found in failed ones alone gets 0 (it trains nothing, and moves no baseline); None
    when fewer than 2 completions remain or they carry no signal."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for action, ret, bad in zip(joint, returns, failed, strict=True):
        if not bad:
            k = action[agent]
            sums[k], counts[k] = sums.get(k, 0.0) + ret, counts.get(k, 0) + 1
    kept = sorted(sums)
    if len(kept) < 2:
        return None
    values = [sums[k] if credit == "sum" else sums[k] / counts[k] for k in kept]
    adv = group_advantages(values, baseline, scale, eps)
    if adv is None:
        return None
    by = dict(zip(kept, adv, strict=True))
    return [by.get(k, 0.0) for k in range(num_generations)]


def failed_actions(node: Node) -> list[bool]:
    """Per joint action of `node`, whether its reward says its episode failed (`FailedEpisode`)."""
    return [isinstance(d, FailedEpisode) and d.failed for d in node.details]


@dataclass
class AdvantageStats:
    groups: int = 0
    skipped: int = 0  # zero-variance groups: no loss


def assign_advantages(
    roots: Sequence[Node], baseline: str, scale: str, eps: float, credit: str = "mean", episodes: bool = False,
) -> AdvantageStats:
    """Fill `node.advantages[agent]` for every node; returns must be backed up first. Agents and samples
    are counted on each node (a turn may sample fewer: the evaluation's chains). `episodes` (flat rollouts: one
    sample per agent after the root) gives a later node's one sample its episode's advantage: that of the
    parent's completion its path went through, down to the root's group (trajectory-level credit)."""
    stats = AdvantageStats()
    for root in roots:
        for node in root.walk():  # parents before children
            node.advantages = []
            parent, j = node.parent, node.parent_action
            if episodes and parent is not None and j is not None and all(len(r) == 1 for r in node.completions):
                node.advantages = [None if parent.advantages[a] is None else [parent.advantages[a][parent.joint[j][a]]]
                                   for a in range(len(node.completions))]
                continue
            failed = failed_actions(node)
            for agent, row in enumerate(node.completions):
                if any(failed):  # the group trains without the episodes that failed
                    adv = kept_advantages(node.joint, node.returns, failed, agent, len(row), credit, baseline, scale,
                                          eps)
                else:
                    values = completion_values(node.joint, node.returns, agent, len(row), credit)
                    adv = group_advantages(values, baseline, scale, eps)
                stats.groups += 1
                stats.skipped += adv is None
                node.advantages.append(adv)
    return stats
