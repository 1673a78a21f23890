"""`configs/comlrl_compat.yaml` reproduces CoMLRL's MAGRPO update on a cross tree computed by hand.

CoMLRL (its `MAGRPOTrainer`): returns R_j = r_j + γ · mean(child returns); in cross mode a completion is
credited with the SUM of the returns of the joint actions containing it; advantage = value − mean of the
siblings, no std scaling; loss = −A · (sum of the completion's token log-probs), averaged over completions.
Every expected number below is worked out by hand in the comments, not by the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from comlrl.config.schema import load_config, validate_threshold
from comlrl.learn.advantages import assign_advantages
from comlrl.learn.loss import aggregate, completion_mask, per_token_loss, step_normaliser
from comlrl.tree.nodes import Node, backup_returns, joint_actions, should_terminate

COMPAT = Path(__file__).resolve().parents[1] / "configs" / "comlrl_compat.yaml"


def test_the_compat_config_holds_comlrls_defaults():
    cfg = load_config(COMPAT)
    m = cfg.magrpo
    assert (cfg.model.temperature, cfg.model.top_p, m.discount) == (0.6, 0.6, 0.9)
    assert m.joint_mode == "align"  # written as CoMLRL's `aligned`
    assert (m.advantage.credit, m.advantage.baseline, m.advantage.scale, m.loss.aggregation) == \
        ("sum", "mean", "none", "seq_sum")
    # CoMLRL's -0.2 on rewards shifted into [-4, 0] is 0.2 below the best reward; ours lie in [0, 4.0]
    assert m.early_termination_threshold == pytest.approx(4.0 - 0.2)
    validate_threshold(cfg, (0.0, 4.0))  # inside code_collab's reward range
    assert should_terminate([4.0, 4.0, 3.5, 4.0], m.early_termination_threshold)  # mean 3.875 > 3.8
    assert not should_terminate([4.0, 4.0, 3.5, 3.5], m.early_termination_threshold)  # mean 3.75


def _cross_tree() -> Node:
    """N=2, G=2, T=2, cross: joint actions (0,0) (0,1) (1,0) (1,1) at every node."""
    joint = joint_actions(2, 2, "cross")
    two = [["a", "b"], ["c", "d"]]  # each agent's G=2 completions
    root = Node(id="0", turn=1, root=0, messages=[[], []], joint=joint, rewards=[1.0, 0.5, 2.0, 3.0], completions=two)
    for j, rewards in enumerate(([1.0, 2.0, 2.0, 4.0], [0.0, 1.0, 0.0, 3.0], [3.0, 4.0, 2.0, 4.0],
                                 [4.0, 4.0, 3.5, 4.0])):
        root.children[j] = Node(id=root.child_id(j), turn=2, root=0, messages=[[], []], parent=root,
                                parent_action=j, joint=joint, rewards=rewards, completions=two)
    return root


def test_compat_config_gives_comlrls_returns_and_advantages_on_a_cross_tree():
    cfg = load_config(COMPAT, ["magrpo.joint_mode=crossed"])
    m, adv = cfg.magrpo, cfg.magrpo.advantage
    assert m.joint_mode == "cross"
    root = _cross_tree()
    assert not should_terminate(root.rewards, m.early_termination_threshold)  # mean 1.625: the root expands
    backup_returns(root, m.discount)
    stats = assign_advantages([root], adv.baseline, adv.scale, adv.eps, credit=adv.credit)

    # Root returns, gamma 0.9: child means 2.25, 1.0, 3.25, 3.875
    #   R = [1 + 0.9*2.25, 0.5 + 0.9*1.0, 2 + 0.9*3.25, 3 + 0.9*3.875] = [3.025, 1.4, 4.925, 6.4875]
    assert root.returns == pytest.approx([3.025, 1.4, 4.925, 6.4875])
    # Agent 0, sum credit: completion 0 is in (0,0),(0,1): 3.025 + 1.4 = 4.425; completion 1: 4.925 + 6.4875
    #   = 11.4125; mean 7.91875 -> A = [-3.49375, +3.49375] (no std scaling)
    # Agent 1: completion 0 in (0,0),(1,0): 3.025 + 4.925 = 7.95; completion 1: 1.4 + 6.4875 = 7.8875
    #   -> A = [+0.03125, -0.03125]
    assert root.advantages[0] == pytest.approx([-3.49375, 3.49375])
    assert root.advantages[1] == pytest.approx([0.03125, -0.03125])
    # Leaves (returns = rewards). Child 0 [1, 2, 2, 4]: agent 0 sums 3, 6 -> [-1.5, 1.5]; agent 1 sums 3, 6.
    # Child 1 [0, 1, 0, 3]: agent 0 sums 1, 3 -> [-1, 1]; agent 1 sums 0, 4 -> [-2, 2].
    # Child 2 [3, 4, 2, 4]: agent 0 sums 7, 6 -> [0.5, -0.5]; agent 1 sums 5, 8 -> [-1.5, 1.5].
    # Child 3 [4, 4, 3.5, 4]: agent 0 sums 8, 7.5 -> [0.25, -0.25]; agent 1 sums 7.5, 8 -> [-0.25, 0.25].
    expected = [([-1.5, 1.5], [-1.5, 1.5]), ([-1.0, 1.0], [-2.0, 2.0]), ([0.5, -0.5], [-1.5, 1.5]),
                ([0.25, -0.25], [-0.25, 0.25])]
    for j, (a0, a1) in enumerate(expected):
        assert root.children[j].advantages[0] == pytest.approx(a0)
        assert root.children[j].advantages[1] == pytest.approx(a1)
    assert (stats.groups, stats.skipped) == (10, 0)

    # Our default (mean credit, std scaling) differs: agent 0's root values are 2.2125, 5.70625 -> +-1 after
    # dividing by their std 1.746875. Under std scaling the credit's G^(N-1) = 2 factor cancels; CoMLRL does
    # not scale, so its step grows with G^(N-1).
    default = _cross_tree()
    backup_returns(default, m.discount)
    assign_advantages([default], "mean", "group", 1e-12)
    assert default.advantages[0] == pytest.approx([-1.0, 1.0])


def test_compat_loss_is_comlrls_per_sequence_summed_log_prob_loss():
    cfg = load_config(COMPAT)
    how = cfg.magrpo.loss.aggregation
    # The root's four completions (agent 0: k=0, 1; agent 1: k=0, 1) with the advantages above, of 2, 3, 1
    # and 2 tokens; the rest is padding.
    adv = torch.tensor([-3.49375, 3.49375, 0.03125, -0.03125])
    lengths = [2, 3, 1, 2]
    logps = torch.tensor([[-0.5, -1.0, -9.0], [-0.2, -0.3, -0.1], [-2.0, -9.0, -9.0], [-0.4, -0.6, -9.0]],
                         requires_grad=True)
    mask = completion_mask(torch.zeros(4, 3), torch.tensor(lengths))
    n = step_normaliser(lengths, how)
    assert n == 4.0  # sequences, not tokens

    # CoMLRL's loss value: mean over completions of -A * sum_t log p:
    #   -(-3.49375)(-1.5) = -5.240625; -(3.49375)(-0.6) = 2.09625; -(0.03125)(-2.0) = 0.0625;
    #   -(-0.03125)(-1.0) = -0.03125; sum -3.113125, / 4 = -0.77828125
    comlrl_terms = -adv.unsqueeze(1) * logps
    assert aggregate(comlrl_terms, mask, how, n).item() == pytest.approx(-0.77828125)

    # What the trainer optimises (the on-policy ratio surrogate) has CoMLRL's gradient: d/dlogp_{k,t} = -A_k / 4
    # on every real token, whatever the sequence length (token_mean would give -A_k / 8, seq_mean -A_k / (4 L_k)).
    loss = aggregate(per_token_loss(logps, adv), mask, how, n)
    loss.backward()
    g = [-a / 4 for a in (-3.49375, 3.49375, 0.03125, -0.03125)]
    expected = torch.tensor([[g[0], g[0], 0.0], [g[1], g[1], g[1]], [g[2], 0.0, 0.0], [g[3], g[3], 0.0]])
    assert torch.allclose(logps.grad, expected)
    # its value is that surrogate's (ratio 1): sum_k -A_k * L_k / 4 = (6.9875 - 10.48125 - 0.03125 + 0.0625) / 4
    assert loss.item() == pytest.approx(-0.865625)
