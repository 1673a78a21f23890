"""task.name=bfcl through the real trainer on the tiny random model (slow): two agents split BFCL's parallel
entries in cross mode, every joint action judged by BFCL's checker, and the evaluation reports BFCL's
accuracy per category."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def test_two_agents_train_on_parallel_entries_and_are_evaluated_per_category(tmp_path):
    from comlrl.models import resolve_model_path

    resolve_model_path("tiny-random")
    run = tmp_path / "par"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    args = ["--config", "configs/bfcl_parallel_N2_T1_G4.yaml", "model.name=tiny-random", "model.max_new_tokens=8",
            "rollout.engine=hf", "training.torch_threads=1", "logging.progress_bar=false", "training.trees_per_step=1",
            "magrpo.num_generations=2", "dataset.eval_size=2", "training.steps=1", "evaluation.samples=2",
            f"training.output_dir={run}"]
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (node,) = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    assert len(node["completions"]) == 2 and len(node["joint_actions"]) == 4  # cross: G^N = 2^2
    assert all(p[0]["role"] == "system" and "caller 1 of a team of 2" in p[0]["content"] for p in node["prompts"][:1])
    for detail in node["reward_details"]:  # every joint action carries the checker's verdict and its parts
        assert {"checker", "decoded", "count_match", "schema", "arguments", "duplicates", "lazy_agents"} <= set(
            detail["components"])
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    last = metrics[-1]
    for category in ("parallel", "parallel_multiple"):  # eval_size 2: one held-out entry per category
        assert last[f"eval/category/{category}/problems"] == 1
        assert 0.0 <= last[f"eval/category/{category}/sampled/pass_at_1"] <= 1.0
    records = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    assert {r["category"] for r in records} == {"parallel", "parallel_multiple"}
    assert all(r["task_id"].startswith(r["category"] + "_") for r in records)  # BFCL's own ids
