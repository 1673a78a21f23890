"""CoMLRL 1.4.3's `RewardProcessors` (`comlrl.utils.reward_processor`): factories of the one-argument functions a
trainer's `reward_processor` takes, so scripts that build theirs this way run unchanged (the environment
repositories shift code rewards by -4 and scale writing rewards, for example)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RewardProcessors"]


class RewardProcessors:
    """Reward processors as 1.4.3 builds them: each maps a raw reward `x` to a new one."""

    @staticmethod
    def scale(factor: Any = 1.0) -> Callable[[Any], Any]:
        """`x -> x * factor`."""

        def scaled(x: Any) -> Any:
            return x * factor

        return scaled

    @staticmethod
    def shift(value: Any = 0.0) -> Callable[[Any], Any]:
        """`x -> x + value`."""

        def shifted(x: Any) -> Any:
            return x + value

        return shifted
