"""A short training run with external.mode=expert_edits and a local (offline) expert model."""

from __future__ import annotations

import pytest
from trainer_helpers import TINY, metrics, train

pytestmark = pytest.mark.slow


def test_expert_edits_with_a_local_expert_trains(tmp_path, tiny_model):
    run = tmp_path / "expert"
    args = [a for a in TINY if not a.startswith("external.mode")]
    res = train(["--config", "configs/align_T2_G4.yaml", *args, "training.steps=1", f"training.output_dir={run}",
                 "external.mode=expert_edits", "external.expert_edits_model=local:tiny-random",
                 "external.expert_cache_dir=off", "external.expert_max_tokens=24"])
    assert res.returncode == 0, res.stderr[-3000:]
    r = metrics(run)[1]
    assert r["nodes"] == 5  # the tree grew past turn 1 with the expert in the loop
    assert r["feedback/expert/requests"] >= 1 and r["feedback/expert/calls"] >= 1
    # the random expert's replies hold no usable edits: every such prompt falls back, and is counted
    assert r["feedback/prompts/expert_edits"] + r["feedback/expert/fallbacks"] == 4
    if r["feedback/expert/fallbacks"] == 4:  # none usable: the step says so in one line
        assert "step 1: every expert prompt (4 joint actions) fell back to external.expert_fallback=level_feedback" \
            in res.stderr
