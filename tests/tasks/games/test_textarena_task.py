"""task.name=textarena with real TextArena games; the policy is a scripted stand-in (the game is what is tested
here; the model runs in tests/tasks/games/test_textarena_train.py)."""

from __future__ import annotations

import pytest
from scripted_engine import Scripted

from comlrl.errors import ConfigError
from comlrl.run.evaluation import chain_stats
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.games import TextArenaOptions, TextArenaTask
from comlrl.tasks.games.task import EVAL_SEED_BASE, outcome_of
from comlrl.tree.contracts import JointTurn
from comlrl.tree.nodes import backup_returns
from comlrl.tree.rollout import Rollout, TreeShape

pytest.importorskip("textarena")


def _task(**kw) -> TextArenaTask:
    return TextArenaTask(TextArenaOptions(**kw))


def test_problems_are_training_seeds_and_held_out_seeds_in_both_seat_orders():
    task = _task(seats=["agent0", "random"])
    train, evals = task.load(DatasetConfig(eval_size=3, max_problems=5, seed=1))
    assert [p.seed for p in train] == [10_000 + i for i in range(5)]
    assert all(p.seats == ("agent0", "random") and p.category == "" for p in train)
    assert [(p.seed - EVAL_SEED_BASE, p.seats) for p in evals] == [
        (i, order) for order in (("agent0", "random"), ("random", "agent0")) for i in range(3)]
    assert {task.problem_category(p) for p in evals} == {"vs random: agent0 / random", "vs random: random / agent0"}
    assert task.problem_id(evals[0]) == "TicTacToe-v0-train/seed-1000000/agent0-random"


def test_self_play_is_evaluated_against_random_and_base():
    task = _task(seats=["agent0", "agent0"], base_model="unused-here")
    assert task.num_agents == 1 and task.evaluation_opponents() == ["random", "base"]
    _, evals = task.load(DatasetConfig(eval_size=1))
    assert [p.seats for p in evals] == [("agent0", "random"), ("random", "agent0"), ("agent0", "base"),
                                        ("base", "agent0")]


def test_a_rollout_plays_whole_games_and_each_move_is_judged_by_its_seats_result():
    task = _task(seats=["agent0", "random"])
    train, _ = task.load(DatasetConfig(max_problems=3))
    roots = Rollout(task, task, Scripted(["[4]", "[0]", "[8]", "[2]", "[6]"]), train).run(
        TreeShape(1, 2, 5, "align", None), tag="")
    finished = 0
    for root in roots:
        backup_returns(root, 1.0)
        for node in root.walk():
            for j, d in enumerate(node.details):
                if node.turn < 5:  # the last turn has no children anyway
                    assert (j in node.children) == (not d.ended)  # a finished game has no child
                if d.ended:
                    finished += 1
                    assert d.outcome in ("win", "draw", "loss") and d.total == d.seat_rewards[0]
                    assert node.returns[j] == d.seat_rewards[0]
                    assert task.outcome_counts(d)[d.outcome] == 1.0
                else:
                    assert task.outcome_counts(d) == {}
    assert finished > 0


def test_an_unparseable_reply_is_the_games_invalid_move_and_counted():
    task = _task(env_id="KuhnPoker-v0-train", seats=["agent0", "random"])
    train, _ = task.load(DatasetConfig(max_problems=2))
    roots = Rollout(task, task, Scripted(["<<<garbage>>>"]), train).run(TreeShape(1, 2, 3, "align", None), tag="")
    ends = [d for root in roots for n in root.walk() for d in n.details if d.ended]
    assert ends and all(d.invalid and d.outcome == "loss" and d.total == -1.0 for d in ends)
    assert all(task.outcome_counts(d) == {"win": 0.0, "draw": 0.0, "loss": 1.0, "invalid": 1.0} for d in ends)


def test_evaluation_rates_are_per_game_whatever_its_length():
    task = _task(seats=["agent0", "random"])
    _, evals = task.load(DatasetConfig(eval_size=2))
    roots = Rollout(task, task, Scripted(["[4]", "[0]", "[8]", "[2]", "[6]", "[1]"]), evals).run(
        TreeShape(1, 2, 5, "align", None, later_generations=1), tag="e")
    for root in roots:
        passed, _, _, rates = chain_stats(root, task.counts)
        assert set(rates) <= {"win", "draw", "loss", "invalid"}
        assert sum(rates.get(k, 0.0) for k in ("win", "draw", "loss")) in (0.0, pytest.approx(1.0))
        if rates:
            assert rates["win"] == pytest.approx(sum(passed) / len(passed))


def test_the_shaping_term_is_a_logged_component():
    task = _task(seats=["agent0", "random"], well_formed_bonus=0.1)
    train, _ = task.load(DatasetConfig(max_problems=1))
    root = Rollout(task, task, Scripted(["[4]", "hmm"]), train).run(TreeShape(1, 2, 1, "align", None), tag="")[0]
    good, bad = root.details
    assert good.components["well_formed"] == 1.0 and good.total == pytest.approx(0.1)
    assert bad.components["well_formed"] == 0.0 and bad.total == 0.0
    assert task.reward_range == (-1.0, pytest.approx(1.1))


def test_outcome_of_reads_the_trained_seats_side():
    assert outcome_of([1.0, -1.0], [0]) == "win" and outcome_of([1.0, -1.0], [1]) == "loss"
    assert outcome_of([0.0, 0.0], [0]) == "draw" and outcome_of([2.0, 2.0], [0, 1]) == "win"


def test_a_seat_list_that_does_not_fit_the_game_is_one_line_at_start_up():
    with pytest.raises(ConfigError, match=r"task.textarena.seats has 3 entries; TicTacToe-v0-train refuses"):
        _task(seats=["agent0", "random", "random"])


def test_an_llm_seat_plays_what_the_model_replies_through_the_real_sdk():
    """`llm:openai-compatible:...@<url>`: the openai SDK against a real HTTP server on loopback."""
    from llm_server import ScriptedLLMServer

    with ScriptedLLMServer(reply="I take [4] please") as server:
        task = _task(seats=["agent0", f"llm:openai-compatible:m@http://127.0.0.1:{server.port}/v1"],
                     answer_prefix="[", stop=["]"])
        state = task.initial_state(task.load(DatasetConfig(max_problems=1))[0][0])
        reward, after = task.score_joint([JointTurn(None, ("[0]",), state)])[0]
        assert "agent0 (seat 0): [0]" in after.log
        assert any(line.startswith("llm:openai-compatible:m@") and line.endswith("I take [4]") for line in after.log)
        asked = server.requests[-1]["body"]["messages"]
        assert asked[-1]["role"] == "user" and "Current Board:" in asked[-1]["content"]  # no begun answer to an API


def test_a_failed_opponent_request_plays_a_random_legal_move_and_is_counted():
    from llm_server import ScriptedLLMServer

    with ScriptedLLMServer() as server:
        server.default = "401"
        task = _task(seats=["agent0", f"llm:openai-compatible:m@http://127.0.0.1:{server.port}/v1"])
        state = task.initial_state(task.load(DatasetConfig(max_problems=1))[0][0])
        _, after = task.score_joint([JointTurn(None, ("[0]",), state)])[0]
        move = after.log[-1].split(": ", 1)[1]
        assert move in {f"[{i}]" for i in range(1, 9)} and task.metrics() == {"opponent_fallbacks": 1.0}


def test_a_base_seat_is_the_initial_model_continuing_the_begun_answer():
    """`base` loads model.name (here the tiny random model) and continues the answer prefix, greedily."""
    task = _task(seats=["base", "agent0"], base_model="tiny-random", answer_prefix="[", stop=["]"])
    problem = task.load(DatasetConfig(max_problems=1))[0][0]
    first, again = task.initial_state(problem), task._start(problem)
    assert first.log == again.log  # greedy: the same opening (the random model's invalid tries, retried) twice
    assert first.log and all(line.startswith("base (seat 0): [") for line in first.log)


def test_without_the_games_extra_the_task_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "textarena", None)  # `import textarena` raises ImportError
    with pytest.raises(ConfigError, match=r"task.name=textarena needs the `games` extra: pip install -e '.\[games\]'"):
        _task()


def test_flat_episodes_are_refused_for_self_play():
    from comlrl.config.schema import load_config

    with pytest.raises(ConfigError, match=r"rollout.shape='flat' is not allowed; expected tree for self-play"):
        load_config("configs/textarena_selfplay.yaml", ["rollout.shape=flat"])
    assert load_config("configs/textarena_tictactoe.yaml", ["rollout.shape=flat"]).rollout.shape == "flat"


def test_a_root_whose_game_is_already_over_scores_without_crashing():
    from comlrl.tasks.games.task import GameProblem

    task = _task(seats=["random", "agent0"])
    task._opponents["random"] = lambda seat, view, rng: "not a move"  # the fixed seat forfeits before agent0 moves
    problem = GameProblem(0, ("random", "agent0"))
    (root,) = Rollout(task, task, Scripted(["[4]"]), [problem]).run(TreeShape(1, 2, 3, "align", None), tag="")
    assert root.messages[0][0]["content"].startswith("The game is over")
    assert [d.outcome for d in root.details] == ["win", "win"] and root.children == {}
