"""task.name=actions: agents answer scripted user turns with JSON actions in a workspace, judged at the end.

One module per job (docs/agentic-tasks.md):

    registry.py      action types (parameter schema + executor), the registry, the built-ins, `register_action`
    parser.py        an answer's text -> its valid actions and an `ActionError` for everything else
    workspace.py     a trajectory's scratch directory (paths stay inside it)
    http_api.py      the task's scripted API on a loopback HTTP server, one state per trajectory
    harness.py       Python run in the sandbox with the workspace's files
    checks.py        success checks and `register_check`
    patterns.py      conversation patterns (the user turns) and `register_pattern`
    taskfile.py      `ActionProblem` and the JSONL task-file parser
    environment.py   executes a turn's joint actions: trajectory states and their observations
    judge.py         trajectory-end judges (rules, or an LLM through `comlrl.llm`) and `register_judge`
    prompts.py       the chat: system prompt, demonstration exchange, format reminder, stop strings
    task.py          `ActionsTask`: prompts, rewards, the link between tree nodes and environment states

It imports nothing from the tool agent or the trainer (.importlinter).
"""

from comlrl.tasks.actions.checks import Check, CheckResult, register_check
from comlrl.tasks.actions.environment import Environment, TrajectoryState
from comlrl.tasks.actions.judge import (
    JudgeRequest,
    JudgeScores,
    LLMJudge,
    RuleJudge,
    make_judge,
    register_judge,
)
from comlrl.tasks.actions.parser import ActionError, ParseResult, parse_actions
from comlrl.tasks.actions.patterns import Pattern, register_pattern
from comlrl.tasks.actions.registry import (
    REGISTRY,
    Action,
    ActionContext,
    ActionRegistry,
    ActionType,
    Observation,
    Param,
    register_action,
)
from comlrl.tasks.actions.task import ActionReward, ActionsTask, bundled_tasks_path
from comlrl.tasks.actions.taskfile import ActionProblem, TaskFileError, load_action_tasks
from comlrl.tasks.actions.workspace import Workspace, WorkspaceError

__all__ = [
    "REGISTRY",
    "Action",
    "ActionContext",
    "ActionError",
    "ActionProblem",
    "ActionRegistry",
    "ActionReward",
    "ActionType",
    "ActionsTask",
    "Check",
    "CheckResult",
    "Environment",
    "Judge",
    "JudgeRequest",
    "JudgeScores",
    "LLMJudge",
    "Observation",
    "Param",
    "ParseResult",
    "Pattern",
    "RuleJudge",
    "TaskFileError",
    "TrajectoryState",
    "Workspace",
    "WorkspaceError",
    "bundled_tasks_path",
    "load_action_tasks",
    "make_judge",
    "parse_actions",
    "register_action",
    "register_check",
    "register_judge",
    "register_pattern",
]
