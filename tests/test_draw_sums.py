"""What a step's sampling bought (`comlrl.run.metrics.DrawSums`): the share of generated completions in a sibling
group with signal, counted by hand on scripted draws, no model."""

from __future__ import annotations

from comlrl.learn.advantages import assign_advantages
from comlrl.run.metrics import DrawSums
from comlrl.tree.nodes import backup_returns, tied
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


def grow(rewards: list[list[float]], g: int = 2, agents: int = 2):
    """One-turn trees, tree i's joint actions scoring `rewards[i]`."""
    def generate(requests, n):
        return [[f"{req[1][0]['content']}/a{req[0]}s{k}" for k in range(n)] for req in requests]

    def score(pairs):
        return [Scored(rewards[node.root][node.joint.index(act)]) for node, act in pairs]

    roots = make_roots([[[{"role": "user", "content": str(i)}]] * agents for i in range(len(rewards))])
    expand_trees(roots, TreeShape(agents, g, 1, "align", None), generate, score, lambda pairs: [])
    return roots


def test_tied_is_no_spread():
    assert tied([1.0, 1.0, 1.0]) and tied([0.5]) and not tied([0.0, 1e-9]) and tied([0.3, 0.3 + 1e-13])


def test_a_fixed_tree_says_only_its_signal_share_and_preference_steps_say_nothing():
    roots = grow([[1.0, 1.0], [1.0, 0.0]])
    for root in roots:
        backup_returns(root, 1.0)
    assert DrawSums.of(roots).means() == {}  # no advantages assigned (madpo, marlhf's heads): no share to tell
    assign_advantages(roots, "mean", "group", 1e-6)
    assert DrawSums.of(roots).means() == {"signal_share": 0.5, "completions_generated": 8}
