"""Structured JSON actions in a multi-turn workspace, judged at the end (task.name=actions, docs/agentic-tasks.md).

The tool agent lives in `comlrl.tasks.tool_agent`; this package goes once the actions half moves to
`comlrl.tasks.actions`.
"""

from comlrl.agentic.actions import (
    REGISTRY,
    Action,
    ActionContext,
    ActionError,
    ActionRegistry,
    ActionType,
    Observation,
    Param,
    ParseResult,
    parse_actions,
    register_action,
)
from comlrl.agentic.environment import (
    ActionProblem,
    Check,
    Environment,
    Pattern,
    TrajectoryState,
    Workspace,
    WorkspaceError,
    load_action_tasks,
    register_check,
    register_pattern,
)
from comlrl.agentic.judge import (
    JudgeRequest,
    JudgeScores,
    LLMJudge,
    RuleJudge,
    make_judge,
    register_judge,
)

__all__ = [
    "REGISTRY",
    "Action",
    "ActionContext",
    "ActionError",
    "ActionProblem",
    "ActionRegistry",
    "ActionType",
    "Check",
    "Environment",
    "JudgeRequest",
    "JudgeScores",
    "LLMJudge",
    "Observation",
    "Param",
    "ParseResult",
    "Pattern",
    "RuleJudge",
    "TrajectoryState",
    "Workspace",
    "WorkspaceError",
    "load_action_tasks",
    "make_judge",
    "parse_actions",
    "register_action",
    "register_check",
    "register_judge",
    "register_pattern",
]
