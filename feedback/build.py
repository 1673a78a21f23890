"""`build_next_messages`: a batch of joint actions in, next-turn chat messages per agent out.

Modes are looked up in `MODES` (name -> pure builder; `comlrl.config.registry.register_transition` adds
to it). `expert_edits` first asks the expert about every joint action of the batch at once (concurrently,
de-duplicated, cached), then renders; a joint action whose expert request failed is rendered by
`external.expert_fallback` and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from feedback import expert_edits, level_feedback, level_passed, passed, plain
from feedback.context import ExternalConfig, FeedbackContext, FeedbackOptions, Messages
from feedback.counters import FeedbackMetrics, default_metrics
from feedback.results import CodeResults

Builder = Callable[[FeedbackContext, FeedbackOptions], list[Messages]]

MODES: dict[str, Builder] = {
    "level_feedback": level_feedback.build,
    "level_passed": level_passed.build,
    "passed": passed.build,
    "plain": plain.build,
}

READS_CODE_RESULTS = ("level_feedback", "level_passed", "passed", "expert_edits")  # plain reads no results


def _check_results(contexts: Sequence[FeedbackContext], mode: str) -> None:
    """The built-in modes show a code task's results; a task whose reward has none gets one clear error."""
    if mode not in READS_CODE_RESULTS:
        return
    for ctx in contexts:
        if not isinstance(ctx.reward, CodeResults):
            raise ValueError(f"external.mode={mode!r} shows a code task's results (feedback.CodeResults); this "
                             f"task's reward {type(ctx.reward).__name__} has none: use external.mode=plain or a "
                             "mode registered for the task")


def _mode(name: str, key: str) -> Builder:
    if name not in MODES:
        raise ValueError(f"{key}={name!r} is not allowed; expected one of: {', '.join(MODES)}")
    return MODES[name]


def build_next_messages(
    contexts: Sequence[FeedbackContext],
    external_cfg: ExternalConfig,
    expert: Any = None,
    metrics: FeedbackMetrics | None = None,
) -> list[list[Messages]]:
    """Messages per context, per agent. `expert` (from `make_expert`) is required for expert_edits."""
    m = metrics if metrics is not None else default_metrics()
    mode = external_cfg.mode
    opts = FeedbackOptions.from_config(external_cfg)
    _check_results(contexts, mode)
    if mode != "expert_edits":
        builder = _mode(mode, "external.mode")
        m.inc(f"prompts/{mode}", len(contexts))
        return [builder(ctx, opts) for ctx in contexts]
    fallback_name = external_cfg.expert_fallback
    fallback = _mode(fallback_name, "external.expert_fallback")
    if expert is None:
        raise ValueError("external.mode=expert_edits needs an expert: build one at start-up with "
                         "feedback.make_expert(cfg.external.expert_edits_model, cfg.external)")
    if not contexts:
        return []
    answers = expert.suggest_many([(expert_edits.expert_messages(ctx, opts), list(ctx.role_names))
                                   for ctx in contexts])
    out: list[list[Messages]] = []
    for ctx, edits in zip(contexts, answers, strict=True):
        if edits:
            m.inc("prompts/expert_edits")
            out.append(expert_edits.build(ctx, opts, edits))
        else:
            m.inc("expert/fallbacks")
            m.inc(f"prompts/{fallback_name}")
            out.append(fallback(ctx, opts))
    return out
