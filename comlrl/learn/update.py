"""One update: the trees become one optimizer step of every agent, by the run's algorithm
(`comlrl.learn.algorithms`: which completions train, with which numbers, under which loss).

Micro-batches of the algorithm's units run forward and backward under accelerate (DDP) or a
DeepSpeed engine (`comlrl.learn.learner.Learner`); every rank runs the same number of micro-batches
(zero-weight ones where it has fewer), so collective operations line up. Optional: PPO ratio clip over
several epochs, KL to the reference policy, truncated importance weights against the rollout engine's
log-probs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import torch

from comlrl.cores import side_by_side
from comlrl.learn.advantages import AdvantageStats
from comlrl.learn.learner import Learner, max_over_ranks
from comlrl.learn.loss import logprob_gap, step_normaliser, truncated_is_weights
from comlrl.learn.units import LearnConfig, MicroBatch, StepSize, Unit
from comlrl.tree.nodes import Node, Sample

if TYPE_CHECKING:
    from comlrl.learn.units import Algorithm


class LossOptions(Protocol):
    """What the update reads of `magrpo.loss` (`comlrl.config.schema.LossConfig` is one)."""

    clip_eps: float | None
    inner_epochs: int
    kl_coef: float


@dataclass(frozen=True)
class UpdateStats:
    """What one update did, on this rank."""

    loss: float  # the step's loss (mean over inner epochs)
    grad_norm: float
    samples: float  # completions trained on (those of the algorithm's units)
    lr: float
    weights_rank_spread: float  # 0 when data-parallel ranks hold the same weights
    engine_abs_gap: float = 0.0  # token sums of the rollout engine's log-prob gap (comlrl.learn.loss.logprob_gap)
    engine_kl: float = 0.0
    engine_tokens: float = 0.0
    groups: AdvantageStats = field(default_factory=AdvantageStats)  # sibling groups with / without a signal
    metrics: dict[str, float] = field(default_factory=dict)  # the algorithm's sums: `<name>` and `<name>/n`


def micro_batches(units: list[Unit], size: int,
                  area: Callable[[list[Sample]], int] | None = None) -> list[list[Unit]]:
    """Consecutive units, a micro-batch within the token slots of `size` of the units' longest samples (a unit is
    never split; a larger one gets a micro-batch of its own). `area`: the token slots a forward over samples takes
    (the policies' packed layout, which lays a prompt's start once for the units that share it), so units whose
    prompts start alike (a node's siblings, a later turn's nodes after the first turn's) fill a micro-batch
    further than `size` completions: fewer, fuller forwards for the same bound on activations. Without `area`
    every sample counts as a longest one: `size` completions a micro-batch."""
    longest = max((len(s.prompt_ids) + len(s.completion_ids) for u in units for s in u.samples), default=1)
    slots = area or (lambda samples: len(samples) * longest)
    out: list[list[Unit]] = []
    held: list[Sample] = []
    for u in units:
        if out and slots([*held, *u.samples]) <= size * longest:
            out[-1].append(u)
            held.extend(u.samples)
        else:
            out.append([u])
            held = list(u.samples)
    return out


def train_on_trees(learner: Learner, algorithm: Algorithm, cfg: LearnConfig, roots: list[Node]) -> UpdateStats:
    """Turn the trees into one optimizer step (all agents at once), by the run's algorithm."""
    values = (learner.action_values if algorithm.per_action_values else learner.state_values) \
        if algorithm.critic else None
    units, groups = algorithm.units(roots, cfg, values)
    return train_units(learner, algorithm, cfg, units, groups, spare=any_sample(roots))


@dataclass
class _Tally:
    """What the micro-steps of one update add up (this rank)."""

    loss: float = 0.0
    gap: dict[str, float] = field(default_factory=lambda: {"abs_gap_sum": 0.0, "kl_sum": 0.0, "tokens": 0.0})
    sums: dict[str, float] = field(default_factory=dict)  # the algorithm's metric sums and counts

    def add(self, other: _Tally) -> None:
        self.loss += other.loss
        for k, v in other.gap.items():
            self.gap[k] += v
        for k, v in other.sums.items():
            self.sums[k] += v


def agent_lanes(units: list[Unit]) -> list[list[Unit]] | None:
    """The units split by agent, in order of first appearance, when every unit trains one agent and there are
    several; None otherwise (a unit over several agents, such as a team critic's, couples their backward)."""
    lanes: dict[int, list[Unit]] = {}
    for u in units:
        agents = {s.agent for s in u.samples}
        if len(agents) != 1:
            return None
        lanes.setdefault(agents.pop(), []).append(u)
    return list(lanes.values()) if len(lanes) > 1 else None


def step_size(units: list[Unit], aggregation: str) -> StepSize:
    """The step's normalisers: its tokens, sequences and units, and the policy loss's (`aggregation`)."""
    samples = [s for u in units for s in u.samples]
    lengths = [max(1, len(s.completion_ids)) for s in samples]
    # the policy loss trains the rows of units with advantages (all of them but replayed preference pairs)
    trained = [max(1, len(s.completion_ids)) for u in units if u.advantages for s in u.samples] or lengths
    trained += [n for u in units for n in u.stands_for]
    return StepSize(tokens=float(max(1, sum(lengths))), sequences=float(max(1, len(samples))),
                    units=float(max(1, len(units))), policy=step_normaliser(trained, aggregation))


def reference_logprobs(learner: Learner, algorithm: Algorithm, lc: LossOptions, micro: list[list[Unit]],
                       n_micro: int, spare: list[Unit],
                       ) -> tuple[list[torch.Tensor] | None, list[torch.Tensor] | None]:
    """(old, ref) per micro-batch, before any weight moves: the rollout policy's log-probs when PPO clips over
    several epochs, the reference policy's when the loss or the KL term reads them (None otherwise). A rank in
    lock step with fewer than `n_micro` micro-batches runs the missing forwards on `spare` and drops them, as
    the update's loop does: under ZeRO-3 every rank's forward gathers the same modules in the same order."""
    old = ref = None
    batches = [*micro, *[spare] * (n_micro - len(micro))] if learner.in_lock_step else micro
    if algorithm.on_policy and lc.clip_eps is not None and lc.inner_epochs > 1:
        with torch.no_grad():
            old = [learner.logprobs(_samples(b))[0].detach() for b in batches][:len(micro)]
    if algorithm.needs_reference or lc.kl_coef > 0:
        ref = [learner.logprobs(_samples(b), reference=True)[0].detach() for b in batches][:len(micro)]
    return old, ref


def engine_logprobs(batch: list[Unit], like: torch.Tensor) -> torch.Tensor | None:
    """The rollout engine's log-probs of the batch's tokens, or None when the trainer sampled them."""
    rows = _samples(batch)
    if any(s.logprobs is None for s in rows):
        return None
    out = torch.zeros_like(like)
    for row, s in enumerate(rows):
        n = min(len(s.logprobs), out.shape[1])
        out[row, :n] = torch.tensor(s.logprobs[:n], dtype=out.dtype)
    return out


def micro_step(learner: Learner, algorithm: Algorithm, cfg: LearnConfig, batch: list[Unit], step: StepSize,
               old: torch.Tensor | None, ref: torch.Tensor | None, tally: _Tally, first_epoch: bool) -> torch.Tensor:
    """One real micro-batch's loss (not yet backward): forward, the engine's log-prob gap and importance
    weights when it sampled, the algorithm's loss; its metric sums go to `tally` in the first epoch."""
    samples = _samples(batch)
    if algorithm.critic:
        logps, mask, values = learner.logprobs_and_values(samples)
    else:
        (logps, mask), values = learner.logprobs(samples), None
    is_w = None
    behaviour = engine_logprobs(batch, logps) if algorithm.on_policy else None
    if behaviour is not None:
        train_lp = old if old is not None else logps.detach()
        if first_epoch:
            for k, v in logprob_gap(train_lp, behaviour, mask).items():
                tally.gap[k] += v
        if cfg.rollout.is_cap is not None:
            is_w = truncated_is_weights(train_lp, behaviour, mask, cfg.rollout.is_cap)
    loss, stats = algorithm.loss(MicroBatch(cfg, batch, logps, mask, step, ref_logps=ref, old_logps=old,
                                            is_weights=is_w, values=values))
    if first_epoch:
        for name, (total, count) in stats.items():
            tally.sums[name] += total
            tally.sums[f"{name}/n"] += count
    return loss


def idle_step(learner: Learner, algorithm: Algorithm, batch: list[Unit]) -> torch.Tensor:
    """A zero-weight loss on a spare sample, for a rank with fewer micro-batches: collectives line up."""
    if algorithm.critic:
        logps, mask, values = learner.logprobs_and_values(_samples(batch))
        return (logps * mask).sum() * 0.0 + values.sum() * 0.0
    logps, mask = learner.logprobs(_samples(batch))
    return (logps * mask).sum() * 0.0


def train_units(learner: Learner, algorithm: Algorithm, cfg: LearnConfig, units: list[Unit], groups: AdvantageStats,
                spare: Any) -> UpdateStats:
    """One optimizer step on the algorithm's units; `spare` is a sample the zero-weight micro-batches of a
    rank without units run on (every rank runs the same number)."""
    lc = cfg.magrpo.loss
    samples = _samples(units)
    step = step_size(units, lc.aggregation)
    # agents of their own models on CPU: each agent's micro-batches in a lane, the lanes side by side
    lanes = agent_lanes(units) if learner.agents_side_by_side else None
    # ranks in lock step split by completions: DeepSpeed's ZeRO-3 checks that every rank's forward runs the same
    # modules in the same order, and a LoRA micro-batch runs the adapters of the agents it holds
    area = None if learner.in_lock_step else learner.policies.packed_area
    lane_micro = [micro_batches(lane, lc.micro_batch_size, area) for lane in lanes or [units]]
    micro = [b for lane in lane_micro for b in lane]
    ends = list(itertools.accumulate(len(lane) for lane in lane_micro))
    spans = [range(a, b) for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    n_micro = max_over_ranks(learner.accelerator, max(1, len(micro)))
    spare_batch = [Unit((samples[0] if samples else spare,))]
    old, ref = reference_logprobs(learner, algorithm, lc, micro, n_micro, spare_batch)
    sums = {k: 0.0 for name in algorithm.metrics for k in (name, f"{name}/n")}
    tally = _Tally(sums=dict(sums))
    learner.model.train()
    grad_norm = float("nan")
    for epoch in range(lc.inner_epochs):
        if lanes:
            passes = [partial(_train_micro_batches, learner, algorithm, cfg, micro, span, step, old, ref, epoch == 0,
                              _Tally(sums=dict(sums))) for span in spans]
            for lane_tally in side_by_side(passes):
                tally.add(lane_tally)
        for i in range(0 if lanes else n_micro):  # lanes: every micro-batch ran in its lane
            with learner.accumulating(last=i == n_micro - 1):
                if i < len(micro):
                    _train_micro_batches(learner, algorithm, cfg, micro, range(i, i + 1), step, old, ref, epoch == 0,
                                         tally)
                elif learner.in_lock_step:  # alone, a step without samples steps on zero gradients only
                    loss = idle_step(learner, algorithm, spare_batch)
                    learner.backward(loss)
                    tally.loss += float(loss.detach())
        grad_norm = learner.optimizer_step()
    lr = learner.end_step()
    return UpdateStats(loss=tally.loss / lc.inner_epochs, grad_norm=grad_norm, samples=float(len(samples)),
                       lr=lr, weights_rank_spread=learner.weights_spread(), engine_abs_gap=tally.gap["abs_gap_sum"],
                       engine_kl=tally.gap["kl_sum"], engine_tokens=tally.gap["tokens"], groups=groups,
                       metrics=tally.sums)


def _train_micro_batches(learner: Learner, algorithm: Algorithm, cfg: LearnConfig, micro: list[list[Unit]],
                         indices: range, step: StepSize, old: list[torch.Tensor] | None,
                         ref: list[torch.Tensor] | None, first_epoch: bool, tally: _Tally) -> _Tally:
    """Forward and backward of the micro-batches at `indices` (one of them in the ranks' lock-step loop, one
    agent's lane of them side by side); their losses and sums go to `tally`."""
    for i in indices:
        loss = micro_step(learner, algorithm, cfg, micro[i], step, old[i] if old is not None else None,
                          ref[i] if ref is not None else None, tally, first_epoch=first_epoch)
        learner.backward(loss)
        tally.loss += float(loss.detach())
    return tally


def _samples(units: list[Unit]) -> list[Any]:
    return [s for u in units for s in u.samples]


def any_sample(roots: list[Node]) -> Any:
    for root in roots:
        for node in root.walk():
            for row in node.completions:
                if row:
                    return row[0]
    return None  # no completion at all: only needed (and then an error) where a rank has no unit either
