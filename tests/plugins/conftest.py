"""The user modules here are imported by name (`plugins: [rhyme_task, echo_feedback]`), as a user's would be."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from comlrl.config import registry

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

PLUGIN_MODULES = ("best_sibling", "count_task", "echo_feedback", "rhyme_task", "short_code_reward",
                  "short_function_reward")


@pytest.fixture(autouse=True)
def _registries_as_before():
    """A plug-in registers into the process's registries; a test that loaded one leaves them as it found
    them (and forgets the module, so the next `plugins` key imports and registers it again). Without this a
    plug-in task's options section (`task.count_words.*`) leaked into later tests' schema: the documented-keys
    and --help tests, and a run's config.yaml that a fresh process could not load."""
    tables = [r.table for r in (registry.TASKS, registry.TRANSITIONS, registry.REWARDS, registry.PROVIDERS,
                                registry.ESTIMATORS, registry.LOSSES, registry.ALGORITHMS)]
    saved = [dict(t) for t in tables]
    yield
    for table, before in zip(tables, saved, strict=True):
        table.clear()
        table.update(before)
    for name in PLUGIN_MODULES:
        sys.modules.pop(name, None)
