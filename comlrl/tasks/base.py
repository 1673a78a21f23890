"""The data every task shares (`Problem`), the interface the trainer drives (`Task`) and the `task` config
section a task is built from (`TaskConfig`).

All are declared in `comlrl.tree.contracts` (with `Transition` and `Reward`); this module keeps the names
the tasks import.
"""

from __future__ import annotations

from comlrl.tree.contracts import Problem, Task, TaskConfig

__all__ = ["Problem", "Task", "TaskConfig"]
