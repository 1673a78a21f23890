"""`passed`: one binary signal, whether the joint action passes every level, and nothing else.

Minimal context by default (`external.passed_context`): the agent's own latest code, the signal and the
revise instruction; no teammates' code, no older attempts. `full` gives it level_feedback's context.
"""

from __future__ import annotations

from feedback.context import FeedbackContext, FeedbackOptions, Messages
from feedback.render import assemble, levels


def all_levels_passed(ctx: FeedbackContext) -> bool:
    return all(v is not False for v in levels(ctx).values())


def build(ctx: FeedbackContext, opts: FeedbackOptions) -> list[Messages]:
    text = ("All checks passed." if all_levels_passed(ctx) else "Not all checks passed.")
    return [assemble(ctx, i, opts, text, minimal=opts.passed_context == "minimal") for i in range(ctx.num_agents)]
