"""What a provider returns: a `Completion` for a structured request, a `ChatResult` for a sampled one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Completion:
    """One successful reply: its text and the tokens the provider billed."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0  # transport retries the SDK made before this reply


@dataclass(frozen=True)
class Sampling:
    """How a trace backend samples: the request options both servers (OpenAI-compatible, Ollama) take."""

    max_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int | None = None
    logprobs: bool = False


@dataclass(frozen=True)
class ChatResult:
    """One completion; `stop` is the stop sequence that ended it when known (a server may not say)."""

    text: str
    finish_reason: str | None = None  # "stop" | "length" | ... (OpenAI's vocabulary)
    stop: str | None = None
    tokens: tuple[str, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
