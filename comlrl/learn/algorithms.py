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
from comlrl.learn.preference import tree_pairs
from comlrl.tree.nodes import Node

if TYPE_CHECKING:
    import torch

    from comlrl.config.schema import RunConfig
    from comlrl.policy.sample import Sample


@dataclass(frozen=True)
class Unit:
    """What one term of the loss reads: its completions and numbers (which ones, the algorithm says)."""

    samples: tuple[Sample, ...]  # one completion, a (chosen, rejected) pair, or a node's completions
    advantages: tuple[float, ...] = ()  # per sample, its advantage (policy gradient)
    targets: tuple[float, ...] = ()  # per sample, the value target of its state (actor-critic)
    pairs: tuple[tuple[int, int], ...] = ()  # (preferred, other) joint actions of a node's samples (marlhf)


@dataclass(frozen=True)
class StepSize:
    """What a whole step divides by, so micro-batch losses add up to the step's loss."""

    tokens: float  # completion tokens of every sample in the step (>= 1)
    sequences: float  # samples in the step (>= 1)
    units: float  # units in the step (>= 1)
    policy: float  # the policy-gradient normaliser of magrpo.loss.aggregation


@dataclass
class MicroBatch:
    """One micro-batch's inputs to an algorithm's loss; tensor rows follow `samples` (units in order)."""

    cfg: RunConfig
    units: list[Unit]
    logps: torch.Tensor  # [S, L] log-probs of the completion tokens under the policy
    mask: torch.Tensor  # [S, L] 1 on completion tokens
    step: StepSize
    ref_logps: torch.Tensor | None = None  # under the reference policy (needs_reference or magrpo.loss.kl_coef)
    old_logps: torch.Tensor | None = None  # before the step's first epoch (PPO ratio)
    is_weights: torch.Tensor | None = None  # truncated importance weights against the rollout engine
    values: torch.Tensor | None = None  # [S] each sample's value head output at its prompt's end (critic)

    @property
    def samples(self) -> list[Sample]:
        return [s for u in self.units for s in u.samples]


# a loss's metric sums: name -> (sum, count); the step logs sum / count per name (over micro-batches and ranks)
MetricSums = dict[str, tuple[float, float]]
# the heads' outputs before the update: node id -> per agent, its state's value (a critic), or every
# completion's head output when the algorithm asks for them (`per_action_values`: [agent][k])
StateValues = Callable[[list[Node]], dict[str, list]]


@dataclass(frozen=True)
class Algorithm:
    """A training signal and a loss on the tree rollout.

    `units(roots, cfg, values)` turns a step's trees (returns backed up) into loss units and the count of
    sibling groups with and without a signal (`values`: the critic's state values before the update, when
    `critic`); `loss(batch)` is one micro-batch's share of the step's loss and its metric sums (names
    declared in `metrics`, so every rank reports the same ones); `derived(means)` adds metrics computed
    from the step's means. `needs_reference`: the loss reads the reference policy's log-probs;
    `on_policy`: PPO clipping and importance weights against the rollout engine apply (a preference loss
    has no ratio); `critic`: the agents carry value heads (`AgentsModule.attach_value_heads`);
    `centralized`: the task's roles are written by one policy in one completion and split for scoring."""

    units: Callable[[Sequence[Node], RunConfig, StateValues | None], tuple[list[Unit], AdvantageStats]]
    loss: Callable[[MicroBatch], tuple[torch.Tensor, MetricSums]]
    metrics: tuple[str, ...] = ()
    derived: Callable[[dict[str, float]], dict[str, float]] | None = None
    needs_reference: bool = False
    on_policy: bool = True
    critic: bool = False
    centralized: bool = False  # one policy writes every role's part (comlrl/tasks/centralized.py)
    min_generations: int = 2  # siblings per group the signal needs
    # the agents' heads read each completion's end (a Q critic, a reward model), and `units` gets every
    # completion's head output ({node id: [agent][k]}) instead of each state's value
    per_action_values: bool = False
    # (key, dataclass) of its options: the config section `algorithm.<key>.*` (with a `check()`), or None
    options: tuple[str, type] | None = None


@dataclass
class DpoConfig:
    """madpo: which sibling completions pair up and how strongly DPO pulls (docs/algorithm.md)."""

    beta: float = 0.1  # DPO's inverse temperature: the implicit reward is beta * log(pi / reference)
    pairs: str = "reward_gap"  # reward_gap (largest value gaps first) | all | random
    pairs_per_node: int | None = 2  # per node and agent; null = every pair that passes min_gap
    min_gap: float = 1e-6  # value gap (raw reward units) a pair needs
    offline_pairs: str | None = None  # a pairs JSONL (scripts/export.py --pairs): train on it, no rollout

    def check(self) -> None:
        require(self.beta > 0, "algorithm.dpo.beta", self.beta, "a number > 0")
        require(self.pairs_per_node is None or self.pairs_per_node >= 1, "algorithm.dpo.pairs_per_node",
                self.pairs_per_node, "an integer >= 1 or null (every pair)")
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

def _advantage_units(roots: Sequence[Node], cfg: RunConfig, values: StateValues | None
                     ) -> tuple[list[Unit], AdvantageStats]:
    m = cfg.magrpo
    stats = assign_advantages(list(roots), m.advantage.baseline, m.advantage.scale, m.advantage.eps,
                              credit=m.advantage.credit)
    units = [Unit((node.completions[a][k],), (float(adv[k]),))
             for root in roots for node in root.walk() for a, adv in enumerate(node.advantages) if adv is not None
             for k in range(len(adv))]
    return units, stats


def _policy_gradient_loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
    import torch

    from comlrl.learn.loss import aggregate, per_token_loss

    lc = b.cfg.magrpo.loss
    adv = torch.tensor([x for u in b.units for x in u.advantages], dtype=b.logps.dtype, device=b.logps.device)
    tok = per_token_loss(b.logps, adv, old_logps=b.old_logps, ref_logps=b.ref_logps, clip_eps=lc.clip_eps,
                         kl_coef=lc.kl_coef, is_weights=b.is_weights)
    return aggregate(tok, b.mask, lc.aggregation, b.step.policy), {}


# ---- madpo: DPO on sibling pairs -----------------------------------------------------------------------

def _pair_units(roots: Sequence[Node], cfg: RunConfig, values: StateValues | None
                ) -> tuple[list[Unit], AdvantageStats]:
    import torch

    m, d = cfg.magrpo, cfg.algorithm.dpo
    # seeded per step and rank by the trainer (torch.manual_seed before the rollout): reproducible draws
    rng = random.Random(torch.initial_seed()) if d.pairs == "random" else None
    pairs = tree_pairs(roots, d.pairs, d.pairs_per_node, d.min_gap, credit=m.advantage.credit, rng=rng)
    groups = sum(1 for root in roots for _ in root.walk()) * m.num_agents
    with_pairs = len({(id(p.node), p.agent) for p in pairs})
    units = [Unit((p.node.completions[p.agent][p.winner], p.node.completions[p.agent][p.loser])) for p in pairs]
    return units, AdvantageStats(groups=groups, skipped=groups - with_pairs)


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

    def units(roots: Sequence[Node], cfg: RunConfig, values: StateValues | None
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
        policy, _ = _policy_gradient_loss(b)
        v = b.values
        if joint and b.cfg.algorithm.critic.kind == "q":  # per joint action: the mean of its agents' Q
            v = torch.cat([_joint_q(v[start:start + len(u.samples)], u) for u, start in
                           zip(b.units, _starts(b.units), strict=True)])
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


def _starts(units: list[Unit]) -> list[int]:
    """Each unit's first row in the micro-batch."""
    out, start = [], 0
    for u in units:
        out.append(start)
        start += len(u.samples)
    return out


def _positions(unit: Unit) -> list[int]:
    """Each sample's index among its agent's completions in the unit: its joint action in align mode."""
    out: list[int] = []
    seen: dict[int, int] = {}
    for s in unit.samples:
        out.append(seen.get(s.agent, 0))
        seen[s.agent] = out[-1] + 1
    return out


def _joint_q(q: torch.Tensor, unit: Unit) -> torch.Tensor:
    """maac's Q of each sample's joint action (align mode: the g-th completion of every agent): the mean of
    the agents' heads at their g-th completions, one linear head over the joint (state, action) scaled by
    1/N, as the V critic's team value is over the joint state."""
    import torch

    pos = torch.tensor(_positions(unit), device=q.device)
    joint = torch.zeros(int(pos.max()) + 1, dtype=q.dtype, device=q.device).index_add(0, pos, q)
    counts = torch.bincount(pos).to(q.dtype)
    return (joint / counts)[pos]


def explained_variance(means: dict[str, float]) -> dict[str, float]:
    """1 - Var(target - value) / Var(target) over the step's samples, from the step's means (1: the
    critic predicts every target; 0: no better than their mean; NaN when the targets do not vary)."""
    var_t = means["value/target_sq"] - means["value/target_mean"] ** 2
    var_r = means["value/mse"] - means["value/residual_mean"] ** 2
    return {"value/explained_variance": 1.0 - var_r / var_t if var_t > 1e-12 else float("nan")}


# ---- marlhf: a learned joint reward (Bradley-Terry on sibling joint actions), then MAGRPO on it ------------

@dataclass
class MarlhfConfig:
    """marlhf: the reward heads' preference loss and how the policy's reward mixes the learned one with the
    task's (docs/algorithm.md)."""

    rm_coef: float = 1.0  # weight of the reward heads' Bradley-Terry loss beside the policy's
    task_weight: float = 0.0  # the policy's reward: task_weight * task + (1 - task_weight) * learned
    pairs_per_node: int | None = 2  # preference pairs of a node's joint actions (largest task-return gaps)
    min_gap: float = 1e-6  # task-return gap (raw reward units) a pair needs

    def check(self) -> None:
        require(self.rm_coef > 0, "algorithm.marlhf.rm_coef", self.rm_coef, "a number > 0")
        require(0.0 <= self.task_weight <= 1.0, "algorithm.marlhf.task_weight", self.task_weight, "a number in [0, 1]")
        require(self.pairs_per_node is None or self.pairs_per_node >= 1, "algorithm.marlhf.pairs_per_node",
                self.pairs_per_node, "an integer >= 1 or null (every pair)")
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


def _marlhf_units(roots: Sequence[Node], cfg: RunConfig, values: StateValues | None
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


def _marlhf_loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
    """The policy gradient on the mixed reward's advantages plus rm_coef * the Bradley-Terry loss of each
    node's pairs, -log sigmoid(r(preferred) - r(other)), averaged over the step's nodes. Pair accuracy is
    read before this update's step: the heads have not trained on these pairs (held out)."""
    import torch
    import torch.nn.functional as F

    assert b.values is not None
    policy, _ = _policy_gradient_loss(b)
    bt, correct, n_pairs, learned = b.values.new_zeros(()), 0.0, 0.0, []
    for u, start in zip(b.units, _starts(b.units), strict=True):
        per_joint = _joint_q(b.values[start:start + len(u.samples)], u)  # each sample's joint action's reward
        first: dict[int, int] = {}
        for i, g in enumerate(_positions(u)):
            first.setdefault(g, i)
        r = torch.stack([per_joint[first[g]] for g in sorted(first)])  # one per joint action (align)
        learned.append(r.detach())
        for wi, lo in u.pairs:
            margin = r[wi] - r[lo]
            bt = bt - F.logsigmoid(margin)
            correct += float(margin.detach() > 0)
            n_pairs += 1
    loss = policy + b.cfg.algorithm.marlhf.rm_coef * bt / b.step.units
    rewards = torch.cat(learned) if learned else b.values.new_zeros(0)
    return loss, {"marlhf/pair_accuracy": (correct, n_pairs), "marlhf/bt_loss": (float(bt.detach()), n_pairs),
                  "marlhf/learned_reward": (float(rewards.sum()), float(rewards.numel()))}


CRITIC_METRICS = ("value/mse", "value/mean", "value/target_mean", "value/target_sq", "value/residual_mean")


# the one table of algorithms (`comlrl.config.registry.register_algorithm` adds to it), in the config's order
ALGORITHMS: dict[str, Algorithm] = {
    "magrpo": Algorithm(_advantage_units, _policy_gradient_loss),
    "centralized": Algorithm(_advantage_units, _policy_gradient_loss, centralized=True),
    "madpo": Algorithm(_pair_units, _dpo_loss, needs_reference=True, on_policy=False,
                       metrics=("dpo/accuracy", "dpo/margin", "dpo/chosen_reward", "dpo/rejected_reward", "dpo/loss"),
                       options=("dpo", DpoConfig)),
    "iac": Algorithm(_critic_units(joint=False), _actor_critic_loss(joint=False), metrics=CRITIC_METRICS,
                     derived=explained_variance, critic=True, min_generations=1, options=("critic", CriticConfig)),
    "maac": Algorithm(_critic_units(joint=True), _actor_critic_loss(joint=True), metrics=CRITIC_METRICS,
                      derived=explained_variance, critic=True, min_generations=1, options=("critic", CriticConfig)),
    "marlhf": Algorithm(_marlhf_units, _marlhf_loss, critic=True, per_action_values=True,
                        metrics=("marlhf/pair_accuracy", "marlhf/bt_loss", "marlhf/learned_reward"),
                        options=("marlhf", MarlhfConfig)),
}
