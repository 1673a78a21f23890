"""`ollama:<model>@<base_url>`: Ollama's native chat API (`POST <base_url>/api/chat`) over plain httpx.

Why native rather than Ollama's OpenAI-compatible `/v1`: `/api/chat` is what every Ollama serves, it takes
`options` (num_predict, stop, seed) as Ollama documents them, and it returns per-token log-probs
(`"logprobs": true`, `"top_logprobs": k` in the request; a `logprobs` list of `{token, logprob, bytes,
top_logprobs}` in the reply or in each streamed chunk). An Ollama too old to know `logprobs` ignores the
field and the reply simply has none. httpx directly, not the `ollama` package: one POST and NDJSON lines
need no SDK, and the errors stay ours to word.

There is no SDK here to retry the transport, so `OllamaChat.chat` does it, the one place that talks HTTP
to Ollama, with the official SDKs' rules: up to `max_retries` more attempts after 408, 409, 429, 5xx, a
timeout, a lost connection or Ollama's mid-stream `{"error": ...}` line; never after 400, 401, 403, 404;
`x-should-retry: true|false` overrides the status; the wait is the server's `retry-after-ms` /
`retry-after` (up to 2 minutes; a longer one is not waited for) or else 0.5 s doubling to 8 s, minus up to
25 % jitter. A reply that does not parse is not a transport failure: it is raised at once (`malformed`)
and the chat client's reply retries decide. Errors are `OllamaError`, one line naming
`ollama:<model>@<base_url>`, never the key, carrying the retries made before it.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from comlrl.llm.client import ChatClient, Messages
from comlrl.llm.completion import ChatResult, Completion, Sampling
from comlrl.llm.errors import SDK_RETRIED_STATUS, RequestFailed, RetryableError
from comlrl.llm.settings import LLMSettings

DEFAULT_MAX_RETRIES = 2  # the SDKs' default
BACKOFF_BASE_S, BACKOFF_MAX_S = 0.5, 8.0  # the SDKs' exponential backoff
MAX_RETRY_AFTER_S = 120.0  # a server asking for a longer wait is not retried (as the SDKs do)


class OllamaError(RequestFailed):
    """One failed request, as one line.

    `retryable`: a transport failure worth another attempt; `malformed`: a reply that did not parse;
    `retries`: the attempts `OllamaChat.chat` had already retried; `retry_after_s`: the server's wait.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 malformed: bool = False, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.malformed = malformed
        self.retry_after_s = retry_after_s


def retry_after_s(headers: httpx.Headers) -> float | None:
    """The server's wait in seconds: `retry-after-ms`, else `retry-after` as seconds or an HTTP date."""
    for name, per_second in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / per_second
        except ValueError:
            continue
    when = email.utils.parsedate_tz(headers.get("retry-after") or "")
    return None if when is None else email.utils.mktime_tz(when) - time.time()


def should_retry(status: int, headers: httpx.Headers) -> bool:
    """The official SDKs' rule: a too-long `retry-after` never, then `x-should-retry`, then the status."""
    wait = retry_after_s(headers)
    if wait is not None and wait > MAX_RETRY_AFTER_S:
        return False
    told = headers.get("x-should-retry")
    if told in ("true", "false"):
        return told == "true"
    return status in SDK_RETRIED_STATUS or status >= 500


def backoff_s(retry: int, server_wait_s: float | None, jitter: float) -> float:
    """Wait before retry number `retry` (0-based): the server's wait when in (0, 2 min], else 0.5 s x 2^retry
    capped at 8 s, scaled by `jitter` in [0.75, 1]."""
    if server_wait_s is not None and 0 < server_wait_s <= MAX_RETRY_AFTER_S:
        return server_wait_s
    return min(BACKOFF_BASE_S * 2.0**min(retry, 1000), BACKOFF_MAX_S) * jitter


@dataclass(frozen=True)
class OllamaReply:
    """The assembled reply (a streamed one is concatenated); log-probs only when the server sent them."""

    text: str
    done_reason: str | None  # "stop" | "length" | ... (Ollama's words, the same as OpenAI's for these)
    tokens: tuple[str, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0  # transport retries made before this reply


def normalize_base_url(base_url: str) -> str:
    """`http://host:11434`, with a trailing `/` or `/api` dropped (both are common in users' configs)."""
    url = base_url.strip().rstrip("/")
    return url[: -len("/api")] if url.endswith("/api") else url


class OllamaChat:
    """A connection to one model on one Ollama server."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 stream: bool = False, max_retries: int = DEFAULT_MAX_RETRIES) -> None:
        self.model = model
        self.max_retries = max(0, int(max_retries))
        self.base_url = normalize_base_url(base_url)
        self.name = f"ollama:{model}@{self.base_url}"
        self.stream = stream
        self._secret = api_key or ""
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s, headers=headers)

    def request_body(self, messages: Messages, *, max_tokens: int, temperature: float, top_p: float | None = None,
                     stop: Sequence[str] = (), seed: int | None = None, logprobs: bool = False,
                     top_logprobs: int = 0) -> dict[str, Any]:
        """The JSON body `/api/chat` documents: model, messages, stream, options, logprobs."""
        options: dict[str, Any] = {"num_predict": int(max_tokens), "temperature": float(temperature)}
        if top_p is not None:
            options["top_p"] = float(top_p)
        if stop:
            options["stop"] = list(stop)
        if seed is not None:
            options["seed"] = int(seed)
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "stream": self.stream,
                                "options": options}
        if logprobs:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = int(top_logprobs)
        return body

    def chat(self, messages: Messages, **kwargs: Any) -> OllamaReply:
        """One reply, with transport retries (module docstring); see `request_body` for the keyword arguments.

        Raises `OllamaError` (its `retries` set) when a failure is not retryable or the retries ran out."""
        body = self.request_body(messages, **kwargs)
        for retry in range(self.max_retries + 1):
            try:
                return replace(self._attempt(body), retries=retry)
            except OllamaError as exc:
                exc.retries = retry
                if not exc.retryable or retry == self.max_retries:
                    raise
                time.sleep(backoff_s(retry, exc.retry_after_s, 1.0 - 0.25 * random.random()))
        raise AssertionError("unreachable")

    def _attempt(self, body: dict[str, Any]) -> OllamaReply:
        """One HTTP request; raises `OllamaError`."""
        try:
            if self.stream:
                with self._client.stream("POST", "/api/chat", json=body) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        raise self._status_error(resp)
                    return assemble(self._lines(resp.iter_lines()), self._fail)
            resp = self._client.post("/api/chat", json=body)
            if resp.status_code != 200:
                raise self._status_error(resp)
            return assemble(self._lines([resp.text]), self._fail)
        except httpx.TimeoutException as exc:
            raise self._fail(f"timed out ({type(exc).__name__})", retryable=True) from None
        except httpx.TransportError as exc:  # connection refused, reset, DNS...
            raise self._fail(f"cannot connect ({type(exc).__name__}: {exc})", retryable=True) from None

    def _lines(self, chunks: Iterable[str]) -> Iterator[dict[str, Any]]:
        """NDJSON objects (a non-streamed reply is one line); a line that is not JSON is a malformed reply."""
        for chunk in chunks:
            for line in chunk.splitlines():
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    raise self._fail(f"malformed reply line: {line[:120]!r}", malformed=True) from None
                if not isinstance(obj, dict):
                    raise self._fail(f"malformed reply line: {line[:120]!r}", malformed=True)
                yield obj

    def _status_error(self, resp: httpx.Response) -> OllamaError:
        try:
            detail = str(resp.json().get("error") or "")
        except (ValueError, AttributeError):
            detail = resp.text
        detail = " ".join(detail.split())[:300] or resp.reason_phrase
        status = resp.status_code
        if status == 404 and "not found" in detail and self.model in detail:
            detail += f" (run `ollama pull {self.model}` on that server)"
        return self._fail(f"HTTP {status}: {detail}", status=status, retryable=should_retry(status, resp.headers),
                          retry_after_s=retry_after_s(resp.headers))

    def _fail(self, what: str, **kwargs: Any) -> OllamaError:
        text = f"{self.name}: {what}"
        if self._secret:
            text = text.replace(self._secret, "***")
        return OllamaError(text, **kwargs)

    def close(self) -> None:
        self._client.close()


def assemble(chunks: Iterable[dict[str, Any]], fail: Callable[..., OllamaError]) -> OllamaReply:
    """Concatenate chunks into one reply; an `{"error": ...}` chunk (Ollama's mid-stream failure) raises."""
    parts: list[str] = []
    tokens: list[str] = []
    values: list[float] = []
    seen_logprobs = False
    last: dict[str, Any] = {}
    for chunk in chunks:
        if chunk.get("error"):
            raise fail(f"error: {' '.join(str(chunk['error']).split())[:300]}", retryable=True)
        message = chunk.get("message") or {}
        parts.append(str(message.get("content") or ""))
        entries = chunk.get("logprobs")
        if isinstance(entries, list):
            seen_logprobs = seen_logprobs or bool(entries)
            for e in entries:
                tokens.append(str(e.get("token", "")))
                values.append(float(e.get("logprob", 0.0)))
        last = chunk
        if chunk.get("done"):
            break
    if not last.get("done"):
        raise fail("reply ended before `done`", retryable=True)
    return OllamaReply("".join(parts), last.get("done_reason"), tuple(tokens) if seen_logprobs else None,
                       tuple(values) if seen_logprobs else None, int(last.get("prompt_eval_count") or 0),
                       int(last.get("eval_count") or 0))


class OllamaClient(ChatClient):
    """An expert, judge or trace backend on `ollama:<model>@<base_url>`: `OllamaChat` retries the transport
    up to `max_retries`, as the SDK clients do; `ChatClient.complete` retries replies that do not parse.
    `settings.stream`: trace backends stream, so the timeout bounds the wait for the next token."""

    provider = "ollama"

    def __init__(self, model: str, settings: LLMSettings | None = None, *, base_url: str,
                 api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, settings, endpoint=normalize_base_url(base_url), **kwargs)
        self._register_secret(api_key)
        self._chat = OllamaChat(model, base_url, api_key=api_key, timeout_s=self.timeout_s,
                                max_retries=self.max_retries, stream=self.settings.stream)
        self.name = self._chat.name

    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        # json_schema is not sent: Ollama before 0.5 rejects a schema in `format`; unparseable replies are retried
        try:
            reply = self._chat.chat(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        except OllamaError as exc:
            if exc.malformed:
                raise RetryableError(str(exc), exc.retries) from None
            raise RequestFailed(str(exc), exc.retries) from None
        return Completion(reply.text, reply.prompt_tokens, reply.completion_tokens, reply.retries)

    def sample(self, messages: Messages, *, stop: Sequence[str], sampling: Sampling) -> ChatResult:
        """One sampled completion (only the continuation of a trailing assistant message); raises OllamaError."""
        r = self._chat.chat(messages, stop=stop, max_tokens=sampling.max_tokens, temperature=sampling.temperature,
                            top_p=sampling.top_p, seed=sampling.seed, logprobs=sampling.logprobs)
        return ChatResult(r.text, r.done_reason, None, r.tokens, r.logprobs, r.prompt_tokens, r.completion_tokens)

    def close(self) -> None:
        super().close()
        self._chat.close()
