"""The provider-independent half of every chat client (experts, judges): reply retries, cache, concurrency,
counters.

A provider implements one method, `_call(messages, json_schema) -> Completion`: one request through its
official SDK, whose own retries (`max_retries`: 408/409/429/5xx, timeouts, connection errors, with the
server's `retry-after(-ms)` and `x-should-retry` honoured) cover the transport; `ollama:` has no SDK and
its client retries by the same rules (`comlrl/llm/ollama_client.py`). What the SDKs cannot
judge lives here, once, for every provider:

- retries of a reply that does not parse (malformed body, unusable edits); a request the SDK gave up
  on, or a client error (400, 401, 404...), ends at once and the caller falls back;
- an on-disk cache keyed by provider, model, endpoint and prompt (never the key), written only for
  replies that parsed, so a bad reply is not replayed forever;
- a thread pool for concurrent requests, with identical prompts in one batch sent once;
- token, cost, latency, call, retry, failure counters (feedback passes its `FeedbackMetrics`);
- redaction: secrets registered by the provider are replaced by `***` in every message we log or
  raise, whatever the SDK put in its exception text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from comlrl.llm.cache import ResponseCache
from comlrl.llm.completion import ChatResult, Completion, Sampling
from comlrl.llm.counters import Counters, CounterSink
from comlrl.llm.errors import RequestFailed, RetryableError
from comlrl.llm.json_reply import edits_schema, parse_edits
from comlrl.llm.settings import LLMSettings

log = logging.getLogger("comlrl.llm")

Messages = list[dict[str, str]]
T = TypeVar("T")


class ChatClient(ABC):
    """Base class of every chat client; subclasses set `provider` and implement `_call`."""

    provider = "base"
    deterministic = False  # True: the same prompt always gives the same reply, so an unparseable one is final
    continues_answer = False  # True: a trailing assistant message is continued (the reply is what follows it)

    def __init__(self, model: str, settings: LLMSettings | None = None, *, endpoint: str = "",
                 metrics: CounterSink | None = None, **fields: Any) -> None:
        """`fields` replace single settings (`temperature=0.2`, `cache_dir=None`...)."""
        s = replace(settings or LLMSettings(), **fields)
        self.settings = s
        self.model = model
        self.endpoint = endpoint
        self.timeout_s = float(s.timeout_s)
        self.max_retries = max(0, int(s.max_retries))
        self.concurrency = max(1, int(s.concurrency))
        self.max_tokens = int(s.max_tokens)
        self.temperature = float(s.temperature)
        self.cache = ResponseCache(s.cache_dir) if s.cache_dir else None
        self.price_per_mtok = s.price_per_mtok or (0.0, 0.0)
        self.counters: CounterSink = metrics if metrics is not None else Counters()
        self._secrets: tuple[str, ...] = ()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # ----- what a provider implements -------------------------------------------------------------

    @abstractmethod
    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        """One request (the SDK retries its transport); `json_schema` asks for structured output where the
        provider offers it. Raise `RetryableError` for a body that did not parse, anything else to give up."""

    # ----- shared behaviour -----------------------------------------------------------------------

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:  # never shows the key: it lives only inside the SDK client
        return f"{type(self).__name__}(spec={self.spec!r}, endpoint={self.endpoint!r})"

    def metrics(self, reset: bool = False) -> dict[str, float]:
        """Snapshot of the counters this client updates (feedback's experts share `feedback.metrics()`)."""
        return self.counters.snapshot(reset=reset)

    def _register_secret(self, secret: str | None) -> None:
        if secret:
            self._secrets = (*self._secrets, secret)

    def redact(self, text: str) -> str:
        """Replace every registered secret (and its long fragments) by `***`."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
            if len(secret) >= 16:  # SDKs sometimes print a key's prefix or suffix
                text = text.replace(secret[:12], "***").replace(secret[-12:], "***")
        return text

    def cache_key(self, messages: Messages) -> str:
        """Provider + model + endpoint + sampling + prompt; the key is deliberately not part of it."""
        ident = {"v": 1, "provider": self.provider, "model": self.model, "endpoint": self.endpoint,
                 "max_tokens": self.max_tokens, "temperature": self.temperature, "messages": messages}
        return hashlib.sha256(json.dumps(ident, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _cost(self, c: Completion) -> float:
        pin, pout = self.price_per_mtok
        return (c.input_tokens * pin + c.output_tokens * pout) / 1e6

    def suggest(self, messages: Messages, role_names: list[str]) -> dict[str, str] | None:
        """Edits per role for one prompt, or None after all attempts failed (the caller falls back)."""
        return self.complete(messages, lambda text: parse_edits(text, role_names) or None,
                             json_schema=edits_schema(role_names))

    def complete(self, messages: Messages, parse: Callable[[str], T | None], *,
                 counter_prefix: str = "expert", json_schema: dict[str, Any] | None = None) -> T | None:
        """One chat request with this client's reply retries, cache and counters.

        `parse` turns the reply text into a result; None (or any falsy value) marks the reply unusable,
        which counts as a parse failure and is retried. Returns None after all attempts failed.
        Counters are named `<counter_prefix>/calls` etc. (`expert/...` for `suggest`); `calls` and
        `retries` include the SDK's transport retries.
        """
        m = self.counters
        p = counter_prefix
        m.inc(f"{p}/requests")
        key = self.cache_key(messages)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                cached = parse(hit.text)
                if cached:
                    m.inc(f"{p}/cache_hits")
                    return cached
        # a deterministic client would repeat an unusable reply: one attempt, and the log says so
        attempts = 1 if self.deterministic else self.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                m.inc(f"{p}/retries")
            t0 = time.perf_counter()
            try:
                m.inc(f"{p}/calls")
                completion = self._call(messages, json_schema)
            except RetryableError as exc:
                self._count_sdk_retries(p, exc.retries)
                m.inc(f"{p}/errors")
                m.inc(f"{p}/latency_s", time.perf_counter() - t0)
                log.warning("expert %s: attempt %d/%d failed: %s", self.spec, attempt + 1, attempts,
                            self.redact(str(exc))[:400])
            except Exception as exc:  # noqa: BLE001 - any other error ends this request, never the run
                self._count_sdk_retries(p, exc.retries if isinstance(exc, RequestFailed) else 0)
                m.inc(f"{p}/errors")
                m.inc(f"{p}/failures")
                m.inc(f"{p}/latency_s", time.perf_counter() - t0)
                log.warning("expert %s: request failed, not retried: %s: %s", self.spec, type(exc).__name__,
                            self.redact(str(exc))[:400])
                return None
            else:
                self._count_sdk_retries(p, completion.retries)
                m.inc(f"{p}/latency_s", time.perf_counter() - t0)
                m.inc(f"{p}/input_tokens", completion.input_tokens)
                m.inc(f"{p}/output_tokens", completion.output_tokens)
                m.inc(f"{p}/cost_usd", self._cost(completion))
                result = parse(completion.text)
                if result:
                    if self.cache is not None:
                        self.cache.put(key, completion, self.spec)
                    return result
                m.inc(f"{p}/parse_failures")
                m.inc(f"{p}/errors")
                log.warning("expert %s: attempt %d/%d gave no parseable %s (%d chars)", self.spec, attempt + 1,
                            attempts, "edits" if p == "expert" else "reply", len(completion.text))
        m.inc(f"{p}/failures")
        return None

    def _count_sdk_retries(self, prefix: str, retries: int) -> None:
        """Each SDK retry was one more request, after one more failed attempt."""
        for name in ("calls", "retries", "errors"):
            self.counters.inc(f"{prefix}/{name}", retries)

    def suggest_many(self, items: Sequence[tuple[Messages, list[str]]]) -> list[dict[str, str] | None]:
        """`suggest` for a batch, concurrently; identical prompts are sent once."""
        keys = [self.cache_key(msgs) + "|" + "|".join(roles) for msgs, roles in items]
        results = self._map_unique(keys, lambda i: self.suggest(*items[i]))
        return [dict(r) if r is not None else None for r in results]

    def complete_many(self, items: Sequence[Messages], parse: Callable[[str], T | None], *,
                      counter_prefix: str = "expert") -> list[T | None]:
        """`complete` for a batch, concurrently; identical prompts are sent once (and share a result)."""
        keys = [self.cache_key(msgs) for msgs in items]
        return self._map_unique(keys, lambda i: self.complete(items[i], parse, counter_prefix=counter_prefix))

    def _map_unique(self, keys: list[str], fn: Callable[[int], Any]) -> list[Any]:
        """fn(first index) once per distinct key, on the pool; results spread back in input order."""
        unique: dict[str, int] = {}
        for i, k in enumerate(keys):
            unique.setdefault(k, i)
        jobs = list(unique.items())
        if not jobs:
            return []
        if self.concurrency == 1 or len(jobs) == 1:
            results = [fn(i) for _, i in jobs]
        else:
            pool = self._executor()
            results = list(pool.map(lambda ki: fn(ki[1]), jobs))
        by_key = {k: r for (k, _), r in zip(jobs, results, strict=True)}
        return [by_key[k] for k in keys]

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="expert")
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FunctionClient(ChatClient):
    """A client backed by a Python callable: for tests and for plugging in custom logic offline."""

    provider = "function"

    def __init__(self, fn: Callable[[Messages], str], model: str = "fn", **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self._fn = fn

    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        return Completion(self._fn(messages))


@runtime_checkable
class Sampler(Protocol):
    """A server a trace backend samples from (`OpenAIClient`, `OllamaClient`, or a registered provider's client
    that has `name` and `sample`): one conversation, one result.

    Raises `RequestFailed` (one line naming the server, never the key) when the request failed.
    """

    name: str

    def sample(self, messages: Messages, *, stop: Sequence[str], sampling: Sampling) -> ChatResult: ...

    def close(self) -> None: ...
