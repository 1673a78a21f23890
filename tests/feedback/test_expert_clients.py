"""Expert clients through the official openai / anthropic SDKs against a real HTTP server on 127.0.0.1.

Injected 429, 500, timeouts, malformed bodies and unparseable replies: the SDK retries the transport
(its `x-stainless-retry-count` header shows each retry at the server), we retry only replies that do not
parse, the fallback engages and is counted, and the key never reaches logs, caches or errors.
"""

from __future__ import annotations

import logging
from pathlib import Path

import fb_cases as cases
import pytest
from fb_golden import render
from llm_server import ScriptedLLMServer

from comlrl.config.schema import ExternalConfig
from feedback import ExpertError, FeedbackMetrics, build_next_messages, make_expert
from feedback.context import FeedbackOptions
from feedback.experts import parse_spec, price_for
from feedback.level_feedback import build as level_feedback_build

KEY = "sk-test-0123456789abcdefSECRETSECRET"
EMPTY_EDITS = '{"helper": "ok", "main": "ok"}'
GOOD = '```json\n{"helper": "square x: return x * x", "main": "No changes needed."}\n```\nDone.'

def sdk_retry_counts(server: ScriptedLLMServer) -> list[int]:
    """The retry number the SDK put on each request (0 = a first attempt)."""
    return [int(r["headers"].get("x-stainless-retry-count", 0)) for r in server.requests]


# A client timeout far above an "ok" reply's time even on a loaded machine (0.3 s let replies time out under
# load and retry, so request counts drifted), and a "timeout" reply slower than it.
TIMEOUT_S = 1.5
SLOW_S = 2.5


def ext(tmp_path: Path, spec: str, **kw: object) -> ExternalConfig:
    base: dict[str, object] = dict(mode="expert_edits", expert_edits_model=spec, expert_timeout_s=TIMEOUT_S,
                                   expert_max_retries=4, expert_concurrency=2, expert_max_tokens=64,
                                   expert_cache_dir=str(tmp_path / "cache"))
    base.update(kw)
    return ExternalConfig(**base)  # type: ignore[arg-type]


def expert_for(provider: str, server: ScriptedLLMServer, cfg: ExternalConfig, metrics: FeedbackMetrics,
               monkeypatch: pytest.MonkeyPatch):
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        spec, url = "anthropic:claude-haiku-4-5", server.base
    else:
        monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
        spec, url = "deepseek:deepseek-coder", server.base_v1
    return make_expert(spec, cfg, base_url=url, metrics=metrics)


PROVIDERS = ["deepseek", "anthropic"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdk_retries_the_transport_and_we_retry_the_unparseable_body(provider, tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        server.script.extend(["429", "500", "timeout", "malformed"])
        cfg = ext(tmp_path, "x:y")
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        ctx = cases.context("failing")
        [msgs] = build_next_messages([ctx], cfg, expert=expert, metrics=m)
        expert.close()
        assert [r["behaviour"] for r in server.requests] == ["429", "500", "timeout", "malformed", "ok"]
        # the SDK retried 429, 500 and the timeout itself; the malformed body came back to us, and our
        # retry is a fresh request
        assert sdk_retry_counts(server) == [0, 1, 2, 3, 0]
        path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
        assert all(r["path"] == path for r in server.requests)
        assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"  # the key was really sent
    assert "square x: return x * x" in msgs[0][1]["content"]
    s = m.snapshot()
    assert s["expert/calls"] == 5 and s["expert/retries"] == 4
    assert s["expert/errors"] == 4 and s["expert/failures"] == 0
    assert s["expert/fallbacks"] == 0 and s["prompts/expert_edits"] == 1
    assert s["expert/input_tokens"] == 100 and s["expert/output_tokens"] == 20
    assert s["expert/cost_usd"] > 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_sdk_honours_retry_after_ms_and_x_should_retry(provider, tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        server.script.extend(["429ms", "ok", "503stop"])
        cfg = ext(tmp_path, "x:y", expert_cache_dir="off")
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        first = expert.suggest([{"role": "user", "content": "one"}], ["helper", "main"])
        second = expert.suggest([{"role": "user", "content": "two"}], ["helper", "main"])
        expert.close()
        assert [r["behaviour"] for r in server.requests] == ["429ms", "ok", "503stop"]
        assert sdk_retry_counts(server) == [0, 1, 0]  # x-should-retry: false: not retried, though retries were left
    assert first == {"helper": "square x: return x * x", "main": "No changes needed."} and second is None
    assert m.get("expert/retries") == 1 and m.get("expert/failures") == 1


@pytest.mark.parametrize("provider,field,expected", [
    ("openai", "response_format", {"type": "json_schema", "json_schema": {
        "name": "reply", "strict": True, "schema": {
            "type": "object", "properties": {"helper": {"type": "string"}, "main": {"type": "string"}},
            "required": ["helper", "main"], "additionalProperties": False}}}),
    ("deepseek", "response_format", {"type": "json_object"}),
    ("anthropic", "output_config", {"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"helper": {"type": "string"}, "main": {"type": "string"}},
        "required": ["helper", "main"], "additionalProperties": False}}}),
    ("openai-compatible", "response_format", None),  # servers differ: the prompt's instructions only
])
def test_structured_output_is_requested_where_the_provider_offers_it(provider, field, expected, tmp_path,
                                                                      monkeypatch):
    keys = {"openai": "OPENAI_API_KEY", "deepseek": "DEEPSEEK_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        if provider in keys:
            monkeypatch.setenv(keys[provider], KEY)
        url = server.base if provider == "anthropic" else server.base_v1
        spec = f"openai-compatible:m@{url}" if provider == "openai-compatible" else f"{provider}:m"
        expert = make_expert(spec, ext(tmp_path, spec, expert_cache_dir="off"), base_url=url)
        assert expert.suggest([{"role": "user", "content": "json please"}], ["helper", "main"])
        expert.close()
        assert server.requests[0]["body"].get(field) == expected


@pytest.mark.parametrize("provider", PROVIDERS)
def test_exhausted_retries_fall_back_and_training_continues(provider, tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=EMPTY_EDITS) as server:
        server.default = "500"
        cfg = ext(tmp_path, "x:y", expert_max_retries=2, expert_fallback="level_feedback")
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        ctxs = [cases.context("failing"), cases.context("syntax")]
        out = build_next_messages(ctxs, cfg, expert=expert, metrics=m)
        expert.close()
        assert len(server.requests) == 2 * 3  # two joint actions x (1 + 2 SDK retries)
        assert sorted(sdk_retry_counts(server)) == [0, 0, 1, 1, 2, 2]
    opts = FeedbackOptions.from_config(cfg)
    assert out == [level_feedback_build(c, opts) for c in ctxs]  # exactly the fallback mode's prompts
    s = m.snapshot()
    assert s["expert/fallbacks"] == 2 and s["expert/failures"] == 2
    assert s["prompts/level_feedback"] == 2 and s["prompts/expert_edits"] == 0
    assert s["expert/retries"] == 4 and s["expert/calls"] == 6


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unparseable_reply_is_retried_then_falls_back(provider, tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=EMPTY_EDITS) as server:
        server.default = "prose"
        cfg = ext(tmp_path, "x:y", expert_max_retries=1, expert_fallback="plain")
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        out = build_next_messages([cases.context("failing")], cfg, expert=expert, metrics=m)
        expert.close()
        assert len(server.requests) == 2
    assert "Feedback:" not in out[0][0][1]["content"]  # plain fallback
    s = m.snapshot()
    assert s["expert/parse_failures"] == 2 and s["expert/fallbacks"] == 1
    assert s["prompts/plain"] == 1
    assert not list((tmp_path / "cache").rglob("*.json"))  # a bad reply is never cached


def test_client_errors_are_not_retried(tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=EMPTY_EDITS) as server:
        server.default = "401"
        cfg = ext(tmp_path, "x:y")
        expert = expert_for("deepseek", server, cfg, m, monkeypatch)
        build_next_messages([cases.context("failing")], cfg, expert=expert, metrics=m)
        expert.close()
        assert len(server.requests) == 1
    assert m.get("expert/failures") == 1 and m.get("expert/fallbacks") == 1 and m.get("expert/retries") == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cache_serves_repeats_without_a_request_and_holds_no_key(provider, tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        cfg = ext(tmp_path, "x:y")
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        first = build_next_messages([cases.context("failing")], cfg, expert=expert, metrics=m)
        expert.close()
        # a new process with another key: same cache entry (the key is not part of the cache key)
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-other-key-000000000000")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-other-key-000000000000")
        spec = "anthropic:claude-haiku-4-5" if provider == "anthropic" else "deepseek:deepseek-coder"
        url = server.base if provider == "anthropic" else server.base_v1
        again = make_expert(spec, cfg, base_url=url, metrics=m)
        second = build_next_messages([cases.context("failing")], cfg, expert=again, metrics=m)
        again.close()
        assert len(server.requests) == 1
    assert first == second and m.get("expert/cache_hits") == 1
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1
    text = files[0].read_text()
    assert KEY not in text and "sk-other" not in text and "square x" in text


def test_batch_is_concurrent_and_deduplicated(tmp_path, monkeypatch):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        server.delay_s = 0.2
        cfg = ext(tmp_path, "x:y", expert_concurrency=3, expert_cache_dir="off")
        expert = expert_for("deepseek", server, cfg, m, monkeypatch)
        distinct = [cases.context(c) for c in ("passing", "failing", "syntax")]
        out = build_next_messages(distinct + distinct, cfg, expert=expert, metrics=m)  # each twice
        expert.close()
        # Concurrency is shown by overlapping requests at the server, not by wall time (which a loaded
        # machine stretches: the elapsed-time bound this replaced failed under load).
        assert len(server.requests) == 3 and server.max_in_flight >= 2
    assert len(out) == 6 and out[:3] == out[3:]
    assert m.get("expert/requests") == 3 and m.get("prompts/expert_edits") == 6


def test_openai_compatible_spec_needs_no_key(tmp_path):
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        spec = f"openai-compatible:qwen2.5-coder:7b@{server.base_v1}"
        cfg = ext(tmp_path, spec)
        expert = make_expert(spec, cfg, metrics=m)
        assert expert.suggest([{"role": "user", "content": "hi"}], ["helper", "main"]) == {
            "helper": "square x: return x * x", "main": "No changes needed."}
        expert.close()
        assert server.requests[0]["body"]["model"] == "qwen2.5-coder:7b"
    assert m.get("expert/cost_usd") == 0.0 and m.get("expert/input_tokens") == 100


@pytest.mark.parametrize("provider", PROVIDERS)
def test_key_never_in_logs_errors_cache_or_metrics(provider, tmp_path, monkeypatch, caplog, capsys):
    caplog.set_level(logging.DEBUG)  # every logger, the SDKs' and httpx2's included
    m = FeedbackMetrics()
    with ScriptedLLMServer(reply=GOOD, slow_s=SLOW_S) as server:
        server.script.extend(["429", "timeout", "malformed", "echo500"])
        cfg = ext(tmp_path, "x:y", expert_max_retries=5)
        expert = expert_for(provider, server, cfg, m, monkeypatch)
        out = build_next_messages([cases.context("failing")], cfg, expert=expert, metrics=m)
        expert.close()
        assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert m.get("expert/fallbacks") == 1  # the 500 with x-should-retry: false ended it
    assert "bad auth Bearer ***" in caplog.text  # the echoed key reached our log line, redacted
    everything = [caplog.text, repr(expert), str(m.snapshot()), render(out[0], ["helper", "main"])]
    captured = capsys.readouterr()
    everything += [captured.out, captured.err]
    everything += [p.read_text(errors="replace") for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    for text in everything:
        assert KEY not in text
        assert KEY[:12] not in text and KEY[-12:] not in text


@pytest.mark.parametrize(
    "spec,var",
    [("deepseek:deepseek-coder", "DEEPSEEK_API_KEY"), ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
     ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY")],
)
def test_missing_key_fails_at_construction_naming_the_variable(spec, var, tmp_path):
    with pytest.raises(ExpertError) as err:
        make_expert(spec, ext(tmp_path, spec))
    assert var in str(err.value) and spec in str(err.value)


def test_expert_edits_without_an_expert_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="make_expert"):
        build_next_messages([cases.context("failing")], ext(tmp_path, "deepseek:deepseek-coder"))


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("deepseek:deepseek-coder", ("deepseek", "deepseek-coder", None)),
        ("openai:gpt-4o", ("openai", "gpt-4o", None)),
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5", None)),
        ("openai-compatible:llama3.1:8b@http://localhost:11434/v1",
         ("openai-compatible", "llama3.1:8b", "http://localhost:11434/v1")),
        ("local:smollm2-135m-instruct", ("local", "smollm2-135m-instruct", None)),
        ("local:/models/my dir", ("local", "/models/my dir", None)),
    ],
)
def test_parse_spec(spec, expected):
    s = parse_spec(spec)
    assert (s.provider, s.model, s.base_url) == expected


@pytest.mark.parametrize("spec", ["", "gpt-4o", "cohere:command", "openai:", "openai-compatible:m@ftp://x",
                                  "openai-compatible:model-without-url"])
def test_bad_specs_name_the_config_key(spec):
    with pytest.raises(ExpertError, match="external.expert_edits_model"):
        parse_spec(spec)


@pytest.mark.parametrize("model,price", [
    ("claude-haiku-4-5", (1.00, 5.00)), ("claude-haiku-4-5-20251001", (1.00, 5.00)),
    ("claude-sonnet-4-5", (3.00, 15.00)), ("claude-opus-4-1", (15.00, 75.00)),
    ("claude-opus-4-5-20251101", (5.00, 25.00)), ("claude-opus-4-7", (5.00, 25.00)),
    ("gpt-4o-mini-2024-07-18", (0.15, 0.60)), ("some-local-model", (0.0, 0.0)),
])
def test_price_is_the_longest_prefix_of_the_model_name(model, price):
    """A dated snapshot pays its family's price; Opus 4.5+ must not fall back to Opus 4's triple price."""
    assert price_for(model) == price
