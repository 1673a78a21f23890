"""What every algorithm reads and returns: the loss units a step's trees become, a micro-batch of them, the
step's normalisers, and the `Algorithm` interface itself (`comlrl.learn.algorithms` holds the table).

Also the pieces several algorithms share: MAGRPO's policy-gradient loss (magrpo, centralized, the actor-critics
and marlhf train the policy with it) and the row arithmetic of joint actions in a unit (align mode: the g-th
completion of every agent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from comlrl.learn.advantages import AdvantageStats
from comlrl.tree.nodes import Node, Sample

if TYPE_CHECKING:
    import torch


class LearnConfig(Protocol):
    """What learn/ reads of the run's config; `comlrl.config.schema.RunConfig` is one. learn/ sits below the
    config, so it names the sections it reads instead of importing the config's types: `magrpo` (its `loss`
    and `advantage`), `algorithm` (`algorithm.<key>`: a registered algorithm's options, e.g. `DpoConfig`) and
    `rollout` (`is_cap`)."""

    magrpo: Any
    algorithm: Any
    rollout: Any


@dataclass(frozen=True)
class Unit:
    """What one term of the loss reads: its completions and numbers (which ones, the algorithm says)."""

    samples: tuple[Sample, ...]  # one completion, a (chosen, rejected) pair, or a node's completions
    advantages: tuple[float, ...] = ()  # per sample, its advantage (policy gradient)
    targets: tuple[float, ...] = ()  # per sample, the value target of its state (actor-critic)
    pairs: tuple[tuple[int, int], ...] = ()  # (preferred, other) joint actions of a node's samples (marlhf)
    seen: bool = False  # its pairs trained the model before (a replayed earlier round's): not held out
    # the completion lengths of untrained siblings its advantage stands for (magrpo.advantage.train_per_group):
    # the step's policy normaliser counts them, so a subsample's loss estimates the whole group's
    stands_for: tuple[int, ...] = ()


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

    cfg: LearnConfig
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

    units: Callable[[Sequence[Node], LearnConfig, StateValues | None], tuple[list[Unit], AdvantageStats]]
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
    # its units learn from preference pairs that a comparator labels, kept per round and replayed
    # (comlrl.run.rounds): "agent" (DPO pairs of one agent's siblings) or "joint" (pairs of a node's joint actions)
    preference: str | None = None
    # (key, dataclass) of its options: the config section `algorithm.<key>.*` (with a `check()`), or None
    options: tuple[str, type] | None = None


def policy_gradient_loss(b: MicroBatch) -> tuple[torch.Tensor, MetricSums]:
    """MAGRPO's loss on the units' advantages (clipped ratio, KL, importance weights as configured); the rows
    of a unit without advantages are left out, and `StepSize.policy` counts only the rows that train."""
    import torch

    from comlrl.learn.loss import aggregate, per_token_loss

    lc = b.cfg.magrpo.loss
    adv = torch.tensor([x for u in b.units for x in (u.advantages or (0.0,) * len(u.samples))], dtype=b.logps.dtype,
                       device=b.logps.device)
    tok = per_token_loss(b.logps, adv, old_logps=b.old_logps, ref_logps=b.ref_logps, clip_eps=lc.clip_eps,
                         kl_coef=lc.kl_coef, is_weights=b.is_weights)
    mask = b.mask
    if not all(u.advantages for u in b.units):  # a unit without advantages (a replayed pair) trains no policy
        keep = torch.tensor([float(bool(u.advantages)) for u in b.units for _ in u.samples], dtype=mask.dtype,
                            device=mask.device)
        mask = mask * keep[:, None]
    return aggregate(tok, mask, lc.aggregation, b.step.policy), {}


def unit_starts(units: list[Unit]) -> list[int]:
    """Each unit's first row in the micro-batch."""
    out, start = [], 0
    for u in units:
        out.append(start)
        start += len(u.samples)
    return out


def joint_positions(unit: Unit) -> list[int]:
    """Each sample's index among its agent's completions in the unit: its joint action in align mode."""
    out: list[int] = []
    seen: dict[int, int] = {}
    for s in unit.samples:
        out.append(seen.get(s.agent, 0))
        seen[s.agent] = out[-1] + 1
    return out


def joint_mean(q: torch.Tensor, unit: Unit) -> torch.Tensor:
    """maac's Q of each sample's joint action (align mode: the g-th completion of every agent): the mean of
    the agents' heads at their g-th completions, one linear head over the joint (state, action) scaled by
    1/N, as the V critic's team value is over the joint state."""
    import torch

    pos = torch.tensor(joint_positions(unit), device=q.device)
    joint = torch.zeros(int(pos.max()) + 1, dtype=q.dtype, device=q.device).index_add(0, pos, q)
    counts = torch.bincount(pos).to(q.dtype)
    return (joint / counts)[pos]
