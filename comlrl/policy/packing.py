"""Token layout of an update batch: completions that share a prompt share one copy of it.

The G samples of a node (and agent) have the same prompt. The unshared layout repeats that prompt in G
padded rows; the shared-prefix layout puts the prompt once in a row followed by all G completions, each
completion attending to the prompt and to itself only (a block mask) and numbered from the prompt's end,
as if it followed the prompt alone. Every completion token then sees exactly the context it saw when it was
sampled, so log-probs and gradients equal the unshared layout's (the prompt's hidden states are shared,
their gradient is the sum over the G completions), while the prompt is computed once instead of G times.

Pure: builds index tensors only; the model forward that consumes them lives in `comlrl.policy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch


@dataclass(frozen=True)
class PackedBatch:
    """Model inputs for a list of samples and where to read each sample's log-probs from.

    input_ids, position_ids: [R, L] rows (right-padded with `pad_id`).
    attention: [R, L] padding mask when no row holds more than one completion (plain causal attention),
        else a [R, 1, L, L] additive mask (0 = attend, -inf = not) for the block structure.
    row_agents: [R] the agent of each row (every sample of a row has the same agent).
    pred_index: [S, Lc] flat index into [R * L] of the hidden state that predicts each completion token.
    targets: [S, Lc] the completion tokens (0 past a sample's end).
    mask: [S, Lc] 1 on completion tokens up to and including the first EOS, 0 elsewhere.
    sample_agents: [S] agent per sample, in the order the samples were given.
    row_lengths: [R] real tokens per row.
    action_index: [S] flat index of the hidden state at each sample's last counted completion token (the
        state after its action: what a Q head reads); the prompt's last token for an empty completion.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention: torch.Tensor
    row_agents: torch.Tensor
    pred_index: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    sample_agents: torch.Tensor
    row_lengths: torch.Tensor
    action_index: torch.Tensor

    @property
    def tokens(self) -> int:
        """Real (non-padding) tokens the forward computes."""
        return int(self.row_lengths.sum())

    def to(self, device: torch.device | str) -> PackedBatch:
        return PackedBatch(*(vars(self)[f.name].to(device) for f in fields(self)))


def prompt_groups(prompts: Sequence[tuple[int, tuple[int, ...]]], share: bool) -> list[list[int]]:
    """Indices of samples grouped by (agent, prompt): consecutive runs of equal keys when `share`, else
    singletons. Order is kept, so the samples of a group stay adjacent and outputs need no reordering."""
    groups: list[list[int]] = []
    for i, key in enumerate(prompts):
        if share and groups and prompts[groups[-1][0]] == key:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def pack(agents: Sequence[int], prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
         lengths: Sequence[int], pad_id: int = 0, share_prefix: bool = True,
         dtype: torch.dtype = torch.float32) -> PackedBatch:
    """Lay out samples (agent, prompt ids, completion ids) in rows.

    `lengths[i]` is how many of sample i's completion tokens count in the loss (up to and including its
    first EOS). With `share_prefix` consecutive samples of the same agent and prompt share one row.
    A prompt must be non-empty (its last token predicts the completion's first).
    """
    n = len(agents)
    if not (len(prompts) == len(completions) == len(lengths) == n):
        raise ValueError("agents, prompts, completions and lengths must have one entry per sample")
    if n == 0:
        raise ValueError("pack needs at least one sample")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every sample needs a non-empty prompt")
    keys = [(int(a), tuple(p)) for a, p in zip(agents, prompts, strict=True)]
    groups = prompt_groups(keys, share_prefix)
    rows: list[list[int]] = []
    positions: list[list[int]] = []
    # per row: (prompt length, [(start, length) of each completion])
    blocks: list[tuple[int, list[tuple[int, int]]]] = []
    starts = [0] * n
    for group in groups:
        prompt = list(prompts[group[0]])
        row, pos, spans = list(prompt), list(range(len(prompt))), []
        for i in group:
            comp = list(completions[i])
            starts[i] = len(row)
            spans.append((len(row), len(comp)))
            row += comp
            pos += range(len(prompt), len(prompt) + len(comp))
        rows.append(row)
        positions.append(pos)
        blocks.append((len(prompt), spans))
    r, width = len(rows), max(len(row) for row in rows)
    input_ids = torch.full((r, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((r, width), dtype=torch.long)
    for k, (row, pos) in enumerate(zip(rows, positions, strict=True)):
        input_ids[k, :len(row)] = torch.tensor(row, dtype=torch.long)
        position_ids[k, :len(pos)] = torch.tensor(pos, dtype=torch.long)
    if all(len(spans) == 1 for _, spans in blocks):
        attention = torch.zeros((r, width), dtype=torch.long)
        for k, row in enumerate(rows):
            attention[k, :len(row)] = 1
    else:
        attention = _block_mask(blocks, width, dtype)
    row_of = {i: k for k, group in enumerate(groups) for i in group}
    comp_width = max(1, max(len(c) for c in completions))
    pred_index = torch.zeros((n, comp_width), dtype=torch.long)
    action_index = torch.zeros((n,), dtype=torch.long)
    targets = torch.zeros((n, comp_width), dtype=torch.long)
    mask = torch.zeros((n, comp_width), dtype=torch.float32)
    for i in range(n):
        comp, k = list(completions[i]), row_of[i]
        prompt_end = blocks[k][0] - 1  # the prompt's last token predicts the first completion token
        counted = min(len(comp), lengths[i])
        action_index[i] = (starts[i] + counted - 1 if counted else prompt_end) + k * width
        if not comp:
            continue
        preds = [prompt_end] + list(range(starts[i], starts[i] + len(comp) - 1))
        pred_index[i, :len(comp)] = torch.tensor(preds, dtype=torch.long) + k * width
        targets[i, :len(comp)] = torch.tensor(comp, dtype=torch.long)
        mask[i, :min(len(comp), lengths[i])] = 1.0
    row_agents = torch.tensor([keys[group[0]][0] for group in groups], dtype=torch.long)
    return PackedBatch(input_ids, position_ids, attention, row_agents, pred_index, targets, mask,
                       torch.tensor([k[0] for k in keys], dtype=torch.long),
                       torch.tensor([len(row) for row in rows], dtype=torch.long), action_index)


def _block_mask(blocks: list[tuple[int, list[tuple[int, int]]]], width: int, dtype: torch.dtype) -> torch.Tensor:
    """[R, 1, L, L] additive mask: the prompt is causal; each completion sees the prompt and its own past.
    Padding positions see only themselves (a row of -inf alone would give NaN in softmax)."""
    allowed = torch.zeros((len(blocks), width, width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for k, (p, spans) in enumerate(blocks):
        allowed[k, :p, :p] = causal[:p, :p]
        for start, length in spans:
            end = start + length
            allowed[k, start:end, :p] = True
            allowed[k, start:end, start:end] = causal[:length, :length]
        used = p + sum(length for _, length in spans)
        idx = torch.arange(used, width)
        allowed[k, idx, idx] = True
    out = torch.zeros((len(blocks), 1, width, width), dtype=dtype)
    out.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)
    return out
