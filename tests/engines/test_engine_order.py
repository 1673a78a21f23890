"""The order in which one generate call serves its agents (pure)."""

from __future__ import annotations

import pytest

from comlrl.engines.vllm_engine import agent_order


@pytest.mark.parametrize(("agents", "held", "want"), [
    ({0, 1}, None, [0, 1]), ({0, 1}, 0, [0, 1]), ({0, 1}, 1, [1, 0]), ({0, 1, 2}, 2, [2, 0, 1]),
    ({1, 2}, 0, [1, 2]), ({1}, 1, [1]), (set(), 1, []),
])
def test_the_held_agent_goes_first_then_the_others_by_index(agents: set[int], held: int | None,
                                                              want: list[int]) -> None:
    assert agent_order(agents, held) == want


def test_a_rollout_alternates_so_each_turn_after_the_first_saves_a_push() -> None:
    held, pushes = None, 0
    for _turn in range(3):
        for agent in agent_order({0, 1}, held):
            pushes += agent != held
            held = agent
    assert pushes == 2 + 2 * 1  # N + (T-1)(N-1) with N=2, T=3 (6 without the order)
