"""Build the chat client a spec names: one place that maps providers to client classes, keys and prices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from comlrl.llm.client import ChatClient
from comlrl.llm.counters import CounterSink
from comlrl.llm.prices import price_for
from comlrl.llm.settings import LLMSettings
from comlrl.llm.spec import DEEPSEEK_BASE_URL, PROVIDERS, api_key, parse_spec

BILLED = frozenset({"deepseek", "openai", "anthropic"})  # list prices apply; other providers count tokens at 0
# providers from user modules (comlrl.config.registry.register_provider): name -> factory(model, settings, metrics=)
REGISTERED: dict[str, Callable[..., ChatClient]] = {}


def provider_names() -> tuple[str, ...]:
    """Every provider a spec may name: the built-ins, then those registered by user modules."""
    return (*PROVIDERS, *REGISTERED)


def make_client(
    spec: str,
    settings: LLMSettings | None = None,
    *,
    key: str,
    resolve_local: Callable[[str], str] | None = None,
    base_url: str | None = None,
    metrics: CounterSink | None = None,
) -> ChatClient:
    """The client `spec` names (see `comlrl.llm.spec`), built at start-up so a bad spec, a missing key or a
    missing model fails there, as a one-line `LLMError` naming the setting `key`.

    `resolve_local` maps a `local:` alias to a model directory; `base_url` overrides the provider's endpoint
    (tests, proxies). `settings.price_per_mtok` None means the list price of billed providers.
    """
    parsed = parse_spec(str(spec), key=key, providers=provider_names())
    if parsed.provider in REGISTERED:  # `<name>:<model>`: the factory reads its own endpoint and key
        return REGISTERED[parsed.provider](parsed.model, settings or LLMSettings(), metrics=metrics)
    secret = api_key(parsed, key=key, raw=str(spec))
    s = settings or LLMSettings()
    if s.price_per_mtok is None:
        s = replace(s, price_per_mtok=price_for(parsed.model) if parsed.provider in BILLED else (0.0, 0.0))
    if parsed.provider == "local":
        from comlrl.llm.local_client import LocalClient

        return LocalClient(parsed.model, s, resolve_local=resolve_local, metrics=metrics)
    if parsed.provider == "anthropic":
        from comlrl.llm.anthropic_client import AnthropicClient

        return AnthropicClient(parsed.model, s, api_key=secret, base_url=base_url, metrics=metrics)
    if parsed.provider == "ollama":
        from comlrl.llm.ollama_client import OllamaClient

        return OllamaClient(parsed.model, s, base_url=base_url or parsed.base_url or "", api_key=secret or None,
                            metrics=metrics)
    from comlrl.llm.openai_client import OpenAIClient

    if parsed.provider == "openai-compatible":
        url = base_url or parsed.base_url
    elif parsed.provider == "deepseek":
        url = base_url or DEEPSEEK_BASE_URL
    else:
        url = base_url  # None: the SDK default (which honours OPENAI_BASE_URL)
    return OpenAIClient(parsed.model, s, api_key=secret or None, base_url=url, provider=parsed.provider,
                        metrics=metrics)
