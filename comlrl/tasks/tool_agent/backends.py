"""Where the tool agent's completions come from: the local trainable model, an OpenAI-compatible server, Ollama
or a provider registered with `comlrl.registry.register_provider`.

    local:<model>                          AgentPolicies (alias, HF dir, .gguf), batched HF generate
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
from typing import Any

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


def _first_stop(text: str, stop: Sequence[str]) -> str | None:
    """The stop sequence that occurs earliest in `text` (the one generation stopped on)."""
    found = [(text.find(s), s) for s in stop if s and s in text]
    return min(found)[1] if found else None


def continued(messages: Messages, text: str) -> str:
    """The whole answer: a trailing assistant message (the prefix the server continued) plus its continuation."""
    prefix = messages[-1]["content"] if messages and messages[-1].get("role") == "assistant" else ""
    return prefix + text


class LocalBackend(ChatBackend):
    """The trainable model (`comlrl.policy.AgentPolicies`), one agent; stop strings cut generation."""

    def __init__(self, policies: Any, agent: int = 0, *, greedy: bool = False, logprobs: bool = False,
                 name: str = "local") -> None:
        self.policies, self.agent, self.greedy, self.logprobs, self.name = policies, agent, greedy, logprobs, name

    @classmethod
    def from_model(cls, model: str, *, max_new_tokens: int = 256, temperature: float = 0.7, top_p: float = 1.0,
                   max_prompt_tokens: int = 2048, dtype: str = "float32", greedy: bool = False,
                   logprobs: bool = False) -> LocalBackend:
        """A full (no adapter) model for generation only."""
        from comlrl.config import AgentsConfig, ModelConfig
        from comlrl.policy import AgentPolicies

        cfg = ModelConfig(name=model, dtype=dtype, max_new_tokens=max_new_tokens, temperature=temperature,
                          top_p=top_p, max_prompt_tokens=max_prompt_tokens)
        policies = AgentPolicies(cfg, AgentsConfig(mode="full"), 1)
        policies.module.eval()
        return cls(policies, 0, greedy=greedy, logprobs=logprobs, name=f"local:{model}")

    def complete(self, conversations: Sequence[Messages], *, stop: Sequence[str] = ()) -> list[ChatResult]:
        if not conversations:
            return []
        rows = self.policies.generate([(self.agent, list(m)) for m in conversations], 1, greedy=self.greedy,
                                      stop_strings=tuple(stop))
        self.policies.report_truncations(self.name)  # one line per batch for the prompts it had to cut
        samples = [row[0] for row in rows]
        lps: list[tuple[float, ...] | None] = [None] * len(samples)
        if self.logprobs:
            import torch

            with torch.no_grad():
                values, mask = self.policies.token_logprobs(samples)
            for i in range(len(samples)):
                n = int(mask[i].sum())
                lps[i] = tuple(round(float(v), 6) for v in values[i, :n])
        tok = self.policies.tokenizers[self.agent]
        out = []
        for s, lp in zip(samples, lps, strict=True):
            hit = _first_stop(s.text, stop) if s.finished else None
            tokens = tuple(tok.decode([t]) for t in s.completion_ids[: len(lp)]) if lp is not None else None
            out.append(ChatResult(s.text, "stop" if s.finished else "length", hit, tokens, lp,
                                  len(s.prompt_ids), len(s.completion_ids)))
        return out


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


def make_backend(spec: str, *, max_tokens: int = 512, temperature: float = 0.7, top_p: float = 1.0,
                 logprobs: bool = False, greedy: bool = False, concurrency: int = 4, timeout_s: float = 120.0,
                 max_prompt_tokens: int = 2048, seed: int | None = None) -> ChatBackend:
    """A backend from its spec (see the module docstring)."""
    kind, model, _ = parse_backend(spec)
    if kind == "local":
        return LocalBackend.from_model(model, max_new_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                       max_prompt_tokens=max_prompt_tokens, greedy=greedy, logprobs=logprobs)
    return ServerBackend(spec, max_tokens=max_tokens, temperature=0.0 if greedy else temperature, top_p=top_p,
                         logprobs=logprobs, timeout_s=timeout_s, concurrency=concurrency, seed=seed)
