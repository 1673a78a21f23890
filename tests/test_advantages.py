"""Credit assignment and normalisation; align and cross must give advantages on the same scale."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.learn.advantages import assign_advantages, completion_values, group_advantages
from comlrl.tree.nodes import Node, joint_actions


def test_align_values_are_own_returns():
    joint = joint_actions(2, 3, "align")
    assert completion_values(joint, [1.0, 2.0, 3.0], 0, 3) == [1.0, 2.0, 3.0]
    assert completion_values(joint, [1.0, 2.0, 3.0], 1, 3) == [1.0, 2.0, 3.0]


def test_cross_values_are_means_over_partners():
    joint = joint_actions(2, 2, "cross")  # (0,0) (0,1) (1,0) (1,1)
    returns = [1.0, 3.0, 5.0, 7.0]
    assert completion_values(joint, returns, 0, 2) == [2.0, 6.0]
    assert completion_values(joint, returns, 1, 2) == [3.0, 5.0]


def test_baselines_and_scales_by_hand():
    v = [1.0, 2.0, 3.0, 6.0]  # mean 3, population std sqrt(3.5)
    std = math.sqrt(3.5)
    assert group_advantages(v, "mean", "none") == [-2.0, -1.0, 0.0, 3.0]
    assert group_advantages(v, "loo", "none") == pytest.approx([1 - 11 / 3, 2 - 10 / 3, 3 - 3, 6 - 2])
    assert group_advantages(v, "none", "none") == v
    assert group_advantages(v, "mean", "group", eps=0.0) == pytest.approx([-2 / std, -1 / std, 0, 3 / std])
    # loo is mean-centred scaled by n/(n-1)
    loo = group_advantages(v, "loo", "group", eps=0.0)
    mean = group_advantages(v, "mean", "group", eps=0.0)
    assert loo == pytest.approx([x * 4 / 3 for x in mean])


def test_zero_variance_group_has_no_signal():
    assert group_advantages([0.5, 0.5, 0.5], "mean", "group") is None
    assert group_advantages([2.0, 2.0], "max", "none") is None
    assert group_advantages([2.0, 2.0], "none", "group") is None  # no spread to scale by
    assert group_advantages([0.0, 0.0], "none", "none") is None


def test_raw_returns_push_equal_nonzero_siblings():
    # REINFORCE without a baseline (CoMLRL's "raw"): equal non-zero returns are still a signal.
    assert group_advantages([2.0, 2.0], "none", "none") == [2.0, 2.0]
    assert group_advantages([-1.0, -1.0, -1.0], "none", "none") == [-1.0, -1.0, -1.0]


def test_max_baseline_by_hand():
    assert group_advantages([1.0, 2.0, 3.0, 6.0], "max", "none") == [-5.0, -4.0, -3.0, 0.0]
    std = math.sqrt(3.5)
    assert group_advantages([1.0, 2.0, 3.0, 6.0], "max", "group", eps=0.0) == pytest.approx(
        [-5 / std, -4 / std, -3 / std, 0.0])


def test_sum_credit_is_g_pow_n_minus_1_times_mean_credit():
    joint = joint_actions(2, 2, "cross")  # (0,0) (0,1) (1,0) (1,1)
    returns = [1.0, 3.0, 5.0, 7.0]
    assert completion_values(joint, returns, 0, 2, "sum") == [4.0, 12.0]
    assert completion_values(joint, returns, 1, 2, "sum") == [6.0, 10.0]
    three = joint_actions(3, 2, "cross")  # each completion is in G^(N-1) = 4 joint actions
    rets = [float(i * i) for i in range(8)]
    for agent in range(3):
        mean = completion_values(three, rets, agent, 2, "mean")
        assert completion_values(three, rets, agent, 2, "sum") == pytest.approx([4 * v for v in mean])
    align = joint_actions(2, 3, "align")  # align: each completion is in one joint action, sum == mean
    assert completion_values(align, [1.0, 2.0, 3.0], 1, 3, "sum") == [1.0, 2.0, 3.0]


def test_bad_switches_raise():
    with pytest.raises(ValueError):
        group_advantages([1.0, 2.0], "min", "group")
    with pytest.raises(ValueError):
        completion_values([(0,), (1,)], [1.0, 2.0], 0, 2, "median")
    with pytest.raises(ValueError):
        group_advantages([1.0, 2.0], "mean", "std")
    with pytest.raises(ValueError):
        group_advantages([1.0], "mean", "group")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=8))
def test_group_scaled_advantages_have_zero_mean_unit_std(values):
    adv = group_advantages(values, "mean", "group", eps=0.0)
    if adv is None:
        assert max(values) - min(values) <= 1e-12
        return
    if statistics.pstdev(values) < 1e-6:
        return
    assert sum(adv) == pytest.approx(0.0, abs=1e-6)
    assert statistics.pstdev(adv) == pytest.approx(1.0, rel=1e-6)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 4), st.lists(st.floats(0, 4, allow_nan=False), min_size=4, max_size=4))
def test_align_and_cross_share_scale_for_additive_rewards(g_unused, per_completion):
    """Reward = quality of agent-0's pick + quality of agent-1's pick. With mean crediting, cross
    gives each completion the same centred value as align does (the sum would scale by G^(N-1))."""
    g = len(per_completion)
    q0 = per_completion
    q1 = list(reversed(per_completion))
    align = joint_actions(2, g, "align")
    cross = joint_actions(2, g, "cross")
    r_align = [q0[a] + q1[b] for a, b in align]
    r_cross = [q0[a] + q1[b] for a, b in cross]
    for agent, q in ((0, q0), (1, q1)):
        va = group_advantages(completion_values(align, r_align, agent, g), "mean", "none")
        vc = group_advantages(completion_values(cross, r_cross, agent, g), "mean", "none")
        if vc is None:
            continue
        expected = [x - sum(q) / g for x in q]
        assert vc == pytest.approx(expected, abs=1e-9)
        # align mixes in the partner's quality; both are centred, bounded by the same reward range
        assert max(abs(x) for x in vc) <= 4 + 1e-9
        if va is not None:
            assert max(abs(x) for x in va) <= 8 + 1e-9


def test_same_reward_table_same_scale_in_both_modes():
    """A reward table where agent 1 is irrelevant: cross advantages equal align advantages exactly."""
    g = 4
    q = [0.0, 1.0, 3.0, 4.0]
    align, cross = joint_actions(2, g, "align"), joint_actions(2, g, "cross")
    ra = [q[a] for a, _ in align]
    rc = [q[a] for a, _ in cross]
    for scale in ("group", "none"):
        a = group_advantages(completion_values(align, ra, 0, g), "mean", scale)
        c = group_advantages(completion_values(cross, rc, 0, g), "mean", scale)
        assert a == pytest.approx(c)
    assert group_advantages(completion_values(cross, rc, 1, g), "mean", "group") is None


def test_assign_advantages_over_a_tree_counts_skipped_groups():
    root = Node(id="0", turn=1, root=0, messages=[], joint=joint_actions(2, 2, "cross"),
                completions=[["a0", "a1"], ["b0", "b1"]])  # agents and G are counted on the node
    root.returns = [1.0, 1.0, 3.0, 3.0]  # agent 1 irrelevant -> its group is skipped
    stats = assign_advantages([root], "mean", "none", 1e-6)
    assert root.advantages[0] == [-1.0, 1.0] and root.advantages[1] is None
    assert (stats.groups, stats.skipped) == (2, 1)


def test_every_completion_is_credited_in_cross():
    for n, g in itertools.product((1, 2, 3), (2, 3)):
        joint = joint_actions(n, g, "cross")
        for agent in range(n):
            assert len(completion_values(joint, [1.0] * len(joint), agent, g)) == g


def test_assign_advantages_reads_each_nodes_own_sample_count():
    """A later turn that samples fewer (the evaluation's chains: 1 per agent after turn 1) is grouped by its
    own count, not the config's G."""
    root = Node(id="0", turn=1, root=0, messages=[], joint=joint_actions(1, 3, "align"),
                completions=[["a", "b", "c"]])
    root.returns = [0.0, 1.0, 2.0]
    child = Node(id="0.0", turn=2, root=0, messages=[], joint=joint_actions(1, 2, "align"), completions=[["x", "y"]])
    child.returns = [1.0, 3.0]
    root.children = {0: child}
    assign_advantages([root], "mean", "none", 1e-6)
    assert root.advantages == [[-1.0, 0.0, 1.0]] and child.advantages == [[-1.0, 1.0]]


class _Episode:
    """A reward detail that can say its episode failed (comlrl.tree.contracts.FailedEpisode)."""

    def __init__(self, failed: bool) -> None:
        self.failed = failed


def test_a_failed_episode_leaves_its_group_and_trains_nothing():
    """An environment that raised on one of four episodes: the other three form the group (its 0 return moves no
    baseline) and the failed one's advantage is 0."""
    root = Node(id="0", turn=1, root=0, messages=[], joint=joint_actions(1, 4, "align"),
                completions=[["a", "b", "c", "d"]])
    root.returns = [0.0, 1.0, 2.0, 3.0]
    root.details = [_Episode(True), _Episode(False), _Episode(False), _Episode(False)]
    assign_advantages([root], "mean", "none", 1e-6)
    assert root.advantages == [[0.0, -1.0, 0.0, 1.0]]
    root.details = [_Episode(False)] * 4  # nothing failed: the whole group, as before
    assign_advantages([root], "mean", "none", 1e-6)
    assert root.advantages == [[-1.5, -0.5, 0.5, 1.5]]


@pytest.mark.parametrize("mode", ["align", "cross"])
@pytest.mark.parametrize("g", [2, 3, 4])
def test_kept_advantages_equal_the_group_of_the_survivors(mode, g):
    """Every pattern of failed joint actions: the survivors' advantages are those of a group made of them alone,
    a completion left in failed joint actions only gets 0, and fewer than 2 survivors give no signal."""
    from comlrl.learn.advantages import kept_advantages

    joint = joint_actions(2, g, mode)
    returns = [float((7 * i) % 5) for i in range(len(joint))]
    for failed in itertools.product((False, True), repeat=len(joint)):
        for agent in range(2):
            got = kept_advantages(joint, returns, failed, agent, g, "mean", "mean", "none")
            kept = sorted({a[agent] for a, f in zip(joint, failed, strict=True) if not f})
            if len(kept) < 2:
                assert got is None
                continue
            values = [statistics.mean(r for a, r, f in zip(joint, returns, failed, strict=True)
                                      if not f and a[agent] == k)
                      for k in kept]
            want = group_advantages(values, "mean", "none")
            if want is None:
                assert got is None
                continue
            assert got == pytest.approx([want[kept.index(k)] if k in kept else 0.0 for k in range(g)])
    # nothing failed: the same as the group's own advantages
    assert kept_advantages(joint, returns, [False] * len(joint), 0, g) == pytest.approx(
        group_advantages(completion_values(joint, returns, 0, g)))
