"""A feedback mode written outside the package: show each agent its last answer and its score.

Selected with `plugins: [echo_feedback]` and `external.mode: echo_score`.
"""

from __future__ import annotations

from comlrl.config.registry import register_transition
from feedback import FeedbackContext, FeedbackOptions


def echo_prompt(total: float) -> str:
    return f"That answer scored {total:.2f} (higher is better). Give a better one."


@register_transition("echo_score")
def echo_score(ctx: FeedbackContext, opts: FeedbackOptions) -> list[list[dict[str, str]]]:
    """Per agent: its first-turn chat, its latest answer, then the reward's total."""
    return [
        [*ctx.initial_messages[a], {"role": "assistant", "content": ctx.latest(a)},
         {"role": "user", "content": echo_prompt(ctx.reward.total)}]
        for a in range(ctx.num_agents)
    ]
