"""Code rewards written as plain functions, as `register_reward`'s docstring invites (issue 24, defect 1).

Selected with `plugins: [short_function_reward]` and `task.reward: short` (numbers back, any range) or
`task.reward: short_levels` (CodeRewards back, a declared range).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from comlrl.config.registry import register_reward
from comlrl.tasks.code.reward import LEVELS


@register_reward("short")
def short(requests: list, sandbox: Any) -> list[float]:
    """Shorter code scores higher; nothing runs."""
    return [1.0 / (1.0 + sum(map(len, r.codes)) / 100.0) for r in requests]


@register_reward("short_levels", reward_range=(0.0, 4.5))
def short_levels(requests: list, sandbox: Any) -> list:
    """The levels plus up to 0.5 for short code."""
    return [replace(r, total=r.total + 0.5 / (1 + len(r.codes[-1]) / 100))
            for r in LEVELS.score_batch(requests, sandbox)]


@register_reward("broken")
def broken(requests: list, sandbox: Any) -> list[float]:
    raise ZeroDivisionError("division by zero")


@register_reward("too_few")
def too_few(requests: list, sandbox: Any) -> list[float]:
    return [1.0]
