"""Two CPU processes train as one world of 2: plain DDP over gloo and DeepSpeed ZeRO-2."""

from __future__ import annotations

import pytest
from trainer_helpers import TINY, VENV_BIN, assert_trained, check_world_of_two, free_port, metrics, train

pytestmark = pytest.mark.slow

DDP = [str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/ddp_cpu.yaml"]
ZERO2 = [str(VENV_BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/deepspeed_zero2.yaml",
         "--num_processes", "2"]
ARGS = ["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=2"]


# every algorithm family under both launchers, with its own metrics reduced over the ranks
ALGORITHM_METRIC = {"magrpo": "adv_groups", "madpo": "dpo/accuracy", "iac": "value/explained_variance",
                    "maac": "value/mse", "centralized": "adv_groups", "marlhf": "marlhf/pair_accuracy"}
# centralized: one policy writes both roles (same tree shape: G joint actions per node in align mode);
# marlhf: half the task's reward in the policy's, so that the policy trains from step 1 (the heads start at 0)
# madpo and marlhf replay earlier rounds' pairs (gathered from both ranks, each rank training its share: step 2)
ALGORITHM_ARGS = {"centralized": ["magrpo.num_agents=1"], "madpo": ["algorithm.dpo.replay=all"],
                  "marlhf": ["algorithm.marlhf.task_weight=0.5", "algorithm.marlhf.replay=nearest_k"]}


# magrpo under DDP with two processes: tests/trainer/test_multinode.py (the same launcher, as two machines)
# and tests/engines/test_vllm_per_rank.py (CI's 20 minutes)
@pytest.mark.parametrize("algo", ["madpo", "iac", "marlhf"])
def test_ddp_two_processes(tmp_path, tiny_model, algo):
    run = tmp_path / "ddp"
    res = train([*ARGS, f"algorithm.name={algo}", *ALGORITHM_ARGS.get(algo, []), f"training.output_dir={run}"],
                launcher=DDP, extra_env={"ACCELERATE_USE_CPU": "true"})
    assert res.returncode == 0, res.stderr[-4000:]
    check_world_of_two(run)
    assert all(ALGORITHM_METRIC[algo] in r for r in metrics(run)[1:])
    if algo in ("madpo", "marlhf"):  # both ranks' pairs kept once; step 2 replays step 1's (if it had any)
        first, second = metrics(run)[1:3]
        kept = (run / "pairs.jsonl").read_text().splitlines()
        assert len(kept) == (first["pairs/labeled"] + second["pairs/labeled"]) * (2 if algo == "marlhf" else 1)
        own = second["pairs/labeled"] or first["pairs/labeled"]
        assert second["pairs/replayed"] == min(own, first["pairs/labeled"])


# ZeRO-2 in two processes runs magrpo (the case dropped when the suite had to fit CI's 20 minutes, back since
# the suite runs one worker per core), the team critic (value heads partitioned with the adapters) and the
# centralized policy
@pytest.mark.parametrize("algo", ["magrpo", "maac", "centralized"])
def test_deepspeed_zero2_two_processes(tmp_path, tiny_model, algo):
    run = tmp_path / "zero2"
    res = train([*ARGS, f"algorithm.name={algo}", *ALGORITHM_ARGS.get(algo, []), f"training.output_dir={run}"],
                launcher=ZERO2, timeout=1500,
                extra_env={"DS_ACCELERATOR": "cpu"})
    assert res.returncode == 0, res.stderr[-4000:]
    check_world_of_two(run, agents=1 if algo == "centralized" else 2)
    assert all(ALGORITHM_METRIC[algo] in r for r in metrics(run)[1:])
    assert (run / "checkpoints" / "step-2" / "deepspeed").is_dir()
    if algo == "maac":  # the critic's heads travel with the agents' weights
        assert (run / "checkpoints" / "step-2" / "weights" / "value_heads.pt").is_file()


def test_refuses_a_world_accelerate_does_not_see(tmp_path, tiny_model):
    """Without ACCELERATE_USE_CPU the launcher starts 2 ranks that each think they are alone."""
    run = tmp_path / "bad"
    res = train([*ARGS, f"training.output_dir={run}"], launcher=DDP, timeout=600,
                extra_env={"ACCELERATE_USE_CPU": None})
    assert res.returncode != 0
    assert "launcher started WORLD_SIZE=2 processes" in res.stderr
    assert not (run / "metrics.jsonl").exists()


# ZeRO-2's file, written like the other two, launches in the two-process tests above and the per-rank engine
# tests; ZeRO-3's from another directory in tests/engines/test_vllm_per_rank.py (CI's 20 minutes)
@pytest.mark.parametrize("stage", [1])
def test_deepspeed_configs_launch_from_any_directory(tmp_path, tiny_model, stage):
    """The shipped ZeRO configs carry no relative path: a launch from another directory trains at that stage."""
    import subprocess

    import torch
    from trainer_helpers import ENTRY, ROOT, env

    elsewhere, run = tmp_path / "elsewhere", tmp_path / "run"
    elsewhere.mkdir()
    cmd = [str(VENV_BIN / "accelerate"), "launch", "--main_process_port", str(free_port()), "--config_file",
           str(ROOT / "configs" / "accelerate" / f"deepspeed_zero{stage}.yaml"), str(ENTRY),
           "--config", str(ROOT / "configs" / "align_T2_G4.yaml"), *TINY, "training.steps=1",
           f"training.output_dir={run}"]
    res = subprocess.run(cmd, cwd=elsewhere, env={**env(), "DS_ACCELERATOR": "cpu"}, capture_output=True, text=True,
                         timeout=1200)
    assert res.returncode == 0, res.stderr[-4000:]
    assert [r["step"] for r in metrics(run)] == [0, 1]
    assert_trained(run)  # ZeRO-3 included: the partitioned update reached the saved adapters
    [optim] = (run / "checkpoints" / "step-1" / "deepspeed" / "state").glob("*optim_states.pt")
    state = torch.load(optim, map_location="cpu", weights_only=False)["optimizer_state_dict"]
    assert int(state["zero_stage"]) == stage
