"""Binds the `feedback` package to a run as a `Transition`: builds contexts from a joint action's path,
calls the configured mode, exposes counters. The contexts come from the code tasks' feedback adapter
(comlrl/tasks/code/feedback.py, over the task's `FeedbackPrompts`): the bridge knows no task or reward type."""

from __future__ import annotations

from collections.abc import Sequence

import feedback
from comlrl.llm.reach import check_reachable
from comlrl.models import resolve_model_path
from comlrl.tasks.code.feedback import feedback_contexts
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
        return self.build(feedback_contexts(task, paths))

    def build(self, contexts: list[feedback.FeedbackContext]) -> list[list[Messages]]:
        return feedback.build_next_messages(contexts, self.external, expert=self.expert, metrics=self.counters)

    def metrics(self) -> dict[str, float]:
        """Per-step deltas of the feedback counters."""
        return self.counters.snapshot(reset=True)
