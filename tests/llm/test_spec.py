"""The one model-spec parser, its API-key lookup and the settings helpers: pure, tested exhaustively."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from comlrl.llm import FORMS, KEY_ENV, PROVIDERS, LLMError, ModelSpec, cache_dir_setting, parse_spec
from comlrl.llm.spec import NEEDS_URL, api_key

KEY = "some.setting"
MODELS = ["m", "gpt-4o", "qwen2.5-coder:7b", "a:b:c", "/models/my dir", "org/name@v2"]
URLS = ["http://127.0.0.1:11434", "https://api.example.com/v1", "http://h:1/v1/"]


def test_providers_forms_and_keys_describe_the_same_set() -> None:
    assert set(PROVIDERS) == set(FORMS) == set(KEY_ENV)
    assert {p for p in PROVIDERS if "@<base_url>" in FORMS[p]} == NEEDS_URL
    for p in PROVIDERS:
        assert FORMS[p].startswith(p + ":")


@pytest.mark.parametrize("provider,model", list(itertools.product(sorted(set(PROVIDERS) - NEEDS_URL), MODELS)))
def test_every_provider_without_url_keeps_the_whole_model(provider: str, model: str) -> None:
    assert parse_spec(f"{provider}:{model}", key=KEY) == ModelSpec(provider, model, None)
    assert parse_spec(f"  {provider.upper()} :  {model}  ", key=KEY) == ModelSpec(provider, model, None)


@pytest.mark.parametrize("provider,model,url", list(itertools.product(sorted(NEEDS_URL), MODELS, URLS)))
def test_every_url_provider_splits_at_the_last_http_at(provider: str, model: str, url: str) -> None:
    assert parse_spec(f"{provider}:{model}@{url}", key=KEY) == ModelSpec(provider, model, url)


@pytest.mark.parametrize("provider", sorted(NEEDS_URL))
@pytest.mark.parametrize("rest", ["m", "m@", "m@ftp://x", "@http://x", "m@localhost:11434", "m@//x"])
def test_a_url_provider_without_an_http_url_names_the_key_and_its_form(provider: str, rest: str) -> None:
    spec = f"{provider}:{rest}"
    with pytest.raises(LLMError) as err:
        parse_spec(spec, key=KEY)
    assert str(err.value) == f"{KEY}={spec!r} is not allowed; expected {FORMS[provider]} with an http(s) base URL"


@pytest.mark.parametrize("spec", ["", ":", "gpt-4o", "openai", "openai:", "openai:   ", "cohere:command",
                                  "vllm:m@http://x", " :m", None])
def test_malformed_specs_are_one_line_naming_the_key_and_every_form(spec: str | None) -> None:
    with pytest.raises(LLMError) as err:
        parse_spec(spec, key=KEY)  # type: ignore[arg-type]
    msg = str(err.value)
    assert msg == f"{KEY}={spec!r} is not allowed; expected one of: " + ", ".join(FORMS.values())
    assert "\n" not in msg


@pytest.mark.parametrize("allowed", [("local",), ("local", "openai-compatible", "ollama"), ("anthropic", "openai")])
def test_a_setting_accepts_only_its_providers_and_lists_only_them(allowed: tuple[str, ...]) -> None:
    for p in PROVIDERS:
        spec = f"{p}:m@http://x" if p in NEEDS_URL else f"{p}:m"
        if p in allowed:
            assert parse_spec(spec, key=KEY, providers=allowed).provider == p
        else:
            with pytest.raises(LLMError) as err:
                parse_spec(spec, key=KEY, providers=allowed)
            assert str(err.value).endswith("expected one of: " + ", ".join(FORMS[a] for a in allowed))


def test_model_spec_is_frozen() -> None:
    s = parse_spec("openai:gpt-4o", key=KEY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.model = "other"  # type: ignore[misc]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_api_key_required_optional_or_none(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env, required = KEY_ENV[provider]
    spec = parse_spec(f"{provider}:m@http://x" if provider in NEEDS_URL else f"{provider}:m", key=KEY)
    raw = f"{provider}:m"
    if required:
        with pytest.raises(LLMError) as err:
            api_key(spec, key=KEY, raw=raw)
        assert str(err.value) == (f"{KEY}={raw!r} needs an API key in the environment variable {env}, "
                                  "which is not set")
        monkeypatch.setenv(env, "   ")  # blank counts as missing
        with pytest.raises(LLMError):
            api_key(spec, key=KEY, raw=raw)
    else:
        assert api_key(spec, key=KEY, raw=raw) == ""
    if env:
        monkeypatch.setenv(env, " sk-secret-value ")
        assert api_key(spec, key=KEY, raw=raw) == "sk-secret-value"


@pytest.mark.parametrize("raw,expected", [
    (None, "DEFAULT"), ("", None), ("off", None), ("OFF", None), (" none ", None), ("false", None),
    ("/tmp/c", "/tmp/c"), ("~/c", "HOME/c"),
])
def test_cache_dir_setting(raw: str | None, expected: str | None, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    default = tmp_path / "default"
    got = cache_dir_setting(raw, default)
    if expected == "DEFAULT":
        assert got == str(default)
    elif expected is None:
        assert got is None
    else:
        assert got == expected.replace("HOME", str(tmp_path))
