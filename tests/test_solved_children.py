"""Cheaper turns after a solved answer (`rollout.solved_generations`, issue 39's selective expansion): a node whose
parent joint action solved the problem samples fewer completions per agent; by hand on scripted draws, no model."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from comlrl.config.schema import ConfigError, load_config
from comlrl.learn.advantages import assign_advantages
from comlrl.tree.nodes import backup_returns
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


@dataclass(frozen=True)
class Verdict:
    """The part of a task's `Reward` the expander reads."""

    all_passed: bool


def grow(shape: TreeShape, root_rewards: list[float], solved: set[int], child_rewards: dict[int, float],
         flat: frozenset[int] = frozenset()):
    """One two-agent tree: the root's joint action j scores root_rewards[j] (solved where j is in `solved`);
    every joint action j' of a deeper node reached by joint action j scores child_rewards[j] + 0.1 x j'
    (without the 0.1 x j' where j is in `flat`: that node ties)."""
    calls: list[tuple[int, int | list[int]]] = []

    def generate(requests, n):
        calls.append((len(requests), n))
        counts = n if isinstance(n, list) else [n] * len(requests)
        return [[f"{req[1][0]['content']}/a{req[0]}s{k}" for k in range(g)]
                for req, g in zip(requests, counts, strict=True)]

    def score(pairs):
        out = []
        for node, act in pairs:
            j = node.joint.index(act)
            if node.parent is None:
                out.append(Scored(root_rewards[j], Verdict(j in solved)))
            else:
                step = 0.0 if node.parent_action in flat else 0.1
                out.append(Scored(child_rewards[node.parent_action] + step * j, Verdict(False)))
        return out

    def next_messages(pairs):
        return [[[{"role": "user", "content": f"{node.id}.{j}"}]] * 2 for node, j in pairs]

    roots = make_roots([[[{"role": "user", "content": "p"}]] * 2])
    expand_trees(roots, shape, generate, score, next_messages)
    return roots[0], calls


def test_the_children_of_solved_joint_actions_sample_fewer() -> None:
    shape = TreeShape(2, 4, 2, "align", None, solved_generations=2)
    root, calls = grow(shape, [1.0, 0.0, 1.0, 0.5], solved={0, 2}, child_rewards={0: 1.0, 1: 0.0, 2: 1.0, 3: 0.5})
    # turn 1: one request per agent, G = 4; turn 2, in one call: the solved paths' children (0, 2) at 2 per
    # agent, the unsolved ones' (1, 3) at 4
    assert calls == [(2, 4), (8, [2, 2, 4, 4, 2, 2, 4, 4])]
    sizes = {j: len(child.completions[0]) for j, child in root.children.items()}
    assert sizes == {0: 2, 1: 4, 2: 2, 3: 4}
    assert [len(root.children[j].joint) for j in range(4)] == [2, 4, 2, 4]
    # the returns back up each child's mean, over its own number of joint actions: 1 + mean(1.0, 1.1) for j = 0,
    # 0 + mean(0.0, 0.1, 0.2, 0.3) for j = 1
    backup_returns(root, 1.0)
    assert root.returns == pytest.approx([2.05, 0.15, 2.05, 1.15])
    assign_advantages([root], "mean", "none", 1e-6)
    assert root.children[0].advantages[0] == pytest.approx([-0.05, 0.05])  # a group of two


def test_off_samples_g_everywhere_in_one_call_per_turn() -> None:
    root, calls = grow(TreeShape(2, 4, 2, "align", None), [1.0, 0.0, 1.0, 0.5], solved={0, 2},
                       child_rewards={0: 1.0, 1: 0.0, 2: 1.0, 3: 0.5})
    assert calls == [(2, 4), (8, 4)] and {len(c.completions[0]) for c in root.children.values()} == {4}


def test_every_joint_action_of_a_mixed_level_grows_a_child() -> None:
    """Three turns: at turn 2 the solved path's node has 2 joint actions and the others 4, and each grows a
    child per joint action of its own (the expander once gave every node of the level the last G drawn's
    count, so the 4-action nodes grew 2 children each)."""
    shape = TreeShape(2, 4, 3, "align", None, solved_generations=2)
    root, calls = grow(shape, [1.0, 0.0, 0.0, 0.0], solved={0}, child_rewards={0: 1.0, 1: 0.0, 2: 0.0, 3: 0.5})
    assert [len(root.children[j].children) for j in range(4)] == [2, 4, 4, 4]
    assert calls == [(2, 4), (8, [2, 2, 4, 4, 4, 4, 4, 4]), (28, 4)]  # turn 3: 14 nodes x 2 agents at G = 4
    assert all(len(c.completions[0]) == 4 for child in root.children.values() for c in child.children.values())


@pytest.mark.parametrize(("overrides", "needle"), [
    (["rollout.solved_generations=1"], "rollout.solved_generations=1 is not allowed; expected an integer >= 2"),
])
def test_config_refuses_a_group_of_one(overrides, needle) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert needle in str(err.value)
    assert load_config(None, ["rollout.solved_generations=2"]).rollout.solved_generations == 2
