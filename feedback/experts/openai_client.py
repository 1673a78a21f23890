"""Experts behind the OpenAI chat-completions API: OpenAI, DeepSeek and any compatible server.

Uses the official `openai` SDK with its own retries off (`max_retries=0`): retries, backoff and their
counting happen once, in `ExpertClient.suggest`.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from feedback.experts.base import Completion, ExpertClient, Messages, RetryableError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def translate_error(exc: Exception, status_error: type, conn_error: type) -> Exception:
    """SDK exception -> RetryableError for transient failures, else the exception itself."""
    if isinstance(exc, status_error):
        status = int(getattr(exc, "status_code", 0) or 0)
        if status in RETRY_STATUS or status >= 500:
            return RetryableError(f"HTTP {status}: {type(exc).__name__}: {str(exc)[:300]}", _retry_after(exc))
        return exc
    if isinstance(exc, conn_error):  # includes the SDK's timeout error
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, json.JSONDecodeError) or type(exc).__name__ == "APIResponseValidationError":
        return RetryableError(f"malformed response body: {type(exc).__name__}")
    return exc


class OpenAIChatExpert(ExpertClient):
    """`openai:<model>`, `deepseek:<model>`, `openai-compatible:<model>@<base_url>`."""

    provider = "openai"

    def __init__(self, model: str, *, api_key: str | None, base_url: str | None, provider: str = "openai",
                 **kwargs: Any) -> None:
        super().__init__(model, endpoint=base_url or "", **kwargs)
        self.provider = provider
        self._register_secret(api_key)
        # A compatible server without auth still needs a non-empty key for the SDK.
        self._client = openai.OpenAI(api_key=api_key or "no-key", base_url=base_url, max_retries=0,
                                     timeout=self.timeout_s)

    def _call(self, messages: Messages) -> Completion:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.provider == "openai":
            params["max_completion_tokens"] = self.max_tokens  # newer OpenAI models refuse max_tokens
        else:
            params["max_tokens"] = self.max_tokens
            params["temperature"] = self.temperature
        try:
            resp = self._client.chat.completions.create(**params)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise translate_error(exc, openai.APIStatusError, openai.APIConnectionError) from None
        try:
            text = resp.choices[0].message.content or ""
            usage = resp.usage
            return Completion(text, int(getattr(usage, "prompt_tokens", 0) or 0),
                              int(getattr(usage, "completion_tokens", 0) or 0))
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise RetryableError(f"malformed response: {type(exc).__name__}") from None

    def close(self) -> None:
        super().close()
        self._client.close()
