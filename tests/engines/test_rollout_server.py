"""The rollout server's protocol: policy versions, stale refusal, waiting for a push, batching across ranks.

A real `ThreadingHTTPServer` on loopback and the real client (`ServerClient`); the vLLM engine behind it is
replaced by a recorder (`load`/`generate`, the interface `VLLMRunner` declares), because these tests are
about the queue and the versions, and must run in the fast suite. The same protocol with the real vLLM
engine: tests/engines/test_server_engine.py (slow) and the two-rank test in tests/engines/test_vllm_per_rank.py.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict

import pytest
import torch
from safetensors.torch import save_file

from comlrl.engines import rollout_server
from comlrl.engines.rollout_server import verdict
from comlrl.engines.server_engine import RolloutServerError, ServerClient
from comlrl.engines.vllm_runner import Sampling
from comlrl.errors import RunStopped


@pytest.mark.parametrize(("requested", "held", "want"), [
    (0, None, "wait"), (3, None, "wait"),  # nothing pushed yet: every version waits for its push
    (2, 2, "serve"), (0, 0, "serve"),
    (3, 2, "wait"),  # another rank has not pushed this version yet
    (1, 2, "stale"), (0, 5, "stale"),  # older than what the server holds: refused, never answered
])
def test_verdict(requested, held, want):
    assert verdict(requested, held) == want


class Recorder:
    """Stands in for VLLMRunner: every request takes `steps` engine steps of `delay` seconds; the completion
    of a prompt is [the loaded agent weight, *prompt], n times."""

    def __init__(self, delay: float = 0.05, steps: int = 4) -> None:
        self.weight = None
        self.loads: list[float] = []
        self.step_sizes: list[int] = []  # requests in each engine step
        self.delay, self.steps = delay, steps
        self._running: dict[str, list] = {}  # id -> [steps left, completion]
        self._ids = 0

    def load(self, weights, whole_model: bool) -> None:
        assert not self._running, "weights changed under running requests"
        self.weight = float(dict(weights)["w"])
        self.loads.append(self.weight)

    def enqueue(self, prompts, sampling):
        assert all(isinstance(x, Sampling) for x in sampling)
        ids = []
        for prompt, x in zip(prompts, sampling, strict=True):
            self._ids += 1
            self._running[f"r{self._ids}"] = [self.steps, [([int(self.weight), *prompt], None)] * x.n]
            ids.append(f"r{self._ids}")
        return ids

    def step(self):
        self.step_sizes.append(len(self._running))
        time.sleep(self.delay)
        done = {}
        for rid, state in list(self._running.items()):
            state[0] -= 1
            if state[0] == 0:
                done[rid] = state[1]
                del self._running[rid]
        return done

    def busy(self) -> bool:
        return bool(self._running)

    def abort(self, ids) -> None:
        for rid in ids:
            self._running.pop(rid, None)


@pytest.fixture
def served(tmp_path):
    """A recorder behind a real HTTP server on a free loopback port: (client, recorder, push, state)."""
    rec = Recorder()
    httpd, state, url = rollout_server.make_server(rec, "tiny", 64, "127.0.0.1", 0, push_wait_s=1.0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = ServerClient(url)

    def push(version: int, weights: dict[int, float]) -> dict:
        files = {}
        for agent, w in weights.items():
            path = tmp_path / f"v{version}-a{agent}.safetensors"
            save_file({"w": torch.tensor(w)}, str(path))
            files[str(agent)] = str(path)
        return client.call("/push", {"version": version, "files": files, "whole_model": False})

    yield client, rec, push, state
    httpd.shutdown()
    httpd.server_close()
    state.close()


def _ask(client, version, agent, prompts):
    s = asdict(Sampling(max_tokens=4, stop=(), stop_token_ids=(2,), greedy=True))
    return client.call("/generate", {"version": version, "agent": agent, "prompts": prompts,
                                     "sampling": [s] * len(prompts)})


def test_answers_under_the_version_pushed_and_refuses_a_stale_request(served):
    client, rec, push, state = served
    assert push(0, {0: 10.0, 1: 11.0}) == {"version": 0}
    assert _ask(client, 0, 1, [[5]]) == {"version": 0, "outputs": [[[[11, 5], None]]]}
    assert push(1, {0: 20.0, 1: 21.0}) == {"version": 1}
    with pytest.raises(RolloutServerError, match="stale request: policy version 0, the server holds version 1"):
        _ask(client, 0, 1, [[5]])
    assert _ask(client, 1, 1, [[5]])["outputs"] == [[[[21, 5], None]]]  # the new weights, loaded again
    assert rec.loads == [11.0, 21.0] and state.served["stale_refused"] == 1
    with pytest.raises(RolloutServerError, match="push of policy version 1 refused: the server holds version 1"):
        push(1, {0: 0.0})  # versions only go forward
    assert issubclass(RolloutServerError, RunStopped)  # mid-run, the run guard reports it as a stop


def test_a_request_for_a_version_not_yet_pushed_waits_for_it(served):
    client, rec, push, _ = served
    push(0, {0: 1.0})
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(_ask(client, 1, 0, [[7]])))
    t.start()  # rank 1 has stepped, rank 0's push of version 1 is still on its way
    time.sleep(0.5)
    assert t.is_alive()
    push(1, {0: 2.0})
    t.join(10)
    assert out == {"version": 1, "outputs": [[[[2, 7], None]]]}


def test_a_version_never_pushed_is_refused_after_the_wait(served):
    client, _, push, _ = served
    push(0, {0: 1.0})
    with pytest.raises(RolloutServerError, match="policy version 4 was never pushed"):
        _ask(client, 4, 0, [[1]])


def test_requests_of_other_ranks_join_the_running_batch_and_another_agent_waits_for_it(served):
    client, rec, push, state = served
    push(0, {0: 3.0, 1: 4.0})
    outs: dict = {}

    def ask(key, agent, prompts):
        outs[key] = _ask(client, 0, agent, prompts)["outputs"]

    first = threading.Thread(target=ask, args=("a", 0, [[1]]))
    first.start()  # rank 0's request runs; rank 1's (same agent) and another agent's arrive meanwhile
    time.sleep(0.08)
    others = [threading.Thread(target=ask, args=("b", 0, [[2], [3]])),
              threading.Thread(target=ask, args=("c", 1, [[4]]))]
    for t in [*others]:
        t.start()
    for t in [first, *others]:
        t.join(10)
    assert outs == {"a": [[[[3, 1], None]]], "b": [[[[3, 2], None]], [[[3, 3], None]]], "c": [[[[4, 4], None]]]}
    assert max(rec.step_sizes) == 3  # rank 1's two prompts ran in the same engine steps as rank 0's one
    assert rec.loads == [3.0, 4.0]  # agent 1 was loaded only after agent 0's requests had finished
    assert state.served["joined_running_batch"] == 1 and state.served["requests"] == 3


def test_health_names_the_model_and_bad_requests_get_400(served):
    client, _, push, _ = served
    assert client.call("/health")["model"] == "tiny" and client.call("/health")["version"] is None
    with pytest.raises(RolloutServerError, match=r"HTTP 400\): bad request body"):
        client.call("/generate", {"agent": 0})
    with pytest.raises(RolloutServerError, match="HTTP 409.*agent 3 has no weights in policy version 0"):
        push(0, {0: 1.0})
        _ask(client, 0, 3, [[1]])


def test_a_server_that_is_gone_is_a_one_line_error_naming_it():
    client = ServerClient("http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(RolloutServerError, match=r"^the rollout server http://127.0.0.1:9 stopped answering \(/health"):
        client.call("/health", timeout=5)


def test_a_server_of_another_config_is_a_config_error_naming_the_url(served):
    """check_server reads the server's model and sequence room (the policies here are plain data)."""
    from types import SimpleNamespace

    from comlrl.engines.server_engine import check_server
    from comlrl.errors import ConfigError

    client = served[0]
    cfg = SimpleNamespace(max_prompt_tokens=40, max_new_tokens=24)  # 64: what the server holds
    check_server(client, SimpleNamespace(cfg=cfg, paths=["tiny"]))
    with pytest.raises(ConfigError, match=rf"^config error: rollout.server.url={client.url} serves tiny, but the "
                                          "agents are other"):
        check_server(client, SimpleNamespace(cfg=cfg, paths=["other"]))
    with pytest.raises(ConfigError, match="holds 64 tokens per sequence; this run needs 65"):
        check_server(client, SimpleNamespace(cfg=SimpleNamespace(max_prompt_tokens=41, max_new_tokens=24),
                                             paths=["tiny"]))


def test_a_worker_that_fails_fails_every_request_instead_of_hanging(served):
    client, rec, push, _ = served
    push(0, {0: 1.0})

    def broken(*args):
        raise RuntimeError("engine bug")

    rec.step = broken  # a failure outside any one request (a bug in the server, say): nothing may hang on it
    rec.abort = broken
    with pytest.raises(RolloutServerError, match="the rollout server's worker failed: RuntimeError: engine bug"):
        _ask(client, 0, 0, [[1]])
    with pytest.raises(RolloutServerError, match="worker failed"):
        _ask(client, 0, 0, [[1]])  # and every later request, at once
