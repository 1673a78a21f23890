"""Training a share of each sibling group (magrpo.advantage.train_per_group): the inclusion probabilities by hand,
Madow's systematic draw exactly over its start, the weighted advantages unbiased by exact enumeration, and the
units and the step's normaliser the update reads."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.config.schema import ConfigError, load_config
from comlrl.learn.algorithms import ALGORITHMS
from comlrl.learn.subsample import inclusion_probabilities, systematic_draw, train_subsample
from comlrl.learn.update import step_size
from comlrl.tree.nodes import Node, Sample, joint_actions


def test_a_binary_group_gives_its_rare_class_every_slot_it_can_fill():
    """G = 8, two of eight pass: group-scaled advantages +sqrt(3) (pass) and -1/sqrt(3) (fail), weights 3 : 1.
    m = 4: c = 4 / (2 * 3 + 6 * 1) = 1/3 per unit weight, so a pass has p = 1 and a fail p = 1/3 (4 = 2 + 6/3)."""
    adv = [3 ** 0.5, 3 ** 0.5] + [-(3 ** -0.5)] * 6
    assert inclusion_probabilities(adv, 4) == pytest.approx([1.0, 1.0] + [1 / 3] * 6)
    # m = 2 splits evenly between the classes by weight x count (Neyman's allocation for two strata): 1 and 1
    assert inclusion_probabilities(adv, 2) == pytest.approx([0.5, 0.5] + [1 / 6] * 6)


def test_a_heavy_completion_is_capped_at_one_and_its_excess_spread_over_the_rest():
    assert inclusion_probabilities([10.0, -1.0, 1.0, -1.0], 2) == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3])


def test_a_completion_of_advantage_zero_is_never_drawn_and_the_size_is_what_is_left():
    assert inclusion_probabilities([1.0, 0.0, -1.0], 3) == [1.0, 0.0, 1.0]
    assert train_subsample([1.0, 0.0, -1.0], 3, random.Random(0)) == [(0, 1.0), (2, -1.0)]
    assert inclusion_probabilities([0.5, -0.5], 1) == pytest.approx([0.5, 0.5])


def test_a_size_as_large_as_the_group_trains_it_whole_with_its_own_advantages():
    adv = [0.3, -1.2, 0.9, 0.0]
    assert train_subsample(adv, 4, random.Random(5)) == [(0, 0.3), (1, -1.2), (2, 0.9)]


def _frequencies(probs: list[float], starts: int) -> tuple[list[float], set[int]]:
    """How often each index is drawn over `starts` evenly spaced starts in [0, 1), and the sizes drawn."""
    counts = [0] * len(probs)
    sizes = set()
    for j in range(starts):
        drawn = systematic_draw(probs, (j + 0.5) / starts)
        sizes.add(len(drawn))
        for i in drawn:
            counts[i] += 1
    return [c / starts for c in counts], sizes


@pytest.mark.parametrize("probs", [
    [0.5, 0.5], [1.0, 1 / 3, 1 / 3, 1 / 3], [0.25, 0.75, 0.6, 0.4, 1.0, 0.0], [0.1] * 10, [0.9, 0.9, 0.2],
])
def test_the_systematic_draw_has_exactly_its_inclusion_probabilities_and_size(probs):
    freq, sizes = _frequencies(probs, 6000)
    assert freq == pytest.approx(probs, abs=len(probs) / 6000)
    assert sizes == {round(sum(probs))}


def test_the_systematic_draw_refuses_a_start_outside_the_unit_interval():
    with pytest.raises(ValueError, match="start=1.0"):
        systematic_draw([0.5, 0.5], 1.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-3, 3).map(lambda x: round(x, 2)), min_size=2, max_size=4), st.integers(1, 4))
def test_the_weighted_subsample_is_unbiased_for_the_whole_group(adv, size):
    """The expectation over every shuffle (exact) and the draw's start (a fine grid): each completion's
    expected weighted advantage is its own advantage, so the expected gradient is the whole group's."""
    probs = inclusion_probabilities(adv, size)
    assert sum(probs) == pytest.approx(min(size, sum(a != 0 for a in adv)))
    assert all(0.0 <= p <= 1.0 for p in probs)
    starts = 300
    expected = [0.0] * len(adv)
    orders = list(itertools.permutations(range(len(adv))))
    for order in orders:
        for j in range(starts):
            for pos in systematic_draw([probs[i] for i in order], (j + 0.5) / starts):
                i = order[pos]
                expected[i] += adv[i] / probs[i] / (len(orders) * starts)
    # the grid's error: a boundary per completion, each worth 1/starts of a weight up to max|A| / min p
    tol = len(adv) * max(abs(a) / p for a, p in zip(adv, probs, strict=True) if p > 0) / starts if any(adv) else 0
    assert expected == pytest.approx(adv, abs=tol + 1e-9)


def test_train_subsample_is_reproducible_by_its_seed_and_weights_by_inverse_probability():
    adv = [3 ** 0.5, 3 ** 0.5] + [-(3 ** -0.5)] * 6
    a = train_subsample(adv, 4, random.Random(7))
    assert a == train_subsample(adv, 4, random.Random(7))
    assert len(a) == 4 and [k for k, _ in a] == sorted(k for k, _ in a)
    assert a[:2] == [(0, pytest.approx(3 ** 0.5)), (1, pytest.approx(3 ** 0.5))]  # p = 1: drawn, unweighted
    assert all(w == pytest.approx(-(3 ** -0.5) * 3) for _, w in a[2:])  # p = 1/3: three times the advantage


def _sample(agent: int, k: int, length: int) -> Sample:
    return Sample(agent=agent, prompt_ids=(1,), completion_ids=tuple(range(length)), text=f"{agent}.{k}",
                  finished=True)


def test_the_units_train_the_share_and_the_normaliser_counts_the_whole_group():
    """One node, two agents, G = 4, align: agent 0's returns spread, agent 1's... the same joint returns, so
    both groups have signal. With train_per_group = 2 each group trains 2 completions; the step's token_mean
    normaliser still counts the tokens of all 8."""
    lengths = [[3, 5, 7, 9], [2, 4, 6, 8]]
    root = Node(id="0", turn=1, root=0, messages=[], joint=joint_actions(2, 4, "align"),
                completions=[[_sample(a, k, lengths[a][k]) for k in range(4)] for a in range(2)])
    root.returns = [1.0, 0.0, 0.0, 0.0]
    whole = load_config(None, ["training.steps=1", "magrpo.num_generations=4", "magrpo.advantage.scale=none"])
    share = load_config(None, ["training.steps=1", "magrpo.num_generations=4", "magrpo.advantage.scale=none",
                               "magrpo.advantage.train_per_group=2"])
    units_all, stats = ALGORITHMS["magrpo"].units([root], whole, None)
    torch.manual_seed(3)
    units, stats_share = ALGORITHMS["magrpo"].units([root], share, None)
    assert (stats.groups, stats.skipped) == (stats_share.groups, stats_share.skipped) == (2, 0)
    assert len(units_all) == 8 and len(units) == 4
    # advantages +0.75 (one) and -0.25 (three): p = 1 for the pass, 1/3 for each fail, weight -0.75
    for agent in range(2):
        mine = [u for u in units if u.samples[0].agent == agent]
        assert mine[0].samples[0] is root.completions[agent][0] and mine[0].advantages == (0.75,)
        assert mine[1].advantages == pytest.approx((-0.75,))
        untrained = [len(s.completion_ids) for s in root.completions[agent]
                     if all(s is not u.samples[0] for u in mine)]
        assert sorted(mine[0].stands_for) == sorted(untrained) and mine[1].stands_for == ()
    assert step_size(units, "token_mean").policy == step_size(units_all, "token_mean").policy == 44
    assert step_size(units, "seq_mean").policy == step_size(units_all, "seq_mean").policy == 8


def test_under_cross_credit_an_agent_that_cannot_change_the_reward_is_skipped_and_the_other_trains_its_share():
    """Cross, two agents, G = 4: the return is 1 when agent 1 draws its completion 0, whatever agent 0 drew. Agent
    0's values are all 0.25 (the mean over its partners), so its group ties and trains nothing; agent 1's values
    1, 0, 0, 0 give +0.75 and -0.25 three times, of which the share trains the pass and one fail weighted by 3."""
    lengths = [[3, 5, 7, 9], [2, 4, 6, 8]]
    root = Node(id="0", turn=1, root=0, messages=[], joint=joint_actions(2, 4, "cross"),
                completions=[[_sample(a, k, lengths[a][k]) for k in range(4)] for a in range(2)])
    root.returns = [1.0 if main == 0 else 0.0 for _, main in root.joint]
    base = ["training.steps=1", "magrpo.num_generations=4", "magrpo.advantage.scale=none", "magrpo.joint_mode=cross"]
    units_all, stats = ALGORITHMS["magrpo"].units([root], load_config(None, base), None)
    torch.manual_seed(3)
    units, stats_share = ALGORITHMS["magrpo"].units(
        [root], load_config(None, [*base, "magrpo.advantage.train_per_group=2"]), None)
    assert root.advantages[0] is None
    assert (stats.groups, stats.skipped) == (stats_share.groups, stats_share.skipped) == (2, 1)
    assert len(units_all) == 4 and len(units) == 2 and all(u.samples[0].agent == 1 for u in units)
    assert units[0].samples[0] is root.completions[1][0] and units[0].advantages == (0.75,)
    assert units[1].advantages == pytest.approx((-0.75,))
    assert step_size(units, "token_mean").policy == step_size(units_all, "token_mean").policy == 2 + 4 + 6 + 8


@pytest.mark.parametrize(("overrides", "needle"), [
    (["magrpo.advantage.train_per_group=0"], "magrpo.advantage.train_per_group=0 is not allowed; expected an integer"),
    (["magrpo.advantage.train_per_group=2", "algorithm.name=madpo"], "expected null for algorithm.name=madpo"),
    (["magrpo.advantage.train_per_group=2", "magrpo.loss.kl_coef=0.1"], "expected null with magrpo.loss.kl_coef > 0"),
])
def test_a_share_refuses_what_it_cannot_estimate(overrides, needle):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["training.steps=1", *overrides])
    assert needle in str(err.value) and "\n" not in str(err.value)
