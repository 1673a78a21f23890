"""The Atropos environment tests: the tiny model's tokenizer, once per session (servers: atropos_servers.py)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from comlrl.models import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))
