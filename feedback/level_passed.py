"""`level_passed`: one pass/fail signal per level (definitions, syntax, tests, helper usage).

Compact on purpose: no failing cases, no error messages, so `sandbox_slice` has no effect. Tests show
p/t because the count is itself the level's signal. Minimal context by default, like `passed`
(`external.passed_context`).
"""

from __future__ import annotations

from feedback.context import FeedbackContext, FeedbackOptions, Messages
from feedback.render import assemble, levels, test_counts, tests_ran


def signals(ctx: FeedbackContext) -> str:
    lv = levels(ctx)
    p, t = test_counts(ctx)
    lines: list[str] = []
    if lv["definitions"] is not None:
        lines.append(f"- Definitions: {'passed' if lv['definitions'] else 'failed'}")
    lines.append(f"- Syntax: {'passed' if lv['syntax'] else 'failed'}")
    if t == 0:
        lines.append("- Tests: none found")
    elif not tests_ran(ctx):
        lines.append(f"- Tests: failed (not run, 0/{t})")
    else:
        lines.append(f"- Tests: {'passed' if lv['tests'] else 'failed'} ({p}/{t})")
    if lv["helper usage"] is not None:
        lines.append(f"- Helper usage: {'passed' if lv['helper usage'] else 'failed'}")
    return "\n".join(lines)


def build(ctx: FeedbackContext, opts: FeedbackOptions) -> list[Messages]:
    text = signals(ctx)  # the same joint signals for every agent
    return [assemble(ctx, i, opts, text, minimal=opts.passed_context == "minimal") for i in range(ctx.num_agents)]
