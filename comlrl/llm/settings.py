"""Typed settings of one chat client: what `external.expert_*` and `task.actions.judge_*` fill in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def cache_dir_setting(raw: str | None, default: Path) -> str | None:
    """A cache-dir setting as a path: None means `default`, '', 'off', 'none', 'false' turn the cache off."""
    if raw is None:
        return str(default.expanduser())
    if str(raw).strip().lower() in ("", "off", "none", "false"):
        return None
    return str(Path(str(raw)).expanduser())


@dataclass(frozen=True)
class LLMSettings:
    """Request limits and sampling of a client. `max_retries` bounds both the SDK's transport retries and
    the retries of a reply that does not parse; `cache_dir` None disables the response cache."""

    timeout_s: float = 60.0
    max_retries: int = 3
    concurrency: int = 4
    max_tokens: int = 512
    temperature: float = 0.0
    cache_dir: str | None = None
    price_per_mtok: tuple[float, float] | None = None  # USD per million (input, output) tokens; None: 0, or the
    # list price where `make_client` builds a billed provider
    stream: bool = False  # Ollama streams the reply, so timeout_s bounds the wait for the next token (trace backends)
