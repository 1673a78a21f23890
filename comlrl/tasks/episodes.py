"""What the environment doors share (task.name=openenv, verifiers): one agent whose episodes an outside environment
runs, its reward arriving when an episode ends, flat episodes of one problem as the group.

`EpisodeTask` keeps what every such door does the same way (the outcomes it reports, its counters, the first turn's
scoring through its own `score_turns`); a door adds how its episodes start and go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.base import TaskDefaults
from comlrl.tree.contracts import JointTurn, Transition


@dataclass(frozen=True)
class EpisodeReward:
    """One turn of an episode: the environment's reward (0 before it ends), whether it ended, and whether it failed
    (the environment raised: `FailedEpisode`, its group trains without it)."""

    total: float
    components: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    reply: str = ""
    ended: bool = False
    failed: bool = False

    @property
    def all_passed(self) -> bool:
        """The episode ended with a positive reward."""
        return self.ended and not self.failed and self.total > 0

    @property
    def scored(self) -> tuple[str, ...]:
        return (self.reply,)


class EpisodeTask(TaskDefaults):
    """One agent in an outside environment; a door sets `options_type` and `cfg`, and writes `initial_state`,
    `score_turns`, `initial_messages`, `next_messages`, `load` and `close`."""

    num_agents = 1
    role_names = ["agent"]
    needs_sandbox = False
    centralizable = False
    reward_range = (float("-inf"), float("inf"))  # the environment's own scale
    outcome_names = ("success", "episode_error")
    cfg: Any  # the door's options: answer_prefix, stop, ...

    def __init__(self) -> None:
        self._counters: dict[str, float] = {}

    def answer_prefix(self, agent: int, problem: Any) -> str:
        return self.cfg.answer_prefix

    def score(self, items: list[tuple[Any, list[str]]]) -> list[EpisodeReward]:
        """First replies of fresh episodes (`score_turns` steps each on its node's episode)."""
        turns = [JointTurn(p, tuple(texts), self.initial_state(p)) for p, texts in items]
        return [r for r, _ in self.score_turns(turns)]

    def transition(self, configured: Transition) -> Transition:
        return self  # the environment's own messages make the next turn

    def outcome_counts(self, reward: EpisodeReward) -> dict[str, float]:
        if not reward.ended:
            return {}
        return {"success": float(reward.all_passed), "episode_error": float(reward.failed)}

    def _count(self, name: str, by: float = 1.0) -> None:
        self._counters[name] = self._counters.get(name, 0.0) + by

    def metrics(self) -> dict[str, float]:
        out, self._counters = self._counters, {}
        return out
