"""`register_reward(name, fn)` with a plain function (issue 24, defect 1): it is a reward rule, not a crash."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError, load_config
from comlrl.tasks import build_task
from comlrl.tasks.reward_funcs import RewardFunctionError

HERE = Path(__file__).resolve().parent
CODE = "```python\ndef f():\n    return 1\n```"


def _task(reward: str, sandbox=None):
    cfg = load_config(None, ["plugins=[short_function_reward]", "task.name=code_single", "magrpo.num_agents=1",
                             f"task.reward={reward}"])
    return cfg, build_task(cfg.task, sandbox)


def test_a_plain_function_scores_and_its_range_is_open() -> None:
    cfg, task = _task("short")
    assert task.reward_range == (-math.inf, math.inf)  # no range declared: any threshold is accepted
    [r] = task.score([(task.load(cfg.dataset)[0][0], [CODE])])
    assert r.total == pytest.approx(1.0 / (1.0 + len(r.codes[0]) / 100.0))
    assert r.components == {"short": r.total} and not r.all_passed and r.codes == r.scored


def test_a_declared_range_bounds_the_threshold(tmp_path: Path) -> None:
    from comlrl.config.schema import validate_threshold
    from sandbox.executor import Sandbox

    with Sandbox(workers=1) as sb:
        cfg, task = _task("short_levels", sb)
        assert task.reward_range == (0.0, 4.5)
        problem = task.load(cfg.dataset)[0][0]
        [r] = task.score([(problem, [CODE])])
        levels = sum(r.components.values())  # the levels' components, as they scored the code
        # CODE defines f, not the entry point: no level holds (syntax counts only with it, as levels are cumulative)
        assert levels == 0.0 and r.total == pytest.approx(levels + 0.5 / (1 + len(r.codes[0]) / 100))
    cfg.magrpo.early_termination_threshold = 5.0
    with pytest.raises(ConfigError, match=r"expected a number in \[0.0, 4.5\)"):
        validate_threshold(cfg, task.reward_range)


@pytest.mark.parametrize(("name", "message"), [
    ("broken", "task.reward=broken: short_function_reward:broken raised ZeroDivisionError: division by zero"),
    ("too_few", "task.reward=too_few: short_function_reward:too_few returned 1 values for 2 requests"),
])
def test_a_function_that_fails_is_one_line_naming_it(name: str, message: str) -> None:
    cfg, task = _task(name)
    problem = task.load(cfg.dataset)[0][0]
    with pytest.raises(RewardFunctionError) as err:
        task.score([(problem, [CODE]), (problem, [CODE])])
    assert str(err.value) == message


def test_registration_refuses_what_is_neither_a_rule_nor_a_function() -> None:
    from comlrl.config.registry import register_reward

    with pytest.raises(TypeError, match=r"^task.reward: 'number' must be a CodeRewardRule \(reward_range and "
                                        r"score_batch\) or a function score\(requests, sandbox\), got int$"):
        register_reward("number", 3)


@pytest.mark.slow
def test_the_issue_command_trains_with_a_function_reward(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(HERE.parent / "trainer"))
    from trainer_helpers import TINY, env, metrics, train

    run = tmp_path / "run"
    pythonpath = os.pathsep.join((str(HERE), env()["PYTHONPATH"]))
    res = train(["--config", "configs/align_T2_G4.yaml", *TINY, "plugins=[short_function_reward]",
                 "task.reward=short", "training.steps=1", "dataset.eval_size=0", f"training.output_dir={run}"],
                extra_env={"PYTHONPATH": pythonpath})
    assert res.returncode == 0, res.stderr[-3000:]
    step = metrics(run)[-1]
    assert step["step"] == 1 and step["samples"] > 0 and step["grad_norm"] > 0


def test_reward_functions_add_to_a_plugin_tasks_reward_that_declares_no_scored() -> None:
    import reward_fns

    from comlrl.tree.contracts import JointTurn

    cfg = load_config(None, ["plugins=[rhyme_task]", "task.name=rhyme", "magrpo.num_agents=1",
                             "task.reward_funcs=[reward_fns:record]"])
    task = build_task(cfg.task, None)
    reward_fns.CALLS.clear()
    [(r, _)] = task.score_joint([JointTurn(task.load(cfg.dataset)[0][0], ("hat bat mat",))])
    assert reward_fns.CALLS[0]["scored"] == ["hat bat mat"]  # RhymeReward has no `scored`: the text stands in
    assert set(r.components) == {"rhymes", "variety", "record"} and r.all_passed
