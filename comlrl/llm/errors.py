"""The errors every provider client raises, and the official SDKs' rule for which failures they retried.

`LLMError` is a start-up error (bad spec, missing key, missing model): one line naming the config key.
`RequestFailed` / `RetryableError` end one request; the caller falls back, the run goes on.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import httpx

# what the Stainless-built SDKs (openai, anthropic) retry by themselves, up to max_retries, besides every 5xx;
# the Ollama client, which has no SDK, follows the same rule
SDK_RETRIED_STATUS = frozenset({408, 409, 429})


class LLMError(RuntimeError):
    """A client could not be built (bad spec, missing key, missing model); raised at start-up."""


class RequestFailed(RuntimeError):
    """The SDK gave up on a request; `retries` counts the transport retries it made first."""

    def __init__(self, message: str, retries: int = 0) -> None:
        super().__init__(message)
        self.retries = retries


class RetryableError(RequestFailed):
    """A reply worth asking for again: its body did not parse (the SDK already retried the transport)."""


class StatusError(Protocol):
    """What the SDKs' `APIStatusError` (openai's, anthropic's) declares and `translate_error` reads."""

    status_code: int
    response: httpx.Response


def translate_error(exc: Exception, status_error: type[StatusError], conn_error: type, max_retries: int
                    ) -> Exception:
    """SDK exception -> RetryableError for a body that did not parse, RequestFailed for what the SDK gave
    up on (counting the retries it made), else the exception itself (client errors: 400, 401...)."""
    if isinstance(exc, json.JSONDecodeError) or type(exc).__name__ == "APIResponseValidationError":
        return RetryableError(f"malformed response body: {type(exc).__name__}")
    if isinstance(exc, status_error):
        status = int(exc.status_code or 0)
        if status in SDK_RETRIED_STATUS or status >= 500:
            told_not = exc.response.headers.get("x-should-retry") == "false"
            return RequestFailed(f"HTTP {status}: {type(exc).__name__}: {str(exc)[:300]}",
                                 0 if told_not else max_retries)
        return exc
    if isinstance(exc, conn_error):  # includes the SDK's timeout error
        return RequestFailed(f"{type(exc).__name__}: {exc}", max_retries)
    return exc
