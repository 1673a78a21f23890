"""MAGRPO loss: policy-gradient terms per completion token, masked and aggregated explicitly.

Pure tensor functions. A step's samples are processed in micro-batches; each micro-batch's loss is
divided by the normaliser of the WHOLE step (token count or sequence count), so summing micro-batch
gradients gives exactly the full-batch `token_mean`, `seq_mean` or `seq_sum` gradient.

How a step's token losses are aggregated is a `LossRule` in the `LOSSES` table
(`comlrl.config.registry.register_loss` adds to it; `magrpo.loss.aggregation` chooses). The functions work on the
tensors they are given, so importing this module loads no torch (the config reads `LOSSES` at load time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LossRule:
    """One way to turn a step's per-token losses into its loss: `reduce(token_loss, mask)` sums a
    micro-batch's share, `normaliser(lengths)` is what the whole step divides by (>= 1). `needs` names
    inputs beyond per-token losses (e.g. "pairs": preference pairs of completions); every built-in
    needs none, and the trainer refuses one whose needs it does not provide."""

    reduce: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    normaliser: Callable[[Sequence[int]], float]
    needs: tuple[str, ...] = ()


def _token_sum(token_loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (token_loss * mask).sum()


def _seq_means(token_loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return ((token_loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).sum()


def _tokens(lengths: Sequence[int]) -> float:
    return float(max(1, sum(lengths)))


def _sequences(lengths: Sequence[int]) -> float:
    return float(max(1, len(lengths)))


# the one table of losses (`comlrl.config.registry.register_loss` adds to it), in the config's order:
# token_mean: masked token losses / tokens in the whole step; seq_mean: each sequence's mean token loss /
# sequences in the step; seq_sum: each sequence's summed token loss / sequences (CoMLRL's per-sequence
# summed log-prob loss, where a long completion weighs more)
LOSSES: dict[str, LossRule] = {
    "token_mean": LossRule(_token_sum, _tokens),
    "seq_mean": LossRule(_seq_means, _sequences),
    "seq_sum": LossRule(_token_sum, _sequences),
}


def _rule(how: str) -> LossRule:
    if how not in LOSSES:
        raise ValueError(f"aggregation={how!r}; expected one of {tuple(LOSSES)}")
    return LOSSES[how]


def completion_mask(completion_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """1 for real completion tokens (up to and including EOS), 0 for padding after them."""
    import torch

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
    ratio = (logps - old).exp()
    adv = advantages.unsqueeze(1)
    loss = -adv * ratio
    if clip_eps is not None:
        clipped = -adv * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
        loss = loss.maximum(clipped)
    if is_weights is not None:
        loss = loss * is_weights
    if kl_coef > 0.0:
        if ref_logps is None:
            raise ValueError("kl_coef > 0 needs ref_logps")
        delta = ref_logps - logps
        loss = loss + kl_coef * (delta.exp() - delta - 1.0)
    return loss


def aggregate(
    token_loss: torch.Tensor, mask: torch.Tensor, how: str, normaliser: float
) -> torch.Tensor:
    """This micro-batch's share of the step loss: the rule's sum over it / `normaliser` (the whole step's,
    `step_normaliser`)."""
    return _rule(how).reduce(token_loss, mask) / normaliser


def step_normaliser(lengths: list[int], how: str) -> float:
    """What the whole step divides by: tokens (token_mean) or sequences (seq_mean, seq_sum); at least 1."""
    return _rule(how).normaliser(lengths)


def truncated_is_weights(train_logps: torch.Tensor, engine_logps: torch.Tensor, mask: torch.Tensor,
                         cap: float) -> torch.Tensor:
    """min(pi_train / pi_engine, cap) per token, detached; 1 on masked positions.

    The rollout engine (e.g. vLLM) samples from numerically different probabilities than the model being
    trained; weighting each token by this capped ratio (truncated importance sampling, as TRL does) keeps
    the gradient that of the trained policy while the cap bounds its variance.
    """
    ratio = (train_logps.detach() - engine_logps).clamp(max=math.log(cap)).exp()
    return ratio.masked_fill(mask <= 0, 1.0)


def logprob_gap(train_logps: torch.Tensor, engine_logps: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Token sums of the engine/trainer mismatch: |delta log p|, the k3 KL(engine || train), and the count.

    Sums (not means), so micro-batches and ranks add up; divide by `tokens` for the step's means.
    """
    delta = (engine_logps - train_logps.detach()) * mask
    k3 = ((-delta).exp() + delta - 1.0) * mask
    return {"abs_gap_sum": float(delta.abs().sum()), "kl_sum": float(k3.sum()), "tokens": float(mask.sum())}


def sequence_logps(logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each completion's log-probability: its masked token log-probs summed, [B]."""
    return (logps * mask).sum(dim=1)


def dpo_loss(chosen: torch.Tensor, rejected: torch.Tensor, ref_chosen: torch.Tensor, ref_rejected: torch.Tensor,
             beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, margin) per pair: loss = -log sigmoid(margin), margin = beta * ((c - ref_c) - (r - ref_r)), where
    each term is a completion's summed log-prob under the policy or the reference. The margin is the
    difference of the implicit rewards beta * log(pi / ref) of the chosen and the rejected completion."""
    import torch.nn.functional as F

    margin = beta * ((chosen - ref_chosen) - (rejected - ref_rejected))
    return -F.logsigmoid(margin), margin


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked per-token k3 estimate of KL(pi || ref), exp(ref - logp) - (ref - logp) - 1 (>= 0), [B, L]."""
    delta = ref_logps - logps
    return (delta.exp() - delta - 1.0) * mask
