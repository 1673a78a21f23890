"""TextArena games as tree states, with the real games (textarena 0.7.4): faults, views, rounds, branching."""

from __future__ import annotations

import random

import pytest

from comlrl.errors import ConfigError
from comlrl.tasks.games import arena

pytest.importorskip("textarena")

RANDOM = {"random": lambda seat, view, rng: arena.random_move(view, rng)}


def _start(env_id: str, seats: list[str], seed: int = 0) -> arena.GameState:
    return arena.start(arena.make_game(env_id, len(seats), seed), seats, seed, RANDOM)


@pytest.mark.parametrize(("env_id", "players", "says"), [
    ("TicTacToe-v9", 2, "is not a registered TextArena game; did you mean TicTacToe-v0"),
    ("Codenames-v0", 4, "needs nltk data that is not installed (words)"),
    ("GuessWho-v0", 2, "cannot start here: OpenRouter API key not found"),
    ("IteratedStagHunt-v0", 2, "does not import on this Python"),
    ("TicTacToe-v0-train", 3, "task.textarena.seats has 3 entries; TicTacToe-v0-train refuses that"),
])
def test_each_fault_of_a_game_is_one_line_naming_the_key(env_id, players, says, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(ConfigError) as err:
        arena.make_game(env_id, players, 0)
    message = str(err.value)
    assert says in message and "\n" not in message and message.startswith("config error: task.textarena.")


def test_legal_moves_are_read_from_the_games_own_list():
    assert arena.legal_moves("board\nAvailable Moves: '[0]', '[4]', '[8]'") == ["[0]", "[4]", "[8]"]
    assert arena.legal_moves("Your available actions are: '[check]', '[bet]'") == ["[check]", "[bet]"]
    assert arena.legal_moves("For example, '[4]' places your mark") == []  # an example is not a list
    assert arena.well_formed("I play [4] now", "Available Moves: '[4]', '[5]'")
    assert not arena.well_formed("I play [3]", "Available Moves: '[4]', '[5]'")
    assert arena.well_formed("[2]", "no list here")  # without a list: any bracketed token


@pytest.mark.parametrize("env_id", ["TicTacToe-v0-train", "KuhnPoker-v0-train"])
def test_a_random_opponent_only_plays_legal_moves(env_id):
    """Random against random for 30 whole games each: no game ends on an invalid move."""
    for seed in range(30):
        env = arena.make_game(env_id, 2, seed)
        rng = random.Random(seed)
        done = False
        while not done:
            seat = arena.current_player(env)
            move = arena.random_move(arena.view_of(env, seat), rng)
            done, _ = env.step(move)
        _, info = env.close()
        assert not any(info[s].get("invalid_move") for s in (0, 1)), (seed, info)


def test_branched_children_diverge_without_touching_their_parent():
    parent = _start("TicTacToe-v0-train", ["agent0", "random"], seed=4)
    before = parent.views[0][1]
    kids = [arena.branch(parent) for _ in range(2)]
    arena.advance(kids[0], {0: "[0]"}, RANDOM)
    arena.advance(kids[1], {0: "[8]"}, RANDOM)
    assert parent.views[0][1] == before and parent.log == () and not parent.done
    assert "agent0 (seat 0): [0]" in kids[0].log and "agent0 (seat 0): [8]" in kids[1].log
    assert kids[0].views[0][1] != kids[1].views[0][1]  # different boards
    # the parent still plays on as if nothing happened: a third child from it sees the first position
    third = arena.branch(parent)
    arena.advance(third, {0: "[0]"}, RANDOM)
    assert third.log == kids[0].log  # siblings meet the same opponent draws (the generator is copied too)


@pytest.mark.parametrize(("env_id", "reason"), [
    ("TicTacToe-v0-train", "correct format"),
    ("KuhnPoker-v0-train", "Action must be [Check], [Bet], [Call], or [Fold]")])
def test_an_invalid_reply_ends_as_the_game_says(env_id, reason):
    """Both games give one retry: the first reply that is not a move is another round for the same seat (the
    game's own error allowance), the second ends the game, the replier losing."""
    state = _start(env_id, ["agent0", "random"], seed=1)
    arena.advance(state, {0: "banana"}, RANDOM)
    assert not state.done and list(state.views) == [0]
    arena.advance(state, {0: "banana"}, RANDOM)
    assert state.done and state.invalid == (True, False) and state.rewards == (-1.0, 1.0)
    assert reason in state.reason


def test_a_fixed_seat_that_moves_first_plays_before_the_root():
    state = _start("TicTacToe-v0-train", ["random", "agent0"], seed=2)
    assert list(state.views) == [0] and state.views[0][0] == 1
    assert len(state.log) == 1 and state.log[0].startswith("random (seat 0): [")
    assert "placed their symbol" in state.views[0][1]


def test_self_play_moves_the_seat_to_move_each_round():
    state = _start("TicTacToe-v0-train", ["agent0", "agent0"], seed=0)
    seats = []
    for move in ("[0]", "[4]", "[1]"):
        seats.append(state.views[0][0])
        arena.advance(state, {0: move}, RANDOM)
    assert seats == [0, 1, 0]
    assert state.view([1.0, -1.0]) == -1.0  # seat 1 to move: its own reward is its view


def test_two_trained_agents_move_in_one_round_from_its_start():
    """Iterated Prisoner's Dilemma with two trained seats: one round holds both agents' moves."""
    state = _start("IteratedPrisonersDilemma-v0", ["agent0", "agent1"], seed=0)
    assert sorted(state.views) == [0, 1] and state.trained_seats == (0, 1)
    played = arena.advance(state, {0: "hello", 1: "hi"}, RANDOM)
    assert [seat for seat, _ in played] == [0, 1]
    assert state.view([3.0, 1.0]) == 2.0  # a team's view: the mean of its seats


def test_a_game_that_raises_on_a_reply_is_that_seats_invalid_move(monkeypatch):
    state = _start("TicTacToe-v0-train", ["agent0", "random"], seed=0)

    def boom(text):
        raise RuntimeError("board on fire")

    monkeypatch.setattr(state.env, "step", boom)
    arena.advance(state, {0: "[0]"}, RANDOM)  # no exception reaches the trainer
    assert state.done and state.invalid == (True, False) and "board on fire" in state.reason


def test_a_game_a_fixed_seat_ends_before_any_trained_move_is_scored_from_the_trained_seats():
    """A fixed seat that opens with two invalid replies ends the game at the root: the root's state is over, its
    view reads the trained seats, and playing on it changes nothing."""
    opponents = {"random": lambda seat, view, rng: "not a move"}
    state = arena.start(arena.make_game("TicTacToe-v0-train", 2, 0), ["random", "agent0"], 0, opponents)
    assert state.done and state.views == {} and state.trained_seats == (1,)
    assert state.rewards == (-1.0, 1.0) and state.view(state.rewards) == 1.0
    before = state.log
    arena.advance(state, {0: "[4]"}, opponents)
    assert state.log == before and state.done
