"""verifiers environments as a task: the environment's own rollouts and rubric, in its own interpreter
(docs/verifiers.md)."""

from comlrl.tasks.verifiers.task import EpisodeReward, RowProblem, VerifiersOptions, VerifiersTask

__all__ = ["EpisodeReward", "RowProblem", "VerifiersOptions", "VerifiersTask"]
