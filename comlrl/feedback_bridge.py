"""Binds the `feedback` package to a run: builds contexts, calls the configured mode, exposes counters."""

from __future__ import annotations

from typing import Any

import feedback
from comlrl.config import RunConfig
from comlrl.tasks.code.reward import CodeReward
from comlrl.tasks.code_common import path_codes


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

    def build(self, contexts: list[feedback.FeedbackContext]) -> list[list[list[dict]]]:
        return feedback.build_next_messages(contexts, self.cfg.external, expert=self.expert, metrics=self.counters)

    def metrics(self) -> dict[str, float]:
        """Per-step deltas of the feedback counters."""
        return self.counters.snapshot(reset=True)
