"""Tasks: a data set, the agents' roles and prompts, and the reward (see docs/architecture.md).

`TASKS` is the one table of task names (`comlrl.config.registry.TASKS` reads it; `register_task` adds to it).
"""

from __future__ import annotations

from typing import Any

from comlrl.errors import ConfigError, not_allowed
from comlrl.tasks.actions import ActionsTask
from comlrl.tasks.base import Problem, Task
from comlrl.tasks.bfcl import BfclMultiTurnTask, BfclTask
from comlrl.tasks.code.collab import CodeCollabTask
from comlrl.tasks.code.common import CodeTask
from comlrl.tasks.code.coop import CodeCoopTask
from comlrl.tasks.code.single import CodeSingleTask
from comlrl.tasks.games import TextArenaTask
from comlrl.tasks.openenv import OpenEnvTask
from comlrl.tasks.reward_funcs import RewardTerms
from comlrl.tasks.text import TextTask
from comlrl.tasks.tool_agent import ToolAgentTask
from comlrl.tasks.verifiers import VerifiersTask
from comlrl.tree.contracts import TaskConfig

TASKS: dict[str, type[Task]] = {"code_collab": CodeCollabTask, "code_single": CodeSingleTask,
                                "tool_agent": ToolAgentTask, "actions": ActionsTask, "code_coop": CodeCoopTask,
                                "text": TextTask, "bfcl": BfclTask,
                                "bfcl_multi_turn": BfclMultiTurnTask, "textarena": TextArenaTask,
                                "openenv": OpenEnvTask, "verifiers": VerifiersTask}

__all__ = ["TASKS", "ActionsTask", "BfclTask", "CodeCollabTask", "CodeCoopTask", "CodeSingleTask", "Problem", "Task",
           "OpenEnvTask", "TextArenaTask", "TextTask", "ToolAgentTask", "VerifiersTask", "build_task"]


def build_task(task_cfg: TaskConfig | str, sandbox: Any) -> Task:
    """The task named by `task_cfg.name` (or a plain name string: default options), scoring through
    `sandbox`, with the reward functions of `task.reward_funcs` added to its rewards."""
    cfg = TaskConfig(name=task_cfg) if isinstance(task_cfg, str) else task_cfg
    if cfg.name not in TASKS:
        raise not_allowed("task.name", cfg.name, f"one of: {', '.join(TASKS)} (or register it from a module listed "
                                                 "in `plugins`)")
    task_type = TASKS[cfg.name]
    if cfg.reward != "levels" and not issubclass(task_type, CodeTask):
        raise ConfigError(f"config error: task.reward={cfg.reward!r} is not allowed; expected levels for "
                          f"task.name={cfg.name} (task.reward chooses the reward of code tasks)")
    task = task_type.from_config(cfg, sandbox)
    task.reward_terms = RewardTerms.from_config(cfg) if cfg.reward_funcs else None  # None: the task's reward only
    return task
