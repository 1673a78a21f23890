"""`passed`: one binary signal, whether the joint action passes every level, and nothing else."""

from __future__ import annotations

from feedback.context import FeedbackContext, FeedbackOptions, Messages
from feedback.render import assemble, levels


def all_levels_passed(ctx: FeedbackContext) -> bool:
    return all(v is not False for v in levels(ctx).values())


def build(ctx: FeedbackContext, opts: FeedbackOptions) -> list[Messages]:
    text = ("All checks passed." if all_levels_passed(ctx) else "Not all checks passed.")
    return [assemble(ctx, i, opts, text) for i in range(ctx.num_agents)]
