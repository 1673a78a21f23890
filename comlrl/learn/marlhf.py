"""marlhf: a learned joint reward (reward heads at each agent's completion end, Bradley-Terry on a node's joint
actions paired by task return), and MAGRPO on it, optionally mixed with the task's reward (docs/algorithm.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from comlrl.errors import require
from comlrl.learn.advantages import AdvantageStats
from comlrl.learn.replay import PreferenceRounds
from comlrl.learn.units import (
    LearnConfig,
    MetricSums,
    MicroBatch,
    StateValues,
    Unit,
    joint_mean,
    joint_positions,
    policy_gradient_loss,
    unit_starts,
)
from comlrl.tree.nodes import Node

if TYPE_CHECKING:
    import torch


@dataclass
class MarlhfConfig(PreferenceRounds):
    """marlhf: the reward heads' preference loss, who labels their pairs and which earlier rounds' pairs are
    replayed (`PreferenceRounds`), and how the policy's reward mixes the learned one with the task's
    (docs/algorithm.md)."""

    rm_coef: float = 1.0  # weight of the reward heads' Bradley-Terry loss beside the policy's
    task_weight: float = 0.0  # the policy's reward: task_weight * task + (1 - task_weight) * learned
    min_gap: float = 1e-6  # task-return gap (raw reward units) a pair needs
    # a pairs file (comlrl-export --pairs, or a run's pairs.jsonl) the reward heads learn from instead of the
    # tree's siblings: one seeded pass over it in training.steps steps; the policy still trains on the rollout
    pairs_file: str | None = None

    def check(self) -> None:
        self.check_rounds("algorithm.marlhf")
        require(self.pairs_file is None or Path(self.pairs_file).is_file(), "algorithm.marlhf.pairs_file",
                self.pairs_file, "an existing pairs file (comlrl-export --pairs, or a run's pairs.jsonl)")
        require(self.rm_coef > 0, "algorithm.marlhf.rm_coef", self.rm_coef, "a number > 0")
        require(0.0 <= self.task_weight <= 1.0, "algorithm.marlhf.task_weight", self.task_weight, "a number in [0, 1]")
        require(self.min_gap > 0, "algorithm.marlhf.min_gap", self.min_gap, "a number > 0")


def joint_rewards(heads: Sequence[Sequence[float]], joint: Sequence[tuple[int, ...]]) -> list[float]:
    """The learned reward of each joint action: the mean of its agents' heads at their completions' ends
    (one linear head over the joint state and action, scaled by 1/N)."""
    return [sum(heads[a][k] for a, k in enumerate(action)) / len(action) for action in joint]


def mixed_returns(node: Node, reward_of: Callable[[Node], list[float]], discount: float) -> dict[str, list[float]]:
    """Backed-up returns of `node`'s tree under other rewards (`reward_of(node)`, one per joint action)."""
    out: dict[str, list[float]] = {}

    def visit(n: Node) -> list[float]:
        rets = []
        for j, r in enumerate(reward_of(n)):
            child = n.children.get(j)
            below = visit(child) if child is not None else None
            rets.append(float(r) + (discount * sum(below) / len(below) if below else 0.0))
        out[n.id] = rets
        return rets

    visit(node)
    return out


def marlhf_units(roots: Sequence[Node], cfg: LearnConfig, values: StateValues | None
                  ) -> tuple[list[Unit], AdvantageStats]:
    """One unit per node: its completions (agent-major) with MAGRPO advantages of the mixed reward, and the
    node's preference pairs of joint actions by task return (largest gaps first), which the reward heads
    learn from. The learned reward is read before the update."""
    from comlrl.learn.advantages import completion_values, group_advantages
    from comlrl.learn.preference import select_pairs

    assert values is not None, "marlhf needs the reward heads' outputs"
    m, h = cfg.magrpo, cfg.algorithm.marlhf
    nodes = [n for root in roots for n in root.walk()]
    heads = values(nodes)
    learned = {n.id: joint_rewards(heads[n.id], n.joint) for n in nodes}
    w = h.task_weight
    returns: dict[str, list[float]] = {}
    for root in roots:
        returns.update(mixed_returns(root, lambda n: [w * t + (1 - w) * r for t, r in
                                                      zip(n.rewards, learned[n.id], strict=True)], m.discount))
    stats, units = AdvantageStats(), []
    for node in nodes:
        advantages: list[float] = []
        for agent, row in enumerate(node.completions):
            adv = group_advantages(completion_values(node.joint, returns[node.id], agent, len(row), m.advantage.credit),
                                   m.advantage.baseline, m.advantage.scale, m.advantage.eps)
            stats.groups += 1
            stats.skipped += adv is None
            advantages.extend(adv if adv is not None else [0.0] * len(row))
        pairs = tuple((wi, lo) for wi, lo, _ in select_pairs(node.returns, "reward_gap", h.pairs_per_node, h.min_gap))
        units.append(Unit(tuple(s for row in node.completions for s in row), tuple(advantages), pairs=pairs))
    return units, stats


def marlhf_loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
    """The policy gradient on the mixed reward's advantages plus rm_coef * the Bradley-Terry loss of each
    node's pairs, -log sigmoid(r(preferred) - r(other)), averaged over the step's units. Pair accuracy is
    read before this update's step on the pairs the heads have not trained on (held out: the step's own, or a
    pairs file's in its one pass), not on replayed ones (`Unit.seen`). A unit without advantages (a replayed or
    a file's pair, comlrl.run.rounds) trains the heads only."""
    import torch
    import torch.nn.functional as F

    assert b.values is not None
    policy, _ = policy_gradient_loss(b)
    bt, correct, n_pairs, learned = b.values.new_zeros(()), 0.0, 0.0, []
    for u, start in zip(b.units, unit_starts(b.units), strict=True):
        per_joint = joint_mean(b.values[start:start + len(u.samples)], u)  # each sample's joint action's reward
        first: dict[int, int] = {}
        for i, g in enumerate(joint_positions(u)):
            first.setdefault(g, i)
        r = torch.stack([per_joint[first[g]] for g in sorted(first)])  # one per joint action (align)
        if u.advantages:  # this step's node (the learned reward of its joint actions)
            learned.append(r.detach())
        for wi, lo in u.pairs:
            margin = r[wi] - r[lo]
            bt = bt - F.logsigmoid(margin)
            if not u.seen:
                correct += float(margin.detach() > 0)
                n_pairs += 1
    loss = policy + b.cfg.algorithm.marlhf.rm_coef * bt / b.step.units
    rewards = torch.cat(learned) if learned else b.values.new_zeros(0)
    every_pair = float(sum(len(u.pairs) for u in b.units))
    return loss, {"marlhf/pair_accuracy": (correct, n_pairs), "marlhf/bt_loss": (float(bt.detach()), every_pair),
                  "marlhf/learned_reward": (float(rewards.sum()), float(rewards.numel()))}
