"""The data every task shares (`Problem`) and the interface the trainer drives (`Task`).

Both are declared in `comlrl.contracts` (with `Transition` and `Reward`); this module keeps the names
the tasks import.
"""

from __future__ import annotations

from comlrl.contracts import Problem, Task

__all__ = ["Problem", "Task"]
