"""Where the tool agent's completions come from: the local trainable model, an OpenAI-compatible server, Ollama
or a provider registered with `comlrl.config.registry.register_provider`.

    local:<model>                          AgentPolicies (alias, HF dir, .gguf), batched HF generate
                                           (comlrl/cli/trace_backends.py: it loads the trained model's stack)
    openai-compatible:<model>@<base_url>   official `openai` SDK against Ollama's /v1, vLLM, llama.cpp...
                                           key from $OPENAI_COMPATIBLE_API_KEY (optional)
    ollama:<model>@<base_url>              Ollama's native /api/chat (comlrl.llm.ollama_client), with
                                           per-token log-probs; key from $OLLAMA_API_KEY (optional)
    <registered>:<model>                   the registered factory's client, if it can `sample` (comlrl.llm.Sampler)

The spec is parsed by `comlrl.llm.parse_spec` and every server client is built by `comlrl.llm.make_client`,
the one place that knows the providers (built-in and registered), shared with expert edits and judges.
All take a batch of conversations and stop sequences and return one `ChatResult` each, with per-token
log-probs when asked for and available (the local model always can; a server only if it implements
`logprobs`, otherwise they are None). Servers strip the stop sequence from the text; the local model keeps
it. `turns.analyze_turn` reads both the same way. A conversation ending in an assistant message is an
answer prefix: the model continues it and the returned text starts with it (servers return only the
continuation; `continued` puts the prefix back).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from comlrl.llm import (
    ChatResult,
    LLMError,
    LLMSettings,
    Messages,
    RequestFailed,
    Sampler,
    Sampling,
    make_client,
    parse_spec,
)
from comlrl.llm.factory import REGISTERED


class BackendError(ValueError):
    """A bad backend spec or a backend that cannot be reached; one line naming the backend."""


class ChatBackend(ABC):
    """A batch of conversations in, one completion each out."""

    name: str = "backend"

    @abstractmethod
    def complete(self, conversations: Sequence[Messages], *, stop: Sequence[str] = ()) -> list[ChatResult]:
        """One `ChatResult` per conversation, in order."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release clients and models."""

    def __enter__(self) -> ChatBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_stop(text: str, stop: Sequence[str]) -> str | None:
    """The stop sequence that occurs earliest in `text` (the one generation stopped on)."""
    found = [(text.find(s), s) for s in stop if s and s in text]
    return min(found)[1] if found else None


def continued(messages: Messages, text: str) -> str:
    """The whole answer: a trailing assistant message (the prefix the server continued) plus its continuation."""
    prefix = messages[-1]["content"] if messages and messages[-1].get("role") == "assistant" else ""
    return prefix + text


class ServerBackend(ChatBackend):
    """A `comlrl.llm` client for a server spec, sampled with fixed options; the requests of a batch run concurrently.

    Ollama replies are streamed, so `timeout_s` bounds the wait for the next token, not a whole long generation.
    """

    def __init__(self, spec: str, *, max_tokens: int = 512, temperature: float = 0.7, top_p: float = 1.0,
                 logprobs: bool = False, timeout_s: float = 120.0, concurrency: int = 4, max_retries: int = 2,
                 seed: int | None = None) -> None:
        settings = LLMSettings(timeout_s=timeout_s, max_retries=max_retries, concurrency=concurrency, stream=True)
        try:
            client = make_client(spec, settings, key="--backend")
        except LLMError as exc:
            raise BackendError(f"backend error: {exc}") from None
        if not isinstance(client, Sampler):
            client.close()
            raise BackendError(f"backend error: --backend={spec!r}: {type(client).__name__} cannot sample (a trace "
                               "backend's client needs `name` and `sample(messages, *, stop, sampling)`)")
        self.client, self.name = client, client.name
        self.sampling = Sampling(max_tokens, temperature, top_p, seed, logprobs)
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="chat")

    def _one(self, messages: Messages, stop: Sequence[str]) -> ChatResult:
        try:
            r = self.client.sample(messages, stop=stop, sampling=self.sampling)
        except RequestFailed as exc:
            raise BackendError(f"backend error: {exc}") from None
        return ChatResult(continued(messages, r.text), r.finish_reason, r.stop, r.tokens, r.logprobs,
                          r.prompt_tokens, r.completion_tokens)

    def complete(self, conversations: Sequence[Messages], *, stop: Sequence[str] = ()) -> list[ChatResult]:
        return list(self._pool.map(lambda m: self._one(list(m), stop), conversations))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.client.close()


BACKENDS = ("local", "openai-compatible", "ollama")  # built in; registered providers are accepted too


def parse_backend(spec: str) -> tuple[str, str, str | None]:
    """`local:<model>` -> ("local", model, None); `openai-compatible:` / `ollama:<model>@<url>` -> (kind, model, url);
    `<registered>:<model>` -> (name, model, None)."""
    try:
        parsed = parse_spec(spec, key="--backend", providers=(*BACKENDS, *REGISTERED))
    except LLMError as exc:
        raise BackendError(f"backend error: {exc}") from None
    return parsed.provider, parsed.model, parsed.base_url
