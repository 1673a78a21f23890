"""The layout every mode shares, and the diagnostics several modes read from a `CodeReward`.

Every next-turn prompt is `[system, user]`, the user message in this fixed order:

    problem (include_original_prompt) -> role -> own earlier attempts (include_history) ->
    own latest code -> teammates' latest code -> feedback (mode-specific) -> instruction

Everything before the feedback depends only on the problem, the role and the agents' code, so
siblings and successive turns share a long token prefix that prefix/KV caches can reuse. Feedback
comes last because it is the part that changes the most.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from feedback.context import FeedbackContext, FeedbackOptions, Messages, as_list, cap, one_line

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
    if opts.include_original_prompt and ctx.problem.strip():
        parts.append("Problem:\n" + cap(ctx.problem.strip("\n"), opts.max_problem_chars))
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


# ----- reading a CodeReward (by attribute: any object with the contract's fields works) ----------------


def analyses(ctx: FeedbackContext) -> list[Any]:
    return as_list(getattr(ctx.reward, "analyses", None))


def analysis_for(ctx: FeedbackContext, agent: int) -> Any | None:
    """Agent i's static analysis (matched by role name, else by position)."""
    items = analyses(ctx)
    name = ctx.role_names[agent]
    for a in items:
        if getattr(a, "role", None) == name:
            return a
    return items[agent] if agent < len(items) else None


def is_defined(analysis: Any) -> bool | None:
    if analysis is None:
        return None
    d = getattr(analysis, "defined", None)
    if d is None:
        return None
    if isinstance(d, bool):
        return d
    return bool(d)


def syntax_error_text(err: Any, limit: int) -> str | None:
    """`line L, col C: message` from a SyntaxErrorInfo (or a plain string)."""
    if err is None or err is False:
        return None
    if isinstance(err, str):
        return one_line(err, limit)
    line, col, msg = getattr(err, "line", None), getattr(err, "col", None), getattr(err, "message", "")
    where = ", ".join(p for p in (f"line {line}" if line is not None else "", f"col {col}" if col is not None else "")
                      if p)
    return one_line(f"{where}: {msg}" if where else str(msg), limit)


def exec_result(ctx: FeedbackContext) -> Any | None:
    return getattr(ctx.reward, "exec", None)


def test_counts(ctx: FeedbackContext) -> tuple[int, int]:
    r = ctx.reward
    return int(getattr(r, "tests_passed", 0) or 0), int(getattr(r, "tests_total", 0) or 0)


def tests_ran(ctx: FeedbackContext) -> bool:
    ex = exec_result(ctx)
    if ex is None:
        return False
    return any(getattr(a, "status", "not_run") != "not_run" for a in as_list(getattr(ex, "asserts", None)))


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
    ex = exec_result(ctx)
    if ex is None:  # the sandbox ran nothing: static checks already failed
        if any(syntax_errors(ctx, limit)):
            return "the code does not compile"
        if any(is_defined(analysis_for(ctx, i)) is False for i in range(ctx.num_agents)):
            return "a required function is missing"
        return "the combined code does not compile"
    status = str(getattr(ex, "status", "") or "")
    if status not in RUN_PROBLEMS:
        return None
    if not detail:
        return RUN_PROBLEMS[status]
    text = one_line(getattr(ex, "message", "") or "", limit)
    if status == "syntax_error" and not text:
        text = syntax_error_text(getattr(ex, "syntax_error", None), limit) or ""
    return RUN_PROBLEMS[status] + (f": {text}" if text else "")


def all_asserts(ctx: FeedbackContext) -> list[Any]:
    ex = exec_result(ctx)
    return [] if ex is None else as_list(getattr(ex, "asserts", None))


def failing_asserts(ctx: FeedbackContext) -> list[Any]:
    return [a for a in all_asserts(ctx) if getattr(a, "status", "") in FAILING]


def _slice(items: Sequence[Any], sandbox_slice: int | str | None) -> list[Any]:
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
        src = one_line(getattr(a, "source", ""), opts.max_assert_chars)
        lines.append(f"  {src}\n    -> {_outcome(a, opts)}")
    return lines


_OUTCOME_WORDS = {"passed": "passed", "not_run": "not run", "timeout": "timed out"}


def _outcome(a: Any, opts: FeedbackOptions) -> str:
    status = getattr(a, "status", "failed")
    if status in _OUTCOME_WORDS:
        return _OUTCOME_WORDS[status]
    etype = getattr(a, "error_type", None) or ("AssertionError" if status == "failed" else "Error")
    msg = one_line(getattr(a, "message", "") or "", opts.max_error_chars)
    return f"{etype}: {msg}" if msg else str(etype)


def helper_usage(ctx: FeedbackContext) -> tuple[bool, str] | None:
    """(ok, note) about how the main agent uses the helper; None for single-agent tasks."""
    if ctx.num_agents < 2:
        return None
    r = ctx.reward
    called = getattr(r, "helper_called", None)
    if called is None:
        return None
    helper, main = ctx.role_names[0], ctx.role_names[-1]
    main_analysis = analysis_for(ctx, ctx.num_agents - 1)
    if main_analysis is not None and (getattr(main_analysis, "syntax_error", None) is not None
                                      or is_defined(main_analysis) is False):
        return False, f"not checked: {main} has no valid definition yet."
    if not called:
        return False, f"{main} does not call the {helper} function."
    if getattr(r, "thin_wrapper", False):
        return False, f"{main} is a thin wrapper around the {helper} function; {main} should do part of the work."
    if not getattr(r, "helper_result_used", True):
        return False, f"{main} calls the {helper} function but does not use its result."
    return True, f"{main} calls the {helper} function and uses its result."


def syntax_errors(ctx: FeedbackContext, limit: int) -> list[str | None]:
    """Per agent: the syntax error text, or None."""
    return [syntax_error_text(getattr(analysis_for(ctx, i), "syntax_error", None), limit)
            for i in range(ctx.num_agents)]


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
