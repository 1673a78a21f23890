"""benchmarks/tree_arms_runs.sh states each arm's whole tree, whatever the config ships: the overrides it passes
load to the tree the arm names, on the one-turn config that ships wideshare and on a two-turn config that ships a
switch on. The trainer is replaced by a recorder of its arguments (a real arm is minutes of training; what is
tested is which tree the script asks for)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from comlrl.config.schema import RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
RECORDER = """#!/usr/bin/env bash
# scripts/train.py --config C key=value ...: keep the overrides, mark the run finished; tree_arms.py: nothing
[[ $1 == scripts/train.py ]] || exit 0
shift 3
for kv in "$@"; do [[ $kv == training.output_dir=* ]] && out=${kv#training.output_dir=}; done
mkdir -p "$out/final" && printf '%s\\n' "$@" > "$out/overrides"
"""


def arms(tmp_path: Path, config: str, names: str) -> dict[str, RunConfig]:
    fake = tmp_path / "python"
    fake.write_text(RECORDER)
    fake.chmod(0o755)
    out = tmp_path / config
    res = subprocess.run(["bash", str(ROOT / "benchmarks" / "tree_arms_runs.sh"), str(out), config, "12", "0"],
                         env=dict(os.environ, PYTHON=str(fake), ARMS=names), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return {arm: load_config(ROOT / "configs" / f"{config}.yaml",
                             (out / f"{arm}_s0" / "overrides").read_text().split())
            for arm in names.split()}


def tree(cfg: RunConfig) -> tuple:
    m, r = cfg.magrpo, cfg.rollout
    return (m.joint_mode, m.num_generations, cfg.training.trees_per_step, m.advantage.train_per_group,
            r.solved_generations)


@pytest.mark.parametrize(("config", "ships"), [("learn_easy_T1", "wideshare"), ("coop_T1_G8", "fixed")])
def test_the_one_turn_arms_depart_from_the_fixed_tree_whichever_the_config_ships(tmp_path, config, ships) -> None:
    got = arms(tmp_path, config, "fixed wideshare share")
    assert tree(got["fixed"]) == ("align", 8, 4, None, None)
    assert tree(got["share"]) == ("align", 8, 4, 4, None)
    assert tree(got["wideshare"]) == ("cross", 4, 8, 2, None)
    assert tree(load_config(ROOT / "configs" / f"{config}.yaml")) == tree(got[ships])
    for cfg in got.values():  # the time budget ends every arm; the step count is only a cap
        assert (cfg.training.time_budget_minutes, cfg.training.steps, cfg.training.seed) == (12, 200, 0)


def test_a_two_turn_config_keeps_its_own_tree_and_every_switch_is_stated(tmp_path) -> None:
    got = arms(tmp_path, "align_T2_G4", "fixed solved")
    assert load_config(ROOT / "configs" / "align_T2_G4.yaml").rollout.solved_generations == 2  # shipped on
    assert tree(got["fixed"]) == ("align", 4, 1, None, None)
    assert tree(got["solved"]) == ("align", 4, 1, None, 2)
