"""Next-turn prompts: how turn t+1's chat messages are built from turn t's joint action and its results.

    FeedbackContext        one joint action + the reward of its single sandbox execution
    CodeResults            what the built-in modes read of that reward (CodeReward satisfies it)
    build_next_messages    batch of contexts -> messages per context, per agent (external.mode)
    make_expert            the expert client for expert_edits (built once, at start-up)
    metrics()              counters for the trainer's logger (prompts per mode, expert calls,
                           failures, fallbacks, tokens, cost)

Imports go one way: feedback may import sandbox, the LLM client stack `comlrl.llm` and `comlrl.errors`,
nothing else of comlrl; it owns its config section (`ExternalConfig`, `external.*`).
"""

from __future__ import annotations

from feedback.build import MODES, build_next_messages
from feedback.context import ExternalConfig, FeedbackContext, FeedbackOptions
from feedback.counters import FeedbackMetrics, default_metrics, metrics
from feedback.experts import ExpertClient, ExpertError, FunctionExpert, make_expert, parse_edits
from feedback.results import AgentAnalysis, CodeResults

__all__ = [
    "MODES",
    "AgentAnalysis",
    "CodeResults",
    "ExpertClient",
    "ExpertError",
    "ExternalConfig",
    "FeedbackContext",
    "FeedbackMetrics",
    "FeedbackOptions",
    "FunctionExpert",
    "build_next_messages",
    "default_metrics",
    "make_expert",
    "metrics",
    "parse_edits",
]
