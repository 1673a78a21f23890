"""Expert clients for `external.mode=expert_edits`, chosen by `external.expert_edits_model`.

    deepseek:<model>                       OpenAI-compatible API at https://api.deepseek.com, DEEPSEEK_API_KEY
    openai:<model>                         OpenAI API, OPENAI_API_KEY
    anthropic:<model>                      Anthropic Messages API, ANTHROPIC_API_KEY
    openai-compatible:<model>@<base_url>   any chat-completions server (vLLM, Ollama...), key optional:
                                           OPENAI_COMPATIBLE_API_KEY
    ollama:<model>@<base_url>              Ollama's native /api/chat (per-token log-probs), key optional:
                                           OLLAMA_API_KEY
    local:<path or alias>                  a transformers model on this machine

Build the expert once at start-up with `make_expert`: a missing key or model fails there, with a
message naming the environment variable, instead of at the first turn that needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback.counters import FeedbackMetrics
from feedback.experts.base import (
    Completion,
    ExpertClient,
    ExpertError,
    FunctionExpert,
    ResponseCache,
    RetryableError,
)
from feedback.experts.parsing import parse_edits

__all__ = [
    "Completion",
    "ExpertClient",
    "ExpertError",
    "ExpertSpec",
    "FORMS",
    "FunctionExpert",
    "ResponseCache",
    "RetryableError",
    "make_expert",
    "parse_edits",
    "parse_spec",
]

DEEPSEEK_BASE_URL = "https://api.deepseek.com"

# provider -> (environment variable of the key, key required)
KEY_ENV: dict[str, tuple[str, bool]] = {
    "deepseek": ("DEEPSEEK_API_KEY", True),
    "openai": ("OPENAI_API_KEY", True),
    "anthropic": ("ANTHROPIC_API_KEY", True),
    "openai-compatible": ("OPENAI_COMPATIBLE_API_KEY", False),
    "ollama": ("OLLAMA_API_KEY", False),
    "local": ("", False),
}
# How each provider is written; `parse_spec` is the one parser of these (experts, judges, rollout backends).
FORMS: dict[str, str] = {
    "deepseek": "deepseek:<model>",
    "openai": "openai:<model>",
    "anthropic": "anthropic:<model>",
    "openai-compatible": "openai-compatible:<model>@<base_url>",
    "ollama": "ollama:<model>@<base_url>",
    "local": "local:<path or alias>",
}
NEEDS_URL = frozenset({"openai-compatible", "ollama"})

# USD per million (input, output) tokens for the cost counter only; list prices as of 2025, the Claude 4.5+
# rows from third-party listings in 2026-11 (the vendors' pages are not reachable from here).
# Unknown models count tokens at zero cost; pass `price_per_mtok=` to make_expert to override.
PRICES: dict[str, tuple[float, float]] = {
    "deepseek-coder": (0.27, 1.10),
    "deepseek-chat": (0.27, 1.10),
    "deepseek-reasoner": (0.55, 2.19),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-opus-4": (15.00, 75.00),  # Opus 4 and 4.1; from 4.5 on the price dropped
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-8": (5.00, 25.00),
}

DEFAULT_CACHE_DIR = Path("~/.cache/comlrl/expert_edits")


@dataclass(frozen=True)
class ExpertSpec:
    provider: str
    model: str
    base_url: str | None = None


def parse_spec(spec: str, *, key: str = "external.expert_edits_model",
               providers: tuple[str, ...] = tuple(FORMS)) -> ExpertSpec:
    """`provider:model[@base_url]` -> ExpertSpec; the model may itself contain ':' (Ollama tags).

    `key` names the setting in the error, `providers` the ones that setting accepts.
    """
    provider, sep, rest = (spec or "").partition(":")
    provider, rest = provider.strip().lower(), rest.strip()
    if not sep or provider not in providers or not rest:
        forms = ", ".join(FORMS[p] for p in providers)
        raise ExpertError(f"{key}={spec!r} is not allowed; expected one of: {forms}")
    if provider in NEEDS_URL:
        at = max(rest.rfind("@http://"), rest.rfind("@https://"))
        if at <= 0:
            raise ExpertError(f"{key}={spec!r} is not allowed; expected {FORMS[provider]} with an http(s) base URL")
        return ExpertSpec(provider, rest[:at], rest[at + 1 :])
    return ExpertSpec(provider, rest)


def price_for(model: str) -> tuple[float, float]:
    """Longest price-table prefix of the model name (dated snapshots share their family's price)."""
    best = ""
    for name in PRICES:
        if model.startswith(name) and len(name) > len(best):
            best = name
    return PRICES.get(best, (0.0, 0.0))


def _cache_dir(external_cfg: Any) -> str | None:
    raw = getattr(external_cfg, "expert_cache_dir", None)
    if raw is None:
        return str(DEFAULT_CACHE_DIR.expanduser())
    if str(raw).strip().lower() in ("", "off", "none", "false"):
        return None
    return str(Path(str(raw)).expanduser())


def make_expert(
    spec: str | None,
    external_cfg: Any = None,
    *,
    resolve_local: Callable[[str], str] | None = None,
    base_url: str | None = None,
    metrics: FeedbackMetrics | None = None,
    **overrides: Any,
) -> ExpertClient:
    """Build the expert named by `spec` (default: `external_cfg.expert_edits_model`).

    `resolve_local` maps a `local:` alias to a model directory (the trainer passes
    `comlrl.models.resolve_model_path`; feedback never imports comlrl). `base_url` overrides the
    provider's endpoint (tests, proxies). `overrides` reach `ExpertClient` (price_per_mtok,
    temperature, cache_dir...).
    """
    if spec is None:
        spec = getattr(external_cfg, "expert_edits_model", None)
    parsed = parse_spec(str(spec))
    env_name, required = KEY_ENV[parsed.provider]
    key = os.environ.get(env_name, "").strip() if env_name else ""
    if required and not key:
        raise ExpertError(
            f"external.expert_edits_model={spec!r} needs an API key in the environment variable {env_name}, "
            "which is not set"
        )
    kwargs: dict[str, Any] = {
        "timeout_s": float(getattr(external_cfg, "expert_timeout_s", 60.0)),
        "max_retries": int(getattr(external_cfg, "expert_max_retries", 3)),
        "concurrency": int(getattr(external_cfg, "expert_concurrency", 4)),
        "max_tokens": int(getattr(external_cfg, "expert_max_tokens", 512)),
        "cache_dir": _cache_dir(external_cfg),
        "price_per_mtok": price_for(parsed.model),
        "metrics": metrics,
    }
    kwargs.update(overrides)
    if parsed.provider == "local":
        from feedback.experts.local import LocalExpert

        kwargs["price_per_mtok"] = overrides.get("price_per_mtok", (0.0, 0.0))
        return LocalExpert(parsed.model, resolve_local=resolve_local, **kwargs)
    if parsed.provider == "anthropic":
        from feedback.experts.anthropic_client import AnthropicExpert

        return AnthropicExpert(parsed.model, api_key=key, base_url=base_url, **kwargs)
    if parsed.provider == "ollama":
        from feedback.experts.ollama_client import OllamaExpert

        kwargs["price_per_mtok"] = overrides.get("price_per_mtok", (0.0, 0.0))
        return OllamaExpert(parsed.model, base_url=base_url or parsed.base_url or "", api_key=key or None, **kwargs)
    from feedback.experts.openai_client import OpenAIChatExpert

    if parsed.provider == "openai-compatible":
        kwargs["price_per_mtok"] = overrides.get("price_per_mtok", (0.0, 0.0))
        url = base_url or parsed.base_url
    elif parsed.provider == "deepseek":
        url = base_url or DEEPSEEK_BASE_URL
    else:
        url = base_url  # None: the SDK default (which honours OPENAI_BASE_URL)
    return OpenAIChatExpert(parsed.model, api_key=key or None, base_url=url, provider=parsed.provider, **kwargs)
