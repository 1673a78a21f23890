"""The layout every mode shares, and the diagnostics several modes read from the reward's `CodeResults`.

Every next-turn prompt is `[system, user]`, the user message in this fixed order:

    problem (include_original_prompt) -> role -> own earlier attempts (include_history) ->
    own latest code -> teammates' latest code -> feedback (mode-specific) -> instruction

Everything before the feedback depends only on the problem, the role and the agents' code, so
siblings and successive turns share a long token prefix that prefix/KV caches can reuse. Feedback
comes last because it is the part that changes the most.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedback.context import FeedbackContext, FeedbackOptions, Messages, cap, one_line
from feedback.results import AgentAnalysis
from sandbox.results import AssertResult, SyntaxErrorInfo

DEFAULT_SYSTEM = (
    "You are a Python programmer in a team of agents that write code together over several turns. "
    "Each agent writes its own part; the parts run together."
)
FAILING = ("failed", "error", "timeout")


def system_message(ctx: FeedbackContext, agent: int) -> str:
    """The task's own system prompt when it has one, so turn 1 and later turns share it."""
    if ctx.initial_messages:
        for msg in ctx.initial_messages[agent]:
            if msg.get("role") == "system" and msg.get("content"):
                return str(msg["content"])
    return DEFAULT_SYSTEM


def code_block(code: str, limit: int) -> str:
    code = code.strip("\n")
    body = cap(code, limit) if code.strip() else "# (empty response: no code)"
    return f"```python\n{body}\n```"


def context_sections(ctx: FeedbackContext, agent: int, opts: FeedbackOptions, minimal: bool = False) -> list[str]:
    """Problem, role, own history and teammates' latest code: the mode-independent part of the prompt.

    `minimal` keeps only the problem, the role and the agent's own latest code (no older attempts, no
    teammates' code): the context of the outcome-only modes `passed` and `level_passed`.
    """
    parts: list[str] = []
    problem = ctx.problem_for(agent)
    if opts.include_original_prompt and problem.strip():
        parts.append("Problem:\n" + cap(problem.strip("\n"), opts.max_problem_chars))
    n = ctx.num_agents
    who = f"Your role: {ctx.role_names[agent]}" + (f" (agent {agent + 1} of {n})" if n > 1 else "")
    instr = ctx.role_instructions[agent].strip()
    parts.append(who + ("\n" + instr if instr else ""))
    hist = ctx.history[agent]
    if opts.include_history and len(hist) > 1 and not minimal:
        older = [f"Attempt {t + 1}:\n{code_block(ctx.code(agent, t), opts.max_history_chars)}"
                 for t in range(len(hist) - 1)]
        parts.append("Your earlier attempts (oldest first):\n" + "\n".join(older))
    parts.append("Your latest code:\n" + code_block(ctx.code(agent), opts.max_code_chars))
    if n > 1 and not minimal:
        mates = [f"{ctx.role_names[j]}:\n{code_block(ctx.code(j), opts.max_code_chars)}"
                 for j in range(n) if j != agent]
        parts.append("Your teammates' latest code:\n" + "\n".join(mates))
    return parts


def revise_instruction(ctx: FeedbackContext, agent: int) -> str:
    role = ctx.role_names[agent]
    return (f"Revise your code for your role ({role}) using the feedback above. "
            "Reply with the complete code of your part only, no explanations.")


def assemble(ctx: FeedbackContext, agent: int, opts: FeedbackOptions, feedback: str | None,
             instruction: str | None = None, minimal: bool = False) -> Messages:
    """`[system, user]` for one agent; `feedback=None` leaves the feedback section out (plain mode)."""
    parts = context_sections(ctx, agent, opts, minimal)
    if feedback is not None:
        parts.append("Feedback:\n" + feedback.strip("\n"))
    parts.append(instruction if instruction is not None else revise_instruction(ctx, agent))
    return [
        {"role": "system", "content": system_message(ctx, agent)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# ----- reading the reward's `CodeResults` -----------------------------------------------------------------


def analysis_for(ctx: FeedbackContext, agent: int) -> AgentAnalysis | None:
    """Agent i's static analysis (matched by role name, else by position)."""
    items = ctx.reward.analyses
    name = ctx.role_names[agent]
    for a in items:
        if a.role == name:
            return a
    return items[agent] if agent < len(items) else None


def is_defined(analysis: AgentAnalysis | None) -> bool | None:
    """Whether the agent's required function is defined; None when the reward has no analysis for it."""
    return None if analysis is None else analysis.defined


def syntax_error_text(err: SyntaxErrorInfo | None, limit: int) -> str | None:
    """`line L, col C: message`, on one line and capped."""
    return None if err is None else one_line(str(err), limit)


def test_counts(ctx: FeedbackContext) -> tuple[int, int]:
    return ctx.reward.tests_passed, ctx.reward.tests_total


def tests_ran(ctx: FeedbackContext) -> bool:
    return any(a.status != "not_run" for a in all_asserts(ctx))


RUN_PROBLEMS = {
    "syntax_error": "the combined code does not compile",
    "load_error": "loading the code raised an error",
    "crashed": "the test process crashed",
    "timeout": "the run timed out",
    "test_error": "the tests' own setup raised an error",
    "sandbox_error": "the sandbox failed (not your code's fault)",
}


def run_problem(ctx: FeedbackContext, limit: int, detail: bool = True) -> str | None:
    """Why the execution went wrong as a whole (`ExecResult.status`), or None when it ran normally.

    `detail=False` leaves out the run's message (when the same fact is already shown per agent).
    """
    ex = ctx.reward.exec
    if ex is None:  # the sandbox ran nothing: static checks already failed
        if any(syntax_errors(ctx, limit)):
            return "the code does not compile"
        if any(is_defined(analysis_for(ctx, i)) is False for i in range(ctx.num_agents)):
            return "a required function is missing"
        return "the combined code does not compile"
    if ex.status not in RUN_PROBLEMS:
        return None
    if not detail:
        return RUN_PROBLEMS[ex.status]
    text = one_line(ex.message, limit)
    if ex.status == "syntax_error" and not text:
        text = syntax_error_text(ex.syntax_error, limit) or ""
    return RUN_PROBLEMS[ex.status] + (f": {text}" if text else "")


def all_asserts(ctx: FeedbackContext) -> list[AssertResult]:
    """Every assert of the run that scored the reward, in test order; none when nothing ran."""
    ex = ctx.reward.exec
    return [] if ex is None else list(ex.asserts)


def failing_asserts(ctx: FeedbackContext) -> list[AssertResult]:
    return [a for a in all_asserts(ctx) if a.status in FAILING]


def _slice(items: Sequence[AssertResult], sandbox_slice: int | str | None) -> list[AssertResult]:
    from sandbox.testparse import slice_asserts

    return list(slice_asserts(items, sandbox_slice))


def slice_label(sandbox_slice: int | str | None, shown: int, total: int) -> str:
    if shown >= total:
        return f"all {total}"
    n = sandbox_slice
    if isinstance(n, str):
        try:
            n = int(n)
        except ValueError:
            n = None
    if isinstance(n, int) and n < 0:
        return f"last {shown} of {total}"
    return f"first {shown} of {total}"


def assert_lines(ctx: FeedbackContext, opts: FeedbackOptions) -> list[str]:
    """The `sandbox_slice` asserts of the one execution that scored the reward, with their outcomes.

    `sandbox_slice_of="tests"`: the slice of all asserts in test order, passing or failing (the key's
    documented meaning); `"failing"`: the slice of the failing ones only.
    """
    failing_only = opts.sandbox_slice_of == "failing"
    pool = failing_asserts(ctx) if failing_only else all_asserts(ctx)
    if not pool:
        return []
    shown = _slice(pool, opts.sandbox_slice)[: opts.max_shown_asserts]
    title = "Failing asserts" if failing_only else "Asserts"
    lines = [f"- {title} ({slice_label(opts.sandbox_slice, len(shown), len(pool))}):"]
    for a in shown:
        src = one_line(a.source, opts.max_assert_chars)
        lines.append(f"  {src}\n    -> {_outcome(a, opts)}")
    return lines


_OUTCOME_WORDS = {"passed": "passed", "not_run": "not run", "timeout": "timed out"}


def _outcome(a: AssertResult, opts: FeedbackOptions) -> str:
    if a.status in _OUTCOME_WORDS:
        return _OUTCOME_WORDS[a.status]
    etype = a.error_type or ("AssertionError" if a.status == "failed" else "Error")
    msg = one_line(a.message, opts.max_error_chars)
    return f"{etype}: {msg}" if msg else str(etype)


def helper_usage(ctx: FeedbackContext) -> tuple[bool, str] | None:
    """(ok, note) about how the main agent uses the helper; None for single-agent tasks."""
    if ctx.num_agents < 2:
        return None
    r = ctx.reward
    helper, main = ctx.role_names[0], ctx.role_names[-1]
    main_analysis = analysis_for(ctx, ctx.num_agents - 1)
    if main_analysis is not None and (main_analysis.syntax_error is not None or not main_analysis.defined):
        return False, f"not checked: {main} has no valid definition yet."
    if not r.helper_called:
        return False, f"{main} does not call the {helper} function."
    if r.thin_wrapper:
        return False, f"{main} is a thin wrapper around the {helper} function; {main} should do part of the work."
    if not r.helper_result_used:
        return False, f"{main} calls the {helper} function but does not use its result."
    return True, f"{main} calls the {helper} function and uses its result."


def syntax_errors(ctx: FeedbackContext, limit: int) -> list[str | None]:
    """Per agent: the syntax error text, or None."""
    found = [analysis_for(ctx, i) for i in range(ctx.num_agents)]
    return [None if a is None else syntax_error_text(a.syntax_error, limit) for a in found]


def levels(ctx: FeedbackContext) -> dict[str, bool | None]:
    """Pass/fail per level for the joint action: definitions, syntax, tests, helper usage (None = n/a)."""
    defined = [is_defined(analysis_for(ctx, i)) for i in range(ctx.num_agents)]
    syntax = syntax_errors(ctx, 200)
    p, t = test_counts(ctx)
    out: dict[str, bool | None] = {
        "definitions": None if all(d is None for d in defined) else all(d is not False for d in defined),
        "syntax": all(s is None for s in syntax),
        "tests": t > 0 and p == t,
    }
    usage = helper_usage(ctx)
    out["helper usage"] = None if usage is None else usage[0]
    return out
