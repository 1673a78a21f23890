"""`rollout.branch` through the real trainer on the tiny random model, vLLM rollouts in a process of their own:
the continuations are drawn, scored, counted and trained. On random weights every sampled token is
surprising, so every completion of two tokens or more branches after its first token."""

from __future__ import annotations

import pytest
from trainer_helpers import TINY, assert_trained, metrics, train

from comlrl.tree.records import read_records

pytestmark = pytest.mark.slow


def test_a_branched_run_draws_k_continuations_of_every_completion_and_trains_them(tmp_path, tiny_model):
    run = tmp_path / "branch"
    res = train(["--config", "configs/learn_easy_T1.yaml", *TINY, "magrpo.num_generations=3", "training.steps=1",
                 "magrpo.joint_mode=align", "magrpo.advantage.train_per_group=null",  # the config ships cross
                 "evaluation.samples=0", "rollout.engine=vllm", "rollout.branch.samples=2",
                 f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-4000:]
    assert_trained(run)
    [step] = [r for r in metrics(run) if r["step"] > 0]
    cut = step["branch/prefixes"]  # every completion of two tokens or more; the random model rarely ends at one
    assert 4 <= cut <= 2 * 3
    assert step["completions_generated"] == 2 * 3 + 2 * cut  # the trunks, then K = 2 per prefix
    # trained rows: per agent the 3 prefixes (or whole trunks), and each prefix's 3 continuations that spread
    assert 2 * 3 < step["samples"] <= 2 * 3 + 3 * cut and 0 < step["signal_share"] <= 1
    [tree] = list(read_records(run / "trees.jsonl"))  # the continuations are in the exported trees
    assert len(tree.branches) == cut and all(len(b.completions) == 2 == len(b.rewards) for b in tree.branches)
