"""The budgeted tree (`rollout.budget: split`, issue 39's second switch) by hand: the proportional split, the
second draw's allocation by the first draw's spread, the draws through the expander, the advantages of a group
drawn in two parts, and their unbiasedness checked by exact enumeration over every outcome."""

from __future__ import annotations

import itertools
import math

import pytest

from comlrl.learn.advantages import assign_advantages, group_advantages
from comlrl.tree.budget import allocate, split_extra, spread
from comlrl.tree.nodes import backup_returns
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


@pytest.mark.parametrize(("caps", "weights", "size", "newer_first", "expected"), [
    ({0: 8, 1: 8, 2: 8}, {0: 0.5, 1: 0.25, 2: 0.0}, 12, False, {0: 8, 1: 4}),  # 12 x 2/3, 12 x 1/3; weight 0: none
    # 6 x 3/5 = 3.6 > cap 3: key 0 is filled, its 0.6 goes to keys 1 and 2 (1.5 each), the odd unit to the tie's
    # smaller key, or with newer_first to the larger
    ({0: 3, 1: 3, 2: 3}, {0: 3.0, 1: 1.0, 2: 1.0}, 6, False, {0: 3, 1: 2, 2: 1}),
    ({0: 3, 1: 3, 2: 3}, {0: 3.0, 1: 1.0, 2: 1.0}, 6, True, {0: 3, 1: 1, 2: 2}),
    ({0: 2, 1: 1}, {0: 1.0, 1: 1.0}, 10, False, {0: 2, 1: 1}),  # more asked than the caps hold: every cap
    ({0: 4, 1: 4}, {0: 1.0, 1: 1.0}, 0, False, {}),
    ({0: 4, 1: 0}, {0: 1.0, 1: 5.0}, 3, False, {0: 3}),  # a cap of 0 takes nothing, whatever its weight
])
def test_allocate_splits_in_proportion_capped_in_whole_units(caps, weights, size, newer_first, expected) -> None:
    assert allocate(caps, weights, size, newer_first) == expected


def test_the_second_draw_goes_to_the_nodes_whose_first_draw_spread() -> None:
    first = [[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0]]
    assert [spread(r) for r in first] == [0.0, 0.5, pytest.approx(math.sqrt(3) / 4), 0.0]
    # 16 x 0.5 / 0.933 = 8.6 > cap 8: node 1 gets 8, node 2 the other 8; the tied nodes none
    assert split_extra(first, 16, cap=8) == [0, 8, 8, 0]
    # 8: 4.29 and 3.71, floored to 4 and 3, the last unit to the larger remainder (node 2)
    assert split_extra(first, 8, cap=8) == [0, 4, 4, 0]
    assert split_extra([[1.0, 1.0], [0.0, 0.0]], 4, cap=2) == [0, 0]  # nothing spread: nothing more drawn


def test_the_expander_draws_half_then_the_rest_where_the_first_half_spread() -> None:
    """Three one-turn trees, two agents, G = 4: two samples per agent first, then the level's other 2 x 3 = 6
    per agent split by spread, at most 4 per node. Tree 0 ties (0, 0), tree 1 spreads (0, 1), tree 2 spreads
    more (0, 2): sd 0.5 and 1.0 split the 6 as 2 and 4."""
    calls: list[tuple[int, int | list[int]]] = []
    rewards = {0: [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 1: [0.0, 1.0, 1.0, 0.0], 2: [0.0, 2.0, 2.0, 2.0, 0.0, 1.0]}
    drawn = {0: 0, 1: 0, 2: 0}

    def generate(requests, n):
        calls.append((len(requests), n))
        counts = n if isinstance(n, list) else [n] * len(requests)
        return [[f"{messages[0]['content']}|a{agent}" for _ in range(k)]
                for (agent, messages), k in zip(requests, counts, strict=True)]

    def score(pairs):
        out = []
        for node, _ in pairs:
            tree = node.root
            out.append(Scored(rewards[tree][drawn[tree]]))
            drawn[tree] += 1
        return out

    roots = make_roots([[[{"role": "user", "content": f"p{i}"}]] * 2 for i in range(3)])
    shape = TreeShape(2, 4, 1, "align", None, budget="split")
    expand_trees(roots, shape, generate, score, lambda pairs: [])
    # the first draw; then the extra samples of every node that spread in one call (2 each agent of tree 1, 4 of
    # tree 2): one decode pass, not one per count
    assert calls == [(6, 2), (4, [2, 2, 4, 4])]
    assert [len(r.completions[0]) for r in roots] == [2, 4, 6] and [r.first_draw for r in roots] == [2, 2, 2]
    assert roots[2].joint == [(g, g) for g in range(6)] and roots[2].rewards == rewards[2]
    assert roots[1].rewards == rewards[1] and roots[0].rewards == [0.0, 0.0]
    assert sum(len(r.completions[0]) for r in roots) == 12  # the fixed tree's 3 x 4: here every sample was spent


def test_a_fixed_tree_is_drawn_once_with_g_everywhere() -> None:
    roots = make_roots([[[{"role": "user", "content": "p"}]]])
    calls = []

    def generate(requests, n):
        calls.append(n)
        return [["x"] * n for _ in requests]

    expand_trees(roots, TreeShape(1, 4, 1, "align", None), generate, lambda pairs: [Scored(1.0) for _ in pairs],
                 lambda pairs: [])
    assert calls == [4] and roots[0].first_draw is None


@pytest.mark.parametrize(("values", "first", "baseline", "expected"), [
    # first draw [1, 0] centred on its mean 0.5; the second's each on the mean of the other four: 2/4, 2/4, 3/4
    ([1.0, 0.0, 1.0, 1.0, 0.0], 2, "mean", [0.5, -0.5, 0.5, 0.5, -0.75]),
    ([1.0, 0.0, 1.0, 1.0, 0.0], 2, "loo", [1.0, -1.0, 0.5, 0.5, -0.75]),  # loo on the first draw alone
    ([1.0, 1.0, 0.0, 1.0], 2, "mean", [0.0, 0.0, -1.0, 1 / 3]),  # a tied first draw: its own samples learn nothing
    ([1.0, 0.0, 1.0], 3, "mean", [1 / 3, -2 / 3, 1 / 3]),  # nothing drawn after: the estimator as always
])
def test_a_group_drawn_in_two_parts_by_hand(values, first, baseline, expected) -> None:
    assert group_advantages(values, baseline, "none", first=first) == pytest.approx(expected)


def test_a_two_part_group_is_scaled_by_its_whole_spread_and_refuses_other_estimators() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0]
    sd = spread(values)
    assert group_advantages(values, "mean", "group", eps=0.0, first=2) == pytest.approx(
        [x / sd for x in (0.5, -0.5, 0.5, 0.5, -0.75)])
    assert group_advantages([1.0, 1.0, 1.0], "mean", "none", first=2) is None  # all tied: no signal
    with pytest.raises(ValueError, match="baseline='max' with a second draw"):
        group_advantages(values, "max", "none", first=2)


def test_assign_advantages_reads_where_each_node_s_second_draw_starts() -> None:
    roots = make_roots([[[{"role": "user", "content": "p"}]] * 2])
    root = roots[0]
    root.completions = [["a", "b", "c", "d"], ["e", "f", "g", "h"]]
    root.joint, root.rewards, root.first_draw = [(g, g) for g in range(4)], [1.0, 1.0, 0.0, 1.0], 2
    backup_returns(root, 1.0)
    assign_advantages(roots, "mean", "none", 1e-6)
    assert root.advantages == [pytest.approx([0.0, 0.0, -1.0, 1 / 3])] * 2


def score_function(y: int, p: float) -> float:
    """d/dp log pi(y) for a Bernoulli policy with pi(1) = p."""
    return y / p - (1 - y) / (1 - p)


def expected_update(p: float, first: int, extra_if_spread: int, extra_if_tied: int, estimator) -> tuple[float, float]:
    """E[sum_i A_i d log pi(y_i) / dp] with reward r = y (so dJ/dp = 1), exactly, over every outcome of the
    first draw and of the second (whose size the first decides); and E[number of samples in the group]."""
    total = size = 0.0
    for head in itertools.product((0, 1), repeat=first):
        extra = extra_if_tied if len(set(head)) == 1 else extra_if_spread
        for tail in itertools.product((0, 1), repeat=extra):
            ys = [*head, *tail]
            prob = math.prod(p if y else 1 - p for y in ys)
            adv = estimator([float(y) for y in ys], first)
            total += prob * sum(a * score_function(y, p) for a, y in zip(adv, ys, strict=True))
            size += prob * len(ys)
    return total, size


def two_part(values, first):
    return group_advantages(values, "mean", "none", first=first) or [0.0] * len(values)


def one_group(values, first):  # the same group, every sample centred on all the others (ignoring the draws)
    return group_advantages(values, "loo", "none") or [0.0] * len(values)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.8])
@pytest.mark.parametrize(("extra_if_spread", "extra_if_tied"), [(3, 0), (0, 3), (2, 4)])
def test_the_two_part_estimator_is_unbiased_whatever_the_second_draw_s_size(p, extra_if_spread, extra_if_tied):
    """Each first-draw sample contributes (1 - 1/first) dJ/dp (the mean estimator), each later one dJ/dp: the
    expectation is (first - 1 + E[second draw's size]) x dJ/dp, the gradient's direction, whatever rule sized the
    second draw on the first's outcome. Centring every sample on all the others instead is biased when the second
    draw's size depends on the first draw."""
    first = 3
    got, size = expected_update(p, first, extra_if_spread, extra_if_tied, two_part)
    assert got == pytest.approx(size - 1.0, abs=1e-9)  # size = first + E[extra]
    naive, _ = expected_update(p, first, extra_if_spread, extra_if_tied, one_group)
    assert abs(naive - size) > 1e-3  # leave-one-out over the whole group would be unbiased with a fixed size: size
