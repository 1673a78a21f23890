"""Rollout backends: the OpenAI-compatible client and a registered provider against a loopback server, and the
local model's stops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from scripted_server import ScriptedModel, ScriptedServer

from comlrl.cli.trace_backends import LocalBackend, make_backend
from comlrl.config.registry import register_provider
from comlrl.llm import FunctionClient, LLMSettings
from comlrl.llm.factory import REGISTERED
from comlrl.llm.openai_client import OpenAIClient
from comlrl.tasks.tool_agent.backends import BackendError, ChatResult, ServerBackend, parse_backend
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES

SOLUTIONS = {"add": ('def add(a, b):\n    """Sum."""\n', "    return a + b\n"),
             "sub": ('def sub(a, b):\n    """Difference."""\n', "    return a - b\n")}
ASK = [{"role": "system", "content": "tools"}, {"role": "user", "content": "Problem: ...\nWrite `add`."}]


def test_parse_backend_specs() -> None:
    assert parse_backend("local:smollm2-135m-instruct") == ("local", "smollm2-135m-instruct", None)
    assert parse_backend("openai-compatible:qwen2.5:7b@http://127.0.0.1:11434/v1") == \
        ("openai-compatible", "qwen2.5:7b", "http://127.0.0.1:11434/v1")
    for bad in ("", "local:", "openai-compatible:m", "openai-compatible:m@ftp://x", "vllm:m@http://x"):
        with pytest.raises(BackendError,
                           match=r"^backend error: --backend=.* is not allowed; expected .*openai-compatible:"):
            parse_backend(bad)


def test_openai_compatible_stop_and_logprobs() -> None:
    with ScriptedServer(ScriptedModel(SOLUTIONS)) as srv:
        backend = make_backend(f"openai-compatible:scripted@{srv.base_url}", logprobs=True, max_tokens=64)
        assert isinstance(backend, ServerBackend) and backend.name == f"openai-compatible:scripted@{srv.base_url}"
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
        with ServerBackend(f"openai-compatible:scripted@{srv.base_url}", logprobs=True, concurrency=2) as backend:
            outs = backend.complete([ASK, ASK, ASK], stop=STOP_SEQUENCES)
        asked = [bool(r.get("logprobs")) for r in srv.requests]
    assert all(isinstance(o, ChatResult) and "<tool_call>" in o.text and o.logprobs is None for o in outs)
    assert asked.count(False) == 3 and asked.count(True) <= 3  # refused once per in-flight request at most


def test_unreachable_server_is_one_clear_error() -> None:
    backend = ServerBackend("openai-compatible:m@http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    with backend, pytest.raises(BackendError, match="cannot connect"):
        backend.complete([ASK])


@pytest.fixture
def loop_provider() -> Iterator[ScriptedServer]:
    """`loop:<model>`, registered as a user module would: an OpenAI-compatible client on the provider's own
    endpoint (a real server on 127.0.0.1) with its own key; unregistered afterwards."""
    seen: list[LLMSettings] = []

    def factory(model: str, settings: LLMSettings, *, metrics: Any = None) -> OpenAIClient:
        seen.append(settings)
        return OpenAIClient(model, settings, api_key="loop-secret", base_url=srv.base_url, provider="loop",
                            metrics=metrics)

    with ScriptedServer(ScriptedModel(SOLUTIONS)) as srv:
        srv.settings_seen = seen  # type: ignore[attr-defined]
        register_provider("loop", factory)
        try:
            yield srv
        finally:
            REGISTERED.pop("loop")


def test_a_registered_provider_is_a_trace_backend(loop_provider: ScriptedServer) -> None:
    assert parse_backend("loop:scripted") == ("loop", "scripted", None)
    backend = make_backend("loop:scripted", logprobs=True, max_tokens=48, greedy=True, seed=7, timeout_s=9,
                           concurrency=2)
    assert isinstance(backend, ServerBackend) and backend.name == f"loop:scripted@{loop_provider.base_url}"
    (settings,) = loop_provider.settings_seen  # type: ignore[attr-defined]
    assert (settings.timeout_s, settings.concurrency, settings.max_retries) == (9, 2, 2)
    with backend:
        (out,) = backend.complete([ASK], stop=STOP_SEQUENCES)
    (req,) = loop_provider.requests
    assert req["model"] == "scripted" and req["messages"] == ASK and req["stop"] == list(STOP_SEQUENCES)
    assert req["max_tokens"] == 48 and req["temperature"] == 0.0 and req["seed"] == 7 and req["logprobs"] is True
    assert out.finish_reason == "stop" and out.stop == "</tool_call>" and "<tool_call>" in out.text
    assert out.logprobs is not None and len(out.logprobs) == len(out.tokens or ()) > 5


def test_unregistered_and_non_sampling_providers_are_one_line_errors() -> None:
    with pytest.raises(BackendError, match=r"--backend='fn_only:m' is not allowed; expected one of: .*"
                                           r"ollama:<model>@<base_url>$"):
        parse_backend("fn_only:m")  # accepted only once registered
    register_provider("fn_only", lambda model, settings, *, metrics=None: FunctionClient(lambda m: "x", model))
    try:
        assert parse_backend("fn_only:m") == ("fn_only", "m", None)
        with pytest.raises(BackendError, match=r"expected one of: .*ollama:<model>@<base_url>, fn_only:<model>$"):
            parse_backend("other:m")
        with pytest.raises(BackendError, match=r"^backend error: --backend='fn_only:m': FunctionClient cannot "
                                               r"sample \(a trace backend's client needs `name` and `sample"):
            make_backend("fn_only:m")
    finally:
        REGISTERED.pop("fn_only")


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
