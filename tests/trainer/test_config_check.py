"""`comlrl-train --config X --check`: one step of any config on the tiny random model in seconds (issue 36,
defect 12: a one-step check of configs/comlrl_compat.yaml took 300+ s, its evaluation sampling 256 tokens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trainer_helpers import ENTRY, ROOT, env

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ENTRY), *args], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_the_check_keeps_the_configs_shape_and_makes_the_rest_tiny(config: Path) -> None:
    from comlrl.cli.train import check_overrides
    from comlrl.config.schema import load_config

    own = load_config(config)
    checked = load_config(config, check_overrides(own, "/tmp/x"))
    # what the config is about is kept
    assert (checked.task.name, checked.magrpo.num_agents, checked.magrpo.num_turns, checked.magrpo.num_generations,
            checked.magrpo.joint_mode, checked.algorithm.name, checked.agents.mode, checked.external.mode) == (
        own.task.name, own.magrpo.num_agents, own.magrpo.num_turns, own.magrpo.num_generations,
        own.magrpo.joint_mode, own.algorithm.name, own.agents.mode, own.external.mode)
    # and what costs time is the least that still runs every part once
    assert checked.model.name == "tiny-random" and checked.training.steps == 1
    assert checked.model.max_new_tokens == min(own.model.max_new_tokens, 16)
    assert (checked.evaluation.samples, checked.evaluation.greedy, checked.training.eval_size) == (1, False, 1)
    assert checked.evaluation.probe_problems == min(own.evaluation.probe_problems, 1)
    assert checked.rollout.engine == "hf" and checked.training.output_dir == "/tmp/x"
    assert not checked.logging.wandb


@pytest.mark.slow
def test_a_check_runs_one_step_says_so_in_one_line_and_leaves_nothing(tmp_path: Path, tiny_model) -> None:
    before = sorted(p.name for p in (ROOT / "runs").iterdir()) if (ROOT / "runs").is_dir() else []
    res = _run("--config", "configs/comlrl_compat.yaml", "--check", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    [line] = [x for x in res.stdout.splitlines() if x.startswith("check passed")]
    assert line.startswith("check passed: configs/comlrl_compat.yaml trained 1 step of task code_collab "
                           "(2 agents, 2 turns, G=4, align) on tiny-random in ")
    assert (sorted(p.name for p in (ROOT / "runs").iterdir()) if (ROOT / "runs").is_dir() else []) == before
    # no line points into the throw-away folder the check removes (outputs, the reward plot, the tree view)
    assert "comlrl-check-" not in res.stdout and "tree view" not in res.stdout and "reward plot" not in res.stdout
    cfg = yaml.safe_load(_run("--config", "configs/comlrl_compat.yaml", "--check", "--print-config").stdout)
    assert cfg["model"]["name"] == "tiny-random" and cfg["training"]["steps"] == 1


def test_check_and_resume_do_not_go_together() -> None:
    res = _run("--resume", "runs/x", "--check", timeout=60)
    assert res.returncode == 2 and res.stderr.strip() == ("error: --check trains a throw-away copy of a config; it "
                                                          "cannot --resume a run")
