"""Preference pairs from sibling completions (comlrl.learn.preference): which pairs exist, which are selected."""

from __future__ import annotations

import itertools
import random

import pytest

from comlrl.learn.preference import candidate_pairs, select_pairs, tree_pairs
from comlrl.tree.nodes import Node

# values [0.2, 1.0, 0.5, 1.0]: the worked case of the reference library's pair selection (docs/algorithm.md)
VALUES = [0.2, 1.0, 0.5, 1.0]


def test_candidate_pairs_are_every_ordered_pair_with_a_gap_in_index_order():
    got = [(w, lo, round(g, 6)) for w, lo, g in candidate_pairs(VALUES, 1e-6)]
    assert got == [(1, 0, 0.8), (1, 2, 0.5), (2, 0, 0.3), (3, 0, 0.8), (3, 2, 0.5)]  # the 1.0/1.0 tie is no pair


def test_reward_gap_takes_the_largest_gaps_first_ties_in_index_order():
    assert [(w, lo) for w, lo, _ in select_pairs(VALUES, "reward_gap", None, 1e-6)] == [
        (1, 0), (3, 0), (1, 2), (3, 2), (2, 0)]
    assert [(w, lo) for w, lo, _ in select_pairs(VALUES, "reward_gap", 2, 1e-6)] == [(1, 0), (3, 0)]


def test_all_keeps_index_order_and_the_limit_cuts_it():
    assert [(w, lo) for w, lo, _ in select_pairs(VALUES, "all", None, 1e-6)] == [
        (1, 0), (1, 2), (2, 0), (3, 0), (3, 2)]
    assert [(w, lo) for w, lo, _ in select_pairs(VALUES, "all", 1, 1e-6)] == [(1, 0)]


def test_random_is_a_seeded_subset_of_the_candidates():
    every = set(candidate_pairs(VALUES, 1e-6))
    a = select_pairs(VALUES, "random", 3, 1e-6, random.Random(7))
    assert len(a) == 3 and set(a) <= every and len(set(a)) == 3
    assert a == select_pairs(VALUES, "random", 3, 1e-6, random.Random(7))
    draws = {tuple(select_pairs(VALUES, "random", 3, 1e-6, random.Random(s))) for s in range(20)}
    assert len(draws) > 1  # the seed matters
    with pytest.raises(ValueError, match="seeded"):
        select_pairs(VALUES, "random", 3, 1e-6)


def test_min_gap_filters_small_gaps_and_tied_groups_give_no_pairs():
    assert [(w, lo) for w, lo, _ in select_pairs(VALUES, "all", None, 0.5)] == [(1, 0), (1, 2), (3, 0), (3, 2)]
    assert select_pairs([1.0, 1.0, 1.0], "reward_gap", None, 1e-6) == []
    with pytest.raises(ValueError, match="min_gap"):
        candidate_pairs(VALUES, 0.0)
    with pytest.raises(ValueError, match="limit"):
        select_pairs(VALUES, "all", 0, 1e-6)
    with pytest.raises(ValueError, match="selection"):
        select_pairs(VALUES, "best", None, 1e-6)


@pytest.mark.parametrize("values", [list(v) for v in itertools.product([0.0, 0.5, 1.0], repeat=3)])
def test_every_selection_yields_pairs_whose_winner_is_better(values):
    for how in ("reward_gap", "all", "random"):
        for w, lo, gap in select_pairs(values, how, None, 1e-6, random.Random(0)):
            assert values[w] - values[lo] == pytest.approx(gap) and gap > 0
        assert len(select_pairs(values, how, None, 1e-6, random.Random(0))) == len(candidate_pairs(values, 1e-6))


def test_tree_pairs_rank_each_agents_completions_by_their_value_in_cross_mode():
    # agent 0's completion 0 sits in joint actions returning 3 and 1 (value 2), completion 1 in 0 and 0
    # (value 0); agent 1's completions: (3 + 0) / 2 = 1.5 and (1 + 0) / 2 = 0.5
    node = Node(id="r", turn=1, root=0, messages=[[], []], completions=[["a0", "a1"], ["b0", "b1"]],
                joint=[(0, 0), (0, 1), (1, 0), (1, 1)], returns=[3.0, 1.0, 0.0, 0.0])
    pairs = tree_pairs([node], "reward_gap", None, 1e-6)
    assert [(p.agent, p.winner, p.loser, p.gap) for p in pairs] == [(0, 0, 1, 2.0), (1, 0, 1, 1.0)]


def test_tree_pairs_walk_children_and_skip_tied_nodes():
    child = Node(id="r.0", turn=2, root=0, messages=[[]], completions=[["c0", "c1"]], joint=[(0,), (1,)],
                 returns=[1.0, 1.0])
    root = Node(id="r", turn=1, root=0, messages=[[]], completions=[["a0", "a1"]], joint=[(0,), (1,)],
                returns=[2.0, 0.0], children={0: child})
    pairs = tree_pairs([root], "all", None, 1e-6)
    assert [(p.node.id, p.winner, p.loser) for p in pairs] == [("r", 0, 1)]


# ---- pairs from a file (comlrl.learn.preference_file): offline DPO on `scripts/export.py --pairs` records --

def _line(**over):
    import json

    rec = {"prompt": [{"role": "user", "content": "Write f."}], "chosen": [{"role": "assistant", "content": "good"}],
           "rejected": [{"role": "assistant", "content": "bad"}], "meta": {"agent": 1}}
    rec.update(over)
    return json.dumps(rec)


def test_a_pair_record_reads_the_exported_format():
    from comlrl.learn.preference_file import parse_pair

    p = parse_pair(_line(), "f:1", 2)
    assert (p.agent, p.prompt, p.chosen, p.rejected) == (1, [{"role": "user", "content": "Write f."}], "good", "bad")
    assert parse_pair(_line(chosen="plain", meta={}), "f:1", 2).agent == 0  # no meta.agent: agent 0


@pytest.mark.parametrize(("line", "message"), [
    ("{", "f:3: not JSON"),
    ("[1]", "f:3: a record must be a JSON object"),
    (_line(prompt=[]), "f:3: 'prompt' must be a non-empty list"),
    (_line(meta={"agent": 2}), "f:3: meta.agent=2 is not an agent of this run (0..1)"),
    (_line(rejected=[{"role": "assistant"}]), "f:3: 'rejected' must be a string or a list of messages"),
])
def test_a_bad_record_is_one_line_naming_the_key_file_line_and_field(line, message):
    from comlrl.errors import ConfigError
    from comlrl.learn.preference_file import parse_pair

    with pytest.raises(ConfigError) as err:
        parse_pair(line, "f:3", 2)
    assert str(err.value).startswith(f"config error: algorithm.dpo.offline_pairs: {message}")
    assert "\n" not in str(err.value)


def test_read_pairs_refuses_missing_and_empty_files(tmp_path):
    from comlrl.errors import ConfigError
    from comlrl.learn.preference_file import read_pairs

    with pytest.raises(ConfigError, match="does not exist"):
        read_pairs(tmp_path / "none.jsonl", 2)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match="holds no pairs"):
        read_pairs(tmp_path / "empty.jsonl", 2)
    (tmp_path / "two.jsonl").write_text(_line() + "\n\n" + _line(chosen="x") + "\n")
    assert [p.chosen for p in read_pairs(tmp_path / "two.jsonl", 2)] == ["good", "x"]


@pytest.mark.parametrize(("count", "steps"), [(10, 3), (7, 7), (5, 8), (100, 6)])
def test_the_steps_make_one_seeded_pass_over_the_pairs(count, steps):
    from comlrl.learn.preference_file import step_slice

    parts = [step_slice(count, steps, s, seed=3) for s in range(steps)]
    assert sorted(i for part in parts for i in part) == list(range(count))  # each pair exactly once
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert parts == [step_slice(count, steps, s, seed=3) for s in range(steps)]
