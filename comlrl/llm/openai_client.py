"""OpenAI chat-completions clients: OpenAI, DeepSeek and any compatible server (vLLM, llama.cpp, Ollama's /v1).

Uses the official `openai` SDK with its own transport retries (`max_retries`; it honours `retry-after-ms`,
`retry-after` and `x-should-retry`). `_call` serves experts and judges (`ChatClient.complete` retries only
replies that do not parse); `sample` serves trace backends (stop sequences, log-probs, seed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import openai

from comlrl.llm.client import ChatClient, Messages
from comlrl.llm.completion import ChatResult, Completion, Sampling
from comlrl.llm.errors import RequestFailed, RetryableError, translate_error
from comlrl.llm.settings import LLMSettings

log = logging.getLogger("comlrl.llm")


def _usage(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens; a server may leave `usage` out or null."""
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


class OpenAIClient(ChatClient):
    """`openai:<model>`, `deepseek:<model>`, `openai-compatible:<model>@<base_url>`."""

    provider = "openai"

    def __init__(self, model: str, settings: LLMSettings | None = None, *, api_key: str | None,
                 base_url: str | None, provider: str = "openai", **kwargs: Any) -> None:
        super().__init__(model, settings, endpoint=base_url or "", **kwargs)
        self.provider = provider
        self.name = f"{provider}:{model}@{base_url}" if base_url else f"{provider}:{model}"
        self._register_secret(api_key)
        self._logprobs_refused = False
        self._lock = threading.Lock()
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
            return Completion(text, *_usage(resp.usage), raw.retries_taken)
        except Exception as exc:  # noqa: BLE001 - a body that does not parse, whatever the SDK raises for it
            raise RetryableError(f"malformed response body: {type(exc).__name__}", raw.retries_taken) from None

    def _sample_request(self, messages: Messages, stop: Sequence[str], sampling: Sampling) -> Any:
        params: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": sampling.max_tokens,
                                  "temperature": sampling.temperature, "top_p": sampling.top_p}
        if stop:
            params["stop"] = list(stop)[:4]  # the OpenAI API takes at most 4
        if sampling.seed is not None:
            params["seed"] = sampling.seed
        if sampling.logprobs and not self._logprobs_refused:
            try:
                return self._client.chat.completions.create(**params, logprobs=True)
            except openai.BadRequestError:  # a server without log-prob support: ask without from now on
                with self._lock:
                    if not self._logprobs_refused:
                        log.warning("%s refused logprobs=true; continuing without log-probs", self.name)
                    self._logprobs_refused = True
        return self._client.chat.completions.create(**params)

    def sample(self, messages: Messages, *, stop: Sequence[str], sampling: Sampling) -> ChatResult:
        """One sampled completion (only the continuation of a trailing assistant message); `RequestFailed`
        names the server when the SDK gave up."""
        try:
            resp = self._sample_request(messages, stop, sampling)
        except openai.APIConnectionError as exc:
            raise RequestFailed(self.redact(f"{self.name}: cannot connect ({exc})")) from None
        except openai.APIStatusError as exc:
            raise RequestFailed(self.redact(f"{self.name}: HTTP {exc.status_code}: {str(exc)[:300]}")) from None
        if not resp.choices:
            raise RequestFailed(f"{self.name}: response without choices")
        choice = resp.choices[0]
        tokens = values = None
        content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
        if content:
            tokens = tuple(str(t.token) for t in content)
            values = tuple(float(t.logprob) for t in content)
        reason = getattr(choice, "stop_reason", None)  # vLLM: the stop string that matched (non-standard)
        hit = reason if isinstance(reason, str) and reason in stop else None
        return ChatResult(choice.message.content or "", choice.finish_reason, hit, tokens, values, *_usage(resp.usage))

    def close(self) -> None:
        super().close()
        self._client.close()
