"""`anthropic:<model>`: the Messages API through the official `anthropic` SDK (its retries off)."""

from __future__ import annotations

from typing import Any

import anthropic

from feedback.experts.base import Completion, ExpertClient, Messages, RetryableError
from feedback.experts.openai_client import translate_error


class AnthropicExpert(ExpertClient):
    """System prompt goes in `system=`, the rest as alternating user/assistant messages."""

    provider = "anthropic"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, endpoint=base_url or "", **kwargs)
        self._register_secret(api_key)
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=self.timeout_s)

    def _call(self, messages: Messages) -> Completion:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        chat = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        # anthropic 2.x has no `temperature` argument any more; the model's default sampling applies.
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": chat}
        if system:
            params["system"] = system
        try:
            resp = self._client.messages.create(**params)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise translate_error(exc, anthropic.APIStatusError, anthropic.APIConnectionError) from None
        try:
            text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
            usage = resp.usage
            return Completion(text, int(getattr(usage, "input_tokens", 0) or 0),
                              int(getattr(usage, "output_tokens", 0) or 0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise RetryableError(f"malformed response: {type(exc).__name__}") from None

    def close(self) -> None:
        super().close()
        self._client.close()
