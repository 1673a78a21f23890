"""`ollama:<model>@<base_url>`: Ollama's native /api/chat for trace generation, expert edits and judges.

The server is a real HTTP server on 127.0.0.1 (tests/llm_server.py `OllamaServer`) speaking /api/chat as
Ollama documents it: streamed NDJSON and single-object replies, `logprobs` entries with token, logprob,
bytes and top_logprobs, 404 for a model that is not pulled, 500 `{"error": ...}`, an error line mid-stream.
Everything on the client side is the code users run: the spec parser, httpx, the client's transport
retries (the official SDKs' rules, since there is no SDK here), the backend, the expert client, the judge
and the trace CLI.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import httpx
import pytest
from llm_server import OllamaServer, ollama_tokens
from scripted_server import ScriptedModel

from comlrl.cli.generate_traces import main as generate_traces
from comlrl.cli.trace_backends import make_backend
from comlrl.config.schema import ExternalConfig
from comlrl.llm.ollama_client import (
    OllamaChat,
    OllamaClient,
    OllamaError,
    backoff_s,
    retry_after_s,
    should_retry,
)
from comlrl.tasks.actions.checks import CheckResult
from comlrl.tasks.actions.judge import JudgeOptions, JudgeRequest, LLMJudge, make_judge
from comlrl.tasks.datasets import load_problems
from comlrl.tasks.tool_agent.backends import BackendError, ServerBackend, parse_backend
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES
from feedback import FeedbackMetrics, make_expert
from feedback.experts import ExpertError, parse_spec

ASK = [{"role": "user", "content": "Say hello."}]
TEXT = "Hello there, I am a small model.\nHow can I help?"
KEY = "ollama-test-key-0123456789SECRET"


def test_one_spec_parser_for_backends_experts_and_judges() -> None:
    spec = "ollama:qwen2.5-coder:7b@http://127.0.0.1:11434"
    s = parse_spec(spec)
    assert (s.provider, s.model, s.base_url) == ("ollama", "qwen2.5-coder:7b", "http://127.0.0.1:11434")
    assert parse_backend(spec) == ("ollama", "qwen2.5-coder:7b", "http://127.0.0.1:11434")
    for bad in ("ollama:m", "ollama:m@ftp://x", "ollama:@http://x"):
        with pytest.raises(ExpertError, match=r"external.expert_edits_model=.*ollama:<model>@<base_url>"):
            parse_spec(bad)
        with pytest.raises(BackendError, match="^backend error: --backend="):
            parse_backend(bad)
    with pytest.raises(BackendError, match="local:<path or alias>, openai-compatible:<model>@<base_url>, ollama:"):
        parse_backend("anthropic:claude-haiku-4-5")  # a valid expert, not a rollout backend
    with pytest.raises(ExpertError, match="task.actions.judge='ollama:m'"):
        make_judge("ollama:m")


@pytest.mark.parametrize("stream", [False, True])
def test_reply_with_logprobs_streamed_or_not(stream: bool) -> None:
    with OllamaServer(TEXT) as srv:
        chat = OllamaChat("scripted", srv.base + "/api/", stream=stream)  # a trailing /api is accepted
        r = chat.chat(ASK, max_tokens=64, temperature=0.3, top_p=0.9, stop=["</tool_call>"], seed=7,
                      logprobs=True, top_logprobs=3)
        chat.close()
        (req,) = srv.requests
    assert req["path"] == "/api/chat" and chat.name == f"ollama:scripted@{srv.base}"
    body = req["body"]
    assert body["model"] == "scripted" and body["messages"] == ASK and body["stream"] is stream
    assert body["options"] == {"num_predict": 64, "temperature": 0.3, "top_p": 0.9, "stop": ["</tool_call>"],
                               "seed": 7}
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert r.text == TEXT and r.done_reason == "stop"
    assert r.tokens == tuple(ollama_tokens(TEXT)) and "".join(r.tokens) == TEXT
    assert r.logprobs == tuple(OllamaServer.logprob(i) for i in range(len(r.tokens)))
    assert r.completion_tokens == len(r.tokens) == 11 and r.prompt_tokens == 11


@pytest.mark.parametrize("stream", [False, True])
def test_stop_length_and_a_server_without_logprobs(stream: bool) -> None:
    with OllamaServer("a b c d e f </tool_call> g h", logprobs_supported=False) as srv:
        chat = OllamaChat("scripted", srv.base, stream=stream)
        stopped = chat.chat(ASK, max_tokens=100, temperature=0.0, stop=STOP_SEQUENCES, logprobs=True)
        capped = chat.chat(ASK, max_tokens=3, temperature=0.0)
        chat.close()
        assert "logprobs" not in srv.requests[1]["body"]  # only asked when wanted
    assert stopped.text == "a b c d e f " and stopped.done_reason == "stop"
    assert stopped.tokens is None and stopped.logprobs is None  # asked, but this server has none
    assert capped.text == "a b c" and capped.done_reason == "length" and capped.completion_tokens == 3


def test_errors_are_one_line_naming_model_and_url_never_the_key() -> None:
    with OllamaServer(TEXT) as srv:
        missing = OllamaChat("llama9:70b", srv.base)
        with pytest.raises(OllamaError) as e404:
            missing.chat(ASK, max_tokens=8, temperature=0.0)
        chat = OllamaChat("scripted", srv.base, api_key=KEY, stream=True, max_retries=0)
        srv.script.extend(["500", "stream_error", "echo500"])
        errors = []
        for _ in range(3):
            with pytest.raises(OllamaError) as exc:
                chat.chat(ASK, max_tokens=8, temperature=0.0)
            errors.append(exc.value)
        assert srv.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"  # the key was really sent
    dead = OllamaChat("scripted", "http://127.0.0.1:9", timeout_s=5, max_retries=0)
    with pytest.raises(OllamaError) as gone:
        dead.chat(ASK, max_tokens=8, temperature=0.0)
    assert str(e404.value) == (f'ollama:llama9:70b@{srv.base}: HTTP 404: model "llama9:70b" not found, try pulling '
                               "it first (run `ollama pull llama9:70b` on that server)")
    assert e404.value.status == 404 and not e404.value.retryable
    assert str(errors[0]) == f"ollama:scripted@{srv.base}: HTTP 500: llama runner process has terminated: exit status 2"
    assert "error: an error was encountered while running the model" in str(errors[1])
    assert str(errors[2]) == f"ollama:scripted@{srv.base}: HTTP 500: unauthorized: Bearer ***"
    assert all(e.retryable for e in errors) and gone.value.retryable
    assert [e.retries for e in (e404.value, *errors, gone.value)] == [0] * 5  # max_retries=0: one attempt each
    assert str(gone.value).startswith("ollama:scripted@http://127.0.0.1:9: cannot connect")
    for err in (e404.value, *errors, gone.value):
        assert "\n" not in str(err) and KEY not in str(err)


def test_backend_results_logprobs_retries_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    with OllamaServer(TEXT, error_headers={"retry-after-ms": "1"}) as srv:
        backend = make_backend(f"ollama:scripted@{srv.base}", logprobs=True, max_tokens=32, greedy=True, seed=3)
        assert isinstance(backend, ServerBackend) and backend.name == f"ollama:scripted@{srv.base}"
        srv.script.extend(["500", "stream_error"])  # transient: retried by OllamaChat (the backend streams)
        with backend:
            outs = backend.complete([ASK, ASK + [{"role": "assistant", "content": "Hello"}]], stop=STOP_SEQUENCES)
        assert len(srv.requests) == 4
        body = srv.requests[-1]["body"]
        assert body["stream"] is True
        assert body["options"]["temperature"] == 0.0 and body["options"]["seed"] == 3
        assert body["options"]["stop"] == list(STOP_SEQUENCES) and body["logprobs"] is True
        assert srv.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        with make_backend(f"ollama:nope@{srv.base}") as missing, pytest.raises(BackendError) as exc:
            missing.complete([ASK])
        assert len(srv.requests) == 5  # the 404 was not retried
    assert outs[0].text == TEXT and outs[0].finish_reason == "stop" and outs[0].stop is None
    assert outs[0].logprobs == tuple(OllamaServer.logprob(i) for i in range(11)) and outs[0].completion_tokens == 11
    assert outs[1].text == "Hello" + TEXT  # an answer prefix comes back in front of its continuation
    assert str(exc.value).startswith(f"backend error: ollama:nope@{srv.base}: HTTP 404: model \"nope\" not found")


def test_trace_generation_through_ollama(tmp_path: Path) -> None:
    easy = load_problems("easy")[:3]
    model = ScriptedModel({p.entry_point: (p.prompt, p.canonical_solution or "") for p in easy})
    with OllamaServer(lambda messages: model.reply(messages)[0]) as srv:
        out = tmp_path / "t.jsonl"
        rc = generate_traces(["--backend", f"ollama:scripted@{srv.base}", "--dataset", "easy", "--limit", "3",
                              "--num-traces", "3", "--out", str(out), "--logprobs", "--sandbox-workers", "1",
                              "--no-progress"])
        bodies = [r["body"] for r in srv.requests]
    assert rc == 0 and len(bodies) == 9 and all(b["logprobs"] and b["stream"] is True for b in bodies)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in records] == [p.task_id for p in easy]
    for r in records:
        assert r["backend"] == f"ollama:scripted@{srv.base}" and r["metrics"]["success"]
        assert r["metrics"]["finish"] == "final" and r["metrics"]["tool_calls"] == 2
        for x in r["rounds"]:
            assert "".join(x["tokens"]) == x["completion"] and len(x["logprobs"]) == len(x["tokens"]) > 5


def test_expert_edits_through_ollama_with_retries() -> None:
    good = '```json\n{"helper": "square x: return x * x", "main": "No changes needed."}\n```'
    ask = [{"role": "user", "content": "Review helper and main."}]
    m = FeedbackMetrics()
    with OllamaServer(good, models=("qwen2.5-coder:7b",), error_headers={"retry-after-ms": "1"}) as srv:
        cfg = ExternalConfig(mode="expert_edits", expert_edits_model=f"ollama:qwen2.5-coder:7b@{srv.base}",
                             expert_max_retries=2, expert_cache_dir="off", expert_max_tokens=64)
        expert = make_expert(cfg.expert_edits_model, cfg, metrics=m)
        assert isinstance(expert, OllamaClient) and expert.spec == "ollama:qwen2.5-coder:7b"
        srv.script.extend(["500", "500"])
        edits = expert.suggest(ask, ["helper", "main"])
        assert [r["behaviour"] for r in srv.requests] == ["500", "500", "ok"]
        assert srv.requests[-1]["body"]["options"]["num_predict"] == 64
        s = m.snapshot(reset=True)
        srv.script.extend(["500", "502", "503"])  # the transport retries run out: the caller falls back
        gave_up = expert.suggest(ask, ["helper", "main"])
        expert.close()
        assert [r["behaviour"] for r in srv.requests[3:]] == ["500", "502", "503"]
    assert edits == {"helper": "square x: return x * x", "main": "No changes needed."}
    # counted as the SDK clients count theirs: every transport retry is one more call
    assert s["expert/calls"] == 3 and s["expert/retries"] == 2 and s["expert/output_tokens"] > 0
    assert s["expert/errors"] == 2 and s.get("expert/failures", 0) == 0
    f = m.snapshot()
    assert gave_up is None
    assert f["expert/calls"] == 3 and f["expert/retries"] == 2 and f["expert/errors"] == 3 and f["expert/failures"] == 1


def test_judge_through_ollama(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scores = json.dumps({"task_completion": 8, "action_quality": 7, "efficiency": 6, "creativity": 5,
                         "rationale": "mostly done"})
    checks = (CheckResult("check 0", True), CheckResult("check 1", False))
    req = JudgeRequest("t", "troubleshooting", "Fix it.", "turn 1 ...", checks, 2, 4, 3, 1, 0, ("read_file",), True)
    with OllamaServer(scores, models=("judge-m",), error_headers={"retry-after-ms": "1"}) as srv:
        judge = make_judge(f"ollama:judge-m@{srv.base}", JudgeOptions(cache_dir="off"))
        assert isinstance(judge, LLMJudge)
        srv.script.append("429")
        (got,) = judge.score_many([req])
        assert [r["behaviour"] for r in srv.requests] == ["429", "ok"]  # rate limit: retried
        missing = make_judge(f"ollama:gone@{srv.base}", JudgeOptions(cache_dir="off"))
        with caplog.at_level(logging.WARNING):
            (fallback,) = missing.score_many([req])
        gone = [r for r in srv.requests if r["body"]["model"] == "gone"]
    assert (got.task_completion, got.action_quality, got.efficiency, got.creativity) == (8, 7, 6, 5)
    assert judge.metrics()["judge/calls"] == 2 and judge.metrics()["judge/retries"] == 1
    assert got.source == "ollama:judge-m" and fallback.source == "rule-fallback"
    assert len(gone) == 1  # a 404 is not retried: the model is not there
    assert f"ollama:gone@{srv.base}: HTTP 404" in caplog.text


def test_retry_rule_is_the_official_sdks() -> None:
    def h(**kv: str) -> httpx.Headers:
        return httpx.Headers({k.replace("_", "-"): v for k, v in kv.items()})

    for status in (408, 409, 429, 500, 502, 503, 504, 529):
        assert should_retry(status, h()), status
    for status in (400, 401, 403, 404, 413, 422):
        assert not should_retry(status, h()), status
    assert should_retry(400, h(x_should_retry="true")) and not should_retry(503, h(x_should_retry="false"))
    assert not should_retry(429, h(retry_after="121")) and should_retry(429, h(retry_after="120"))
    assert retry_after_s(h(retry_after_ms="250", retry_after="9")) == 0.25  # milliseconds win
    assert retry_after_s(h(retry_after="1.5")) == 1.5 and retry_after_s(h()) is None
    assert retry_after_s(h(retry_after_ms="soon")) is None
    date = retry_after_s(h(retry_after=time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))))
    assert date is not None and 28 <= date <= 31
    assert [backoff_s(k, None, 1.0) for k in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff_s(1, None, 0.75) == 0.75 and backoff_s(5000, None, 1.0) == 8.0
    assert backoff_s(3, 0.02, 1.0) == 0.02  # the server's wait replaces the backoff...
    assert backoff_s(0, 0.0, 1.0) == 0.5 and backoff_s(0, -3.0, 1.0) == 0.5 and backoff_s(0, 500.0, 1.0) == 0.5


@pytest.mark.parametrize(("status", "requests"), [("400", 1), ("401", 1), ("403", 1), ("404", 1), ("503stop", 1),
                                                  ("408", 2), ("409", 2), ("429", 2), ("500", 2), ("502", 2)])
def test_client_retries_what_the_sdks_retry(status: str, requests: int) -> None:
    with OllamaServer(TEXT, error_headers={"retry-after-ms": "1"}) as srv:
        chat = OllamaChat("scripted", srv.base, max_retries=2)
        srv.script.append(status)
        if requests == 1:
            with pytest.raises(OllamaError) as exc:
                chat.chat(ASK, max_tokens=8, temperature=0.0)
            assert exc.value.retries == 0 and not exc.value.retryable
        else:
            assert chat.chat(ASK, max_tokens=8, temperature=0.0).retries == 1
        chat.close()
        assert len(srv.requests) == requests


def test_client_waits_as_the_server_says_and_gives_up_after_max_retries() -> None:
    with OllamaServer(TEXT, error_headers={"retry-after-ms": "300"}) as srv:
        chat = OllamaChat("scripted", srv.base, max_retries=2)
        srv.script.extend(["429"])
        t0 = time.perf_counter()
        assert chat.chat(ASK, max_tokens=8, temperature=0.0).retries == 1
        waited = time.perf_counter() - t0
        srv.error_headers = {"retry-after": "0.01"}
        srv.script.extend(["500", "500", "500", "500"])
        with pytest.raises(OllamaError) as exc:
            chat.chat(ASK, max_tokens=8, temperature=0.0)
        chat.close()
        assert len(srv.requests) == 2 + 3  # one first attempt and max_retries=2 retries
    assert 0.3 <= waited < 2.0
    assert exc.value.retries == 2 and exc.value.status == 500
    dead = OllamaChat("scripted", "http://127.0.0.1:9", timeout_s=5, max_retries=1)
    with pytest.raises(OllamaError) as gone:
        dead.chat(ASK, max_tokens=8, temperature=0.0)
    assert gone.value.retries == 1 and "cannot connect" in str(gone.value)  # a refused connection is retried
