"""The expert of `external.mode=expert_edits`: a `comlrl.llm` chat client named by `external.expert_edits_model`.

The providers, the spec syntax and the client behaviour live in `comlrl.llm` (shared with the actions judge
and trace backends); this module binds them to the `external.expert_*` keys. Build the expert once at
start-up with `make_expert`: a missing key or model fails there, with a message naming the environment
variable, instead of at the first turn that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from comlrl import llm
from comlrl.llm import (
    ChatClient,
    Completion,
    FunctionClient,
    LLMSettings,
    Messages,
    ModelSpec,
    ResponseCache,
    RetryableError,
    parse_edits,
    price_for,
)
from comlrl.llm import LLMError as ExpertError
from feedback.context import ExternalConfig
from feedback.counters import FeedbackMetrics, default_metrics

ExpertClient = ChatClient  # the name feedback has always exported

__all__ = [
    "Completion",
    "ExpertClient",
    "ExpertError",
    "FunctionExpert",
    "ResponseCache",
    "RetryableError",
    "make_expert",
    "parse_edits",
    "parse_spec",
    "price_for",
]

SPEC_KEY = "external.expert_edits_model"
DEFAULT_CACHE_DIR = Path("~/.cache/comlrl/expert_edits")


class FunctionExpert(FunctionClient):
    """An expert backed by a Python callable, counting into `feedback.metrics()` unless given `metrics=`."""

    def __init__(self, fn: Callable[[Messages], str], model: str = "fn", *, metrics: FeedbackMetrics | None = None,
                 **kwargs: Any) -> None:
        super().__init__(fn, model, metrics=metrics if metrics is not None else default_metrics(), **kwargs)


def parse_spec(spec: str) -> ModelSpec:
    """`external.expert_edits_model` parsed by the one spec parser (errors name that key)."""
    return llm.parse_spec(spec, key=SPEC_KEY)


def expert_settings(external_cfg: ExternalConfig) -> LLMSettings:
    """The `external.expert_*` keys as client settings."""
    return LLMSettings(
        timeout_s=float(external_cfg.expert_timeout_s),
        max_retries=int(external_cfg.expert_max_retries),
        concurrency=int(external_cfg.expert_concurrency),
        max_tokens=int(external_cfg.expert_max_tokens),
        cache_dir=llm.cache_dir_setting(external_cfg.expert_cache_dir, DEFAULT_CACHE_DIR),
    )


def make_expert(
    spec: str | None,
    external_cfg: ExternalConfig,
    *,
    resolve_local: Callable[[str], str] | None = None,
    base_url: str | None = None,
    metrics: FeedbackMetrics | None = None,
    **overrides: Any,
) -> ExpertClient:
    """Build the expert named by `spec` (default: `external_cfg.expert_edits_model`).

    `resolve_local` maps a `local:` alias to a model directory (the trainer passes
    `comlrl.models.resolve_model_path`). `base_url` overrides the provider's endpoint (tests, proxies).
    `overrides` replace single `LLMSettings` fields (price_per_mtok, temperature, cache_dir...).
    """
    if spec is None:
        spec = external_cfg.expert_edits_model
    settings = replace(expert_settings(external_cfg), **overrides)
    return llm.make_client(str(spec), settings, key=SPEC_KEY, resolve_local=resolve_local, base_url=base_url,
                           metrics=metrics if metrics is not None else default_metrics())
