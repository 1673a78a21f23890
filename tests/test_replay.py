"""Preference rounds' replay (comlrl.learn.replay), computed by hand: each mode's round weights, the quota of
pairs per round (proportional to weight x count, capped, largest remainder) and the seeded draw."""

from __future__ import annotations

import random

import pytest

from comlrl.errors import ConfigError
from comlrl.learn.replay import PreferenceRounds, replay_draw, replay_quota, round_weights

ROUNDS = [1, 2, 3, 4, 5]


def test_current_replays_nothing():
    assert round_weights("current", ROUNDS, current=5) == {}


def test_nearest_k_is_the_k_rounds_just_before_this_one():
    assert round_weights("nearest_k", ROUNDS, current=5, k=2) == {3: 1.0, 4: 1.0}
    assert round_weights("nearest_k", ROUNDS, current=2, k=3) == {1: 1.0}  # fewer earlier rounds than k
    assert round_weights("nearest_k", [1, 4], current=5, k=2) == {4: 1.0}  # rounds 2, 3 kept no pairs


def test_all_is_every_earlier_round_alike():
    assert round_weights("all", ROUNDS, current=4) == {1: 1.0, 2: 1.0, 3: 1.0}
    assert round_weights("all", ROUNDS, current=1) == {}


def test_decay_weighs_a_round_lambda_to_its_distance():
    assert round_weights("decay", ROUNDS, current=4, lam=0.5) == {3: 0.5, 2: 0.25, 1: 0.125}
    assert round_weights("decay", ROUNDS, current=3, lam=1.0) == {1: 1.0, 2: 1.0}  # lambda 1 = all


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="replay mode 'newest'"):
        round_weights("newest", ROUNDS, current=2)


def test_quota_is_proportional_to_weight_times_count():
    # decay at round 4, lambda 0.5: masses 0.5*4 = 2, 0.25*4 = 1, 0.125*4 = 0.5 of 3.5; 7 pairs -> 4, 2, 1
    counts = {1: 4, 2: 4, 3: 4}
    assert replay_quota(counts, {3: 0.5, 2: 0.25, 1: 0.125}, 7) == {3: 4, 2: 2, 1: 1}
    # equal weights, unequal counts: each pair equally likely -> shares follow the counts (6 of 2+4+6=12 -> 1,2,3)
    assert replay_quota({1: 2, 2: 4, 3: 6}, {1: 1.0, 2: 1.0, 3: 1.0}, 6) == {1: 1, 2: 2, 3: 3}


def test_quota_caps_a_round_at_its_pairs_and_gives_the_rest_to_the_others():
    # 10 of 12: round 3's share 10*2/3.5 = 5.71 > 4 -> 4; 6 left over rounds 2 and 1 (masses 1, 0.5) -> 4, 2
    assert replay_quota({1: 4, 2: 4, 3: 4}, {3: 0.5, 2: 0.25, 1: 0.125}, 10) == {3: 4, 2: 4, 1: 2}
    # more asked than held: every eligible pair once
    assert replay_quota({1: 2, 2: 3}, {1: 1.0, 2: 1.0}, 50) == {1: 2, 2: 3}


def test_quota_rounds_by_largest_remainder_and_newer_rounds_win_ties():
    # 3 pairs over three equal rounds of 5: 1 each
    assert replay_quota({1: 5, 2: 5, 3: 5}, {1: 1.0, 2: 1.0, 3: 1.0}, 3) == {1: 1, 2: 1, 3: 1}
    # 2 pairs over three equal rounds: remainders tie at 2/3 -> the two newest
    assert replay_quota({1: 5, 2: 5, 3: 5}, {1: 1.0, 2: 1.0, 3: 1.0}, 2) == {2: 1, 3: 1}
    # shares 0.4 * 5 / (0.4*5 + 0.1*5) = 1.6 and 0.4 -> floors 1, 0; remainders .6 and .4 -> round 2 gets it
    assert replay_quota({1: 5, 2: 5}, {2: 0.4, 1: 0.1}, 2) == {2: 2}


def test_rounds_without_pairs_or_weight_and_a_zero_size_give_nothing():
    assert replay_quota({1: 0, 2: 3}, {1: 1.0, 2: 1.0}, 2) == {2: 2}
    assert replay_quota({1: 3, 2: 3}, {2: 1.0}, 2) == {2: 2}  # round 1 has no weight (not replayed)
    assert replay_quota({1: 3}, {1: 1.0}, 0) == {}
    assert replay_quota({}, {}, 5) == {}


def test_the_draw_is_without_replacement_within_each_round_and_seeded():
    counts, quota = {1: 6, 2: 3}, {1: 2, 2: 3}
    draw = replay_draw(quota, counts, random.Random(0))
    assert [r for r, _ in draw] == [1, 1, 2, 2, 2]
    assert len({i for r, i in draw if r == 1}) == 2 and all(0 <= i < 6 for r, i in draw if r == 1)
    assert [i for r, i in draw if r == 2] == [0, 1, 2]
    assert draw == replay_draw(quota, counts, random.Random(0))


def test_a_drawn_pair_is_replayed_as_often_as_its_rounds_weight_says():
    """Over many draws, a round-3 pair (weight 0.5) is replayed 4x as often as a round-1 pair (0.125)."""
    counts, weights = {1: 40, 2: 40, 3: 40}, {3: 0.5, 2: 0.25, 1: 0.125}
    quota = replay_quota(counts, weights, 35)  # 35 * 20/35, 10/35, 5/35 = 20, 10, 5
    assert quota == {3: 20, 2: 10, 1: 5}
    assert quota[3] / counts[3] == 4 * quota[1] / counts[1]


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("comparator", "judge", "task, policy, checkpoint or llm:"),
    ("comparator", "llm:", "task, policy, checkpoint or llm:"),
    ("replay", "recent", "current | nearest_k | all | decay"),
    ("replay_k", 0, "an integer >= 1"),
    ("replay_lambda", 0.0, "a number in (0, 1]"),
    ("replay_size", 0, "an integer >= 1 or null"),
])
def test_the_section_names_a_bad_key(key, value, expected):
    rounds = PreferenceRounds(**{key: value})
    with pytest.raises(ConfigError, match=rf"algorithm\.dpo\.{key}"):
        rounds.check_rounds("algorithm.dpo")
    try:
        rounds.check_rounds("algorithm.dpo")
    except ConfigError as exc:
        assert expected in str(exc)


def test_the_defaults_and_an_llm_judge_pass():
    PreferenceRounds().check_rounds("algorithm.marlhf")
    PreferenceRounds(comparator="llm:openai-compatible:judge@http://127.0.0.1:9", replay="decay").check_rounds("x")
