"""`level_feedback` (default): per-agent diagnostics, level by level, then a revise instruction.

Definitions found or missing, syntax errors with line/column, tests passed p/t with the
`sandbox_slice` asserts with their outcomes (of all eval asserts, or of the failing ones with
`sandbox_slice_of="failing"`), helper-usage notes and the reward's notes. Every
fact comes from the one execution that scored the reward: nothing is run again here.
"""

from __future__ import annotations

import re

from feedback.context import FeedbackContext, FeedbackOptions, Messages, one_line
from feedback.render import (
    analysis_for,
    assemble,
    assert_lines,
    helper_usage,
    run_problem,
    syntax_errors,
    test_counts,
    tests_ran,
)
from feedback.results import AgentAnalysis

# Reward notes that restate a fact the lines above already show (comlrl/tasks/code/reward.py wording); any
# other note (e.g. "main redefines aux", "combined program: SyntaxError ...") is passed on as is.
_COVERED = re.compile(r"^\w+: SyntaxError at |^\w+: no top-level def |^main does not call |"
                      r"^main calls \w+ but ignores its result|^main is a thin wrapper|^run \w+")


def _covered(note: str) -> bool:
    return bool(_COVERED.search(note))


def _definition(analysis: AgentAnalysis | None) -> str:
    if analysis is None:
        return "unknown"
    if analysis.defined:
        return "found"
    others = analysis.functions
    return "MISSING" + (f" (top-level functions: {', '.join(others)})" if others else "")


def _per_agent(ctx: FeedbackContext, agent: int, values: list[str]) -> str:
    """`value` for a single agent; `role (you): v; other: w` for a team."""
    if ctx.num_agents == 1:
        return values[0]
    return "; ".join(f"{ctx.role_names[i]}{' (you)' if i == agent else ''}: {v}" for i, v in enumerate(values))


def diagnostics(ctx: FeedbackContext, agent: int, opts: FeedbackOptions) -> str:
    """The feedback section for one agent."""
    lines: list[str] = []
    found = [analysis_for(ctx, i) for i in range(ctx.num_agents)]
    if any(a is not None for a in found):
        vals = [_definition(a) for a in found]
        lines.append("- Required definition: " + _per_agent(ctx, agent, vals))
    syn = syntax_errors(ctx, opts.max_error_chars)
    lines.append("- Syntax: " + _per_agent(ctx, agent, ["OK" if s is None else f"error at {s}" for s in syn]))
    p, t = test_counts(ctx)
    problem = run_problem(ctx, opts.max_error_chars, detail=all(s is None for s in syn))
    if t == 0:
        lines.append("- Tests: none found" + (f" ({problem})" if problem else ""))
    elif not tests_ran(ctx):
        lines.append(f"- Tests: {p}/{t} passed (not run: {problem or 'no assert ran'})")
    else:
        lines.append(f"- Tests: {p}/{t} passed" + (f" ({problem})" if problem else ""))
        lines.extend(assert_lines(ctx, opts))
    usage = helper_usage(ctx)
    if usage is not None:
        lines.append("- Helper usage: " + usage[1])
    notes = [one_line(n, opts.max_error_chars) for n in ctx.reward.notes
             if str(n).strip() and not _covered(str(n))]
    if notes:
        lines.append("- Notes: " + " ".join(notes))
    return "\n".join(lines)


def keep_instruction(ctx: FeedbackContext, agent: int) -> str | None:
    """When every test passed, ask for the working code again instead of a revision: asked to "revise"
    passing code, the embedded model rewrote it and lost 2 of 32 held-out problems in turn 2."""
    p, t = test_counts(ctx)
    if t == 0 or p != t:
        return None
    return (f"Every test passed. Reply with the complete code of your part ({ctx.role_names[agent]}) again, "
            "unchanged, no explanations.")


def build(ctx: FeedbackContext, opts: FeedbackOptions) -> list[Messages]:
    """Chat messages per agent."""
    return [assemble(ctx, i, opts, diagnostics(ctx, i, opts), keep_instruction(ctx, i))
            for i in range(ctx.num_agents)]
