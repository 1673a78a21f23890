"""task.name=openenv against a real OpenEnv server (openenv-core's own create_app, uvicorn on loopback); the
policy is a scripted stand-in (the environment door is what is tested here)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("openenv")

from scripted_engine import Scripted  # noqa: E402

from comlrl.errors import ConfigError, RunStopped  # noqa: E402
from comlrl.tasks.datasets import DatasetConfig  # noqa: E402
from comlrl.tasks.openenv import OpenEnvOptions, OpenEnvTask  # noqa: E402
from comlrl.tasks.openenv.local_server import LocalServer  # noqa: E402
from comlrl.tree.nodes import backup_returns  # noqa: E402
from comlrl.tree.rollout import Rollout, TreeShape  # noqa: E402


@pytest.fixture(scope="module")
def server():
    srv = LocalServer.start("comlrl.tasks.openenv.example_env:app")
    yield srv
    srv.stop()


def _task(server, **kw) -> OpenEnvTask:
    return OpenEnvTask(OpenEnvOptions(url=server.url, **kw))


def test_independent_episodes_per_seed_with_the_environments_reward(server):
    task = _task(server, instruction="Reply with [d].")
    train, evals = task.load(DatasetConfig(eval_size=2, max_problems=3))
    assert [p.seed for p in train] == [0, 1, 2] and [p.seed for p in evals] == [1_000_000, 1_000_001]
    roots = Rollout(task, task, Scripted([f"[{d}]" for d in range(10)]), train).run(
        TreeShape(1, 4, 3, "align", None, later_generations=1), tag="")
    for root in roots:
        backup_returns(root, 1.0)
        assert root.messages[0][0]["content"] == "Guess a digit from 0 to 9, written as [d].\n\nReply with [d]."
        for node in root.walk():
            for j, d in enumerate(node.details):
                assert d.total in (0.0, 1.0) and d.ended == (d.total == 1.0 or node.turn == 3)
                if j in node.children:
                    chat = node.children[j].messages[0]
                    assert chat[-2] == {"role": "assistant", "content": d.reply}
                    assert chat[-1]["content"].split("\n\n")[0] in ("higher", "lower")
    wins = [d.all_passed for root in roots for n in root.walk() for d in n.details]
    assert any(wins) and not all(wins)
    task.begin_rollout()  # the batch's sessions close
    assert task._open == []
    task.close()


def test_an_episode_the_environment_fails_ends_with_reward_zero_and_is_counted(server):
    task = _task(server)
    train, _ = task.load(DatasetConfig(max_problems=1))
    roots = Rollout(task, task, Scripted(["boom", "[3]", "[4]"]), train).run(
        TreeShape(1, 2, 2, "align", None, later_generations=1), tag="")
    failed, other = roots[0].details
    assert failed.failed and failed.ended and failed.total == 0.0 and 0 not in roots[0].children
    assert "the environment broke" in failed.notes[0] or "Server error" in failed.notes[0]
    from comlrl.learn.advantages import assign_advantages

    backup_returns(roots[0], 1.0)
    assign_advantages(roots, "mean", "none", 1e-6, episodes=True)
    assert roots[0].advantages[0] is None  # the group without it is one episode: no signal, nothing trained
    assert not other.failed
    assert task.metrics()["episode_errors"] == 1.0
    assert task.outcome_counts(failed) == {"success": 0.0, "episode_error": 1.0}
    task.close()


def test_a_server_that_is_down_is_one_line_at_start_up():
    with pytest.raises(ConfigError) as err:
        OpenEnvTask(OpenEnvOptions(url="http://127.0.0.1:9", timeout_s=2))
    message = str(err.value)
    assert message.startswith("config error: task.openenv.url='http://127.0.0.1:9' cannot be used: the OpenEnv "
                              "server at http://127.0.0.1:9 did not open 1 session(s)") and "\n" not in message


def test_a_server_that_dies_mid_run_stops_the_step_naming_it():
    own = LocalServer.start("comlrl.tasks.openenv.example_env:app")
    task = OpenEnvTask(OpenEnvOptions(url=own.url, timeout_s=3))
    train, _ = task.load(DatasetConfig(max_problems=1))
    state = task.initial_state(train[0])
    own.stop()  # the server goes away with the session open
    from comlrl.tree.contracts import JointTurn

    with pytest.raises(RunStopped, match=rf"the OpenEnv server at {own.url} (stopped answering|did not open)"):
        task.score_joint([JointTurn(train[0], ("[1]",), state), JointTurn(train[0], ("[2]",), state)])
    task.close()


def test_options_are_checked_in_one_line():
    with pytest.raises(ConfigError, match="task.openenv.url=None is not allowed"):
        OpenEnvTask(OpenEnvOptions())
    for opts, says in ((OpenEnvOptions(url="http://x", app="m:a"), "null when task.openenv.app is set"),
                       (OpenEnvOptions(url="ws://x"), "an http:// or https:// URL"),
                       (OpenEnvOptions(app="nocolon"), "task.openenv.app='nocolon' is not allowed")):
        with pytest.raises(ConfigError, match=says):
            OpenEnvTask.validate_options(opts)
    with pytest.raises(ConfigError, match=r"task.openenv.app: cannot import 'no_such_module'"):
        OpenEnvTask(OpenEnvOptions(app="no_such_module:app"))


def test_the_tree_shape_is_refused_for_openenv():
    from comlrl.config.schema import load_config

    with pytest.raises(ConfigError, match=r"rollout.shape='tree' is not allowed; expected flat for task.name=openenv"):
        load_config(None, ["task.name=openenv", "task.openenv.url=http://127.0.0.1:1", "magrpo.num_agents=1"])


def test_the_shipped_config_trains_one_step_against_the_served_example(tmp_path):
    """comlrl-train on configs/openenv_guess.yaml with the tiny random model: the run serves the example
    environment itself, trains one step of flat episodes and evaluates before and after."""
    import json
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "comlrl.cli.train", "--config", "configs/openenv_guess.yaml",
                          "model.name=tiny-random", "rollout.engine=hf", "training.steps=1", "dataset.eval_size=2",
                          "training.trees_per_step=2", "training.torch_threads=1", "logging.progress_bar=false",
                          f"training.output_dir={tmp_path / 'run'}"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = lines[1]
    assert step["turn_1/nodes"] == 2 and step["joint_actions"] >= 2 * 4  # 4 episodes per seed, then their turns
    assert "eval/sampled/success_rate" in lines[-1] and "eval/pass_at_1" in lines[-1]
