"""Atropos both ways, all real, on loopback: atroposlib 0.4.0's API server (`run-api`), the project's code
environment in `serve` mode sampling from the trainer's rollout server (real vLLM, CPU build, tiny-random)
through its OpenAI endpoints, and comlrl-train pulling the environment's groups for two steps.

The random model writes no working code, so the environment adds the TRL-style reward function the trainer
tests use (tests/reward_fns.py: distinct characters / 100) to the code reward: its groups' scores differ and
every step trains. What is checked: the groups arrive and train (weights move between the checkpoints), the
inference log-probs the environment sends line up with the trainer's own (small gap), and the server
serves each new policy version after its optimizer step.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from atropos_api import RunApi, free_port
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "trainer"))
from trainer_helpers import ENTRY, env  # noqa: E402

pytestmark = pytest.mark.slow


def _versions(url: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as resp:
            return json.loads(resp.read())["data"][0]["policy_version"]
    except OSError:
        return None


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5):
            return True
    except OSError:
        return False


def _adapter(ckpt: Path) -> dict[str, torch.Tensor]:
    files = sorted(ckpt.rglob("*.safetensors"))
    assert files, f"no weights in {ckpt}"
    return {f"{f.name}:{k}": v for f in files for k, v in load_file(str(f)).items()}


def test_the_environment_serves_groups_the_trainer_trains_on_and_the_server_serves_each_new_policy(tmp_path):
    api = RunApi(tmp_path / "run-api.log")
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    run = tmp_path / "run"
    common = ["model.name=tiny-random", "task.name=code_single", "magrpo.num_agents=1"]
    # the rollout server started by hand (comlrl-serve), so that it outlives the run and can be asked which
    # policy it serves at the end (the trainer's own server, rollout.server.port, ran the README's commands)
    serving = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve.py"), *common, "--port", str(port)],
                               stdout=open(tmp_path / "serve.out", "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                               env=env())
    trainer = environment = None
    try:
        deadline = time.monotonic() + 420
        while not _health(server):
            assert serving.poll() is None, (tmp_path / "serve.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the rollout server never served"
            time.sleep(1)
        trainer = subprocess.Popen(
            [sys.executable, str(ENTRY), *common, "rollout.engine=vllm_server", f"rollout.server.url={server}",
             f"rollout.atropos.url={api.url}", "rollout.atropos.batch_size=4", "rollout.atropos.poll_s=0.2",
             "rollout.atropos.wait_timeout_s=240", "training.steps=2", "training.save_total_limit=null",
             "training.torch_threads=1", "logging.progress_bar=false", f"training.output_dir={run}"],
            stdout=open(tmp_path / "trainer.out", "w"), stderr=subprocess.STDOUT, env=env())  # noqa: SIM115
        while _versions(server) is None:  # the trainer pushes its first weights
            assert trainer.poll() is None, (tmp_path / "trainer.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the trainer never pushed"
            time.sleep(1)
        environment = subprocess.Popen(
            [sys.executable, "-m", "comlrl.integrations.atropos.code_env", "serve",
             "--env.rollout_server_url", api.url, "--env.group_size", "2", "--env.total_steps", "2",
             "--env.max_tokens", "16", "--env.use_wandb", "false", "--env.request_logprobs", "true",
             "--env.reward_funcs", '["reward_fns:distinct_chars"]',
             "--openai.base_url", f"{server}/v1", "--openai.model_name", "agent0", "--openai.api_key", "x"],
            stdout=open(tmp_path / "env.out", "w"), stderr=subprocess.STDOUT, env=env())  # noqa: SIM115
        while trainer.poll() is None:
            assert time.monotonic() < deadline + 300, "the trainer did not finish"
            assert environment.poll() in (None, 0), (tmp_path / "env.out").read_text()[-3000:]  # 0: it sent its steps
            time.sleep(0.5)
        # the start's weights were version 1, each optimizer step pushed the next: the server holds version 3
        served = _versions(server)
    finally:
        for proc in (trainer, environment, serving):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        api.stop()
    out = (tmp_path / "trainer.out").read_text()
    assert trainer.returncode == 0, out[-3000:] + (tmp_path / "env.out").read_text()[-3000:]
    m = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in m] == [1, 2]
    assert all(x["atropos/sequences"] == 4 and x["samples"] > 0 and x["grad_norm"] > 0 for x in m), m
    # the log-probs the environment got from the server, sent back as inference_logprobs, are the trainer's own
    assert all(x["atropos/samples_with_logprobs"] > 0 for x in m), m
    assert all(x["rollout/logprob_abs_gap"] < 0.05 for x in m), m
    assert served == 3, served
    a, b = _adapter(run / "checkpoints" / "step-1"), _adapter(run / "checkpoints" / "step-2")
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)
