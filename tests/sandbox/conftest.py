"""Shared sandboxes for the sandbox tests (starting a pool costs ~0.5 s, so one per module/session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox import Sandbox, SandboxUnavailable


@pytest.fixture(scope="session")
def sb() -> Iterator[Sandbox]:
    """The default pool: auto isolation, 3 s per run."""
    with Sandbox(workers=2, timeout_s=3.0) as box:
        yield box


@pytest.fixture(scope="session", params=[
    "auto", pytest.param("unshare", marks=pytest.mark.slow), pytest.param("subprocess", marks=pytest.mark.slow),
])
def fast_sb(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A pool with a 1 s limit, for attacks that run until they are stopped; the weaker fallback levels
    are exercised too (slow), skipped where the machine cannot provide them."""
    try:
        box = Sandbox(workers=2, timeout_s=1.0, cache=False, isolation=request.param)
    except SandboxUnavailable:
        pytest.skip(f"isolation {request.param} is not available here")
    with box:
        yield box
