"""Tree shapes, termination and return backup, driven by fake generate/score/feedback callables."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.tree.nodes import (
    Node,
    TreeStats,
    backup_returns,
    expected_counts,
    joint_actions,
    should_terminate,
)
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


def run(num_agents, g, turns, mode, threshold=None, reward=None, later=None, sizes=None):
    """Expand one tree with deterministic fake completions; reward(node, action) defaults to 0."""
    calls = []

    def generate(requests, n):
        calls.append(len(requests))
        if sizes is not None:
            sizes.append(n)
        return [[f"a{a}s{k}" for k in range(n)] for a, _ in requests]

    def score(pairs):
        return [Scored(reward(node, act) if reward else 0.0) for node, act in pairs]

    def next_messages(pairs):
        return [[[{"role": "user", "content": f"{node.id}.{j}"}] for _ in range(num_agents)] for node, j in pairs]

    roots = make_roots([[[{"role": "user", "content": "p"}]] * num_agents])
    shape = TreeShape(num_agents, g, turns, mode, threshold, later)
    expand_trees(roots, shape, generate, score, next_messages)
    return roots, calls


@pytest.mark.parametrize(
    "n,g,t,mode,nodes,rewards",
    [
        (2, 4, 2, "align", 5, 20),
        (2, 4, 2, "cross", 17, 272),
        (3, 2, 2, "cross", 9, 72),
        (3, 3, 1, "cross", 1, 27),
        (1, 4, 3, "align", 21, 84),
        (1, 4, 3, "cross", 21, 84),
        (2, 3, 3, "align", 13, 39),
    ],
)
def test_tree_shapes_without_termination(n, g, t, mode, nodes, rewards):
    roots, calls = run(n, g, t, mode)
    stats = TreeStats.of(roots, t)
    assert sum(stats.nodes) == nodes
    assert sum(stats.joint_actions) == rewards
    per_node = g if mode == "align" else g**n
    assert stats.leaves == per_node**t  # G^T (align) or G^(N*T) (cross)
    assert stats.nodes == [per_node**k for k in range(t)]
    assert calls == [per_node**k * n for k in range(t)]  # one generate call per level, all nodes x agents
    assert stats.pruned == [0] * t


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(2, 4), st.integers(1, 3), st.sampled_from(["align", "cross"]))
def test_tree_counts_match_formula(n, g, t, mode):
    if mode == "cross" and (g**n) ** t > 700:
        return
    roots, _ = run(n, g, t, mode)
    stats = TreeStats.of(roots, t)
    nodes, rewards = expected_counts(n, g, t, mode)
    assert stats.nodes == nodes and stats.joint_actions == rewards


@pytest.mark.parametrize("n,k,t,mode", [(2, 4, 2, "align"), (1, 8, 3, "align"), (2, 3, 3, "cross"), (3, 2, 1, "align")])
def test_later_generations_one_gives_k_chains(n, k, t, mode):
    """k samples at turn 1 and one after: k independent chains of t turns (the evaluation's sampled chains)."""
    sizes: list[int] = []
    (root,), calls = run(n, k, t, mode, later=1, sizes=sizes)
    per_root = k if mode == "align" else k**n
    assert sizes == [k] + [1] * (t - 1)
    assert calls == [n] + [per_root * n] * (t - 1)
    stats = TreeStats.of([root], t)
    assert stats.nodes == [1] + [per_root] * (t - 1) and stats.joint_actions == [per_root] * t
    for j in range(per_root if t > 1 else 0):  # every chain continues its own turn-1 joint action
        node = root.children[j]
        while node.turn < t:
            assert list(node.children) == [0]
            node = node.children[0]
        assert not node.children


def test_generations_per_turn():
    assert [TreeShape(2, 4, 3, "align", None).generations(t) for t in (1, 2, 3)] == [4, 4, 4]
    assert [TreeShape(2, 4, 3, "align", None, 1).generations(t) for t in (1, 2, 3)] == [4, 1, 1]


def test_joint_actions_align_and_cross():
    assert joint_actions(2, 3, "align") == [(0, 0), (1, 1), (2, 2)]
    assert joint_actions(2, 2, "cross") == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert joint_actions(3, 2, "cross") == list(itertools.product(range(2), repeat=3))
    assert joint_actions(1, 3, "cross") == joint_actions(1, 3, "align") == [(0,), (1,), (2,)]
    with pytest.raises(ValueError, match="joint_mode='crossed'"):
        joint_actions(2, 2, "crossed")


def test_single_turn_is_grpo():
    roots, calls = run(1, 4, 1, "align")
    assert roots[0].children == {} and len(roots[0].rewards) == 4 and calls == [1]


def test_joint_actions_pair_completions_of_the_same_node():
    roots, _ = run(2, 2, 2, "cross")
    child = roots[0].children[3]
    assert child.parent is roots[0] and child.parent_action == 3 and child.turn == 2
    assert child.messages[0][0]["content"] == "0.3"  # built from its own parent's joint action


def test_termination_makes_a_leaf_while_siblings_continue():
    # root joint actions 0,1 -> children; child of action 0 scores high (mean 1.0 > 0.5) and stops
    def reward(node, act):
        return 1.0 if node.id == "0.0" else 0.0

    roots, _ = run(2, 2, 3, "align", threshold=0.5, reward=reward)
    root = roots[0]
    assert not root.terminated
    assert root.children[0].terminated and root.children[0].is_leaf()
    assert not root.children[1].terminated and set(root.children[1].children) == {0, 1}
    stats = TreeStats.of(roots, 3)
    assert stats.nodes == [1, 2, 2] and stats.pruned == [0, 1, 0]


def test_threshold_compares_mean_strictly_and_none_disables():
    assert should_terminate([1.0, 0.0], 0.4)
    assert not should_terminate([1.0, 0.0], 0.5)
    assert not should_terminate([9.0, 9.0], None)
    roots, _ = run(2, 2, 2, "align", threshold=None, reward=lambda n, a: 100.0)
    assert TreeStats.of(roots, 2).nodes == [1, 2]


def test_root_terminating_stops_the_whole_tree():
    roots, calls = run(2, 4, 3, "cross", threshold=0.0, reward=lambda n, a: 1.0)
    assert roots[0].terminated and roots[0].children == {} and calls == [2]


def _tree(rewards_root, children):
    root = Node(id="0", turn=1, root=0, messages=[], rewards=list(rewards_root))
    for j, rs in children.items():
        root.children[j] = Node(id=f"0.{j}", turn=2, root=0, messages=[], rewards=list(rs))
    return root


def test_backup_by_hand_discount_one():
    root = _tree([1.0, 0.0], {0: [0.0, 2.0], 1: [1.0, 1.0]})
    assert backup_returns(root, 1.0) == [2.0, 1.0]
    assert root.children[0].returns == [0.0, 2.0]


def test_backup_by_hand_discount_point_nine_three_levels():
    root = _tree([1.0, 0.5], {0: [0.0, 1.0]})  # action 1 was pruned: a leaf
    grand = Node(id="0.0.1", turn=3, root=0, messages=[], rewards=[2.0, 4.0])
    root.children[0].children[1] = grand
    rets = backup_returns(root, 0.9)
    # grand: [2, 4] mean 3; child: [0, 1 + 0.9*3] = [0, 3.7] mean 1.85; root: [1 + 0.9*1.85, 0.5]
    assert grand.returns == [2.0, 4.0]
    assert root.children[0].returns == pytest.approx([0.0, 3.7])
    assert rets == pytest.approx([2.665, 0.5])


def test_last_turn_nodes_are_never_marked_pruned():
    roots, _ = run(2, 2, 2, "align", threshold=0.0, reward=lambda n, a: 1.0 if n.turn == 2 else 0.0)
    assert not roots[0].terminated and all(not c.terminated for c in roots[0].children.values())
    assert TreeStats.of(roots, 2).pruned == [0, 0]
