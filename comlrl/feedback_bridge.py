"""Binds the `feedback` package to a run as a `Transition`: builds contexts from a joint action's path,
calls the configured mode, exposes counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import feedback
from comlrl.config import RunConfig
from comlrl.contracts import Continuation, Messages, Task
from comlrl.tasks.code.common import path_codes
from comlrl.tasks.code.reward import CodeReward


class FeedbackBridge:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.counters = feedback.FeedbackMetrics()
        self.expert = None
        if cfg.external.mode == "expert_edits":  # built at start-up: a missing API key fails here
            from comlrl.models import resolve_model_path

            self.expert = feedback.make_expert(cfg.external.expert_edits_model, cfg.external,
                                               resolve_local=resolve_model_path, metrics=self.counters)

    def context(self, **fields: Any) -> feedback.FeedbackContext:
        """A context whose code is the code the reward scored (code tasks), not a second reading of the text."""
        if isinstance(fields.get("reward"), CodeReward):
            fields["codes"] = path_codes(fields["history"], fields["reward"])
        return feedback.FeedbackContext(**fields)

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """The configured feedback mode's next-turn prompts (this is the feedback modes' `Transition`)."""
        contexts = [
            self.context(
                problem=c.problem.prompt,
                agent_problems=[task.problem_statement(a, c.problem) for a in range(task.num_agents)],
                role_names=list(task.role_names),
                role_instructions=[task.revise_instructions(a) for a in range(task.num_agents)],
                initial_messages=task.initial_messages(c.problem),
                history=c.history,
                reward=c.reward,
                entry_point=c.problem.entry_point,
            )
            for c in paths
        ]
        return self.build(contexts)

    def build(self, contexts: list[feedback.FeedbackContext]) -> list[list[Messages]]:
        return feedback.build_next_messages(contexts, self.cfg.external, expert=self.expert, metrics=self.counters)

    def metrics(self) -> dict[str, float]:
        """Per-step deltas of the feedback counters."""
        return self.counters.snapshot(reset=True)
