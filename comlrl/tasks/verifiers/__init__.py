"""verifiers environments as a task: the environment's own rollouts and rubric, in its own interpreter
(docs/verifiers.md)."""

from comlrl.tasks.verifiers.task import RowProblem, VerifiersOptions, VerifiersTask

__all__ = ["RowProblem", "VerifiersOptions", "VerifiersTask"]
