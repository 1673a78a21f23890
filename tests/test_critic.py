"""Value targets and advantages of the actor-critic algorithms (comlrl.learn.critic, comlrl.learn.algorithms' units),
checked against hand-computed cases; the reference library's worked cases are marked."""

from __future__ import annotations

import pytest

from comlrl.config.schema import load_config
from comlrl.learn.algorithms import ALGORITHMS, explained_variance
from comlrl.learn.critic import completion_targets, lambda_returns, whiten
from comlrl.tree.nodes import Node, backup_returns


def _two_turn_tree() -> Node:
    """Root: 2 joint actions (rewards 0.3, 0.0); the first continues into a child with rewards 1.0, 0.0."""
    child = Node(id="r.0", turn=2, root=0, messages=[[]], joint=[(0,), (1,)], rewards=[1.0, 0.0])
    return Node(id="r", turn=1, root=0, messages=[[]], joint=[(0,), (1,)], rewards=[0.3, 0.0], children={0: child})


def test_lambda_one_is_the_backed_up_return():
    root = _two_turn_tree()
    got = lambda_returns(root, lambda n: 123.0, 0.9, 1.0)  # the critic's value is never read
    backup_returns(root, 0.9)
    assert got["r"] == pytest.approx(root.returns) and got["r"] == pytest.approx([0.3 + 0.9 * 0.5, 0.0])
    assert got["r.0"] == pytest.approx([1.0, 0.0])


def test_lambda_zero_is_td0_as_in_the_reference_library():
    # reference case: r = [0.3, 1.0] along one path, V(next state) = 0.6, discount 0.9 -> targets [0.84, 1.0]
    child = Node(id="r.0", turn=2, root=0, messages=[[]], joint=[(0,)], rewards=[1.0])
    root = Node(id="r", turn=1, root=0, messages=[[]], joint=[(0,)], rewards=[0.3], children={0: child})
    got = lambda_returns(root, lambda n: {"r.0": 0.6}[n.id], 0.9, 0.0)
    assert got["r"] == pytest.approx([0.84]) and got["r.0"] == pytest.approx([1.0])


def test_lambda_half_mixes_the_value_and_the_child_returns():
    got = lambda_returns(_two_turn_tree(), lambda n: 0.6, 0.9, 0.5)
    assert got["r"] == pytest.approx([0.3 + 0.9 * (0.5 * 0.6 + 0.5 * 0.5), 0.0])  # 0.795
    with pytest.raises(ValueError, match="lambda"):
        lambda_returns(_two_turn_tree(), lambda n: 0.0, 1.0, 1.5)


def test_completion_targets_average_the_joint_actions_holding_each_completion():
    node = Node(id="r", turn=1, root=0, messages=[[], []], joint=[(0, 0), (0, 1), (1, 0), (1, 1)],
                completions=[["a", "b"], ["c", "d"]])
    assert completion_targets(node, [3.0, 1.0, 0.0, 0.0], 0) == [2.0, 0.0]
    assert completion_targets(node, [3.0, 1.0, 0.0, 0.0], 1) == [1.5, 0.5]


def test_whiten_matches_the_reference_librarys_worked_cases():
    # returns [1, 0], V [0.5, 0.5]: A = [0.5, -0.5] -> [1, -1]
    assert whiten([0.5, -0.5], 1e-9) == pytest.approx([1.0, -1.0])
    # returns [1, 0, 1, 0], V [0.5, 0.5, 0.2, 0.8]: A = [0.5, -0.5, 0.8, -0.8]
    assert whiten([0.5, -0.5, 0.8, -0.8], 1e-9) == pytest.approx([0.749532, -0.749532, 1.199251, -1.199251], abs=1e-6)
    assert whiten([2.0]) == [0.0] and whiten([]) == []


def test_explained_variance_from_the_steps_means():
    # targets [1, 0, 1, 0], values [0.5, 0.5, 0.5, 0.5]: residuals +-0.5 -> Var(r) = 0.25 = Var(t): EV 0
    means = {"value/target_mean": 0.5, "value/target_sq": 0.5, "value/mse": 0.25, "value/residual_mean": 0.0}
    assert explained_variance(means)["value/explained_variance"] == pytest.approx(0.0)
    # values equal to the targets: EV 1; a constant offset does not count (Var of residuals is 0)
    means = {"value/target_mean": 0.5, "value/target_sq": 0.5, "value/mse": 0.04, "value/residual_mean": 0.2}
    assert explained_variance(means)["value/explained_variance"] == pytest.approx(1.0)


def _cfg(algo: str, scale: str = "none", lam: float = 1.0):
    return load_config(None, [f"algorithm.name={algo}", f"magrpo.advantage.scale={scale}", "magrpo.num_generations=2",
                              "magrpo.discount=1.0", f"algorithm.critic.gae_lambda={lam}"])


def _node() -> Node:
    # align, G = 2, two agents; completions are labels the units carry through
    return Node(id="r", turn=1, root=0, messages=[[], []], completions=[["a0", "a1"], ["b0", "b1"]],
                joint=[(0, 0), (1, 1)], rewards=[1.0, 0.0], returns=[1.0, 0.0])


def test_iac_units_advantage_is_target_minus_each_agents_own_value():
    units, stats = ALGORITHMS["iac"].units([_node()], _cfg("iac"), lambda nodes: {"r": [0.5, 0.25]})
    [u] = units
    assert u.samples == ("a0", "a1", "b0", "b1") and u.targets == (1.0, 0.0, 1.0, 0.0)
    assert u.advantages == pytest.approx((0.5, -0.5, 0.75, -0.25)) and (stats.groups, stats.skipped) == (2, 0)


def test_maac_units_advantage_is_target_minus_the_teams_value():
    [u], _ = ALGORITHMS["maac"].units([_node()], _cfg("maac"), lambda nodes: {"r": [0.5, 0.25]})
    assert u.advantages == pytest.approx((0.625, -0.375, 0.625, -0.375))  # V(team) = (0.5 + 0.25) / 2


def test_maac_team_value_equals_one_head_when_every_agent_sees_the_same_value():
    """The team critic is the mean of the heads (not their sum): equal heads give iac's value, so under
    Adam it moves as fast as one iac head."""
    iac, _ = ALGORITHMS["iac"].units([_node()], _cfg("iac"), lambda nodes: {"r": [0.3, 0.3]})
    maac, _ = ALGORITHMS["maac"].units([_node()], _cfg("maac"), lambda nodes: {"r": [0.3, 0.3]})
    assert maac[0].advantages == pytest.approx(iac[0].advantages)
    assert maac[0].advantages == pytest.approx((0.7, -0.3, 0.7, -0.3))


def test_group_scale_whitens_each_agents_advantages_over_the_step():
    [u], _ = ALGORITHMS["iac"].units([_node()], _cfg("iac", scale="group"), lambda nodes: {"r": [0.5, 0.25]})
    assert u.advantages == pytest.approx((1.0, -1.0, 1.0, -1.0), abs=1e-4)


def test_one_sample_per_node_trains_without_a_sibling_group():
    node = Node(id="r", turn=1, root=0, messages=[[]], completions=[["a0"]], joint=[(0,)], rewards=[1.0],
                returns=[1.0])
    cfg = load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "algorithm.name=iac",
                             "magrpo.num_generations=1", "magrpo.advantage.scale=none"])
    [u], _ = ALGORITHMS["iac"].units([node], cfg, lambda nodes: {"r": [0.4]})
    assert u.advantages == pytest.approx((0.6,)) and u.targets == (1.0,)


def test_maac_q_of_a_joint_action_is_the_mean_of_its_agents_heads():
    """align, G = 2, two agents: samples a0 a1 b0 b1; joint action g holds a_g and b_g."""
    import torch

    from comlrl.learn.units import Unit, joint_mean

    unit = Unit(tuple(type("S", (), {"agent": a})() for a in (0, 0, 1, 1)))
    q = torch.tensor([1.0, 2.0, 3.0, 5.0])
    assert joint_mean(q, unit).tolist() == [2.0, 3.5, 2.0, 3.5]


def test_q_critic_td_targets_on_a_two_turn_tree():
    """Q(s, a) heads: a state's value is the mean Q of the actions sampled there (the learner's
    state_values), and TD(0) targets bootstrap from it: root Q 0.6, 0.0 (V 0.3); the child's Q 0.8, 0.2
    (V 0.5). Targets: root r + V(child) = 0.3 + 0.5 = 0.8 and 0.0; child 1.0 and 0.0. Advantages target -
    V(state): root 0.5, -0.3; child 0.5, -0.5."""
    from types import SimpleNamespace

    import torch

    from comlrl.learn.learner import Learner

    tree = _two_turn_tree()
    tree.completions, tree.children[0].completions = [["r0", "r1"]], [["c0", "c1"]]
    backup_returns(tree, 1.0)
    q = {"r0": 0.6, "r1": 0.0, "c0": 0.8, "c1": 0.2}
    policies = SimpleNamespace(module=SimpleNamespace(value_at_action=True),
                               logprobs_and_values=lambda s: (None, None, torch.tensor([q[x] for x in s])))
    learner = Learner.__new__(Learner)
    learner.policies, learner.micro_batch_size = policies, 3
    learner.accelerator = SimpleNamespace(num_processes=1)
    values = learner.state_values([tree, tree.children[0]])
    assert values["r"] == pytest.approx([0.3]) and values["r.0"] == pytest.approx([0.5])
    cfg = load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "algorithm.name=iac",
                             "magrpo.num_generations=2", "magrpo.advantage.scale=none", "magrpo.discount=1.0",
                             "algorithm.critic.gae_lambda=0", "algorithm.critic.kind=q"])
    units, _ = ALGORITHMS["iac"].units([tree], cfg, learner.state_values)
    by_node = {u.samples[0]: u for u in units}
    assert by_node["r0"].targets == pytest.approx((0.8, 0.0)) and by_node["c0"].targets == pytest.approx((1.0, 0.0))
    assert by_node["r0"].advantages == pytest.approx((0.5, -0.3))
    assert by_node["c0"].advantages == pytest.approx((0.5, -0.5))
    policies.module.value_at_action = False  # a V head: one forward per (node, agent), the first completion's
    assert learner.state_values([tree])["r"] == pytest.approx([0.6])


def test_the_q_critic_is_for_the_actor_critic_families_and_maac_in_align_mode():
    from comlrl.errors import ConfigError

    with pytest.raises(ConfigError, match="algorithm.critic.kind='q' is not allowed.*algorithm.name=magrpo"):
        load_config(None, ["algorithm.critic.kind=q"])
    with pytest.raises(ConfigError, match="algorithm.critic.kind='q'.*joint_mode=cross"):
        load_config(None, ["algorithm.name=maac", "algorithm.critic.kind=q", "magrpo.joint_mode=cross"])
    with pytest.raises(ConfigError, match="algorithm.critic.kind"):
        load_config(None, ["algorithm.name=iac", "algorithm.critic.kind=w"])
    assert load_config(None, ["algorithm.name=maac", "algorithm.critic.kind=q"]).algorithm.critic.kind == "q"
