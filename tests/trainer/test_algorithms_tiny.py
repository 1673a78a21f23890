"""Each algorithm family trains a few steps through the real trainer on the tiny random model, from its
shipped config, and logs the metrics a user of that algorithm reads."""

from __future__ import annotations

import math

import pytest
from trainer_helpers import TINY, assert_trained, metrics, train

pytestmark = pytest.mark.slow

# the shipped config of each family, made tiny: the random model, short completions, 2 steps of one tree
SMALL = [*TINY, "training.steps=2", "training.trees_per_step=1", "magrpo.num_generations=4",
         "evaluation.samples=0", "dataset.name=easy"]


def test_madpo_config_trains_and_logs_its_pairs(tmp_path, tiny_model):
    run = tmp_path / "madpo"
    res = train(["--config", "configs/madpo_T1_G8.yaml", *SMALL, f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    for r in [r for r in metrics(run) if r["step"] > 0]:
        # at most 2 pairs per node and agent, 2 completions each; the first step starts at the reference
        assert 0 < r["samples"] <= 2 * 2 * 2
        assert 0.0 <= r["dpo/accuracy"] <= 1.0 and math.isfinite(r["dpo/margin"])
        assert r["dpo/loss"] == pytest.approx(math.log(2.0), abs=1e-4) if r["step"] == 1 else r["dpo/loss"] > 0
