"""The packed layout (comlrl/policy/packing.py), exhaustively and without models: rows, positions, block masks,
and which hidden state predicts which completion token."""

from __future__ import annotations

import itertools

import pytest
import torch

from comlrl.policy.packing import hidden_to_logprobs, pack, prompt_groups

NEG = torch.finfo(torch.float32).min


def test_groups_are_consecutive_runs_of_agent_and_prompt() -> None:
    keys = [(0, (1, 2)), (0, (1, 2)), (1, (1, 2)), (1, (1, 2)), (0, (1, 2)), (0, (3,))]
    assert prompt_groups(keys, share=True) == [[0, 1], [2, 3], [4], [5]]
    assert prompt_groups(keys, share=False) == [[i] for i in range(6)]


def test_shared_row_layout_positions_and_predictors() -> None:
    b = pack([0, 0, 1], [(5, 6, 7), (5, 6, 7), (8,)], [(10, 11), (12, 13, 14), (20,)], [2, 3, 1], pad_id=99)
    assert b.input_ids.tolist() == [[5, 6, 7, 10, 11, 12, 13, 14], [8, 20, 99, 99, 99, 99, 99, 99]]
    # each completion is numbered as if it followed the prompt alone
    assert b.position_ids[0].tolist() == [0, 1, 2, 3, 4, 3, 4, 5]
    assert b.row_agents.tolist() == [0, 1] and b.sample_agents.tolist() == [0, 0, 1]
    w = b.input_ids.shape[1]
    # first completion token of every sample is predicted by its prompt's last token
    assert b.pred_index.tolist() == [[2, 3, 0], [2, 5, 6], [w + 0, 0, 0]]
    assert b.targets.tolist() == [[10, 11, 0], [12, 13, 14], [20, 0, 0]]
    assert b.mask.tolist() == [[1, 1, 0], [1, 1, 1], [1, 0, 0]]
    assert b.tokens == 10


def test_action_index_is_each_samples_last_counted_token_where_a_q_head_reads() -> None:
    """The state after the action: the position of the last completion token that counts (up to its EOS),
    in its own row; an empty completion's is its prompt's last token."""
    b = pack([0, 0, 1, 1], [(5, 6, 7), (5, 6, 7), (8,), (9, 9)], [(10, 11), (12, 13, 14), (20,), ()], [2, 2, 1, 0])
    w = b.input_ids.shape[1]
    # row 0: 5 6 7 | 10 11 | 12 13 14 (the second sample counts two tokens: its EOS was 13)
    assert b.action_index.tolist() == [4, 6, w + 1, 2 * w + 1]
    flat = b.input_ids.reshape(-1)
    assert flat[b.action_index].tolist() == [11, 13, 20, 9]
    unshared = pack([0, 0], [(5, 6, 7), (5, 6, 7)], [(10, 11), (12, 13, 14)], [2, 3], share_prefix=False)
    w = unshared.input_ids.shape[1]
    assert unshared.action_index.tolist() == [4, w + 5]


def test_block_mask_lets_a_completion_see_its_prompt_and_own_past_only() -> None:
    b = pack([0, 0], [(5, 6), (5, 6)], [(10, 11), (12,)], [2, 1])
    allowed = (b.attention[0, 0] == 0).int().tolist()
    #               5  6  10 11 12
    assert allowed == [[1, 0, 0, 0, 0],   # 5
                       [1, 1, 0, 0, 0],   # 6
                       [1, 1, 1, 0, 0],   # 10
                       [1, 1, 1, 1, 0],   # 11
                       [1, 1, 0, 0, 1]]   # 12 does not see the sibling completion
    assert b.attention.shape == (1, 1, 5, 5) and b.attention.dtype == torch.float32
    assert set(b.attention.unique().tolist()) == {0.0, NEG}


def test_padding_positions_attend_to_themselves_so_softmax_stays_finite() -> None:
    b = pack([0, 0, 1], [(5,), (5,), (7, 8, 9)], [(10,), (11,), (12, 13, 14, 15)], [1, 1, 4])
    row0 = (b.attention[0, 0] == 0)
    assert row0.any(dim=-1).all()  # every query position attends to something
    assert row0[3:, 3:].equal(torch.eye(b.input_ids.shape[1] - 3, dtype=torch.bool))


def test_unshared_layout_is_plain_causal_with_a_padding_mask() -> None:
    b = pack([0, 0], [(5, 6), (5, 6)], [(10, 11), (12,)], [2, 1], share_prefix=False)
    assert b.attention.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert b.input_ids[:, :3].tolist() == [[5, 6, 10], [5, 6, 12]]
    assert b.pred_index.tolist() == [[1, 2], [4 + 1, 0]]
    assert b.tokens == 7


def test_mask_stops_at_the_loss_length_and_empty_completions_count_nothing() -> None:
    b = pack([0, 0], [(5,), (5,)], [(10, 2, 11), ()], [2, 0])  # 2 = EOS: the token after it is junk
    assert b.mask.tolist() == [[1, 1, 0], [0, 0, 0]]


@pytest.mark.parametrize("share", [True, False])
def test_every_target_is_the_token_after_its_predictor_in_its_own_sequence(share: bool) -> None:
    """For all small layouts: reading each sample back through (row, position) reconstructs prompt + completion
    in the order the model sees it, i.e. the predictor of target t is the previous token of that sample."""
    prompts = [(3, 4), (3, 4), (5,), (3, 4)]
    for comps in itertools.product([(), (20,), (21, 22)], repeat=3):
        comps = (*comps, (23, 24, 25))
        agents = [0, 0, 0, 1]
        b = pack(agents, prompts, comps, [len(c) for c in comps], share_prefix=share)
        flat = b.input_ids.flatten()
        for i, comp in enumerate(comps):
            seq = list(prompts[i]) + list(comp)
            for t, tok in enumerate(comp):
                assert int(b.targets[i, t]) == tok
                assert int(flat[b.pred_index[i, t]]) == seq[len(prompts[i]) + t - 1]


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ValueError, match="one entry per sample"):
        pack([0], [(1,)], [(2,), (3,)], [1])
    with pytest.raises(ValueError, match="non-empty prompt"):
        pack([0], [()], [(2,)], [1])
    with pytest.raises(ValueError, match="at least one sample"):
        pack([], [], [], [])


def _seen(b, i: int, t: int) -> tuple[list[int], list[int]]:
    """The tokens (ordered by position id) and the position ids the query predicting sample i's completion token
    t attends to."""
    w = b.input_ids.shape[1]
    q = int(b.pred_index[i, t])
    row, col = divmod(q, w)
    if b.attention.dim() == 2:  # plain causal with a padding mask
        cols = [c for c in range(col + 1) if b.attention[row, c]]
    else:
        cols = (b.attention[row, 0, col] == 0).nonzero().flatten().tolist()
    cols.sort(key=lambda c: int(b.position_ids[row, c]))
    return [int(b.input_ids[row, c]) for c in cols], [int(b.position_ids[row, c]) for c in cols]


def test_groups_whose_prompts_start_alike_share_a_trunk_then_their_own_tails() -> None:
    b = pack([0, 0, 0, 0], [(1, 2, 3), (1, 2, 3), (1, 2, 4, 5), (1, 2, 4, 5)], [(10,), (11,), (12, 13), (14,)],
             [1, 1, 2, 1], pad_id=99)
    # one row: the trunk 1 2, group 1's tail 3 and completions, group 2's tail 4 5 and completions
    assert b.input_ids.tolist() == [[1, 2, 3, 10, 11, 4, 5, 12, 13, 14]]
    assert b.position_ids.tolist() == [[0, 1, 2, 3, 3, 2, 3, 4, 5, 4]]
    assert b.pred_index.tolist() == [[2, 0], [2, 0], [6, 7], [6, 0]]
    assert b.tokens == 10  # the unshared layout computes 4 + 4 + 6 + 5 = 19
    assert _seen(b, 2, 1) == ([1, 2, 4, 5, 12], [0, 1, 2, 3, 4])  # never group 1's tail or a sibling


def test_trunks_join_one_agents_consecutive_groups_only_when_they_share_and_it_pays() -> None:
    comps = [(10,), (11,)]
    # other agent, or nothing shared: separate rows
    assert pack([0, 1], [(1, 2), (1, 3)], comps, [1, 1]).input_ids.shape[0] == 2
    assert pack([0, 0], [(1, 2), (7, 3)], comps, [1, 1]).input_ids.shape[0] == 2
    # one shared token against a long group: one row of 1 + 1 + 1 + 40 + 1 = 44 beats two rows of 42
    long = (1, *range(100, 140))
    assert pack([0, 0], [(1, 2), long], comps, [1, 1]).input_ids.shape[0] == 1
    # sharing one token, a merged row of 19 would pad three rows to 19 where a row of its own keeps them at 10
    b = pack([1, 0, 0], [(7, *[8] * 8), (1, *[2] * 8), (1, *[3] * 8)], [(10,), (11,), (12,)], [1, 1, 1])
    assert b.input_ids.shape[0] == 3 and b.row_lengths.tolist() == [10, 10, 10]


def test_a_row_never_grows_past_the_cap() -> None:
    from comlrl.policy.packing import prompt_groups, trunk_rows

    prompts = [(1, *range(100 * k, 100 * k + 30)) for k in (1, 2, 3)]  # 31 tokens, one shared
    keys = [(0, p) for p in prompts]
    rows = trunk_rows(prompt_groups(keys, True), [0, 0, 0], prompts, [(9,)] * 3, cap=64)
    assert [members for members, _ in rows] == [[[0], [1]], [[2]]] and [t for _, t in rows] == [1, 31]
    # past the cap, a row may still reach the widest row a group makes alone
    rows = trunk_rows(prompt_groups(keys, True), [0, 0, 0], prompts, [(9,)] * 3, cap=8)
    assert [members for members, _ in rows] == [[[0]], [[1]], [[2]]]


@pytest.mark.parametrize("share", [True, False])
def test_every_completion_token_sees_exactly_its_own_sequence_at_its_own_positions(share: bool) -> None:
    """For all small layouts of one agent's groups whose prompts start alike (or not), and another agent's: the
    query predicting each completion token attends to precisely its sample's prompt and own past, each token
    numbered by its place in that sequence, whatever rows and trunks the layout made."""
    prompt_sets = [(3, 4), (3, 4, 5), (3, 6), (7,)]
    for prompts in itertools.product(prompt_sets, repeat=3):
        for comps in itertools.product([(), (20,), (21, 22)], repeat=2):
            ps = [prompts[0], prompts[0], prompts[1], prompts[2], (8, 9)]
            cs = [comps[0], (30,), comps[1], (23, 24, 25), (26,)]
            agents = [0, 0, 0, 0, 1]
            b = pack(agents, ps, cs, [len(c) for c in cs], share_prefix=share)
            assert b.tokens <= sum(len(p) + len(c) for p, c in zip(ps, cs, strict=True))
            for i, comp in enumerate(cs):
                seq = list(ps[i]) + list(comp)
                for t in range(len(comp)):
                    n = len(ps[i]) + t
                    assert _seen(b, i, t) == (seq[:n], list(range(n))), (ps, cs, i, t)


@pytest.mark.parametrize("chunk", [3, 4, 100])
def test_chunked_log_probs_and_their_gradients_are_log_softmaxs(chunk: int) -> None:
    """The lm_head runs on chunks of tokens; several chunks are checkpointed (backward runs the head again on
    each), a single chunk keeps its logits (the head runs once)."""
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50)
    hidden = torch.randn(2, 5, 8, requires_grad=True)
    targets = torch.randint(0, 50, (2, 5))
    calls = [0]
    counted = head.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    got = hidden_to_logprobs(head, hidden, targets, temperature=0.7, chunk=chunk)
    got.sum().backward()
    counted.remove()
    grads = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    expected = torch.log_softmax(head(hidden) / 0.7, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    expected.sum().backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(grads, (hidden.grad, head.weight.grad))
    chunks = -(-10 // chunk)
    assert calls[0] == (2 * chunks if chunks > 1 else 1)
