"""The code tasks' feedback adapter: a joint action's path as the `feedback.FeedbackContext` the feedback
modes (`external.mode`) build the next turn's prompts from. What a prompt shows comes from the task's
`FeedbackPrompts` (`problem_statement`, `revise_instructions`, `shown_codes`) and the HumanEval-format
problem (`prompt`, `entry_point`); the run layer's `comlrl.run.feedback_bridge.FeedbackBridge` only wires
the configured mode to it."""

from __future__ import annotations

from collections.abc import Sequence

import feedback
from comlrl.tree.contracts import Continuation, FeedbackPrompts, Task


def feedback_contexts(task: Task, paths: Sequence[Continuation]) -> list[feedback.FeedbackContext]:
    """One `FeedbackContext` per continuing joint action, in order. `task` must implement `FeedbackPrompts`
    (the code tasks do): a `TypeError` naming it otherwise."""
    if not isinstance(task, FeedbackPrompts):
        raise TypeError(f"{type(task).__name__} does not implement FeedbackPrompts (comlrl/tree/contracts.py): "
                        "the feedback modes (external.mode) cannot build its next turns; declare FeedbackPrompts "
                        "or override Task.transition")
    return [
        feedback.FeedbackContext(
            problem=c.problem.prompt,
            agent_problems=[task.problem_statement(a, c.problem) for a in range(task.num_agents)],
            role_names=list(task.role_names),
            role_instructions=[task.revise_instructions(a) for a in range(task.num_agents)],
            initial_messages=task.initial_messages(c.problem),
            history=c.history,
            reward=c.reward,
            entry_point=c.problem.entry_point,
            codes=task.shown_codes(c.history, c.reward),
        )
        for c in paths
    ]
