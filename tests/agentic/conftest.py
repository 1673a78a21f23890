"""Shared fixtures of the tool-agent tests: one sandbox pool per session, no real keys, helpers importable."""

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


@pytest.fixture(scope="session")
def sb() -> Iterator[object]:
    """One small pool (the machine is shared): 1 worker, 5 s per run."""
    from sandbox import Sandbox

    with Sandbox(workers=1, timeout_s=5.0) as box:
        yield box


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sends the developer's key to the loopback server."""
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
