"""Thread-safe counters the trainer logs: prompts per mode, expert calls, failures, fallbacks, tokens, cost.

Expert requests run in a thread pool, so every update takes a lock. Values are cumulative; pass
`reset=True` to `snapshot` for per-step deltas. Keys carry no prefix ("expert/calls"): the trainer
logs them under "feedback/".
"""

from __future__ import annotations

from comlrl.llm.counters import Counters

# Every counter is present in a snapshot (zero until used), so dashboards get stable keys.
KNOWN = (
    "prompts/level_feedback",
    "prompts/level_passed",
    "prompts/passed",
    "prompts/plain",
    "prompts/expert_edits",
    "expert/requests",  # joint actions sent to the expert (after de-duplication within a batch)
    "expert/cache_hits",
    "expert/calls",  # attempts that reached the provider (HTTP requests or local generate calls)
    "expert/retries",
    "expert/errors",  # failed attempts (429, 5xx, timeouts, malformed bodies, unparseable edits)
    "expert/parse_failures",
    "expert/failures",  # requests that ended without usable edits
    "expert/fallbacks",  # joint actions whose prompts were built by external.expert_fallback
    "expert/input_tokens",
    "expert/output_tokens",
    "expert/cost_usd",
    "expert/latency_s",
)


class FeedbackMetrics(Counters):
    """The counters above, present (zero) in every snapshot."""

    def __init__(self) -> None:
        super().__init__(KNOWN)


_DEFAULT = FeedbackMetrics()


def default_metrics() -> FeedbackMetrics:
    """The process-wide counters used when a caller passes none."""
    return _DEFAULT


def metrics(reset: bool = False) -> dict[str, float]:
    """Snapshot of the process-wide counters, ready for `logger.log(metrics())`."""
    return _DEFAULT.snapshot(reset=reset)
