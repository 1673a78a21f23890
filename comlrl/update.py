"""One update: the trees become one optimizer step of every agent, by the run's algorithm
(`comlrl.algorithms`: which completions train, with which numbers, under which loss).

Micro-batches of the algorithm's units run forward and backward under accelerate (DDP) or a
DeepSpeed engine; every rank runs the same number of micro-batches (zero-weight ones where it has fewer), so
collective operations line up. Optional: PPO ratio clip over several epochs, KL to the reference policy,
truncated importance weights against the rollout engine's log-probs.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from comlrl.advantages import AdvantageStats
from comlrl.algorithms import MicroBatch, StepSize, Unit
from comlrl.components import Components
from comlrl.distributed import max_over_ranks, uses_deepspeed, uses_zero3
from comlrl.loss import logprob_gap, step_normaliser, truncated_is_weights
from comlrl.tree import Node


@dataclass(frozen=True)
class UpdateStats:
    """What one update did, on this rank."""

    loss: float  # the step's loss (mean over inner epochs)
    grad_norm: float
    samples: float  # completions trained on (those of the algorithm's units)
    lr: float
    weights_rank_spread: float  # 0 when data-parallel ranks hold the same weights
    engine_abs_gap: float = 0.0  # token sums of the rollout engine's log-prob gap (comlrl.loss.logprob_gap)
    engine_kl: float = 0.0
    engine_tokens: float = 0.0
    groups: AdvantageStats = field(default_factory=AdvantageStats)  # sibling groups with / without a signal
    metrics: dict[str, float] = field(default_factory=dict)  # the algorithm's sums: `<name>` and `<name>/n`


def micro_batches(units: list[Unit], size: int) -> list[list[Unit]]:
    """Consecutive units, at most `size` completions per micro-batch (a unit is never split; a unit larger
    than `size` gets a micro-batch of its own)."""
    out: list[list[Unit]] = []
    held = 0
    for u in units:
        if out and held + len(u.samples) <= size:
            out[-1].append(u)
            held += len(u.samples)
        else:
            out.append([u])
            held = len(u.samples)
    return out


def train_on_trees(comp: Components, roots: list[Node]) -> UpdateStats:
    """Turn the trees into one optimizer step (all agents at once), by the run's algorithm."""
    algo = comp.algorithm
    units, groups = algo.units(roots, comp.cfg, (lambda nodes: state_values(comp, nodes)) if algo.critic else None)
    return train_units(comp, units, groups, spare=_any_sample(roots))


def train_units(comp: Components, units: list[Unit], groups: AdvantageStats, spare: Any) -> UpdateStats:
    """One optimizer step on the algorithm's units; `spare` is a sample the zero-weight micro-batches of a
    rank without units run on (every rank runs the same number)."""
    cfg, acc, policies, model = comp.cfg, comp.accelerator, comp.policies, comp.model
    algo, lc = comp.algorithm, cfg.magrpo.loss
    samples = [s for u in units for s in u.samples]
    lengths = [max(1, len(s.completion_ids)) for s in samples]
    step = StepSize(tokens=float(max(1, sum(lengths))), sequences=float(max(1, len(samples))),
                    units=float(max(1, len(units))), policy=step_normaliser(lengths, lc.aggregation))
    micro = micro_batches(units, lc.micro_batch_size)
    n_micro = max_over_ranks(acc, max(1, len(micro)))
    dummy = [Unit((samples[0] if samples else spare,))]
    trainable = [p for p in policies.trainable_parameters()]
    deepspeed = uses_deepspeed(acc)
    zero3 = uses_zero3(acc)
    sums = {k: 0.0 for name in algo.metrics for k in (name, f"{name}/n")}

    def logps_of(batch: list[Unit], **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return policies.token_logprobs([s for u in batch for s in u.samples], module=model, **kw)

    def forward(batch: list[Unit]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if algo.critic:
            return policies.logprobs_and_values([s for u in batch for s in u.samples], module=model)
        return (*logps_of(batch), None)

    def engine_logps(batch: list[Unit], like: torch.Tensor) -> torch.Tensor | None:
        """The rollout engine's log-probs of the batch's tokens, or None when the trainer sampled them."""
        rows = [s for u in batch for s in u.samples]
        if any(s.logprobs is None for s in rows):
            return None
        out = torch.zeros_like(like)
        for row, s in enumerate(rows):
            n = min(len(s.logprobs), out.shape[1])
            out[row, :n] = torch.tensor(s.logprobs[:n], dtype=out.dtype)
        return out

    old = ref = None
    if algo.on_policy and lc.clip_eps is not None and lc.inner_epochs > 1:
        with torch.no_grad():
            old = [logps_of(b)[0].detach() for b in micro]
    if algo.needs_reference or lc.kl_coef > 0:
        ref = [logps_of(b, reference=True)[0].detach() for b in micro]
    loss_sum = 0.0
    gap = {"abs_gap_sum": 0.0, "kl_sum": 0.0, "tokens": 0.0}
    model.train()
    for epoch in range(lc.inner_epochs):
        for i in range(n_micro):
            real = i < len(micro)
            batch = micro[i] if real else dummy
            last = i == n_micro - 1
            if deepspeed:
                model.set_gradient_accumulation_boundary(last)
            ctx = acc.no_sync(model) if (not last and not deepspeed and acc.num_processes > 1) else nullcontext()
            with ctx:
                logps, mask, values = forward(batch)
                if real:
                    is_w = None
                    behaviour = engine_logps(batch, logps) if algo.on_policy else None
                    if behaviour is not None:
                        train_lp = old[i] if old is not None else logps.detach()
                        if epoch == 0:
                            for k, v in logprob_gap(train_lp, behaviour, mask).items():
                                gap[k] += v
                        if cfg.rollout.is_cap is not None:
                            is_w = truncated_is_weights(train_lp, behaviour, mask, cfg.rollout.is_cap)
                    loss, stats = algo.loss(MicroBatch(cfg, batch, logps, mask, step,
                                                       ref_logps=ref[i] if ref is not None else None,
                                                       old_logps=old[i] if old is not None else None,
                                                       is_weights=is_w, values=values))
                    if epoch == 0:
                        for name, (total, count) in stats.items():
                            sums[name] += total
                            sums[f"{name}/n"] += count
                else:  # a rank with fewer micro-batches runs zero-weight ones: collectives line up
                    loss = (logps * mask).sum() * 0.0 + (values.sum() * 0.0 if values is not None else 0.0)
                # a zero term touching every trainable tensor: all ranks reduce the same gradients (ZeRO-3
                # holds only a partition of each tensor outside forward and gives unused ones zero gradients itself)
                if not zero3:
                    loss = loss + 0.0 * sum(p.sum() for p in trainable)
                if deepspeed:  # accelerate's backward would step the engine after every micro-batch
                    model.backward(loss)
                else:
                    acc.backward(loss)
            loss_sum += float(loss.detach())
        if deepspeed:  # clips (gradient_clipping from magrpo.max_grad_norm), steps and zeroes
            model.step()
            gn = model.get_global_grad_norm()
        else:
            gn = acc.clip_grad_norm_(trainable, cfg.magrpo.max_grad_norm)
            comp.optimizer.step()
            comp.optimizer.zero_grad(set_to_none=True)
        grad_norm = float(gn) if gn is not None else float("nan")
    comp.scheduler.step()
    comp.engine.weights_changed()
    return UpdateStats(loss=loss_sum / lc.inner_epochs, grad_norm=grad_norm, samples=float(len(samples)),
                       lr=comp.scheduler.get_last_lr()[0], weights_rank_spread=_weights_spread(acc, trainable),
                       engine_abs_gap=gap["abs_gap_sum"], engine_kl=gap["kl_sum"], engine_tokens=gap["tokens"],
                       groups=groups, metrics=sums)


@torch.no_grad()
def state_values(comp: Components, nodes: list[Node]) -> dict[str, list[float]]:
    """Each node's value head outputs, one per agent, at the state the agent acts in (its prompt's end),
    before the update: one sample per (node, agent) carries the prompt, in micro-batches. Every rank runs
    the same number of forwards (ZeRO-3 gathers parameters in each)."""
    rows = [(node.id, a, node.completions[a][0]) for node in nodes for a in range(len(node.completions))]
    out: dict[str, list[float]] = {node.id: [0.0] * len(node.completions) for node in nodes}
    size = comp.cfg.magrpo.loss.micro_batch_size
    chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
    for i in range(max_over_ranks(comp.accelerator, max(1, len(chunks)))):
        chunk = chunks[i] if i < len(chunks) else rows[:1]
        if not chunk:
            continue  # no nodes on any rank's first chunk: nothing to gather for
        _, _, values = comp.policies.logprobs_and_values([s for _, _, s in chunk])
        for (node_id, a, _), v in zip(chunk, values.tolist(), strict=True) if i < len(chunks) else ():
            out[node_id][a] = float(v)
    return out


def _weights_spread(acc: Any, params: list[torch.Tensor]) -> float:
    """Max minus min over ranks of a checksum of the trainable weights: 0 when data parallel is in sync."""
    with torch.no_grad():
        checksum = sum(p.detach().double().sum() for p in params) if params else torch.zeros(())
        checksum = checksum.reshape(1).to(acc.device)
    if acc.num_processes == 1:
        return 0.0
    every = acc.gather(checksum)
    return float(every.max() - every.min())


def _any_sample(roots: list[Node]) -> Any:
    for root in roots:
        for node in root.walk():
            for row in node.completions:
                if row:
                    return row[0]
    return None  # no completion at all: only needed (and then an error) where a rank has no unit either
