"""`local:<path or alias>`: a transformers causal LM on this machine, so experts and judges work offline.

The model loads at construction (a bad path fails at start-up, not mid-run). Generation is greedy
and serialised by a lock: one CPU model gains nothing from concurrent calls. `max_time` bounds a call
the way a request timeout bounds an API call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from comlrl.llm.client import ChatClient, Messages
from comlrl.llm.completion import Completion
from comlrl.llm.errors import LLMError
from comlrl.llm.local_model import load_model
from comlrl.llm.settings import LLMSettings


class LocalClient(ChatClient):
    provider = "local"
    deterministic = True  # greedy decoding: retrying an unparseable reply would repeat it
    continues_answer = True  # a trailing assistant message is an answer begun: the model continues it

    def __init__(self, model: str, settings: LLMSettings | None = None, *,
                 resolve_local: Callable[[str], str] | None = None, **kwargs: Any) -> None:
        super().__init__(model, settings, **{**kwargs, "concurrency": 1})
        try:
            path = resolve_local(model) if resolve_local is not None else model
        except Exception as exc:  # noqa: BLE001 - reported as a start-up error naming the model
            raise LLMError(f"expert local:{model}: cannot resolve the model: {exc}") from None
        if not os.path.isdir(str(path)):
            raise LLMError(f"expert local:{model}: {path!s} is not a local model directory")
        self.endpoint = str(path)
        import torch

        self._torch = torch
        self._tok, self._model = load_model(str(path))
        self._model.eval()
        self._lock = threading.Lock()

    def _prompt(self, messages: Messages) -> tuple[str, bool]:
        """Prompt text, and whether the tokenizer should still add its special tokens; a trailing assistant
        message is continued, not answered."""
        if self._tok.chat_template:
            begun = bool(messages) and messages[-1]["role"] == "assistant"
            return str(self._tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=not begun,
                                                     continue_final_message=begun)), False
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:", True

    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        """Greedy generation; `json_schema` is not enforced locally (the reply parser recovers the JSON)."""
        torch = self._torch
        with self._lock, torch.inference_mode():
            text, special = self._prompt(messages)
            enc = self._tok(text, return_tensors="pt", add_special_tokens=special)
            pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else self._tok.eos_token_id
            out = self._model.generate(
                **enc, max_new_tokens=self.max_tokens, do_sample=False, max_time=self.timeout_s, pad_token_id=pad
            )
            n_in = int(enc["input_ids"].shape[1])
            new = out[0, n_in:]
            text = self._tok.decode(new, skip_special_tokens=True)
        return Completion(text, n_in, int(new.shape[0]))
