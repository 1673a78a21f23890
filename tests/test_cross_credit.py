"""Cross pairing at one turn (issue 39): a completion credited with the mean over every partner is still an
unbiased policy-gradient estimate, with less variance than align's one partner, and an agent whose completion
cannot change the reward gets no update instead of its partner's noise. Checked by exact enumeration over
every draw of two-option policies (docs/algorithm.md, "Scoring every pairing at one turn")."""

from __future__ import annotations

import itertools

import pytest

from comlrl.learn.advantages import completion_values, group_advantages
from comlrl.tree.nodes import joint_actions

G = 2
P0, P1 = 0.3, 0.6  # probability that agent 0 (agent 1) writes option 1 rather than option 0


def _prob(option: int, p: float) -> float:
    return p if option else 1.0 - p


Table = list[list[float]]  # reward of (agent 0's option, agent 1's option)


def _gradient_draws(table: Table, mode: str, agent: int) -> list[tuple[float, float]]:
    """(probability, estimate) of the score-function estimate d/d(logit of option 1) for `agent`, over every
    draw of G completions per agent: (1/G) sum_k A_k (1[y_k = 1] - p), A from the project's loo estimator."""
    joint = joint_actions(2, G, mode)
    p_agent = (P0, P1)[agent]
    out = []
    for draws0 in itertools.product((0, 1), repeat=G):
        for draws1 in itertools.product((0, 1), repeat=G):
            prob = 1.0
            for a in draws0:
                prob *= _prob(a, P0)
            for b in draws1:
                prob *= _prob(b, P1)
            returns = [table[draws0[i]][draws1[j]] for i, j in joint]
            values = completion_values(joint, returns, agent, G)
            adv = group_advantages(values, "loo", "none") or [0.0] * G
            own = (draws0, draws1)[agent]
            out.append((prob, sum(a * ((y == 1) - p_agent) for a, y in zip(adv, own, strict=True)) / G))
    return out


def _moments(draws: list[tuple[float, float]]) -> tuple[float, float]:
    mean = sum(p * g for p, g in draws)
    return mean, sum(p * (g - mean) ** 2 for p, g in draws)


def _true_gradient(table: Table, agent: int) -> float:
    """d/d(logit) of E[R] = p (1 - p) E_partner[R(option 1) - R(option 0)]."""
    if agent == 0:
        diff = sum(_prob(b, P1) * (table[1][b] - table[0][b]) for b in (0, 1))
        return P0 * (1 - P0) * diff
    diff = sum(_prob(a, P0) * (table[a][1] - table[a][0]) for a in (0, 1))
    return P1 * (1 - P1) * diff


TABLES: dict[str, Table] = {
    "both matter": [[0.0, 1.0], [1.0, 3.0]],
    "helper only helps a good main": [[0.0, 0.0], [1.0, 2.0]],
    "substitutes": [[0.0, 1.0], [1.0, 1.0]],
}


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("agent", [0, 1])
def test_cross_credit_is_unbiased_and_no_noisier_than_align(name, agent):
    table = TABLES[name]
    truth = _true_gradient(table, agent)
    align_mean, align_var = _moments(_gradient_draws(table, "align", agent))
    cross_mean, cross_var = _moments(_gradient_draws(table, "cross", agent))
    assert align_mean == pytest.approx(truth)
    assert cross_mean == pytest.approx(truth)
    assert cross_var <= align_var + 1e-12


def test_cross_variance_by_hand():
    """"both matter", agent 0: the true gradient is 0.3 * 0.7 * (0.4 * 1 + 0.6 * 2) = 0.336; over the 16 draws
    (summed directly from the table, without the project's estimator) align's variance is 0.281904 and
    cross's 0.168504: the mean over both partners instead of one partner cuts it by 40%."""
    table = TABLES["both matter"]
    assert _true_gradient(table, 0) == pytest.approx(0.336)
    assert _moments(_gradient_draws(table, "align", 0)) == pytest.approx((0.336, 0.281904))
    assert _moments(_gradient_draws(table, "cross", 0)) == pytest.approx((0.336, 0.168504))


def test_an_agent_that_cannot_change_the_reward_trains_on_noise_in_align_and_not_at_all_in_cross():
    """The reward reads only agent 0's completion (a helper the main agent never calls): agent 1's true
    gradient is 0. Align credits each of agent 1's completions with its partner's reward, a zero-mean term with
    positive variance; cross gives every one of agent 1's completions the same value, so its group ties and
    is skipped (no update, no update time)."""
    table = [[0.0, 0.0], [2.0, 2.0]]
    align_mean, align_var = _moments(_gradient_draws(table, "align", 1))
    assert align_mean == pytest.approx(0.0)
    assert align_var > 0.01
    joint = joint_actions(2, G, "cross")
    for draws0 in itertools.product((0, 1), repeat=G):
        for draws1 in itertools.product((0, 1), repeat=G):
            returns = [table[draws0[i]][draws1[j]] for i, j in joint]
            assert group_advantages(completion_values(joint, returns, 1, G), "loo", "none") is None
    assert _moments(_gradient_draws(table, "cross", 1)) == (0.0, 0.0)
