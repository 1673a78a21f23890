"""The trainer's side: Atropos's scored groups as training units (comlrl/run/atropos_groups.py),
hand-computed, no models. (The environments' side of a group: test_atropos_groups.py.)"""

from __future__ import annotations

import math

import pytest

from comlrl.run.atropos_groups import Estimator, MalformedGroup, batch_units, group_units, trained_spans

M = -100


def group(tokens, masks, scores, **extra):
    return {"tokens": tokens, "masks": masks, "scores": scores, **extra}


@pytest.mark.parametrize(("mask", "spans"), [
    ([M, M, 5, 6], [(2, 4)]),
    ([M, 5, M, 7, 8, M], [(1, 2), (3, 5)]),  # two assistant turns around a masked tool response
    ([4, 5, M], [(1, 2)]),  # position 0 has no context: never trained
    ([M, M, M], []),
    ([9], []),
])
def test_trained_spans(mask, spans):
    assert trained_spans(mask) == spans


def test_advantages_from_scores_by_the_runs_estimator():
    """Scores 1, 0 with the mean baseline and group scaling: (1 - .5) / .5 = +1 and -1 (std 0.5)."""
    g = group([[1, 2, 3], [1, 2, 4]], [[M, M, 3], [M, M, 4]], [1.0, 0.0])
    units, signal, own = group_units(g, 0, Estimator("mean", "group", 0.0))
    assert signal and not own
    assert [u.advantages for u in units] == [(1.0,), (-1.0,)]
    s = units[0].samples[0]
    assert (s.agent, s.prompt_ids, s.completion_ids, s.logprobs) == (0, (1, 2), (3,), None)
    units, _, _ = group_units(g, 1, Estimator("none", "none"))  # REINFORCE on raw scores, agent 1
    assert [u.advantages for u in units] == [(1.0,), (0.0,)] and units[0].samples[0].agent == 1


def test_tied_scores_carry_no_signal():
    g = group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [0.5, 0.5])
    assert group_units(g, 0, Estimator()) == ([], False, False)


def test_a_group_of_one_without_advantages_has_no_signal():
    assert group_units(group([[1, 2]], [[M, 2]], [1.0]), 0, Estimator()) == ([], False, False)


def test_own_advantages_are_averaged_over_each_span():
    """Per-token advantages (Atropos's field): each span's sample gets its tokens' mean."""
    g = group([[1, 2, 3, 4, 5]], [[M, 2, M, 4, 5]], [0.0], advantages=[[0, 3.0, 9, 1.0, 2.0]])
    units, signal, own = group_units(g, 0, Estimator())
    assert signal and own
    assert [(u.samples[0].prompt_ids, u.samples[0].completion_ids, u.advantages) for u in units] == [
        ((1,), (2,), (3.0,)), ((1, 2, 3), (4, 5), (1.5,))]


def test_multi_span_sequence_becomes_one_sample_per_span_sharing_its_prefix():
    g = group([[7, 8, 9, 10, 11], [7, 8, 9, 12, 13]], [[M, 8, M, 10, 11], [M, 8, M, M, 13]], [2.0, 0.0])
    units, _, _ = group_units(g, 0, Estimator("mean", "none"))
    got = [(u.samples[0].prompt_ids, u.samples[0].completion_ids, u.advantages[0]) for u in units]
    assert got == [((7,), (8,), 1.0), ((7, 8, 9), (10, 11), 1.0), ((7,), (8,), -1.0), ((7, 8, 9, 12), (13,), -1.0)]


def test_inference_logprobs_become_the_samples_engine_logprobs():
    """Aligned with tokens, 1.0 at masked positions (Atropos's convention); a trained position holding 1.0
    has no log-prob, so that sample gets none (no importance weight)."""
    g = group([[1, 2, 3], [1, 2, 4]], [[M, 2, 3], [M, 2, 4]], [1.0, 0.0],
              inference_logprobs=[[1.0, -0.5, -0.25], [1.0, -0.1, 1.0]])
    units, _, _ = group_units(g, 0, Estimator())
    assert [u.samples[0].logprobs for u in units] == [(-0.5, -0.25), None]


@pytest.mark.parametrize(("bad", "kind"), [
    ("not a dict", "not an object"),
    ({"tokens": [[1, 2]], "masks": [[M, 2]]}, "missing field"),
    (group([[1, 2], [1, 3]], [[M, 2]], [1.0, 0.0]), "length mismatch"),
    (group([], [], []), "length mismatch"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, math.nan]), "bad score"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, "x"]), "bad score"),
    (group([[1, 2], [1, 3]], [[M, 2], [M]], [1.0, 0.0]), "mask length"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, 4]], [1.0, 0.0]), "mask not tokens"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, M]], [1.0, 0.0]), "nothing trained"),
    (group([[1, "a"], [1, 3]], [[M, 2], [M, 3]], [1.0, 0.0]), "tokens not integers"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, 0.0], advantages=[[1.0]]), "advantages shape"),
    (group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, 0.0], inference_logprobs=[[0, 0], [0, math.inf]]),
     "inference_logprobs shape"),
])
def test_malformed_groups_name_their_defect(bad, kind):
    with pytest.raises(MalformedGroup) as err:
        group_units(bad, 0, Estimator())
    assert err.value.kind == kind


def test_too_long_sequences_are_malformed_against_max_token_len():
    g = group([[1, 2, 3], [1, 2, 4]], [[M, 2, 3], [M, 2, 4]], [1.0, 0.0])
    with pytest.raises(MalformedGroup, match="max_token_len=2"):
        group_units(g, 0, Estimator(), max_len=2)
    assert group_units(g, 0, Estimator(), max_len=3)[1]


def test_a_batch_counts_signal_ties_and_malformed_groups_by_kind():
    good = group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, 0.0], inference_logprobs=[[1.0, -1.0], [1.0, -2.0]])
    tied = group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [0.0, 0.0])
    out = batch_units([good, tied, {"tokens": []}, "x", "y"], 0, Estimator())
    assert (out.groups.groups, out.groups.skipped, out.sequences) == (2, 1, 4)
    assert len(out.units) == 2 and out.with_logprobs == 2 and out.scores == [1.0, 0.0, 0.0, 0.0]
    assert out.malformed == {"missing field": 1, "not an object": 2}


def test_several_agents_one_environment_each():
    """env_id i trains agent i; a group of an env_id with no agent is skipped and counted."""
    g0 = group([[1, 2], [1, 3]], [[M, 2], [M, 3]], [1.0, 0.0], env_id=0)
    g1 = {**g0, "env_id": 1}
    g5 = {**g0, "env_id": 5}
    out = batch_units([g0, g1, g5], {0: 0, 1: 1}, Estimator())
    assert [u.samples[0].agent for u in out.units] == [0, 0, 1, 1]
    assert out.malformed == {"unknown env_id": 1}
