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
# `python scripts/x.py` in a test's subprocess imports THIS checkout's packages, not whichever checkout the
# venv's editable install points at (the shims in scripts/ no longer edit sys.path)
ROOT = str(Path(HERE).parent)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

KEY_VARS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "OLLAMA_API_KEY",
            "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _clean_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's real keys or endpoints (a test that needs one sets its own)."""
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
