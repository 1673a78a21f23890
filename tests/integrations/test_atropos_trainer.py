"""comlrl as an Atropos trainer (comlrl/run/atropos.py) against the real API server of atroposlib 0.4.0
(`run-api` on loopback). The environment's side here is its HTTP protocol sent by the test (register-env,
scored groups of real token ids of the tiny model), so that the groups, the faults and the timing are the
test's to choose; the project's own environments sending to the same server:
tests/integrations/test_atropos_end_to_end.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from atropos_api import RunApi, free_port, register_env, send_group

from comlrl.config.schema import load_config
from comlrl.errors import ConfigError
from comlrl.run import atropos as atropos_mod
from comlrl.run.atropos import AtroposClient, AtroposGone

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "trainer"))
from trainer_helpers import ENTRY, env  # noqa: E402

M = -100


@pytest.fixture
def api(tmp_path):
    server = RunApi(tmp_path / "run-api.log")
    yield server
    server.stop()


def _cfg(url: str, **over: object):
    return load_config(None, [f"rollout.atropos.url={url}", "rollout.atropos.batch_size=4",
                              *(f"{k}={v}" for k, v in over.items())])


def _group(seed: int, size: int = 2) -> dict:
    """A group of `size` sequences: 3 prompt tokens, 3 to 5 trained ones, scores that differ."""
    tokens = [[10, 11, 12, *[20 + seed + k + j for j in range(3 + k % 3)]] for k in range(size)]
    masks = [[M, M, M, *t[3:]] for t in tokens]
    return {"tokens": tokens, "masks": masks, "scores": [float(k == seed % size) for k in range(size)]}


def test_register_then_batches_of_exactly_batch_size_sequences(api):
    client = AtroposClient(api.url, poll_s=0.1, wait_timeout_s=30)
    assert "uuid" in client.register(_cfg(api.url), 0, "/tmp/ckpt")
    got: list = []
    t = threading.Thread(target=lambda: got.append(client.next_batch(1)))
    t.start()  # the trainer's first /batch starts the API: environments may register from then on
    env_id = register_env(api.url, group_size=2)
    for seed in range(2):
        send_group(api.url, _group(seed), env_id)
    t.join(30)
    assert sum(len(g["tokens"]) for g in got[0]) == 4
    assert [g["env_id"] for g in got[0]] == [env_id, env_id]
    assert sorted(tuple(g["scores"]) for g in got[0]) == [(0.0, 1.0), (1.0, 0.0)]


def test_an_empty_queue_is_waited_on_with_progress_lines_then_a_stop(api, monkeypatch, caplog):
    monkeypatch.setattr(atropos_mod, "PROGRESS_S", 0.3)
    client = AtroposClient(api.url, poll_s=0.1, wait_timeout_s=1.2)
    client.register(_cfg(api.url), 0, "/tmp/ckpt")
    with caplog.at_level(logging.INFO, logger="comlrl"), pytest.raises(AtroposGone) as err:
        client.next_batch(3)
    assert "rollout.atropos.wait_timeout_s=1.2" in str(err.value) and api.url in str(err.value)
    waiting = [r.getMessage() for r in caplog.records if "waiting for a batch" in r.getMessage()]
    assert 2 <= len(waiting) <= 5 and all(f"step 3: waiting for a batch from {api.url}" in w for w in waiting)


def test_the_server_going_away_is_a_stop_naming_it(api):
    client = AtroposClient(api.url, poll_s=0.1, wait_timeout_s=30)
    client.register(_cfg(api.url), 0, "/tmp/ckpt")
    api.stop()
    with pytest.raises(AtroposGone, match=f"the Atropos API server {api.url} stopped answering at step 2"):
        client.next_batch(2)


def test_an_unreachable_server_is_a_config_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match=f"rollout.atropos.url={url} is not reachable"):
        AtroposClient(url).register(_cfg(url), 0, "/tmp/ckpt")


@pytest.mark.slow
def test_the_cli_refuses_an_unreachable_server_in_one_line_before_loading_anything(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, str(ENTRY), "model.name=tiny-random", f"rollout.atropos.url={url}",
                           f"training.output_dir={tmp_path / 'run'}"], capture_output=True, text=True, env=env(),
                          timeout=300)
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == 2, done.stderr
    assert lines[-1].startswith(f"error: the Atropos API server rollout.atropos.url={url} is not reachable")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
    assert time.monotonic() - t0 < 60


def _feed(url: str, groups: list[dict]) -> None:
    env_id = register_env(url, group_size=2, timeout=300)
    for g in groups:
        send_group(url, g, env_id)


def _metrics(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_trains_on_the_groups_stops_when_the_server_goes_away_and_resumes(tmp_path):
    """Two steps of two groups each (one malformed: skipped, counted, warned about once); the API server
    killed while the run waits for step 3: exit 1, one line, step-2 checkpoint intact; a new API server and
    `training.resume=true` go on to step 3."""
    run = tmp_path / "run"
    args = [str(ENTRY), "model.name=tiny-random", "task.name=code_single", "magrpo.num_agents=1",
            "rollout.atropos.batch_size=4", "rollout.atropos.poll_s=0.2", "training.steps=3",
            "training.save_total_limit=null", "training.torch_threads=1", "logging.progress_bar=false",
            f"training.output_dir={run}"]
    api = RunApi(tmp_path / "api1.log")
    bad = {**_group(7), "masks": [[M, 5], [M, 6]]}  # masks shorter than the tokens: the trainer skips it
    feeder = threading.Thread(target=_feed, args=(api.url, [_group(0), _group(1), bad, _group(2)]))
    feeder.start()
    proc = subprocess.Popen([sys.executable, *args, f"rollout.atropos.url={api.url}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + 600
        while not (run / "checkpoints" / "step-2").is_dir() or len(_metrics(run)) < 2:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.5)
        time.sleep(1.0)  # the checkpoint's files written (its meta.json last)
        api.stop()
        _, stderr = proc.communicate(timeout=120)
    finally:
        api.stop()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    last = [x for x in stderr.splitlines() if x.strip()][-1]
    assert last.startswith(f"error: the Atropos API server {api.url} stopped answering at step 3"), last
    assert "step-2" in last
    m = _metrics(run)
    assert [x["step"] for x in m] == [1, 2]
    assert sum(x["atropos/groups"] for x in m) == 3 and sum(x["atropos/malformed"] for x in m) == 1
    assert sum(x["atropos/sequences"] for x in m) == 6 and all(x["grad_norm"] > 0 for x in m)
    assert sum(x["samples"] for x in m) == 6 and all(x["adv_groups_skipped"] == 0 for x in m)
    assert stderr.count("malformed Atropos group") == 1 and "mask length" in stderr

    api2 = RunApi(tmp_path / "api2.log")
    feeder = threading.Thread(target=_feed, args=(api2.url, [_group(3), _group(4)]))
    feeder.start()
    try:
        done = subprocess.run([sys.executable, *args, f"rollout.atropos.url={api2.url}", "training.resume=true"],
                              capture_output=True, text=True, env=env(), timeout=600)
    finally:
        api2.stop()
    assert done.returncode == 0, done.stderr
    m = _metrics(run)
    assert [x["step"] for x in m] == [1, 2, 3] and m[-1]["atropos/groups"] == 2
    assert (run / "final").is_dir() and (run / "checkpoints" / "step-3").is_dir()


def test_only_the_policy_gradient_trains_on_atropos_groups():
    with pytest.raises(ConfigError, match="algorithm.name='madpo' is not allowed.*rollout.atropos.url"):
        load_config(None, ["rollout.atropos.url=http://127.0.0.1:8000", "algorithm.name=madpo"])
    with pytest.raises(ConfigError, match="rollout.atropos.batch_size"):
        load_config(None, ["rollout.atropos.url=http://127.0.0.1:8000", "rollout.atropos.batch_size=0"])
    with pytest.raises(ConfigError, match="rollout.atropos.url"):
        load_config(None, ["rollout.atropos.url=localhost:8000"])


@pytest.mark.slow
def test_two_ranks_share_each_batch_and_stay_in_step(tmp_path):
    """DDP over gloo, two processes: rank 0 pulls the batch, every rank trains its share of the groups (one
    each here), the metrics are summed over ranks and the weights stay equal on both."""
    from trainer_helpers import VENV_BIN, train

    api = RunApi(tmp_path / "api.log")
    feeder = threading.Thread(target=_feed, args=(api.url, [_group(k) for k in range(4)]))
    feeder.start()
    run = tmp_path / "run"
    launcher = [str(VENV_BIN / "accelerate"), "launch", "--config_file", str(ROOT / "configs/accelerate/ddp_cpu.yaml")]
    try:
        res = train(["model.name=tiny-random", "task.name=code_single", "magrpo.num_agents=1",
                     f"rollout.atropos.url={api.url}", "rollout.atropos.batch_size=4", "rollout.atropos.poll_s=0.2",
                     "training.steps=2", "training.torch_threads=1", "logging.progress_bar=false",
                     f"training.output_dir={run}"], launcher=launcher, timeout=900,
                    extra_env={"ACCELERATE_USE_CPU": "true"})
    finally:
        api.stop()
    assert res.returncode == 0, res.stderr[-3000:]
    m = _metrics(run)
    assert [x["atropos/groups"] for x in m] == [2, 2] and [x["samples"] for x in m] == [4, 4]
    assert all(x["weights_rank_spread"] == 0 and x["grad_norm"] > 0 for x in m), m
