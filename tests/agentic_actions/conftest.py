"""The action-task tests share one sandbox pool (keys and paths: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    from sandbox import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box
