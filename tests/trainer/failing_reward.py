"""A code reward that raises on its first use: a run that fails after its outputs were opened, before step 1.

Selected with `plugins: [failing_reward]` and `task.reward: fails` (tests/trainer/test_run_failures.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.config.registry import register_reward
from comlrl.tasks.code.reward import CodeReward, ScoreRequest


class Fails:
    def reward_range(self, num_agents: int) -> tuple[float, float]:
        return 0.0, float(num_agents)

    def score_batch(self, requests: Sequence[ScoreRequest], sandbox: Any) -> list[CodeReward]:
        raise RuntimeError("the failing_reward plugin failed on purpose")


register_reward("fails", Fails())
