"""OpenEnv environments as a task: episodes driven through OpenEnv's own client (docs/openenv.md)."""

from comlrl.tasks.openenv.task import EpisodeProblem, EpisodeReward, OpenEnvOptions, OpenEnvTask

__all__ = ["EpisodeProblem", "EpisodeReward", "OpenEnvOptions", "OpenEnvTask"]
