"""`anthropic:<model>`: the Messages API through the official `anthropic` SDK (its transport retries on)."""

from __future__ import annotations

from typing import Any

import anthropic

from comlrl.llm.client import ChatClient, Messages
from comlrl.llm.completion import Completion
from comlrl.llm.errors import RetryableError, translate_error
from comlrl.llm.settings import LLMSettings


class AnthropicClient(ChatClient):
    """System prompt goes in `system=`, the rest as alternating user/assistant messages; a JSON schema
    goes in `output_config.format` (structured outputs)."""

    provider = "anthropic"

    def __init__(self, model: str, settings: LLMSettings | None = None, *, api_key: str,
                 base_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, settings, endpoint=base_url or "", **kwargs)
        self._register_secret(api_key)
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=self.max_retries,
                                           timeout=self.timeout_s)

    def _call(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> Completion:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        chat = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        # anthropic 2.x has no `temperature` argument any more; the model's default sampling applies.
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": chat}
        if system:
            params["system"] = system
        if json_schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": json_schema}}
        try:
            raw = self._client.messages.with_raw_response.create(**params)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise translate_error(exc, anthropic.APIStatusError, anthropic.APIConnectionError,
                                  self.max_retries) from None
        try:
            resp = raw.parse()
            text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
            usage = resp.usage
            return Completion(text, int(getattr(usage, "input_tokens", 0) or 0),
                              int(getattr(usage, "output_tokens", 0) or 0), raw.retries_taken)
        except Exception as exc:  # noqa: BLE001 - a body that does not parse, whatever the SDK raises for it
            raise RetryableError(f"malformed response body: {type(exc).__name__}", raw.retries_taken) from None

    def close(self) -> None:
        super().close()
        self._client.close()
