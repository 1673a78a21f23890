"""The code tasks' feedback: a joint action's path as the `feedback.FeedbackContext` the feedback modes
(`external.mode`) build the next turn's prompts from, and `FeedbackBridge`, those modes as the run's
`Transition`. What a prompt shows comes from the task's `FeedbackPrompts` (`problem_statement`,
`revise_instructions`, `shown_codes`) and the HumanEval-format problem (`prompt`, `entry_point`)."""

from __future__ import annotations

from collections.abc import Sequence

import feedback
from comlrl.llm.reach import check_reachable
from comlrl.models import resolve_model_path
from comlrl.tree.contracts import Continuation, FeedbackPrompts, Messages, Task


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


class FeedbackBridge:
    """The feedback modes (`external.mode`) as a run's `Transition`: builds contexts from a joint action's path
    (`feedback_contexts`), calls the configured mode, exposes its counters; knows no reward type."""

    def __init__(self, external: feedback.ExternalConfig) -> None:
        self.external = external
        self.counters = feedback.FeedbackMetrics()
        self.expert = None
        if external.mode == "expert_edits":  # built at start-up: a missing API key or a server that is down fails here
            self.expert = feedback.make_expert(external.expert_edits_model, external,
                                               resolve_local=resolve_model_path, metrics=self.counters)
            check_reachable(self.expert.endpoint, "external.expert_edits_model")

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """The configured feedback mode's next-turn prompts (this is the feedback modes' `Transition`)."""
        return self.build(feedback_contexts(task, paths))

    def build(self, contexts: list[feedback.FeedbackContext]) -> list[list[Messages]]:
        return feedback.build_next_messages(contexts, self.external, expert=self.expert, metrics=self.counters)

    def metrics(self) -> dict[str, float]:
        """Per-step deltas of the feedback counters."""
        return self.counters.snapshot(reset=True)
