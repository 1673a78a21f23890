"""Games others wrote, on the turn tree: TextArena (docs/games.md)."""

from comlrl.tasks.games.task import GameProblem, GameReward, TextArenaOptions, TextArenaTask

__all__ = ["GameProblem", "GameReward", "TextArenaOptions", "TextArenaTask"]
