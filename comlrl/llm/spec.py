"""The one parser of model specs (`provider:model[@base_url]`), shared by experts, judges, trace backends.

    deepseek:<model>                       OpenAI-compatible API at https://api.deepseek.com, DEEPSEEK_API_KEY
    openai:<model>                         OpenAI API, OPENAI_API_KEY
    anthropic:<model>                      Anthropic Messages API, ANTHROPIC_API_KEY
    openai-compatible:<model>@<base_url>   any chat-completions server (vLLM, Ollama...), key optional:
                                           OPENAI_COMPATIBLE_API_KEY
    ollama:<model>@<base_url>              Ollama's native /api/chat (per-token log-probs), key optional:
                                           OLLAMA_API_KEY
    local:<path or alias>                  a transformers model on this machine

Pure: no network, no environment except `api_key`, which reads the provider's variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from comlrl.llm.errors import LLMError

DEEPSEEK_BASE_URL = "https://api.deepseek.com"

# How each provider is written, in the order error messages list them.
FORMS: dict[str, str] = {
    "deepseek": "deepseek:<model>",
    "openai": "openai:<model>",
    "anthropic": "anthropic:<model>",
    "openai-compatible": "openai-compatible:<model>@<base_url>",
    "ollama": "ollama:<model>@<base_url>",
    "local": "local:<path or alias>",
}
PROVIDERS: tuple[str, ...] = tuple(FORMS)
NEEDS_URL = frozenset({"openai-compatible", "ollama"})

# provider -> (environment variable of the key, key required)
KEY_ENV: dict[str, tuple[str, bool]] = {
    "deepseek": ("DEEPSEEK_API_KEY", True),
    "openai": ("OPENAI_API_KEY", True),
    "anthropic": ("ANTHROPIC_API_KEY", True),
    "openai-compatible": ("OPENAI_COMPATIBLE_API_KEY", False),
    "ollama": ("OLLAMA_API_KEY", False),
    "local": ("", False),
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: `base_url` is set exactly for the providers in NEEDS_URL."""

    provider: str
    model: str
    base_url: str | None = None


def parse_spec(spec: str, *, key: str, providers: tuple[str, ...] = PROVIDERS) -> ModelSpec:
    """`provider:model[@base_url]` -> ModelSpec; the model may itself contain ':' (Ollama tags).

    `key` names the setting in the one-line error, `providers` the ones that setting accepts.
    """
    provider, sep, rest = (spec or "").partition(":")
    provider, rest = provider.strip().lower(), rest.strip()
    if not sep or provider not in providers or not rest:
        raise LLMError(f"{key}={spec!r} is not allowed; expected one of: {spec_forms(providers)}")
    if provider in NEEDS_URL:
        at = max(rest.rfind("@http://"), rest.rfind("@https://"))
        if at <= 0:
            raise LLMError(f"{key}={spec!r} is not allowed; expected {FORMS[provider]} with an http(s) base URL")
        return ModelSpec(provider, rest[:at], rest[at + 1 :])
    return ModelSpec(provider, rest)


def spec_forms(providers: tuple[str, ...] = PROVIDERS) -> str:
    """How each provider is written, comma-separated, for errors; a registered one is `<name>:<model>`."""
    return ", ".join(FORMS.get(p, f"{p}:<model>") for p in providers)


def api_key(spec: ModelSpec, *, key: str, raw: str) -> str:
    """The provider's key from its environment variable ('' when it has none); a required key that is
    missing is a one-line LLMError naming the setting `key`, its value `raw` and the variable."""
    env_name, required = KEY_ENV[spec.provider]
    value = os.environ.get(env_name, "").strip() if env_name else ""
    if required and not value:
        raise LLMError(f"{key}={raw!r} needs an API key in the environment variable {env_name}, which is not set")
    return value
