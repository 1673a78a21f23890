"""Token layout of an update batch: completions that share a prompt share one copy of it.

The G samples of a node (and agent) have the same prompt. The unshared layout repeats that prompt in G
padded rows; the shared-prefix layout puts the prompt once in a row followed by all G completions, each
completion attending to the prompt and to itself only (a block mask) and numbered from the prompt's end,
as if it followed the prompt alone. Every completion token then sees exactly the context it saw when it was
sampled, so log-probs and gradients equal the unshared layout's (the prompt's hidden states are shared,
their gradient is the sum over the G completions), while the prompt is computed once instead of G times.
Groups whose prompts start alike (a later turn's prompt repeats the system message and the problem) share
that start the same way, one level up: a trunk, then each group's own prompt tail and completions
(`trunk_rows`); a row holds one agent's samples only.

The layout (`pack`) is pure index tensors. The forward that consumes it is here too: a packed batch's final
hidden states (`packed_hidden`) and the log-probs of its completion tokens without [B, L, V] logits alive
(`hidden_to_logprobs`, `grouped_logprobs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


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


# tokens a merged row may reach when the batch's rows are shorter (its [L, L] mask and attention grow with it);
# a batch of longer rows merges only within its widest one
SHARED_ROW_TOKENS = 512


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def trunk_rows(groups: list[list[int]], agents: Sequence[int], prompts: Sequence[Sequence[int]],
               completions: Sequence[Sequence[int]], cap: int = SHARED_ROW_TOKENS) -> list[tuple[list[int], int]]:
    """Consecutive groups of one agent whose prompts start alike, merged into rows: (the row's groups, its trunk
    length: how many prompt tokens they all share). A group joins the row before it when they share at least one
    token and the batch's padded area (rows x widest row) gets smaller, and the row stays within `cap` tokens
    or, past it, within the widest row the groups make alone (so attention per row never grows there). A
    turn's prompts that repeat the turn before's (the same system and problem, then a new message) then
    compute that start once."""
    rows: list[tuple[list[int], int]] = []
    width = 0  # the last row's tokens
    closed = 0  # the widest row before it

    def own(g: list[int], trunk: int) -> int:  # the tokens a group adds after a trunk
        return len(prompts[g[0]]) - trunk + sum(len(completions[i]) for i in g)

    cap = max(cap, max((own(g, 0) for g in groups), default=0))

    for g in groups:
        alone = own(g, 0)
        if rows and agents[rows[-1][0][0][0]] == agents[g[0]]:
            members, trunk = rows[-1]
            shared = min(trunk, _common_prefix(prompts[members[0][0]], prompts[g[0]]))
            merged = shared + sum(own(m, shared) for m in (*members, g))
            if shared > 0 and merged <= cap and \
                    len(rows) * max(closed, merged) < (len(rows) + 1) * max(closed, width, alone):
                rows[-1] = ([*members, g], shared)
                width = merged
                continue
        closed = max(closed, width)
        rows.append(([g], len(prompts[g[0]])))
        width = alone
    return rows


def packed_area(agents: Sequence[int], prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]) -> int:
    """The token slots `pack` (sharing prefixes) lays these samples out in: rows x the widest row, what a
    forward's activations grow with."""
    keys = [(int(a), tuple(p)) for a, p in zip(agents, prompts, strict=True)]
    layout = trunk_rows(prompt_groups(keys, True), agents, prompts, completions)
    widths = [trunk + sum(len(prompts[g[0]]) - trunk + sum(len(completions[i]) for i in g) for g in members)
              for members, trunk in layout]
    return len(widths) * max(widths, default=0)


def pack(agents: Sequence[int], prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
         lengths: Sequence[int], pad_id: int = 0, share_prefix: bool = True,
         dtype: torch.dtype = torch.float32) -> PackedBatch:
    """Lay out samples (agent, prompt ids, completion ids) in rows.

    `lengths[i]` is how many of sample i's completion tokens count in the loss (up to and including its
    first EOS). With `share_prefix` consecutive samples of the same agent and prompt share one copy of it,
    and consecutive such groups whose prompts start alike share that start (`trunk_rows`).
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
    layout = trunk_rows(groups, agents, prompts, completions) if share_prefix else \
        [([g], len(prompts[g[0]])) for g in groups]
    rows: list[list[int]] = []
    positions: list[list[int]] = []
    # per row, its segments: (start, length, parent segment or -1); a token sees its segment's past and every
    # token of the segment's ancestors (the trunk, then the group's own prompt tail, then the completion)
    segments: list[list[tuple[int, int, int]]] = []
    starts = [0] * n
    prompt_ends = [0] * n  # where each sample's prompt ends in its row (its last token predicts the completion)
    row_of = [0] * n
    for members, trunk in layout:
        prompt = list(prompts[members[0][0]])
        row, pos, segs = prompt[:trunk], list(range(trunk)), [(0, trunk, -1)]
        for group in members:
            tail = list(prompts[group[0]])[trunk:]
            parent = 0
            if tail:
                segs.append((len(row), len(tail), 0))
                parent = len(segs) - 1
                row += tail
                pos += range(trunk, trunk + len(tail))
            end, offset = (len(row) - 1 if tail else trunk - 1), trunk + len(tail)
            for i in group:
                comp = list(completions[i])
                starts[i], prompt_ends[i], row_of[i] = len(row), end, len(rows)
                segs.append((len(row), len(comp), parent))
                row += comp
                pos += range(offset, offset + len(comp))
        rows.append(row)
        positions.append(pos)
        segments.append(segs)
    r, width = len(rows), max(len(row) for row in rows)
    input_ids = torch.full((r, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((r, width), dtype=torch.long)
    for k, (row, pos) in enumerate(zip(rows, positions, strict=True)):
        input_ids[k, :len(row)] = torch.tensor(row, dtype=torch.long)
        position_ids[k, :len(pos)] = torch.tensor(pos, dtype=torch.long)
    if all(len(segs) == 2 for segs in segments):  # a prompt and one completion a row: plain causal attention
        attention = torch.zeros((r, width), dtype=torch.long)
        for k, row in enumerate(rows):
            attention[k, :len(row)] = 1
    else:
        attention = _block_mask(segments, width, dtype)
    comp_width = max(1, max(len(c) for c in completions))
    pred_index = torch.zeros((n, comp_width), dtype=torch.long)
    action_index = torch.zeros((n,), dtype=torch.long)
    targets = torch.zeros((n, comp_width), dtype=torch.long)
    mask = torch.zeros((n, comp_width), dtype=torch.float32)
    for i in range(n):
        comp, k = list(completions[i]), row_of[i]
        counted = min(len(comp), lengths[i])
        action_index[i] = (starts[i] + counted - 1 if counted else prompt_ends[i]) + k * width
        if not comp:
            continue
        preds = [prompt_ends[i]] + list(range(starts[i], starts[i] + len(comp) - 1))
        pred_index[i, :len(comp)] = torch.tensor(preds, dtype=torch.long) + k * width
        targets[i, :len(comp)] = torch.tensor(comp, dtype=torch.long)
        mask[i, :min(len(comp), lengths[i])] = 1.0
    row_agents = torch.tensor([keys[members[0][0]][0] for members, _ in layout], dtype=torch.long)
    return PackedBatch(input_ids, position_ids, attention, row_agents, pred_index, targets, mask,
                       torch.tensor([k[0] for k in keys], dtype=torch.long),
                       torch.tensor([len(row) for row in rows], dtype=torch.long), action_index)


def _block_mask(segments: list[list[tuple[int, int, int]]], width: int, dtype: torch.dtype) -> torch.Tensor:
    """[R, 1, L, L] additive mask: each segment is causal within itself and sees all of its ancestors (a
    completion: the trunk, its group's prompt tail, its own past; never a sibling). Padding positions see
    only themselves (a row of -inf alone would give NaN in softmax)."""
    allowed = torch.zeros((len(segments), width, width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for k, segs in enumerate(segments):
        for start, length, parent in segs:
            end = start + length
            allowed[k, start:end, start:end] = causal[:length, :length]
            while parent >= 0:
                p_start, p_length, parent = segs[parent]
                allowed[k, start:end, p_start:p_start + p_length] = True
        used = sum(length for _, length, _ in segs)
        idx = torch.arange(used, width)
        allowed[k, idx, idx] = True
    out = torch.zeros((len(segments), 1, width, width), dtype=dtype)
    out.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)
    return out


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

    The lm_head runs on chunks of tokens; with grad on and more than one chunk, each chunk is checkpointed so
    backward recomputes its logits instead of storing them (costs one more lm_head matmul, saves B*L*V*4 bytes).
    A single chunk keeps its logits for backward: at most `chunk` x V floats, and no second lm_head matmul
    (~3% of a CoMLRL-style script's update on the CPU).
    """
    b, t, d = hidden.shape
    flat_h, flat_t = hidden.reshape(b * t, d), targets.reshape(b * t)
    fn = partial(_chunk_logprobs, head, temperature)
    outs = []
    for s in range(0, b * t, chunk):
        if torch.is_grad_enabled() and b * t > chunk:
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
