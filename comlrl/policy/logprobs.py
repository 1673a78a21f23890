"""Log-probs of completion tokens from a packed batch (`comlrl.policy.packing`), without [B, L, V] logits alive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from comlrl.policy.packing import PackedBatch

LOGIT_CHUNK_TOKENS = 512  # tokens per lm_head chunk: 512 x 49k vocab x 4 B = 100 MB of logits at a time


def _chunk_logprobs(head: Callable[[torch.Tensor], torch.Tensor], temperature: float, h: torch.Tensor,
                    targets: torch.Tensor) -> torch.Tensor:
    logits = head(h).float()
    if temperature != 1.0:
        logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)


def hidden_to_logprobs(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, targets: torch.Tensor,
                       temperature: float = 1.0, chunk: int = LOGIT_CHUNK_TOKENS) -> torch.Tensor:
    """log p(target) from final hidden states without keeping [B, L, V] fp32 logits alive.

    The lm_head runs on chunks of tokens; with grad on, each chunk is checkpointed so backward recomputes
    its logits instead of storing them (costs one more lm_head matmul, saves B*L*V*4 bytes).
    """
    b, t, d = hidden.shape
    flat_h, flat_t = hidden.reshape(b * t, d), targets.reshape(b * t)
    fn = partial(_chunk_logprobs, head, temperature)
    outs = []
    for s in range(0, b * t, chunk):
        if torch.is_grad_enabled():
            outs.append(checkpoint(fn, flat_h[s:s + chunk], flat_t[s:s + chunk], use_reentrant=False))
        else:
            outs.append(fn(flat_h[s:s + chunk], flat_t[s:s + chunk]))
    return torch.cat(outs).view(b, t) if outs else hidden.new_zeros(b, t, dtype=torch.float32)


def packed_hidden(model: nn.Module, batch: PackedBatch) -> torch.Tensor:
    """Final hidden states of a packed batch, flattened to [R * L, D] for `pred_index` lookups."""
    hidden = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention,
                                 position_ids=batch.position_ids, use_cache=False).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])


def grouped_logprobs(models: Sequence[nn.Module], batch: PackedBatch, temperature: float,
                     states: bool = False, at_action: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """[S, Lc] log-probs when each agent has its own model: one forward per agent over its rows; with
    `states`, also each sample's final hidden state at its prompt's last token (`at_action`: at its action's
    last token, `PackedBatch.action_index`), as float32 [S, D] (agents of different widths: zero-padded to
    the widest)."""
    out = batch.targets.new_zeros(batch.targets.shape, dtype=torch.float32)
    ends: list[tuple[torch.Tensor, torch.Tensor]] = []
    width = batch.input_ids.shape[1]
    for a in torch.unique(batch.row_agents).tolist():
        rows = (batch.row_agents == a).nonzero().squeeze(1)
        local = torch.full((len(batch.row_agents),), -1, dtype=torch.long, device=rows.device)
        local[rows] = torch.arange(len(rows), device=rows.device)
        part = PackedBatch(batch.input_ids[rows], batch.position_ids[rows], batch.attention[rows],
                           batch.row_agents[rows], batch.pred_index, batch.targets, batch.mask,
                           batch.sample_agents, batch.row_lengths[rows], batch.action_index)
        flat = packed_hidden(models[a], part)
        mine = (batch.sample_agents == a).nonzero().squeeze(1)
        pred = batch.pred_index[mine]
        pred = local[pred // width] * width + pred % width
        lp = hidden_to_logprobs(models[a].get_output_embeddings(), flat[pred], batch.targets[mine], temperature)
        out = out.index_put((mine,), lp.to(out.dtype))
        if states:
            at = batch.action_index[mine] if at_action else batch.pred_index[mine][:, 0]
            ends.append((mine, flat[local[at // width] * width + at % width].float()))
    if not states:
        return out
    widest = max(h.shape[1] for _, h in ends)
    hidden = out.new_zeros(out.shape[0], widest)
    for mine, h in ends:
        hidden = hidden.index_put((mine,), torch.nn.functional.pad(h, (0, widest - h.shape[1])))
    return out, hidden
