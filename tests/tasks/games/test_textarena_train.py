"""Whole runs of the shipped game configs with the tiny random model (the pipeline, not learning): a game's
rounds on the tree, both seat orders in evaluation, the readable games, and the flat baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textarena")

ROOT = Path(__file__).resolve().parents[3]
FAST = ["model.name=tiny-random", "training.torch_threads=1", "logging.progress_bar=false", "dataset.eval_size=2",
        "training.steps=1", "training.trees_per_step=2", "evaluation.samples=2", "rollout.engine=hf"]


def train(config: str, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "comlrl.cli.train", "--config", config, *FAST, f"training.output_dir={out}",
           *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_game_against_random_trains_and_evaluates_both_seat_orders(tmp_path: Path) -> None:
    run = tmp_path / "ttt"
    res = train("configs/textarena_tictactoe.yaml", run)
    assert res.returncode == 0, res.stderr[-3000:]
    evals = lines(run / "eval.jsonl")
    assert {e["category"] for e in evals} == {"vs random: agent0 / random", "vs random: random / agent0"}
    assert len(evals) == 2 * 2 * 2  # 2 seeds x 2 orders, before and after
    last = lines(run / "metrics.jsonl")[-1]
    for key in ("eval/pass_at_1", "eval/sampled/win_rate", "eval/sampled/invalid_rate",
                "eval/category/vs random: random / agent0/pass_at_1", "eval/sampled/pass_at_1_delta"):
        assert key in last, key
    nodes = lines(run / "trees.jsonl")
    assert all("Current Board:" in n["prompts"][0][-1]["content"] or n["prompts"][0][-1]["role"] == "assistant"
               for n in nodes)
    assert all(c.startswith("[") for n in nodes for c in n["completions"][0])  # the answer prefix
    games = (run / "games.txt").read_text()
    assert games.startswith("# the greedy games of the evaluation after step 1")
    assert games.count("== TicTacToe-v0-train/seed-") == 4 and "result: reward" in games
    assert "agent0 (seat 1): [" in games and "random (seat 0): [" in games  # the agent played second too


def test_flat_episodes_run_the_same_game(tmp_path: Path) -> None:
    run = tmp_path / "flat"
    res = train("configs/textarena_tictactoe.yaml", run, "rollout.shape=flat", "magrpo.num_generations=3")
    assert res.returncode == 0, res.stderr[-3000:]
    step = lines(run / "metrics.jsonl")[1]
    assert step["turn_1/nodes"] == 2 and step.get("turn_2/nodes", 0) <= 2 * 3  # G chains per problem


@pytest.mark.parametrize("config", ["configs/textarena_tictactoe.yaml", "configs/textarena_selfplay.yaml",
                                    "configs/textarena_prisoners.yaml", "configs/textarena_market.yaml"])
def test_the_other_game_configs_check(config: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "comlrl.cli.train", "--config", config, "--check",
                          f"training.output_dir={tmp_path / 'out'}"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "check passed" in res.stdout + res.stderr


@pytest.mark.parametrize(("override", "says"), [
    ("task.textarena.env_id=TicTacToe-v9", "config error: task.textarena.env_id='TicTacToe-v9' is not a registered"),
    ("task.textarena.seats=[agent0,agent1]", "config error: magrpo.num_agents=1 is not allowed; expected 2"),
])
def test_a_bad_game_setting_stops_the_run_in_one_line(override: str, says: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "comlrl.cli.train", "--config", "configs/textarena_tictactoe.yaml",
                          "--check", "model.name=tiny-random", override, f"training.output_dir={tmp_path / 'out'}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 2
    lines = [x for x in res.stderr.splitlines() if x.strip() and not x.lstrip().startswith("[nltk_data]")]
    assert len(lines) == 1 and lines[0].startswith(says), res.stderr[-2000:]
