"""Rollout backends: the OpenAI-compatible client against a loopback server, and the local model's stops."""

from __future__ import annotations

import pytest
import torch
from scripted_server import ScriptedModel, ScriptedServer

from comlrl.tasks.tool_agent.backends import (
    BackendError,
    ChatResult,
    LocalBackend,
    OpenAICompatibleBackend,
    make_backend,
    parse_backend,
)
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES

SOLUTIONS = {"add": ('def add(a, b):\n    """Sum."""\n', "    return a + b\n"),
             "sub": ('def sub(a, b):\n    """Difference."""\n', "    return a - b\n")}
ASK = [{"role": "system", "content": "tools"}, {"role": "user", "content": "Problem: ...\nWrite `add`."}]


def test_parse_backend_specs() -> None:
    assert parse_backend("local:smollm2-135m-instruct") == ("local", "smollm2-135m-instruct", None)
    assert parse_backend("openai-compatible:qwen2.5:7b@http://127.0.0.1:11434/v1") == \
        ("openai-compatible", "qwen2.5:7b", "http://127.0.0.1:11434/v1")
    for bad in ("", "local:", "openai-compatible:m", "openai-compatible:m@ftp://x", "vllm:m@http://x"):
        with pytest.raises(BackendError, match=r"^backend error: --backend=.* is not allowed; expected .*openai-compatible:"):
            parse_backend(bad)


def test_openai_compatible_stop_and_logprobs() -> None:
    with ScriptedServer(ScriptedModel(SOLUTIONS)) as srv:
        backend = make_backend(f"openai-compatible:scripted@{srv.base_url}", logprobs=True, max_tokens=64)
        assert isinstance(backend, OpenAICompatibleBackend)
        with backend:
            (out,) = backend.complete([ASK], stop=STOP_SEQUENCES)
        req = srv.requests[0]
    assert req["stop"] == list(STOP_SEQUENCES) and req["logprobs"] is True and req["max_tokens"] == 64
    assert req["model"] == "scripted" and req["messages"] == ASK
    assert out.finish_reason == "stop" and out.stop == "</tool_call>"
    assert "<tool_call>" in out.text and "</tool_call>" not in out.text  # servers strip the stop sequence
    assert out.tokens is not None and out.logprobs is not None and len(out.tokens) == len(out.logprobs) > 5
    assert "".join(out.tokens) == out.text and all(v == -0.25 for v in out.logprobs)
    assert out.completion_tokens == len(out.tokens)


def test_server_without_logprobs_support_falls_back() -> None:
    with ScriptedServer(ScriptedModel(SOLUTIONS), refuse_logprobs=True) as srv:
        with OpenAICompatibleBackend("scripted", srv.base_url, logprobs=True, concurrency=2) as backend:
            outs = backend.complete([ASK, ASK, ASK], stop=STOP_SEQUENCES)
        asked = [bool(r.get("logprobs")) for r in srv.requests]
    assert all(isinstance(o, ChatResult) and "<tool_call>" in o.text and o.logprobs is None for o in outs)
    assert asked.count(False) == 3 and asked.count(True) <= 3  # refused once per in-flight request at most


def test_unreachable_server_is_one_clear_error() -> None:
    backend = OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    with backend, pytest.raises(BackendError, match="cannot connect"):
        backend.complete([ASK])


@pytest.fixture(scope="module")
def tiny_backend() -> LocalBackend:
    torch.set_num_threads(1)
    return LocalBackend.from_model("tiny-random", max_new_tokens=24, temperature=1.0, logprobs=True)


def test_local_stop_strings_cut_exactly_where_the_stop_completes(tiny_backend: LocalBackend) -> None:
    pol = tiny_backend.policies
    tok = pol.tokenizers[0]
    convs = [[{"role": "user", "content": f"Say something {i}."}] for i in range(6)]
    torch.manual_seed(0)
    free = pol.generate([(0, c) for c in convs], 1)
    torch.manual_seed(0)
    stopped = pol.generate([(0, c) for c in convs], 1, stop_strings=("e",))  # in most random tokens
    hits = 0
    for (f,), (s,) in zip(free, stopped, strict=True):
        ids = list(s.completion_ids)
        assert list(f.completion_ids)[: len(ids)] == ids  # same sampling, just cut
        if "e" in tok.decode(ids):
            hits += 1
            assert s.finished and "e" not in tok.decode(ids[:-1])
        assert tok.eos_token_id not in ids or ids[-1] == tok.eos_token_id
    assert hits >= 3
    assert pol.stop_strings == () and len(pol._stop_criteria) == 1


def test_local_backend_results_and_logprobs(tiny_backend: LocalBackend) -> None:
    torch.manual_seed(1)
    outs = tiny_backend.complete([ASK, ASK[1:]], stop=("a",))
    for out in outs:
        assert out.tokens is not None and out.logprobs is not None
        assert len(out.tokens) == len(out.logprobs) == out.completion_tokens > 0
        assert all(v <= 0 for v in out.logprobs) and out.prompt_tokens > 10
        assert (out.stop == "a") == ("a" in out.text)
        assert out.finish_reason in ("stop", "length")
    assert tiny_backend.name == "local:tiny-random"
