"""The data every task shares (`Problem`), the interface the trainer drives (`Task`, the
required protocol; the opt-in ones and `TaskDefaults`, which brings them with their defaults) and the `task` config
section a task is built from (`TaskConfig`).

All are declared in `comlrl.tree.contracts` (with `Transition` and `Reward`); this module keeps the names
the tasks import.
"""

from __future__ import annotations

from comlrl.tree.contracts import (
    Configured,
    Counts,
    EnvironmentState,
    FeedbackPrompts,
    Problem,
    ProblemInfo,
    Prompting,
    Scoring,
    SplitRoles,
    Task,
    TaskConfig,
    TaskDefaults,
)

__all__ = ["Configured", "Counts", "EnvironmentState", "FeedbackPrompts", "Problem", "ProblemInfo", "Prompting",
           "Scoring", "SplitRoles", "Task", "TaskConfig", "TaskDefaults"]
