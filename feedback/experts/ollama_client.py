"""`ollama:<model>@<base_url>`: Ollama's native chat API (`POST <base_url>/api/chat`) over plain httpx.

Why native rather than Ollama's OpenAI-compatible `/v1`: `/api/chat` is what every Ollama serves, it takes
`options` (num_predict, stop, seed) as Ollama documents them, and it returns per-token log-probs
(`"logprobs": true`, `"top_logprobs": k` in the request; a `logprobs` list of `{token, logprob, bytes,
top_logprobs}` in the reply or in each streamed chunk). An Ollama too old to know `logprobs` ignores the
field and the reply simply has none. httpx directly, not the `ollama` package: one POST and NDJSON lines
need no SDK, and the errors stay ours to word.

`OllamaChat` makes exactly one attempt per call and raises `OllamaError`, one line naming
`ollama:<model>@<base_url>` and never the key; the expert client (`OllamaExpert`, below) and the rollout
backend (`comlrl.agentic.backends.OllamaBackend`) decide about retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from feedback.experts.base import Completion, ExpertClient, Messages, RetryableError

KEY_ENV = "OLLAMA_API_KEY"  # optional: ollama.com and authenticating proxies want a bearer token
RETRY_STATUS = frozenset({408, 425, 429})


class OllamaError(RuntimeError):
    """One failed request, as one line; `retryable` for timeouts, lost connections, 429 and 5xx."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True)
class OllamaReply:
    """The assembled reply (a streamed one is concatenated); log-probs only when the server sent them."""

    text: str
    done_reason: str | None  # "stop" | "length" | ... (Ollama's words, the same as OpenAI's for these)
    tokens: tuple[str, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


def normalize_base_url(base_url: str) -> str:
    """`http://host:11434`, with a trailing `/` or `/api` dropped (both are common in users' configs)."""
    url = base_url.strip().rstrip("/")
    return url[: -len("/api")] if url.endswith("/api") else url


class OllamaChat:
    """A connection to one model on one Ollama server."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 stream: bool = False) -> None:
        self.model = model
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
        """One request (see `request_body` for the keyword arguments); raises `OllamaError`."""
        body = self.request_body(messages, **kwargs)
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
                    raise self._fail(f"malformed reply line: {line[:120]!r}", retryable=True) from None
                if not isinstance(obj, dict):
                    raise self._fail(f"malformed reply line: {line[:120]!r}", retryable=True)
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
        retry = status in RETRY_STATUS or status >= 500
        return self._fail(f"HTTP {status}: {detail}", status=status, retryable=retry)

    def _fail(self, what: str, *, status: int | None = None, retryable: bool = False) -> OllamaError:
        text = f"{self.name}: {what}"
        if self._secret:
            text = text.replace(self._secret, "***")
        return OllamaError(text, status=status, retryable=retryable)

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


class OllamaExpert(ExpertClient):
    """An expert (or judge) on `ollama:<model>@<base_url>`; retries happen in `ExpertClient.complete`."""

    provider = "ollama"

    def __init__(self, model: str, *, base_url: str, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, endpoint=normalize_base_url(base_url), **kwargs)
        self._register_secret(api_key)
        self._chat = OllamaChat(model, base_url, api_key=api_key, timeout_s=self.timeout_s)

    def _call(self, messages: Messages) -> Completion:
        try:
            reply = self._chat.chat(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        except OllamaError as exc:
            if exc.retryable:
                raise RetryableError(str(exc)) from None
            raise
        return Completion(reply.text, reply.prompt_tokens, reply.completion_tokens)

    def close(self) -> None:
        super().close()
        self._chat.close()
