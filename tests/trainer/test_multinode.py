"""The multi-node launch path on one CPU machine: two "machines" on loopback, one process each, one world of 2.

Each launch is what a user runs on one node of the README's multi-node recipe (`--num_machines 2
--machine_rank 0|1 --main_process_ip --main_process_port`): accelerate gives torchrun `--nnodes 2
--node_rank R` and a static rendezvous at rank 0's address, so every process has LOCAL_RANK 0 while its
RANK is 0 or 1 (a process on machine 1 that took its local rank for its rank would also claim rank 0).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess

import pytest
from trainer_helpers import ENTRY, ROOT, TINY, VENV_BIN, check_world_of_two, env, metrics

pytestmark = pytest.mark.slow

# the flags on top of each launcher's config file; --num_processes counts the processes of all machines
LAUNCHERS = {
    # DDP over gloo: ACCELERATE_USE_CPU=true and --multi_gpu, as on one machine (cpu-stack notes)
    "ddp": (["--config_file", "configs/accelerate/ddp_cpu.yaml", "--num_processes", "2"],
            {"ACCELERATE_USE_CPU": "true"}),
    # the shipped 2 x 8 GPU config, shrunk to 2 x 1 on the command line
    "zero2": (["--config_file", "configs/accelerate/multinode_zero2.yaml", "--num_processes", "2"],
              {"DS_ACCELERATOR": "cpu"}),
}
ARGS = ["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=1",
        # evaluation stays (each rank scores one held-out problem, gathered on rank 0) but greedy only
        "evaluation.samples=0", "evaluation.probe_problems=0", "logging.tensorboard=false"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_machines(launcher: list[str], args: list[str], extra_env: dict[str, str],
                        timeout: int = 1200) -> list[subprocess.CompletedProcess]:
    """`accelerate launch` once per machine rank, as on two nodes, both pointed at rank 0 on 127.0.0.1."""
    port = _free_port()
    e = {**env(), **extra_env}
    procs = []
    for machine in (0, 1):
        cmd = [str(VENV_BIN / "accelerate"), "launch", *launcher, "--num_machines", "2",
               "--machine_rank", str(machine), "--main_process_ip", "127.0.0.1", "--main_process_port", str(port),
               str(ENTRY), *args]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, start_new_session=True))
    results = []
    try:
        for p in procs:  # one machine failing leaves the other waiting at the rendezvous: the timeout ends both
            out, err = p.communicate(timeout=timeout)
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return results


@pytest.mark.parametrize("name", ["ddp", "zero2"])
def test_two_loopback_machines_train_as_one_world(tmp_path, tiny_model, name):
    launcher, extra_env = LAUNCHERS[name]
    run = tmp_path / name
    machine0, machine1 = launch_two_machines(launcher, [*ARGS, f"training.output_dir={run}"], extra_env)
    assert machine0.returncode == 0, machine0.stderr[-4000:]
    assert machine1.returncode == 0, machine1.stderr[-4000:]
    check_world_of_two(run, steps=1)  # both ranks' trees, identical weights after the step
    step1 = metrics(run)[1]
    assert step1["trees"] == 2  # a machine that trained alone would count its own tree only
    assert json.loads((run / "checkpoints" / "step-1" / "meta.json").read_text())["world_size"] == 2
    # only rank 0 writes outputs: one copy of each line, and the run's summary on machine 0 only
    assert len((run / "trees.jsonl").read_text().splitlines()) == len(
        {json.loads(x)["id"] for x in (run / "trees.jsonl").read_text().splitlines()})
    assert f"outputs in {run}" in machine0.stdout + machine0.stderr
    assert "outputs in" not in machine1.stdout + machine1.stderr
    rng = sorted(p.name for p in (run / "checkpoints" / "step-1").glob("rng-*.pt"))
    assert rng == ["rng-0.pt", "rng-1.pt"]  # each rank's own RNG state, by its global rank
    if name == "zero2":
        assert (run / "checkpoints" / "step-1" / "deepspeed").is_dir()
