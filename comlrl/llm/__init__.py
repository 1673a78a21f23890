"""The one LLM client stack: expert edits, the actions judge, trace backends and measurement use it.

    spec.py          `provider:model[@base_url]` -> ModelSpec (the one spec parser), API keys
    settings.py      LLMSettings: timeouts, retries, concurrency, max tokens, cache, price, streaming
    client.py        ChatClient: reply retries, cache, concurrency, counters, redaction; `_call` per provider
    openai_client.py, anthropic_client.py, ollama_client.py, local_client.py   one provider each
    factory.py       make_client(spec, settings, key=...): the client a spec names
    local_model.py   loading and sampling a transformers model on this machine
    json_reply.py    one string per name from a JSON reply (json-repair), and its schema

A lower layer: it imports nothing from feedback, comlrl.tasks or the trainer.
"""

from __future__ import annotations

from comlrl.llm.cache import ResponseCache
from comlrl.llm.client import ChatClient, FunctionClient, Messages, Sampler
from comlrl.llm.completion import ChatResult, Completion, Sampling
from comlrl.llm.counters import Counters, CounterSink
from comlrl.llm.errors import LLMError, RequestFailed, RetryableError
from comlrl.llm.factory import make_client, provider_names
from comlrl.llm.json_reply import edits_schema, parse_edits
from comlrl.llm.prices import PRICES, price_for
from comlrl.llm.settings import LLMSettings, cache_dir_setting
from comlrl.llm.spec import FORMS, KEY_ENV, PROVIDERS, ModelSpec, parse_spec, spec_forms

__all__ = [
    "FORMS",
    "KEY_ENV",
    "PRICES",
    "PROVIDERS",
    "ChatClient",
    "ChatResult",
    "Completion",
    "CounterSink",
    "Counters",
    "FunctionClient",
    "LLMError",
    "LLMSettings",
    "Messages",
    "ModelSpec",
    "RequestFailed",
    "ResponseCache",
    "RetryableError",
    "Sampler",
    "Sampling",
    "cache_dir_setting",
    "edits_schema",
    "make_client",
    "parse_edits",
    "parse_spec",
    "price_for",
    "provider_names",
    "spec_forms",
]
