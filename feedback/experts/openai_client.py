"""Experts behind the OpenAI chat-completions API: OpenAI, DeepSeek and any compatible server.

Uses the official `openai` SDK with its own transport retries (`max_retries`; it honours `retry-after-ms`,
`retry-after` and `x-should-retry`); `ExpertClient.complete` retries only replies that do not parse.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from feedback.experts.base import (
    SDK_RETRIED_STATUS,
    Completion,
    ExpertClient,
    Messages,
    RequestFailed,
    RetryableError,
)


def translate_error(exc: Exception, status_error: type, conn_error: type, max_retries: int) -> Exception:
    """SDK exception -> RetryableError for a body that did not parse, RequestFailed for what the SDK gave
    up on (counting the retries it made), else the exception itself (client errors: 400, 401...)."""
    if isinstance(exc, json.JSONDecodeError) or type(exc).__name__ == "APIResponseValidationError":
        return RetryableError(f"malformed response body: {type(exc).__name__}")
    if isinstance(exc, status_error):
        status = int(getattr(exc, "status_code", 0) or 0)
        if status in SDK_RETRIED_STATUS or status >= 500:
            response = getattr(exc, "response", None)
            told_not = getattr(response, "headers", {}).get("x-should-retry") == "false"
            return RequestFailed(f"HTTP {status}: {type(exc).__name__}: {str(exc)[:300]}",
                                 0 if told_not else max_retries)
        return exc
    if isinstance(exc, conn_error):  # includes the SDK's timeout error
        return RequestFailed(f"{type(exc).__name__}: {exc}", max_retries)
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
        self._client = openai.OpenAI(api_key=api_key or "no-key", base_url=base_url, max_retries=self.max_retries,
                                     timeout=self.timeout_s)

    def _response_format(self, json_schema: dict[str, Any] | None) -> dict[str, Any] | None:
        """OpenAI enforces a JSON schema; DeepSeek offers JSON mode only; other servers vary, so none is sent."""
        if json_schema is None:
            return None
        if self.provider == "openai":
            return {"type": "json_schema", "json_schema": {"name": "reply", "schema": json_schema, "strict": True}}
        if self.provider == "deepseek":
            return {"type": "json_object"}
        return None

    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.provider == "openai":
            params["max_completion_tokens"] = self.max_tokens  # newer OpenAI models refuse max_tokens
        else:
            params["max_tokens"] = self.max_tokens
            params["temperature"] = self.temperature
        response_format = self._response_format(json_schema)
        if response_format is not None:
            params["response_format"] = response_format
        try:
            raw = self._client.chat.completions.with_raw_response.create(**params)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise translate_error(exc, openai.APIStatusError, openai.APIConnectionError, self.max_retries) from None
        try:
            resp = raw.parse()
            text = resp.choices[0].message.content or ""
            usage = resp.usage
            return Completion(text, int(getattr(usage, "prompt_tokens", 0) or 0),
                              int(getattr(usage, "completion_tokens", 0) or 0), raw.retries_taken)
        except Exception as exc:  # noqa: BLE001 - a body that does not parse, whatever the SDK raises for it
            raise RetryableError(f"malformed response body: {type(exc).__name__}", raw.retries_taken) from None

    def close(self) -> None:
        super().close()
        self._client.close()
