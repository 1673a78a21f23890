"""task.name=verifiers against real verifiers environments (verifiers 0.3.0 in its own interpreter: the bundled
ReasoningGymEnv on reasoning-gym's data, and guess_env.py here, a MultiTurnEnv written with verifiers' classes);
the policy is a scripted stand-in (the environment door is what is tested here).

The interpreter is $COMLRL_VERIFIERS_PYTHON or .venv-verifiers/bin/python (`bash scripts/install_verifiers.sh`,
which .ci/run runs); without it these tests are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_engine import Scripted

from comlrl.errors import ConfigError, RunStopped
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.verifiers import VerifiersOptions, VerifiersTask
from comlrl.tree.contracts import JointTurn
from comlrl.tree.nodes import backup_returns
from comlrl.tree.rollout import Rollout, TreeShape

ROOT = Path(__file__).resolve().parents[3]
VF_PYTHON = os.environ.get("COMLRL_VERIFIERS_PYTHON") or str(ROOT / ".venv-verifiers" / "bin" / "python")
GUESS = f"{Path(__file__).with_name('guess_env.py')}:load_environment"
RG = {"gym": "letter_counting", "num_train_examples": 8, "num_eval_examples": 4, "seed": 0}

pytestmark = pytest.mark.skipif(not Path(VF_PYTHON).exists(),
                                reason=f"no verifiers interpreter at {VF_PYTHON} (bash scripts/install_verifiers.sh)")


def _task(env: str = GUESS, **kw) -> VerifiersTask:
    return VerifiersTask(VerifiersOptions(env=env, python=VF_PYTHON, **kw))


def test_a_multi_turn_environment_plays_its_own_loop_and_rubric():
    task = _task()
    train, evals = task.load(DatasetConfig(eval_size=2, max_problems=3))
    # no eval dataset: the last rows are held out and not trained on
    assert [(p.split, p.row) for p in train] == [("train", 0), ("train", 1), ("train", 2)]
    assert [(p.split, p.row) for p in evals] == [("train", 4), ("train", 5)]
    roots = Rollout(task, task, Scripted([f"[{d}]" for d in range(10)]), train).run(
        TreeShape(1, 4, 3, "align", None, later_generations=1), tag="")
    for root in roots:
        backup_returns(root, 1.0)
        assert root.messages[0] == [{"role": "user", "content": "Guess a digit from 0 to 9, written as [d]."}]
        for node in root.walk():
            for j, d in enumerate(node.details):
                assert d.total in (0.0, 1.0) and (d.ended or node.turn < 3)
                assert d.ended == (d.total == 1.0 or node.turn == 3)  # right, or the env's 3 turns are used
                if j in node.children:  # the environment's own next prompt: the chat, its reply
                    chat = node.children[j].messages[0]
                    assert chat[-2] == {"role": "assistant", "content": d.reply}
                    assert chat[-1]["content"] in ("higher", "lower")
    wins = [d.all_passed for root in roots for n in root.walk() for d in n.details]
    assert any(wins) and not all(wins)
    assert all(d.components.get("guessed") == d.total for r in roots for n in r.walk() for d in n.details if d.ended)
    task.begin_rollout()
    assert task._open == set() and "episodes_unfinished" not in task.metrics()
    task.close()


def test_a_reasoning_gym_environment_is_scored_by_its_own_rubric():
    """verifiers' bundled ReasoningGymEnv (reasoning-gym's letter_counting): the right count in <answer> tags
    earns 1, a wrong one 0, with its format reward as a component."""
    task = _task("verifiers:ReasoningGymEnv", args=RG)
    train, evals = task.load(DatasetConfig(eval_size=2, max_problems=8))
    assert len(train) == 8 and [(p.split, p.row) for p in evals] == [("eval", 0), ("eval", 1)]
    (prompt,) = task.initial_messages(train[0])
    assert prompt[0]["role"] == "system" and "<answer>" in prompt[0]["content"]
    question = prompt[1]["content"]
    letter = question.split('letter "')[1][0]
    text = question.split('text: "')[1].rsplit('"', 1)[0]
    right = str(text.count(letter))
    state = task.initial_state(train[0])
    scored = task.score_turns([JointTurn(train[0], (f"<answer>{right}</answer>",), state),
                               JointTurn(train[0], (f"<answer>{int(right) + 1}</answer>",), state),
                               JointTurn(train[0], ("no tags",), state)])
    (good, _), (wrong, _), (bare, _) = scored
    assert (good.total, wrong.total, bare.total) == (1.0, 0.0, 0.0)
    assert good.ended and good.all_passed and not wrong.all_passed
    assert good.components["format_reward_func"] == 1.0 > bare.components["format_reward_func"]
    task.close()


def test_an_episode_that_raises_is_logged_counted_and_scores_zero():
    task = _task()
    train, _ = task.load(DatasetConfig(eval_size=1, max_problems=1))
    roots = Rollout(task, task, Scripted(["boom", "[3]", "[4]"]), train).run(
        TreeShape(1, 2, 2, "align", None, later_generations=1), tag="")
    failed, other = roots[0].details
    assert failed.failed and failed.ended and failed.total == 0.0 and 0 not in roots[0].children
    assert "RuntimeError: the environment broke" in failed.notes[0]
    from comlrl.learn.advantages import assign_advantages

    backup_returns(roots[0], 1.0)
    assign_advantages(roots, "mean", "none", 1e-6, episodes=True)
    assert roots[0].advantages[0] is None  # the group without it is one episode: no signal, nothing trained
    assert not other.failed
    assert task.metrics()["episode_errors"] == 1.0
    assert task.outcome_counts(failed) == {"success": 0.0, "episode_error": 1.0}
    task.close()


def test_an_environment_with_tools_ends_its_episodes_saying_so():
    task = _task(GUESS.replace(":load_environment", ":load_tool_environment"))
    train, _ = task.load(DatasetConfig(eval_size=1, max_problems=1))
    (reward,) = task.score([(train[0], ["5"])])
    assert reward.failed and reward.ended and "offers tools" in reward.notes[0]
    task.close()


def test_episodes_the_tree_cuts_short_are_dropped_and_counted():
    task = _task()
    train, _ = task.load(DatasetConfig(eval_size=1, max_problems=1))
    Rollout(task, task, Scripted(["[0]"]), train).run(TreeShape(1, 2, 1, "align", None, later_generations=1), tag="")
    task.begin_rollout()  # the env takes up to 3 turns, the tree had 1: both episodes were still running
    assert task.metrics()["episodes_unfinished"] == 2.0 and task._open == set()
    task.close()


def test_faults_at_start_up_are_one_line():
    for opts, says in (
            (VerifiersOptions(env="x", python="/no/such/python"),
             "config error: task.verifiers.python='/no/such/python' cannot be run"),
            (VerifiersOptions(env="x", python=sys.executable),  # this interpreter has no verifiers
             "verifiers is not installed in it"),
            (VerifiersOptions(env="verifiers:ReasoningGymEnv", args={"gym": "no_such_gym"}, python=VF_PYTHON),
             "config error: task.verifiers.env='verifiers:ReasoningGymEnv' cannot be loaded"),
            (VerifiersOptions(env="no_such_environment", python=VF_PYTHON),
             "cannot be loaded")):
        with pytest.raises(ConfigError) as err:
            VerifiersTask(opts)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match="task.verifiers.env=None is not allowed"):
        VerifiersTask(VerifiersOptions(python=VF_PYTHON))
    with pytest.raises(ConfigError, match="task.verifiers.timeout_s=0 is not allowed"):
        VerifiersTask.validate_options(VerifiersOptions(env="x", timeout_s=0))


def test_a_worker_that_dies_mid_run_stops_the_step_naming_it():
    task = _task()
    train, _ = task.load(DatasetConfig(eval_size=1, max_problems=1))
    state = task.initial_state(train[0])
    task.channel.proc.kill()
    task.channel.proc.wait()
    with pytest.raises(RunStopped, match=r"the verifiers worker \(.*\) stopped"):
        task.score_turns([JointTurn(train[0], ("[1]",), state)])
    task.close()


def test_the_tree_shape_is_refused_for_verifiers():
    from comlrl.config.schema import load_config

    with pytest.raises(ConfigError, match=r"rollout.shape='tree' is not allowed; expected flat for task.name=verif"):
        load_config(None, ["task.name=verifiers", "task.verifiers.env=x", "magrpo.num_agents=1"])


def test_the_shipped_config_trains_one_step(tmp_path):
    """comlrl-train on configs/verifiers_reasoning_gym.yaml with the tiny random model: one step of flat episodes
    of the environment, evaluated before and after on its held-out rows."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "comlrl.cli.train", "--config", "configs/verifiers_reasoning_gym.yaml",
                          "model.name=tiny-random", "rollout.engine=hf", "training.steps=1", "dataset.eval_size=2",
                          "training.trees_per_step=2", "training.torch_threads=1", "logging.progress_bar=false",
                          f"task.verifiers.python={VF_PYTHON}", f"training.output_dir={tmp_path / 'run'}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = lines[1]
    assert step["turn_1/nodes"] == 2 and step["joint_actions"] == 2 * 4  # 4 single-turn episodes per row
    assert "eval/sampled/success_rate" in lines[-1] and "eval/pass_at_1" in lines[-1]
