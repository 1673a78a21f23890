"""Fixtures of the action-task tests: one shared sandbox, helper modules on sys.path, no real API keys."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

KEY_VARS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_COMPATIBLE_API_KEY",
            "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _clean_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    from sandbox import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box
