"""Binds the `feedback` package to a run: builds contexts, calls the configured mode, exposes counters."""

from __future__ import annotations

from typing import Any

from comlrl.config import RunConfig


class FeedbackBridge:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.expert = None
        import feedback

        self._fb = feedback
        if cfg.external.mode == "expert_edits":
            from comlrl.models import resolve_model_path

            self.expert = feedback.make_expert(cfg.external.expert_edits_model, cfg.external,
                                               resolve_local=resolve_model_path)

    def context(self, **fields: Any) -> Any:
        return self._fb.FeedbackContext(**fields)

    def build(self, contexts: list[Any]) -> list[list[list[dict]]]:
        return self._fb.build_next_messages(contexts, self.cfg.external, expert=self.expert)

    def metrics(self) -> dict[str, float]:
        return dict(self.expert.metrics()) if self.expert is not None and hasattr(self.expert, "metrics") else {}
