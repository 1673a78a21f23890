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


@pytest.mark.parametrize("algo, extra", [
    ("iac", ["magrpo.num_generations=1", "magrpo.num_turns=2", "algorithm.critic.gae_lambda=0.5"]),  # G = 1, in a tree
    ("maac", []),
])
def test_actor_critic_config_trains_logs_its_critic_and_resumes_it(tmp_path, tiny_model, algo, extra):
    run = tmp_path / algo
    res = train(["--config", f"configs/{algo}_T1_G8.yaml", *SMALL, *extra, "training.save_every=1",
                 f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    steps = [r for r in metrics(run) if r["step"] > 0]
    for r in steps:
        assert math.isfinite(r["value/mse"]) and math.isfinite(r["value/explained_variance"])
        assert r["adv_groups_skipped"] == 0  # a critic's advantage needs no sibling spread
    assert steps[0]["value/mean"] == 0.0  # zero-initialised heads
    assert steps[1]["value/mean"] != 0.0  # the critic learned in step 1
    for ckpt in ("checkpoints/step-1/weights", "final"):
        assert (run / ckpt / "value_heads.pt").is_file()
    res = train(["--config", f"configs/{algo}_T1_G8.yaml", *SMALL, *extra, "training.steps=3", "--resume", str(run)])
    assert res.returncode == 0, res.stderr[-4000:]
    resumed = metrics(run)[-1]
    # the heads came back from the checkpoint: fresh (zero) heads would value every state at exactly 0
    assert resumed["step"] == 3 and resumed["value/mean"] != 0.0
