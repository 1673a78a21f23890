"""Binds the `feedback` package to a run as a `Transition`: builds contexts from a joint action's path,
calls the configured mode, exposes counters. What a prompt shows of the task's results comes from the
task's declared hooks (`Task.problem_statement`, `Task.shown_codes`): the bridge knows no task or reward type."""

from __future__ import annotations

from collections.abc import Sequence

import feedback
from comlrl.llm.reach import check_reachable
from comlrl.models import resolve_model_path
from comlrl.tree.contracts import Continuation, Messages, Task


class FeedbackBridge:
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
        contexts = [
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
        return self.build(contexts)

    def build(self, contexts: list[feedback.FeedbackContext]) -> list[list[Messages]]:
        return feedback.build_next_messages(contexts, self.external, expert=self.expert, metrics=self.counters)

    def metrics(self) -> dict[str, float]:
        """Per-step deltas of the feedback counters."""
        return self.counters.snapshot(reset=True)
