"""The tree's per-seat backup and finished episodes (pure: no models, no games)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from comlrl.tree.nodes import Node, Sample, backup_returns
from comlrl.tree.rollout import Scored, TreeShape, ended, expand_trees


@dataclass(frozen=True)
class Seated:
    seats: tuple[int, ...]  # the seats whose view the node takes
    over: bool = False

    @property
    def ended(self) -> bool:
        return self.over

    def view(self, seat_returns: Sequence[float]) -> float:
        return sum(seat_returns[s] for s in self.seats) / len(self.seats)


@dataclass(frozen=True)
class SeatReward:
    total: float
    seat_rewards: tuple[float, ...]
    components: dict = None
    notes: tuple = ()
    all_passed: bool = False
    scored: tuple = ()


def _node(state, rewards, children=None, id_="r"):
    n = Node(id=id_, turn=1, root=0, messages=[[]], state=state)
    n.details = [SeatReward(state.view(r), tuple(r)) for r in rewards]
    n.rewards = [d.total for d in n.details]
    for j, child in (children or {}).items():
        n.children[j] = child
        child.parent, child.parent_action = n, j
    return n


def test_self_play_judges_each_move_from_the_side_of_the_seat_that_made_it():
    # seat 0 moves at the root; its move 0 leads to seat 1's node, whose two replies end the game
    child = _node(Seated((1,)), [(1.0, -1.0), (-1.0, 1.0)], id_="c")  # seat 1 loses with one, wins with the other
    root = _node(Seated((0,)), [(0.0, 0.0), (-1.0, 1.0)], {0: child})
    returns = backup_returns(root, 1.0)
    assert child.returns == [-1.0, 1.0]  # seat 1's own side
    assert returns == [0.0, -1.0]  # seat 0: move 0 leads to the mean of (+1, -1); move 1 lost at once
    # a scalar backup (one side for every node) would have given the root's move 0 the child's mean return 0
    # too, but the child's own advantages would carry seat 0's sign: the per-seat vector keeps both right


def test_a_team_view_backs_up_the_mean_of_its_seats_with_discount():
    child = _node(Seated((0, 1)), [(2.0, 0.0), (4.0, 4.0)], id_="c")
    root = _node(Seated((0, 1)), [(1.0, 1.0)], {0: child})
    assert backup_returns(root, 0.5) == [pytest.approx(1.0 + 0.5 * (1.0 + 4.0) / 2)]


def test_plain_rewards_keep_the_scalar_backup():
    root = Node(id="r", turn=1, root=0, messages=[[]])
    root.rewards, root.details = [1.0, 0.0], [None, None]
    assert backup_returns(root, 1.0) == [1.0, 0.0]


def _sample(text: str) -> Sample:
    return Sample(0, (), (1,), text, True)


def test_a_joint_action_whose_episode_ended_gets_no_child():
    shape = TreeShape(1, 2, 4, "align", None)

    def generate(requests, n):
        return [[_sample(f"m{g}") for g in range(n)] for _ in requests]

    def score(pairs):  # completion 0 ends the episode, completion 1 goes on
        return [Scored(0.0, None, Seated((0,), over=node.completions[0][act[0]].text == "m0"))
                for node, act in pairs]

    roots = expand_trees([Node(id="0", turn=1, root=0, messages=[[]])], shape, generate, score,
                         lambda pairs: [[[]] for _ in pairs])
    nodes = list(roots[0].walk())
    assert [n.turn for n in nodes] == [1, 2, 3, 4]  # one chain: only the joint action that went on has a child
    assert all(sorted(n.children) == [1] for n in nodes[:-1])
    assert ended(Seated((0,), over=True)) and not ended(None) and not ended(object())


def test_flat_episodes_give_every_later_move_its_episodes_advantage():
    """rollout.shape=flat: G chains from one root; a later node's one sample takes the advantage its root
    completion got (trajectory-level credit), where a one-sample group would otherwise carry nothing."""
    from comlrl.learn.advantages import assign_advantages

    shape = TreeShape(1, 3, 3, "align", None, later_generations=1)

    def generate(requests, n):
        sizes = [n] * len(requests) if isinstance(n, int) else n
        return [[_sample(f"m{g}") for g in range(k)] for k in sizes]

    finals = iter([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0])  # level by level, chains 0, 1, 2
    roots = expand_trees([Node(id="0", turn=1, root=0, messages=[[]])], shape, generate,
                         lambda pairs: [Scored(next(finals)) for _ in pairs], lambda pairs: [[[]] for _ in pairs])
    root = roots[0]
    backup_returns(root, 1.0)
    assert root.returns == [1.0, 0.0, 2.0]
    assign_advantages(roots, "mean", "none", 1e-6, episodes=True)
    assert root.advantages == [[0.0, -1.0, 1.0]]
    for j, adv in enumerate(root.advantages[0]):
        node = root.children[j]
        while node is not None:  # every later move of chain j carries chain j's advantage
            assert node.advantages == [[adv]]
            node = node.children.get(0)
