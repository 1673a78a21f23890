"""`expert_edits`: an expert model proposes edits for each agent's code; prompts carry them.

Two pure halves around the network call (made by `build_next_messages`, batched and concurrent):
`expert_messages(ctx)` is what the expert is asked, `build(ctx, opts, edits)` renders the agents'
prompts from its parsed answer. `sandbox_slice` has no effect here: the expert gets a fixed, capped
summary of the test results and decides what matters.
"""

from __future__ import annotations

import json

from feedback.context import FeedbackContext, FeedbackOptions, Messages, cap, one_line
from feedback.render import (
    assemble,
    code_block,
    failing_asserts,
    run_problem,
    syntax_errors,
    test_counts,
    tests_ran,
)

EXPERT_SYSTEM = (
    "You review Python code written by a team of agents and propose concrete edits for each agent. "
    "Reply with one JSON object and nothing else."
)
EXPERT_MAX_ASSERTS = 3
NO_EDITS = "The expert suggested no changes to your code."


def expert_messages(ctx: FeedbackContext, opts: FeedbackOptions | None = None) -> Messages:
    """The expert's prompt for one joint action (deterministic, so it can key the response cache)."""
    o = opts or FeedbackOptions()
    team = "\n".join(f"- {name}: {one_line(instr, 300)}" for name, instr in
                     zip(ctx.role_names, ctx.role_instructions, strict=True))
    code = "\n".join(f"{name}:\n{code_block(ctx.code(i), o.max_code_chars)}"
                     for i, name in enumerate(ctx.role_names))
    p, t = test_counts(ctx)
    syn = [(ctx.role_names[i], s) for i, s in enumerate(syntax_errors(ctx, o.max_error_chars)) if s]
    problem = run_problem(ctx, o.max_error_chars, detail=not syn)
    note = f" ({'' if tests_ran(ctx) else 'not run: '}{problem})" if problem else ""
    results = [f"Tests: {p}/{t} passed{note}"]
    if syn:
        results.append("Syntax errors: " + "; ".join(f"{name}: {s}" for name, s in syn))
    fails = failing_asserts(ctx)[:EXPERT_MAX_ASSERTS]
    for a in fails:
        msg = one_line(a.message, o.max_error_chars)
        err = "timed out" if a.status == "timeout" else (a.error_type or "AssertionError") + (f": {msg}" if msg else "")
        results.append(f"Failing: {one_line(a.source, o.max_assert_chars)} -> {err}")
    keys = ", ".join(json.dumps(n) for n in ctx.role_names)
    user = "\n\n".join([
        "Problem:\n" + cap(ctx.team_problem().strip("\n"), o.max_problem_chars),
        "Team (each agent writes one part; the parts run together):\n" + team,
        "Current code:\n" + code,
        "\n".join(results),
        f"Return a JSON object with exactly these keys: {keys}. Each value is a string with concrete edits for "
        "that agent (what to change, or the corrected code of its part). Write \"No changes needed.\" for an "
        "agent whose code is already right.",
    ])
    return [{"role": "system", "content": EXPERT_SYSTEM}, {"role": "user", "content": user}]


def suggestions(ctx: FeedbackContext, agent: int, opts: FeedbackOptions, edits: dict[str, str]) -> str:
    own = (edits.get(ctx.role_names[agent]) or "").strip()
    parts = ["Expert suggestions for your code:\n" + (cap(own, opts.max_edit_chars) if own else NO_EDITS)]
    mates = [f"{ctx.role_names[j]}: {cap((edits.get(ctx.role_names[j]) or '').strip() or 'no changes', 400)}"
             for j in range(ctx.num_agents) if j != agent]
    if mates:
        parts.append("Expert suggestions for your teammates (for context):\n" + "\n".join(mates))
    return "\n\n".join(parts)


def build(ctx: FeedbackContext, opts: FeedbackOptions, edits: dict[str, str]) -> list[Messages]:
    """Chat messages per agent from the expert's edits keyed by role name."""
    return [assemble(ctx, i, opts, suggestions(ctx, i, opts, edits)) for i in range(ctx.num_agents)]
