"""One MAGRPO update: the trees' advantages become one optimizer step of every agent.

Micro-batches of (completion, advantage) pairs run forward and backward under accelerate (DDP) or a
DeepSpeed engine; every rank runs the same number of micro-batches (zero-weight ones where it has fewer), so
collective operations line up. Optional: PPO ratio clip over several epochs, KL to the reference policy,
truncated importance weights against the rollout engine's log-probs.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from comlrl.components import Components
from comlrl.distributed import max_over_ranks, uses_deepspeed
from comlrl.loss import aggregate, logprob_gap, per_token_loss, step_normaliser, truncated_is_weights
from comlrl.tree import Node


@dataclass(frozen=True)
class UpdateStats:
    """What one update did, on this rank."""

    loss: float  # the step's loss (mean over inner epochs)
    grad_norm: float
    samples: float  # completions trained on (those of sibling groups with an advantage)
    lr: float
    weights_rank_spread: float  # 0 when data-parallel ranks hold the same weights
    engine_abs_gap: float = 0.0  # token sums of the rollout engine's log-prob gap (comlrl.loss.logprob_gap)
    engine_kl: float = 0.0
    engine_tokens: float = 0.0


def train_on_trees(comp: Components, roots: list[Node]) -> UpdateStats:
    """Turn the trees' advantages into one optimizer step (all agents at once)."""
    cfg, acc, policies, model = comp.cfg, comp.accelerator, comp.policies, comp.model
    lc = cfg.magrpo.loss
    items = [
        (node.completions[a][k], float(adv[k]))
        for root in roots
        for node in root.walk()
        for a, adv in enumerate(node.advantages)
        if adv is not None
        for k in range(len(adv))
    ]
    lengths = [max(1, len(s.completion_ids)) for s, _ in items]
    normaliser = step_normaliser(lengths, lc.aggregation)
    mb = lc.micro_batch_size
    micro = [items[i : i + mb] for i in range(0, len(items), mb)]
    n_micro = max_over_ranks(acc, max(1, len(micro)))
    any_sample = items[0][0] if items else _dummy_sample(roots)
    trainable = [p for p in policies.trainable_parameters()]
    deepspeed = uses_deepspeed(acc)
    zero3 = deepspeed and acc.state.deepspeed_plugin.zero_stage == 3

    def logps_of(batch, **kw):
        return policies.token_logprobs([s for s, _ in batch], module=model, **kw)

    def engine_logps(batch, like: torch.Tensor) -> torch.Tensor | None:
        """The rollout engine's log-probs of the batch's tokens, or None when the trainer sampled them."""
        if any(s.logprobs is None for s, _ in batch):
            return None
        out = torch.zeros_like(like)
        for row, (s, _) in enumerate(batch):
            n = min(len(s.logprobs), out.shape[1])
            out[row, :n] = torch.tensor(s.logprobs[:n], dtype=out.dtype)
        return out

    old = ref = None
    if lc.clip_eps is not None and lc.inner_epochs > 1:
        with torch.no_grad():
            old = [logps_of(b)[0].detach() for b in micro]
    if lc.kl_coef > 0:
        ref = [logps_of(b, reference=True)[0].detach() for b in micro]
    loss_sum = 0.0
    gap = {"abs_gap_sum": 0.0, "kl_sum": 0.0, "tokens": 0.0}
    model.train()
    for epoch in range(lc.inner_epochs):
        for i in range(n_micro):
            real = i < len(micro)
            batch = micro[i] if real else [(any_sample, 0.0)]
            last = i == n_micro - 1
            if deepspeed:
                model.set_gradient_accumulation_boundary(last)
            ctx = acc.no_sync(model) if (not last and not deepspeed and acc.num_processes > 1) else nullcontext()
            with ctx:
                logps, mask = logps_of(batch)
                adv = torch.tensor([a for _, a in batch], dtype=logps.dtype, device=logps.device)
                behaviour = engine_logps(batch, logps) if real else None
                is_w = None
                if behaviour is not None:
                    train_lp = old[i] if old is not None else logps.detach()
                    if epoch == 0:
                        for k, v in logprob_gap(train_lp, behaviour, mask).items():
                            gap[k] += v
                    if cfg.rollout.is_cap is not None:
                        is_w = truncated_is_weights(train_lp, behaviour, mask, cfg.rollout.is_cap)
                tok = per_token_loss(
                    logps, adv,
                    old_logps=old[i] if (old is not None and real) else None,
                    ref_logps=ref[i] if (ref is not None and real) else None,
                    clip_eps=lc.clip_eps, kl_coef=lc.kl_coef if real else 0.0, is_weights=is_w,
                )
                loss = aggregate(tok, mask, lc.aggregation, normaliser) * (1.0 if real else 0.0)
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
    return UpdateStats(loss=loss_sum / lc.inner_epochs, grad_norm=grad_norm, samples=float(len(items)),
                       lr=comp.scheduler.get_last_lr()[0], weights_rank_spread=_weights_spread(acc, trainable),
                       engine_abs_gap=gap["abs_gap_sum"], engine_kl=gap["kl_sum"], engine_tokens=gap["tokens"])


def _weights_spread(acc: Any, params: list[torch.Tensor]) -> float:
    """Max minus min over ranks of a checksum of the trainable weights: 0 when data parallel is in sync."""
    with torch.no_grad():
        checksum = sum(p.detach().double().sum() for p in params) if params else torch.zeros(())
        checksum = checksum.reshape(1).to(acc.device)
    if acc.num_processes == 1:
        return 0.0
    every = acc.gather(checksum)
    return float(every.max() - every.min())


def _dummy_sample(roots: list[Node]) -> Any:
    for root in roots:
        for node in root.walk():
            for row in node.completions:
                if row:
                    return row[0]
    raise RuntimeError("no completion to run a zero-weight micro-batch on")
