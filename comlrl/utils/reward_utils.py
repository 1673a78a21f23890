"""A reward function's declared range, as CoMLRL 1.4.3 declares and reads it (`comlrl.utils.reward_utils`): an
attribute `reward_range = (minimum, maximum)` on the callable. 1.4.3's preference comparators read it; its
MAGRPO and actor-critic trainers do not, and neither do the trainers here, so declaring one changes no training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["RewardCallable", "resolve_reward_range", "set_reward_range"]

RewardCallable = TypeVar("RewardCallable", bound=Callable[..., Any])


def resolve_reward_range(reward_func: Callable[..., Any]) -> tuple[float, float] | None:
    """The (minimum, maximum) `reward_func` declares, or None; a malformed one raises ValueError, as in 1.4.3."""
    declared = getattr(reward_func, "reward_range", None)
    if declared is None:
        return None
    if isinstance(declared, str | bytes) or not isinstance(declared, Sequence) or len(declared) != 2:
        raise ValueError("reward_func.reward_range must be a two-item sequence: (minimum, maximum).")
    low, high = float(declared[0]), float(declared[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("reward_func.reward_range values must be finite.")
    if low >= high:
        raise ValueError("reward_func.reward_range minimum must be less than maximum.")
    return low, high


def set_reward_range(reward_func: RewardCallable, minimum: float, maximum: float) -> RewardCallable:
    """Declare `reward_func`'s raw range on it (checked) and return it."""
    reward_func.reward_range = (float(minimum), float(maximum))  # type: ignore[attr-defined]
    resolve_reward_range(reward_func)
    return reward_func
