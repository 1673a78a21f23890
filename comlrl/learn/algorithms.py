"""The learning algorithms, each a choice of training signal and loss on the same tree rollout.

An `Algorithm` says what a step's trees become (`units`: completions with the numbers their loss reads)
and the loss of a micro-batch of them (`loss`); the update (`comlrl.learn.update.train_on_trees`) runs the
micro-batches, the backward passes and the optimizer step for all of them alike, under accelerate DDP or
DeepSpeed. `ALGORITHMS` is the one table (`algorithm.name`; `comlrl.config.registry.register_algorithm` adds
to it). The math lives in the pure modules: advantages (`comlrl.learn.advantages`), preference pairs
(`comlrl.learn.preference`), value targets (`comlrl.learn.critic`) and the losses (`comlrl.learn.loss`).

- `magrpo`: each sibling group's completions weighted by their group-relative advantage (policy gradient).
- `centralized`: MAGRPO for one policy that writes every role's part in one completion; the task splits
  it into the roles' parts for scoring and feedback (`comlrl.tasks.centralized`).
- `madpo`: pairs of sibling completions ranked by value, DPO per agent against the reference policy
  (the base with adapters off).
- `iac`: actor-critic, a value head per agent on its own view of the state; `maac`: one critic of the
  team's joint state. Advantage = value target - V(state); works with one sample per node (G = 1).
- `marlhf`: a learned joint reward, then MAGRPO on it (`comlrl.learn.marlhf`).

The interface (`Algorithm`, `Unit`, `MicroBatch`, `StepSize`) and the shared policy-gradient loss live in
`comlrl.learn.units`; they are importable from here too, where plugins have always found them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from comlrl.errors import require
from comlrl.learn.advantages import AdvantageStats, assign_advantages
from comlrl.learn.critic import completion_targets, lambda_returns, whiten
from comlrl.learn.marlhf import MarlhfConfig, marlhf_loss, marlhf_units
from comlrl.learn.preference import Pair, tree_pairs
from comlrl.learn.replay import PreferenceRounds
from comlrl.learn.subsample import train_subsample
from comlrl.learn.units import (
    Algorithm,
    LearnConfig,
    MetricSums,
    MicroBatch,
    StateValues,
    Unit,
    joint_mean,
    policy_gradient_loss,
    unit_starts,
)
from comlrl.tree.nodes import Node

if TYPE_CHECKING:
    import torch


@dataclass
class DpoConfig(PreferenceRounds):
    """madpo: which sibling completions pair up, who labels them, which earlier rounds' pairs are replayed
    (`PreferenceRounds`) and how strongly DPO pulls (docs/algorithm.md)."""

    beta: float = 0.1  # DPO's inverse temperature: the implicit reward is beta * log(pi / reference)
    pairs: str = "reward_gap"  # reward_gap (largest value gaps first) | all | random
    min_gap: float = 1e-6  # value gap (raw reward units) a pair needs
    offline_pairs: str | None = None  # a pairs JSONL (scripts/export.py --pairs): train on it, no rollout

    def check(self) -> None:
        self.check_rounds("algorithm.dpo")
        require(self.beta > 0, "algorithm.dpo.beta", self.beta, "a number > 0")
        require(self.min_gap > 0, "algorithm.dpo.min_gap", self.min_gap,
                "a number > 0 (equal values carry no preference)")
        require(self.offline_pairs is None or Path(self.offline_pairs).is_file(), "algorithm.dpo.offline_pairs",
                self.offline_pairs, "an existing pairs file (scripts/export.py --pairs)")


@dataclass
class CriticConfig:
    """iac / maac: the value heads' loss weight, learning rate and targets (docs/algorithm.md)."""

    value_coef: float = 0.5  # weight of the critic's squared error in the loss
    learning_rate: float | None = None  # of the value heads; null = magrpo.learning_rate
    gae_lambda: float = 1.0  # TD(lambda) targets across turns: 1 = backed-up returns, 0 = r + discount * V(next)
    # v: V(s), a head on the state (the prompt's end); q: Q(s, a), a head on the state after each agent's
    # action (its completion's end), V(s) = the mean Q of the actions sampled there (docs/algorithm.md)
    kind: str = "v"

    def check(self) -> None:
        require(self.kind in ("v", "q"), "algorithm.critic.kind", self.kind, "v (V(s)) or q (Q(s, a))")
        require(self.value_coef >= 0, "algorithm.critic.value_coef", self.value_coef, "a number >= 0")
        require(self.learning_rate is None or self.learning_rate > 0, "algorithm.critic.learning_rate",
                self.learning_rate, "a number > 0 or null (magrpo.learning_rate)")
        require(0.0 <= self.gae_lambda <= 1.0, "algorithm.critic.gae_lambda", self.gae_lambda, "a number in [0, 1]")


# ---- magrpo: group-relative policy gradient ------------------------------------------------------------

def _advantage_units(roots: Sequence[Node], cfg: LearnConfig, values: StateValues | None
                     ) -> tuple[list[Unit], AdvantageStats]:
    m = cfg.magrpo
    stats = assign_advantages(list(roots), m.advantage.baseline, m.advantage.scale, m.advantage.eps,
                              credit=m.advantage.credit, episodes=cfg.rollout.shape == "flat")
    nodes = [node for root in roots for node in root.walk()]
    groups = [(node.completions[a], adv) for node in nodes for a, adv in enumerate(node.advantages) if adv is not None]
    size = m.advantage.train_per_group
    if size is None:
        return [Unit((row[k],), (float(adv[k]),)) for row, adv in groups for k in range(len(adv))], stats
    # seeded per step and rank by the trainer (torch.manual_seed before the rollout): reproducible draws
    import torch

    rng = random.Random(torch.initial_seed())
    units = []
    for row, adv in groups:
        drawn = train_subsample(adv, size, rng)
        kept = {k for k, _ in drawn}
        left = tuple(max(1, len(row[k].completion_ids)) for k in range(len(adv)) if k not in kept)
        units += [Unit((row[k],), (float(a),), stands_for=left if i == 0 else ()) for i, (k, a) in enumerate(drawn)]
    return units, stats


# ---- madpo: DPO on sibling pairs -----------------------------------------------------------------------

def madpo_pairs(roots: Sequence[Node], cfg: LearnConfig) -> list[Pair]:
    """The step's DPO pairs labeled by the task: each node's and agent's siblings ranked by value
    (algorithm.dpo.pairs, pairs_per_node, min_gap)."""
    import torch

    m, d = cfg.magrpo, cfg.algorithm.dpo
    # seeded per step and rank by the trainer (torch.manual_seed before the rollout): reproducible draws
    rng = random.Random(torch.initial_seed()) if d.pairs == "random" else None
    return tree_pairs(roots, d.pairs, d.pairs_per_node, d.min_gap, credit=m.advantage.credit, rng=rng)


def pair_units(roots: Sequence[Node], pairs: Sequence[Pair]) -> tuple[list[Unit], AdvantageStats]:
    """One (chosen, rejected) unit per pair, and the node-agent groups with and without a pair."""
    groups = sum(len(node.completions) for root in roots for node in root.walk())
    with_pairs = len({(id(p.node), p.agent) for p in pairs})
    units = [Unit((p.node.completions[p.agent][p.winner], p.node.completions[p.agent][p.loser])) for p in pairs]
    return units, AdvantageStats(groups=groups, skipped=groups - with_pairs)


def _pair_units(roots: Sequence[Node], cfg: LearnConfig, values: StateValues | None
                ) -> tuple[list[Unit], AdvantageStats]:
    return pair_units(roots, madpo_pairs(roots, cfg))


def _dpo_loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
    from comlrl.learn.loss import dpo_loss, k3_kl, sequence_logps

    assert b.ref_logps is not None
    seq, ref = sequence_logps(b.logps, b.mask), sequence_logps(b.ref_logps, b.mask)
    losses, margin = dpo_loss(seq[0::2], seq[1::2], ref[0::2], ref[1::2], b.cfg.algorithm.dpo.beta)
    loss = losses.sum() / b.step.units
    kl_coef = b.cfg.magrpo.loss.kl_coef
    if kl_coef > 0:
        loss = loss + kl_coef * k3_kl(b.logps, b.ref_logps, b.mask).sum() / b.step.tokens
    beta = b.cfg.algorithm.dpo.beta
    n = float(len(b.units))
    chosen = beta * (seq[0::2] - ref[0::2]).detach()
    rejected = beta * (seq[1::2] - ref[1::2]).detach()
    return loss, {"dpo/accuracy": (float((margin > 0).sum()), n), "dpo/margin": (float(margin.detach().sum()), n),
                  "dpo/chosen_reward": (float(chosen.sum()), n), "dpo/rejected_reward": (float(rejected.sum()), n),
                  "dpo/loss": (float(losses.detach().sum()), n)}


# ---- iac / maac: actor-critic with value heads -----------------------------------------------------------

def _critic_units(joint: bool) -> Callable[..., tuple[list[Unit], AdvantageStats]]:
    """Units of `iac` (each agent's own critic) or `maac` (one critic of the team's state): one unit per
    node, holding every agent's completions there with their advantages (target - V(state), V before the
    update) and value targets (TD(lambda) over the tree, `comlrl.learn.critic`)."""

    def units(roots: Sequence[Node], cfg: LearnConfig, values: StateValues | None
              ) -> tuple[list[Unit], AdvantageStats]:
        assert values is not None, "an actor-critic algorithm needs the critic's state values"
        m, c = cfg.magrpo, cfg.algorithm.critic
        nodes = [n for root in roots for n in root.walk()]
        heads = values(nodes)

        def state_value(node: Node, agent: int) -> float:
            return sum(heads[node.id]) / len(heads[node.id]) if joint else heads[node.id][agent]

        adv: dict[tuple[str, int], list[float]] = {}
        tgt: dict[tuple[str, int], list[float]] = {}
        for agent in range(m.num_agents):
            for root in roots:
                targets = lambda_returns(root, lambda n, a=agent: state_value(n, a), m.discount, c.gae_lambda)
                for node in root.walk():
                    t = completion_targets(node, targets[node.id], agent, m.advantage.credit)
                    tgt[node.id, agent] = t
                    adv[node.id, agent] = [x - state_value(node, agent) for x in t]
        if m.advantage.scale == "group":  # whitened over the step, per agent (no sibling group with G = 1)
            for agent in range(m.num_agents):
                keys = [k for k in adv if k[1] == agent]
                flat = whiten([x for k in keys for x in adv[k]], m.advantage.eps)
                for k in keys:
                    adv[k], flat = flat[:len(adv[k])], flat[len(adv[k]):]
        out = [Unit(tuple(s for a in range(m.num_agents) for s in node.completions[a]),
                    tuple(x for a in range(m.num_agents) for x in adv[node.id, a]),
                    tuple(x for a in range(m.num_agents) for x in tgt[node.id, a])) for node in nodes]
        return out, AdvantageStats(groups=len(nodes) * m.num_agents)

    return units


def _actor_critic_loss(joint: bool) -> Callable[[MicroBatch], tuple[torch.Tensor, MetricSums]]:
    """The policy-gradient loss on the critic's advantages plus value_coef * the critic's squared error
    against each sample's target; `maac`'s value of a node is the mean of its agents' head outputs (one
    linear head over the concatenated states, scaled by 1/N so that under Adam it moves as fast as one
    `iac` head: a sum moved N times as fast and overshot)."""

    def loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
        import torch

        assert b.values is not None
        policy, _ = policy_gradient_loss(b)
        v = b.values
        if joint and b.cfg.algorithm.critic.kind == "q":  # per joint action: the mean of its agents' Q
            v = torch.cat([joint_mean(v[start:start + len(u.samples)], u) for u, start in
                           zip(b.units, unit_starts(b.units), strict=True)])
        elif joint:  # per unit (node): the mean over agents of one sample's head output each
            parts, start = [], 0
            for u in b.units:
                firsts = {}
                for i, s in enumerate(u.samples):
                    firsts.setdefault(s.agent, start + i)
                node_value = v[list(firsts.values())].mean()
                parts.append(node_value.expand(len(u.samples)))
                start += len(u.samples)
            v = torch.cat(parts)
        t = torch.tensor([x for u in b.units for x in u.targets], dtype=v.dtype, device=v.device)
        err = (v - t) ** 2
        value_loss = b.cfg.algorithm.critic.value_coef * err.sum() / b.step.sequences
        n, vd = float(len(t)), v.detach()
        return policy + value_loss, {
            "value/mse": (float(err.detach().sum()), n), "value/mean": (float(vd.sum()), n),
            "value/target_mean": (float(t.sum()), n), "value/target_sq": (float((t * t).sum()), n),
            "value/residual_mean": (float((t - vd).sum()), n)}

    return loss


def explained_variance(means: dict[str, float]) -> dict[str, float]:
    """1 - Var(target - value) / Var(target) over the step's samples, from the step's means (1: the
    critic predicts every target; 0: no better than their mean; NaN when the targets do not vary)."""
    var_t = means["value/target_sq"] - means["value/target_mean"] ** 2
    var_r = means["value/mse"] - means["value/residual_mean"] ** 2
    return {"value/explained_variance": 1.0 - var_r / var_t if var_t > 1e-12 else float("nan")}


CRITIC_METRICS = ("value/mse", "value/mean", "value/target_mean", "value/target_sq", "value/residual_mean")


# the one table of algorithms (`comlrl.config.registry.register_algorithm` adds to it), in the config's order
ALGORITHMS: dict[str, Algorithm] = {
    "magrpo": Algorithm(_advantage_units, policy_gradient_loss),
    "centralized": Algorithm(_advantage_units, policy_gradient_loss, centralized=True),
    "madpo": Algorithm(_pair_units, _dpo_loss, needs_reference=True, on_policy=False, preference="agent",
                       metrics=("dpo/accuracy", "dpo/margin", "dpo/chosen_reward", "dpo/rejected_reward", "dpo/loss"),
                       options=("dpo", DpoConfig)),
    "iac": Algorithm(_critic_units(joint=False), _actor_critic_loss(joint=False), metrics=CRITIC_METRICS,
                     derived=explained_variance, critic=True, min_generations=1, options=("critic", CriticConfig)),
    "maac": Algorithm(_critic_units(joint=True), _actor_critic_loss(joint=True), metrics=CRITIC_METRICS,
                      derived=explained_variance, critic=True, min_generations=1, options=("critic", CriticConfig)),
    "marlhf": Algorithm(marlhf_units, marlhf_loss, critic=True, per_action_values=True, preference="joint",
                        metrics=("marlhf/pair_accuracy", "marlhf/bt_loss", "marlhf/learned_reward"),
                        options=("marlhf", MarlhfConfig)),
}
