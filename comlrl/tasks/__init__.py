"""Tasks: a data set, the agents' roles and prompts, and the reward (see docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from comlrl.tasks.actions import ActionsTask
from comlrl.tasks.base import Problem, Task
from comlrl.tasks.code_collab import CodeCollabTask
from comlrl.tasks.code_single import CodeSingleTask
from comlrl.tasks.tool_agent import ToolAgentTask

TASKS: dict[str, type[Task]] = {"code_collab": CodeCollabTask, "code_single": CodeSingleTask,
                                "tool_agent": ToolAgentTask, "actions": ActionsTask}

__all__ = ["TASKS", "ActionsTask", "CodeCollabTask", "CodeSingleTask", "Problem", "Task", "ToolAgentTask", "build_task"]


def build_task(task_cfg: Any, sandbox: Any) -> Task:
    """The task named by `task_cfg.name` (or a plain name string), scoring through `sandbox`."""
    name = task_cfg if isinstance(task_cfg, str) else getattr(task_cfg, "name", None)
    if name not in TASKS:
        raise ValueError(f"task.name: unknown task {name!r}; expected one of: {', '.join(TASKS)}")
    if name == "actions":  # options in task.actions
        return ActionsTask.from_config(task_cfg, sandbox)
    if name == "tool_agent":  # options in task.tool_agent
        return ToolAgentTask(sandbox, getattr(task_cfg, "tool_agent", None))
    return TASKS[name](sandbox)  # type: ignore[call-arg]
