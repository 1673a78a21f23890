"""BFCL v4, judged by its own checkers: the single-turn categories (`bfcl`) and the stateful multi-turn
environment on the turn tree (`bfcl_multi_turn`). docs/bfcl.md."""

from comlrl.tasks.bfcl.multi_turn import BfclMultiTurnConfig, BfclMultiTurnTask
from comlrl.tasks.bfcl.task import BfclTask, BfclTaskConfig

__all__ = ["BfclMultiTurnConfig", "BfclMultiTurnTask", "BfclTask", "BfclTaskConfig"]
