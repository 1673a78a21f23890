"""marlhf's pure parts (comlrl.learn.algorithms): the learned joint reward, returns under a mixed reward,
the units (advantages of the mixed reward, pairs by task return) and the Bradley-Terry loss, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from comlrl.config.schema import load_config
from comlrl.learn.algorithms import ALGORITHMS
from comlrl.learn.marlhf import joint_rewards, mixed_returns
from comlrl.learn.units import MicroBatch, StepSize
from comlrl.tree.nodes import Node, backup_returns


def _cfg(*over: str):
    return load_config(None, ["algorithm.name=marlhf", "magrpo.num_generations=2", "magrpo.discount=1.0",
                              "magrpo.advantage.scale=none", *over])


def _node() -> Node:
    """align, G = 2, two agents: joint action g = (a_g, b_g); task rewards 1.0 and 0.0."""
    node = Node(id="r", turn=1, root=0, messages=[[], []], completions=[["a0", "a1"], ["b0", "b1"]],
                joint=[(0, 0), (1, 1)], rewards=[1.0, 0.0])
    backup_returns(node, 1.0)
    return node


def test_a_joint_actions_learned_reward_is_the_mean_of_its_agents_heads():
    assert joint_rewards([[1.0, 0.0], [0.5, 0.25]], [(0, 0), (1, 1)]) == [0.75, 0.125]
    assert joint_rewards([[1.0, 0.0], [0.5, 0.25]], [(0, 1), (1, 0)]) == [0.625, 0.25]


def test_returns_back_up_under_another_reward():
    child = Node(id="r.0", turn=2, root=0, messages=[[]], joint=[(0,), (1,)], rewards=[1.0, 0.0])
    root = Node(id="r", turn=1, root=0, messages=[[]], joint=[(0,), (1,)], rewards=[0.3, 0.0], children={0: child})
    doubled = mixed_returns(root, lambda n: [2 * r for r in n.rewards], 0.5)
    assert doubled == {"r.0": [2.0, 0.0], "r": [0.6 + 0.5 * 1.0, 0.0]}


def test_units_follow_the_learned_reward_and_pair_by_the_task_return():
    """The heads prefer joint action 1 (learned 0.6 against 0.2), the task joint action 0 (1.0 against 0.0):
    task_weight 0 trains toward 1, task_weight 1 toward 0; the pair is (0, 1) either way (task return)."""
    heads = {"r": [[0.2, 0.6], [0.2, 0.6]]}
    [u], stats = ALGORITHMS["marlhf"].units([_node()], _cfg(), lambda nodes: heads)
    assert u.samples == ("a0", "a1", "b0", "b1") and u.pairs == ((0, 1),)
    assert u.advantages == pytest.approx((-0.2, 0.2, -0.2, 0.2)) and (stats.groups, stats.skipped) == (2, 0)
    [u], _ = ALGORITHMS["marlhf"].units([_node()], _cfg("algorithm.marlhf.task_weight=1.0"), lambda nodes: heads)
    assert u.advantages == pytest.approx((0.5, -0.5, 0.5, -0.5))
    [u], stats = ALGORITHMS["marlhf"].units([_node()], _cfg(), lambda nodes: {"r": [[0.0, 0.0], [0.0, 0.0]]})
    assert u.advantages == (0.0, 0.0, 0.0, 0.0) and stats.skipped == 2  # untrained heads: no policy signal yet


def test_bradley_terry_loss_and_accuracy_by_hand():
    """Heads a0 1.0, a1 0.0, b0 0.0, b1 0.0: joint rewards 0.5 and 0.0; the pair (0, 1) has margin 0.5,
    loss log(1 + e^-0.5) = 0.474077, and is ranked right; reversed, log(1 + e^0.5) = 0.974077, wrong."""
    sample = [type("S", (), {"agent": a})() for a in (0, 0, 1, 1)]
    [u], _ = ALGORITHMS["marlhf"].units([_node()], _cfg(), lambda nodes: {"r": [[0.0, 0.0], [0.0, 0.0]]})
    values = torch.tensor([1.0, 0.0, 0.0, 0.0], requires_grad=True)
    unit = type(u)(tuple(sample), (0.0,) * 4, pairs=((0, 1),))
    batch = MicroBatch(_cfg(), [unit], torch.zeros(4, 1), torch.ones(4, 1), StepSize(4.0, 4.0, 1.0, 4.0),
                       values=values)
    loss, stats = ALGORITHMS["marlhf"].loss(batch)
    assert float(loss.detach()) == pytest.approx(math.log1p(math.exp(-0.5)), abs=1e-6)
    assert stats["marlhf/pair_accuracy"] == (1.0, 1.0) and stats["marlhf/learned_reward"] == pytest.approx((0.5, 2.0))
    loss.backward()  # the preferred joint action's heads go up, the other's down (mean over 2 agents: / 2)
    g = 1 / (1 + math.exp(0.5)) / 2
    assert values.grad.tolist() == pytest.approx([-g, g, -g, g])
    reversed_unit = type(u)(tuple(sample), (0.0,) * 4, pairs=((1, 0),))
    loss, stats = ALGORITHMS["marlhf"].loss(MicroBatch(_cfg(), [reversed_unit], torch.zeros(4, 1), torch.ones(4, 1),
                                                       StepSize(4.0, 4.0, 1.0, 4.0), values=values.detach()))
    assert float(loss) == pytest.approx(math.log1p(math.exp(0.5)), abs=1e-6)
    assert stats["marlhf/pair_accuracy"] == (0.0, 1.0)


def test_marlhf_config_is_checked_where_it_is_defined():
    from comlrl.errors import ConfigError

    with pytest.raises(ConfigError, match="algorithm.marlhf.task_weight"):
        _cfg("algorithm.marlhf.task_weight=1.5")
    with pytest.raises(ConfigError, match="magrpo.joint_mode.*align for algorithm.name=marlhf"):
        _cfg("magrpo.joint_mode=cross")
