"""Every test: offline hubs, no real API keys or endpoints, shared helpers (tests/llm_server.py) importable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

KEY_VARS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "OLLAMA_API_KEY",
            "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _clean_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's real keys or endpoints (a test that needs one sets its own)."""
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
