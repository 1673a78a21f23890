"""Seat lists of task.textarena (pure): who is trained, who is fixed, what evaluation plays."""

from __future__ import annotations

import pytest

from comlrl.errors import ConfigError
from comlrl.tasks.games.seats import (
    against,
    agent_of,
    check_seats,
    evaluation_arrangements,
    fixed_kinds,
    rotations,
)


@pytest.mark.parametrize(("seats", "agents"), [
    (["agent0", "random"], 1), (["random", "agent0"], 1), (["agent0", "agent0"], 1),
    (["agent0", "agent1"], 2), (["agent1", "base", "agent0"], 2), (["agent0", "llm:local:x", "frozen:/tmp/m"], 1),
])
def test_the_number_of_trained_agents_is_the_number_of_distinct_agent_seats(seats, agents):
    assert check_seats(seats) == agents


@pytest.mark.parametrize(("seats", "says"), [
    ([], "is empty"),
    (["random", "base"], "has no trained seat"),
    (["agent0", "agent2"], "numbers its agents [0, 2]"),
    (["agent0", "randm"], "task.textarena.seats[1]='randm' is not allowed"),
    (["agent0", "frozen:"], "names no folder"),
    (["agent0", "llm:"], "names no model"),
    (["Agent0", "random"], "task.textarena.seats[0]"),
])
def test_a_bad_seat_list_is_one_line_naming_the_key(seats, says):
    with pytest.raises(ConfigError) as err:
        check_seats(seats)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_agent_of_reads_only_whole_agent_names():
    assert [agent_of(s) for s in ("agent0", "agent12", "agent", "xagent1", "agent1x", "random")] == \
        [0, 12, None, None, None, None]


def test_against_replaces_fixed_seats_or_every_later_seat_of_a_self_playing_agent():
    assert against(["agent0", "random"], "base") == ("agent0", "base")
    assert against(["agent0", "random", "agent1", "base"], "random") == ("agent0", "random", "agent1", "random")
    assert against(["agent0", "agent0"], "random") == ("agent0", "random")
    assert against(["agent0", "agent1"], "base") == ("agent0", "agent1")  # a team without fixed seats stays


def test_rotations_give_both_orders_of_two_players_and_every_order_of_three():
    assert rotations(("agent0", "random")) == [("agent0", "random"), ("random", "agent0")]
    assert rotations(("a", "b", "c")) == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")]
    assert rotations(("agent0", "agent0")) == [("agent0", "agent0")]


def test_evaluation_plays_each_opponent_in_both_seat_orders():
    assert evaluation_arrangements(["agent0", "random"], ["random", "base"]) == [
        ("agent0", "random"), ("random", "agent0"), ("agent0", "base"), ("base", "agent0")]
    # self-play: each opponent takes the second seat of the agent, then the orders swap
    assert evaluation_arrangements(["agent0", "agent0"], ["random"]) == [("agent0", "random"), ("random", "agent0")]
    assert fixed_kinds(["agent0", "random", "base", "random"]) == ["random", "base"]
