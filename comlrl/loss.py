"""MAGRPO loss: policy-gradient terms per completion token, masked and aggregated explicitly.

Pure tensor functions. A step's samples are processed in micro-batches; each micro-batch's loss is
divided by the normaliser of the WHOLE step (token count or sequence count), so summing micro-batch
gradients gives exactly the full-batch `token_mean`, `seq_mean` or `seq_sum` gradient.
"""

from __future__ import annotations

import math

import torch

AGGREGATIONS = ("token_mean", "seq_mean", "seq_sum")


def completion_mask(completion_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """1 for real completion tokens (up to and including EOS), 0 for padding after them."""
    positions = torch.arange(completion_ids.shape[1], device=completion_ids.device)
    return (positions.unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float32)


def per_token_loss(
    logps: torch.Tensor,
    advantages: torch.Tensor,
    old_logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    clip_eps: float | None = None,
    kl_coef: float = 0.0,
    is_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """-A * ratio (optionally PPO-clipped) [* is_weights] + kl_coef * KL(pi || ref), per token, shape [B, L].

    `old_logps` defaults to `logps.detach()`: ratio 1 with the gradient of log pi, the on-policy case.
    `is_weights` (from `truncated_is_weights`) corrects for samples drawn by an engine whose probabilities
    differ from the trained model's. The KL uses the k3 estimator exp(ref - logp) - (ref - logp) - 1, which
    is >= 0 and unbiased.
    """
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    adv = advantages.unsqueeze(1)
    loss = -adv * ratio
    if clip_eps is not None:
        clipped = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
        loss = torch.maximum(loss, clipped)
    if is_weights is not None:
        loss = loss * is_weights
    if kl_coef > 0.0:
        if ref_logps is None:
            raise ValueError("kl_coef > 0 needs ref_logps")
        delta = ref_logps - logps
        loss = loss + kl_coef * (torch.exp(delta) - delta - 1.0)
    return loss


def aggregate(
    token_loss: torch.Tensor, mask: torch.Tensor, how: str, normaliser: float
) -> torch.Tensor:
    """Sum this micro-batch's share of the step loss.

    token_mean: sum of masked token losses / `normaliser` (= tokens in the whole step).
    seq_mean:   sum over sequences of (mean of its tokens) / `normaliser` (= sequences in the whole step).
    seq_sum:    sum over sequences of (sum of its tokens) / `normaliser` (= sequences in the whole step):
                CoMLRL's per-sequence summed log-prob loss, where a long completion weighs more.
    """
    if how == "token_mean":
        return (token_loss * mask).sum() / normaliser
    if how == "seq_mean":
        per_seq = (token_loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_seq.sum() / normaliser
    if how == "seq_sum":
        return (token_loss * mask).sum() / normaliser
    raise ValueError(f"aggregation={how!r}; expected one of {AGGREGATIONS}")


def step_normaliser(lengths: list[int], how: str) -> float:
    """Tokens (token_mean) or sequences (seq_mean, seq_sum) of a whole step; at least 1."""
    if how == "token_mean":
        return float(max(1, sum(lengths)))
    if how in ("seq_mean", "seq_sum"):
        return float(max(1, len(lengths)))
    raise ValueError(f"aggregation={how!r}; expected one of {AGGREGATIONS}")


def truncated_is_weights(train_logps: torch.Tensor, engine_logps: torch.Tensor, mask: torch.Tensor,
                         cap: float) -> torch.Tensor:
    """min(pi_train / pi_engine, cap) per token, detached; 1 on masked positions.

    The rollout engine (e.g. vLLM) samples from numerically different probabilities than the model being
    trained; weighting each token by this capped ratio (truncated importance sampling, as TRL does) keeps
    the gradient that of the trained policy while the cap bounds its variance.
    """
    ratio = torch.exp((train_logps.detach() - engine_logps).clamp(max=math.log(cap)))
    return torch.where(mask > 0, ratio, torch.ones_like(ratio))


def logprob_gap(train_logps: torch.Tensor, engine_logps: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Token sums of the engine/trainer mismatch: |delta log p|, the k3 KL(engine || train), and the count.

    Sums (not means), so micro-batches and ranks add up; divide by `tokens` for the step's means.
    """
    delta = (engine_logps - train_logps.detach()) * mask
    k3 = (torch.exp(-delta) + delta - 1.0) * mask
    return {"abs_gap_sum": float(delta.abs().sum()), "kl_sum": float(k3.sum()), "tokens": float(mask.sum())}
