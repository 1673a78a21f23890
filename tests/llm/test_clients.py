"""`make_client`: which class, endpoint, price and settings each spec gets; secrets; the layer it sits in.

Building an SDK client opens no connection, so these run offline; the requests themselves are tested
against loopback servers in tests/feedback/test_expert_clients.py and tests/tool_agent/test_ollama.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from comlrl.llm import ChatClient, Counters, FunctionClient, LLMError, LLMSettings, make_client, price_for
from comlrl.llm.anthropic_client import AnthropicClient
from comlrl.llm.ollama_client import OllamaClient
from comlrl.llm.openai_client import OpenAIClient

KEY = "sk-test-0123456789abcdefSECRETSECRET"
LLM_DIR = Path(__file__).resolve().parents[2] / "comlrl" / "llm"


@pytest.mark.parametrize("spec,env,cls,endpoint,billed", [
    ("deepseek:deepseek-coder", "DEEPSEEK_API_KEY", OpenAIClient, "https://api.deepseek.com", True),
    ("openai:gpt-4o-mini", "OPENAI_API_KEY", OpenAIClient, "", True),
    ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY", AnthropicClient, "", True),
    ("openai-compatible:qwen:7b@http://127.0.0.1:9/v1", None, OpenAIClient, "http://127.0.0.1:9/v1", False),
    ("ollama:qwen:7b@http://127.0.0.1:9/api/", None, OllamaClient, "http://127.0.0.1:9", False),
])
def test_each_provider_gets_its_client_endpoint_and_price(spec, env, cls, endpoint, billed, monkeypatch):
    if env:
        monkeypatch.setenv(env, KEY)
    settings = LLMSettings(timeout_s=7.0, max_retries=1, concurrency=3, max_tokens=99, cache_dir=None)
    client = make_client(spec, settings, key="x.model")
    try:
        assert type(client) is cls
        assert client.provider == spec.split(":")[0]
        assert client.endpoint == endpoint
        assert (client.timeout_s, client.max_retries, client.concurrency, client.max_tokens) == (7.0, 1, 3, 99)
        assert client.price_per_mtok == (price_for(client.model) if billed else (0.0, 0.0))
        assert client.cache is None
        assert KEY not in repr(client) and KEY[:12] not in repr(client)
    finally:
        client.close()


def test_an_explicit_price_and_base_url_win(monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    client = make_client("deepseek:deepseek-coder", LLMSettings(price_per_mtok=(1.0, 2.0)), key="k",
                         base_url="http://127.0.0.1:9/v1")
    assert client.price_per_mtok == (1.0, 2.0) and client.endpoint == "http://127.0.0.1:9/v1"
    client.close()


def test_errors_name_the_setting_given_as_key(tmp_path):
    with pytest.raises(LLMError, match=r"^task\.actions\.judge='openai:gpt-4o' needs an API key .*OPENAI_API_KEY"):
        make_client("openai:gpt-4o", key="task.actions.judge")
    with pytest.raises(LLMError, match=r"^my\.key='nope:m' is not allowed"):
        make_client("nope:m", key="my.key")
    with pytest.raises(LLMError, match="is not a local model directory"):
        make_client(f"local:{tmp_path / 'missing'}", key="k")


def test_the_chat_interface_is_declared_and_a_client_counts_into_what_it_is_given():
    with pytest.raises(TypeError, match="abstract"):
        ChatClient("m")  # type: ignore[abstract]
    sink = Counters(("judge/calls",))
    client = FunctionClient(lambda msgs: '{"score": 3}', metrics=sink, cache_dir=None, max_retries=0)
    got = client.complete([{"role": "user", "content": "hi"}], lambda t: t if "score" in t else None,
                          counter_prefix="judge")
    assert got == '{"score": 3}'
    assert sink.snapshot()["judge/calls"] == 1 and sink.snapshot()["judge/requests"] == 1
    assert client.metrics() == sink.snapshot()
    alone = FunctionClient(lambda msgs: "x")
    assert alone.counters is not sink and alone.metrics() == {}


def test_settings_fields_can_be_replaced_one_by_one_and_unknown_ones_fail():
    client = FunctionClient(lambda msgs: "x", settings=LLMSettings(max_tokens=5), temperature=0.5)
    assert client.max_tokens == 5 and client.temperature == 0.5
    with pytest.raises(TypeError):
        FunctionClient(lambda msgs: "x", not_a_setting=1)


FORBIDDEN = ("feedback", "comlrl.tasks", "comlrl.run.trainer", "comlrl.tree.rollout", "comlrl.policy",
             "sandbox")


@pytest.mark.parametrize("path", sorted(LLM_DIR.glob("*.py")), ids=lambda p: p.name)
def test_llm_is_a_lower_layer(path: Path) -> None:
    """No module of comlrl/llm imports a layer above it, not even lazily inside a function."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    bad = [n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
