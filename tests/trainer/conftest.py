from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model():
    from comlrl.models import resolve_model_path

    return resolve_model_path("tiny-random")
