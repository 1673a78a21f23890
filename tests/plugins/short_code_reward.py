"""A code reward written outside the package: shorter code scores higher (nothing is executed).

Selected with `plugins: [short_code_reward]` and `task.reward: short_code` (code tasks only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.config.registry import register_reward
from comlrl.tasks.code.reward import CodeReward, ScoreRequest


class ShortCode:
    def reward_range(self, num_agents: int) -> tuple[float, float]:
        return 0.0, float(num_agents)

    def score_batch(self, requests: Sequence[ScoreRequest], sandbox: Any) -> list[CodeReward]:
        out = []
        for req in requests:
            parts = {f"agent{a}": 1.0 / (1.0 + len(code) / 100.0) for a, code in enumerate(req.codes)}
            out.append(CodeReward(total=sum(parts.values()), components=parts, analyses=(), tests_passed=0,
                                  tests_total=0, helper_called=False, helper_result_used=False,
                                  thin_wrapper=False, exec=None, codes=tuple(req.codes)))
        return out


register_reward("short_code", ShortCode())
