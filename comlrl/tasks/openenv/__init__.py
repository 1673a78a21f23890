"""OpenEnv environments as a task: episodes driven through OpenEnv's own client (docs/openenv.md)."""

from comlrl.tasks.openenv.task import EpisodeProblem, OpenEnvOptions, OpenEnvTask

__all__ = ["EpisodeProblem", "OpenEnvOptions", "OpenEnvTask"]
