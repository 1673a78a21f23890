"""The tool-agent tests share one sandbox pool (keys and paths: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def sb() -> Iterator[object]:
    """One small pool (the machine is shared): 1 worker, 5 s per run."""
    from sandbox import Sandbox

    with Sandbox(workers=1, timeout_s=5.0) as box:
        yield box
