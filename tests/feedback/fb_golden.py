"""Render per-agent messages as readable text and map (mode, case, slice) to golden files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fb_cases as cases

from comlrl.config.schema import ExternalConfig
from feedback import FeedbackMetrics, FunctionExpert, build_next_messages

GOLDEN = Path(__file__).resolve().parent / "golden"
MODES = ("level_feedback", "level_passed", "passed", "plain", "expert_edits")
# Golden folder -> (mode, the `external` keys it sets): every mode with its defaults, plus each option that
# changes a mode's prompt (the other reading of sandbox_slice, the full context of the outcome-only modes).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "level_feedback": ("level_feedback", {}),
    "level_feedback_failing": ("level_feedback", {"sandbox_slice_of": "failing"}),
    "level_passed": ("level_passed", {}),
    "level_passed_full": ("level_passed", {"passed_context": "full"}),
    "passed": ("passed", {}),
    "passed_full": ("passed", {"passed_context": "full"}),
    "plain": ("plain", {}),
    "expert_edits": ("expert_edits", {}),
}
CASES = ("passing", "failing", "syntax")
SLICES: tuple[Any, ...] = (1, -1, "all")


def slice_tag(s: Any) -> str:
    return {1: "slice1", -1: "slice-1", "all": "sliceall"}[s]


def golden_path(variant: str, case: str, sandbox_slice: Any) -> Path:
    return GOLDEN / variant / f"{case}_{slice_tag(sandbox_slice)}.txt"


def render(per_agent: list[list[dict[str, str]]], roles: list[str]) -> str:
    """Human-readable dump: one block per agent, one sub-block per chat message."""
    out: list[str] = []
    for i, messages in enumerate(per_agent):
        out.append(f"===== agent {i} ({roles[i]}) =====")
        for msg in messages:
            out.append(f"----- {msg['role']} -----")
            out.append(msg["content"])
    return "\n".join(out) + "\n"


def render_expert_prompt(ctx: Any) -> str:
    from feedback.expert_edits import expert_messages

    out = []
    for msg in expert_messages(ctx):
        out += [f"----- {msg['role']} -----", msg["content"]]
    return "\n".join(out) + "\n"


def canned_expert(case: str) -> FunctionExpert:
    """An offline expert that answers like a model would for this case."""
    reply = cases.EXPERT_REPLIES[case]
    return FunctionExpert(lambda _messages: reply, metrics=FeedbackMetrics(), cache_dir=None)


def config(mode: str, sandbox_slice: Any = 1, **kw: Any) -> ExternalConfig:
    """The `external` section with the defaults, `mode`, `sandbox_slice` and any other key set."""
    return ExternalConfig(mode=mode, sandbox_slice=sandbox_slice, **kw)


def produce(variant: str, case: str, sandbox_slice: Any) -> str:
    mode, keys = VARIANTS[variant]
    ctx = cases.context(case)
    expert = canned_expert(case) if mode == "expert_edits" else None
    [per_agent] = build_next_messages([ctx], config(mode, sandbox_slice, **keys), expert=expert,
                                      metrics=FeedbackMetrics())
    return render(per_agent, ctx.role_names)


def produce_single(variant: str) -> str:
    mode, keys = VARIANTS[variant]
    ctx = cases.single_agent_context()
    reply = '{"main": "Square each number: return sum(x * x for x in xs)."}'
    expert = FunctionExpert(lambda _m: reply, metrics=FeedbackMetrics()) if mode == "expert_edits" else None
    [per_agent] = build_next_messages([ctx], config(mode, 1, **keys), expert=expert, metrics=FeedbackMetrics())
    return render(per_agent, ctx.role_names)
