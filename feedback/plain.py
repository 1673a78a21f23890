"""`plain`: no diagnostics at all, only the context (own and teammates' code) and a revise instruction.

It never reads the sandbox results, so it also never needs a test run beyond the reward's own.
"""

from __future__ import annotations

from feedback.context import FeedbackContext, FeedbackOptions, Messages
from feedback.render import assemble

INSTRUCTION = ("Review your code for your role ({role}) and revise it if it can be improved. "
               "Reply with the complete code of your part only, no explanations.")


def build(ctx: FeedbackContext, opts: FeedbackOptions) -> list[Messages]:
    return [assemble(ctx, i, opts, None, INSTRUCTION.format(role=ctx.role_names[i])) for i in range(ctx.num_agents)]
