"""An Atropos server class on Ollama's native `POST /api/chat`, through the project's Ollama client.

Why not Atropos's `OpenAIServer` on Ollama's `/v1`: that route has no per-token log-probs, which a trainer
needs for importance ratios; `/api/chat` returns them (`"logprobs": true`), and the project already
speaks it (`comlrl.llm.ollama_client.OllamaChat`: options, streaming, the SDKs' retry rules, errors that
name the model and never the key). This class only translates between Atropos's calls and that client:

* `_chat_completion_wrapper` -> an OpenAI `ChatCompletion` (n choices = n concurrent requests, since
  Ollama has no `n`; `logprobs.content` filled when Ollama returned them);
* `_completion_wrapper` -> an OpenAI `Completion`; the prompt goes as one user message (the client speaks
  /api/chat only, so Ollama applies the model's chat template to it);
* `_tokens_and_logprobs_completion_wrapper` -> (prompt ids, output ids, output log-probs, finish
  reasons), the tuple Atropos's token-level code reads; Ollama reports tokens as text, so each piece is
  mapped back to one id of `--openai.tokenizer_name` (the served model's tokenizer); a piece that is not
  exactly one token of it raises, rather than misalign ids and log-probs.

How an env uses it: the project's envs take the config switch `--env.server_api ollama` (their
`__init__` sets `server_cls` before `BaseEnv.__init__` builds the server manager); any other env
can set `server_cls = OllamaAPIServer` as a class attribute. `--openai.base_url` is the Ollama root
(`http://127.0.0.1:11434`; a trailing `/v1` or `/api` is dropped), `--openai.model_name` the Ollama model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from atroposlib.envs.server_handling.server_baseline import APIServer, APIServerConfig, ReasoningConfig
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from comlrl.llm.ollama_client import OllamaChat, OllamaReply

FINISH_REASONS = ("stop", "length")  # OpenAI's words that Ollama's done_reason shares; anything else is "stop"


def ollama_root(base_url: str | None) -> str:
    """The server root from an Atropos-style base URL (`.../v1` is what users write for OpenAI routes)."""
    url = (base_url or "http://127.0.0.1:11434").strip().rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def finish_reason(reply: OllamaReply) -> str:
    return reply.done_reason if reply.done_reason in FINISH_REASONS else "stop"


class OllamaAPIServer(APIServer):
    """One Ollama model as an Atropos server (see the module docstring)."""

    def __init__(self, config: APIServerConfig, reasoning_config: ReasoningConfig | None = None) -> None:
        self.chat = OllamaChat(config.model_name, ollama_root(config.base_url), api_key=config.api_key or None,
                               timeout_s=float(config.timeout), stream=False)
        self._tokenizer: Any = None
        self._piece_ids: dict[str, int] | None = None
        super().__init__(config, reasoning_config=reasoning_config)

    # ---- plumbing ---------------------------------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        """`tokenizer_name` (or the model name when "none"), loaded on first use: only token ids need it."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            name = self.config.tokenizer_name
            self._tokenizer = AutoTokenizer.from_pretrained(self.config.model_name if name == "none" else name)
        return self._tokenizer

    def options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """OpenAI-style keyword arguments as `OllamaChat.chat`'s (max_tokens, temperature, top_p, stop, seed)."""
        stop = kwargs.get("stop") or ()
        out: dict[str, Any] = {
            "max_tokens": int(kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
                              or kwargs.get("max_new_tokens") or 512),
            "temperature": float(kwargs.get("temperature", 1.0)),
            "top_p": kwargs.get("top_p"),
            "stop": [stop] if isinstance(stop, str) else list(stop),
            "seed": kwargs.get("seed"),
        }
        if kwargs.get("logprobs"):
            out["logprobs"] = True
            out["top_logprobs"] = int(kwargs.get("top_logprobs") or 0)
        return out

    async def replies(self, messages: list[dict[str, Any]], n: int, opts: dict[str, Any]) -> list[OllamaReply]:
        """n replies, requested concurrently (Ollama has no `n`); the blocking client runs in threads."""
        return list(await asyncio.gather(*[asyncio.to_thread(self.chat.chat, messages, **opts)
                                           for _ in range(max(1, n))]))

    async def check_server_status_task(self, chat_completion: bool = True) -> None:
        """Healthy while a one-token chat succeeds (as Atropos's OpenAI server checks), every second."""
        while True:
            try:
                await asyncio.to_thread(self.chat.chat, [{"role": "user", "content": "hi"}], max_tokens=1,
                                        temperature=0.0)
                self.server_healthy = True
            except Exception:  # noqa: BLE001 - any failure means unhealthy; the next check tries again
                self.server_healthy = False
            await asyncio.sleep(1)

    # ---- Atropos's three calls --------------------------------------------------------------------------
    async def _chat_completion_wrapper(self, **kwargs: Any) -> ChatCompletion:
        messages = kwargs.get("messages")
        if not messages:
            raise ValueError("messages are required for a chat completion")
        replies = await self.replies(list(messages), int(kwargs.get("n") or 1), self.options(kwargs))
        choices = []
        for i, r in enumerate(replies):
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": r.text},
                                      "finish_reason": finish_reason(r)}
            if r.logprobs is not None:
                choice["logprobs"] = {"content": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                    for t, lp in zip(r.tokens or (), r.logprobs, strict=True)]}
            choices.append(choice)
        return ChatCompletion.model_validate({
            "id": "ollama-chat", "object": "chat.completion", "created": 0, "model": self.config.model_name,
            "choices": choices, "usage": usage(replies)})

    async def _completion_wrapper(self, **kwargs: Any) -> Completion:
        prompt = kwargs.get("prompt")
        if prompt is None:
            raise ValueError("a prompt is required for a completion")
        replies = await self.replies([{"role": "user", "content": str(prompt)}], int(kwargs.get("n") or 1),
                                     self.options(kwargs))
        choices = []
        for i, r in enumerate(replies):
            logprobs = None
            if r.logprobs is not None:
                logprobs = {"tokens": list(r.tokens or ()), "token_logprobs": list(r.logprobs)}
            choices.append({"index": i, "text": r.text, "finish_reason": finish_reason(r), "logprobs": logprobs})
        return Completion.model_validate({"id": "ollama-completion", "object": "text_completion", "created": 0,
                                          "model": self.config.model_name, "choices": choices,
                                          "usage": usage(replies)})

    async def _tokens_and_logprobs_completion_wrapper(self, **kwargs: Any) -> tuple[list, list, list, list]:
        """(prompt ids, [output ids], [output log-probs], [finish reasons]) for n samples of a prompt."""
        if kwargs.get("input_ids") is not None:
            prompt_ids = [int(t) for t in kwargs["input_ids"]]
            prompt = self.tokenizer.decode(prompt_ids)
        elif kwargs.get("prompt") is not None:
            prompt = str(kwargs["prompt"])
            prompt_ids = list(self.tokenizer.encode(prompt, add_special_tokens=False))
        else:
            raise ValueError("a prompt or input_ids is required")
        opts = {**self.options(kwargs), "logprobs": True}
        replies = await self.replies([{"role": "user", "content": prompt}], int(kwargs.get("n") or 1), opts)
        out_ids, out_logprobs = [], []
        for r in replies:
            if r.logprobs is None:
                raise ValueError(f"{self.chat.name}: the reply has no log-probs (this Ollama does not support "
                                 "`logprobs`; upgrade it)")
            out_ids.append(self.piece_ids(r.tokens or ()))
            out_logprobs.append(list(r.logprobs))
        return prompt_ids, out_ids, out_logprobs, [finish_reason(r) for r in replies]

    def piece_ids(self, pieces: Sequence[str]) -> list[int]:
        """One tokenizer id per text piece Ollama returned; a piece that is not one token raises."""
        if self._piece_ids is None:
            tok = self.tokenizer
            table: dict[str, int] = {}
            for i, text in enumerate(tok.batch_decode([[i] for i in range(len(tok))])):
                table.setdefault(text, i)  # the lowest id of equal texts
            self._piece_ids = table
        ids = []
        for piece in pieces:
            if piece not in self._piece_ids:
                raise ValueError(f"{self.chat.name}: token {piece!r} is not one token of the tokenizer "
                                 f"{self.config.tokenizer_name!r} (set --openai.tokenizer_name to the served model's)")
            ids.append(self._piece_ids[piece])
        return ids


def usage(replies: Sequence[OllamaReply]) -> dict[str, int]:
    prompt = replies[0].prompt_tokens if replies else 0
    completion = sum(r.completion_tokens for r in replies)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
