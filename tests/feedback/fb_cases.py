"""The joint actions the golden files are made of: a passing, a failing and a syntax-error one.

Rewards are built by hand from the reward's own dataclasses, with the values
`comlrl.tasks.code.reward.score_batch` reports for these codes (test_feedback_sandbox.py checks that they
still agree). code_collab: agent 0 = helper writing `aux`, agent 1 = main writing the entry point.
"""

from __future__ import annotations

import dataclasses

from comlrl.tasks.code.common import path_codes
from comlrl.tasks.code.extract import extract_code
from comlrl.tasks.code.reward import CodeAnalysis, CodeReward
from feedback import FeedbackContext
from sandbox.results import AssertResult, ExecResult, SyntaxErrorInfo

PROBLEM = '''def sum_of_squares(xs: list[int]) -> int:
    """Return the sum of the squares of the numbers in xs.

    >>> sum_of_squares([1, 2, 3])
    14
    """
'''
ROLES = ["helper", "main"]
ROLE_INSTRUCTIONS = [
    "Write a helper function `aux` that the main function can call. Output only the code of `aux`.",
    "Write `sum_of_squares(xs)`. A helper `aux` is available: call it and use its result. "
    "Output only the code of `sum_of_squares`.",
]
SYSTEM = "You are a helpful Python programmer. You write correct, simple code."
INITIAL = [
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROBLEM + "\n" + ROLE_INSTRUCTIONS[0]}],
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROBLEM + "\n" + ROLE_INSTRUCTIONS[1]}],
]
ASSERTS = (
    "assert sum_of_squares([1, 2, 3]) == 14",
    "assert sum_of_squares([]) == 0",
    "assert sum_of_squares([-2]) == 4",
)

HELPER_OK = "```python\ndef aux(x):\n    return x * x\n```"
HELPER_BAD = "def aux(x):\n    return x * 2"
HELPER_FIRST = "def aux(x):\n    return x + x"
MAIN_OK = "def sum_of_squares(xs):\n    return sum(aux(x) for x in xs)"
MAIN_FIRST = "def sum_of_squares(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total"
MAIN_SYNTAX = "def sum_of_squares(xs)\n    return sum(aux(x) for x in xs)"


ANALYSES_OK = (CodeAnalysis(role="helper", defined=True, syntax_error=None, functions=("aux",)),
               CodeAnalysis(role="main", defined=True, syntax_error=None, functions=("sum_of_squares",)))


def _exec(statuses: list[tuple[str, str | None, str]]) -> ExecResult:
    asserts = tuple(
        AssertResult(index=i, source=src, status=st, error_type=et, message=msg)
        for i, (src, (st, et, msg)) in enumerate(zip(ASSERTS, statuses, strict=True))
    )
    passed = sum(1 for a in asserts if a.status == "passed")
    status = "passed" if passed == len(asserts) else "failed"
    return ExecResult(status=status, asserts=asserts, passed=passed, total=len(asserts), duration_s=0.02,
                      isolation="bwrap")


def passing_reward() -> CodeReward:
    ex = _exec([("passed", None, "")] * 3)
    return CodeReward(
        total=4.0, components={"helper_defined": 0.25, "main_defined": 0.25, "syntax": 0.5, "tests": 2.0,
                               "helper_used": 0.5, "not_thin_wrapper": 0.5},
        analyses=ANALYSES_OK,
        tests_passed=3, tests_total=3, helper_called=True, helper_result_used=True, thin_wrapper=False,
        exec=ex, notes=())


def failing_reward() -> CodeReward:
    ex = _exec([
        ("failed", "AssertionError", "assert 12 == 14"),
        ("passed", None, ""),
        ("failed", "AssertionError", "assert -4 == 4"),
    ])
    return CodeReward(
        total=2.0, components={"helper_defined": 0.25, "main_defined": 0.25, "syntax": 0.5, "tests": 2 / 3,
                               "helper_used": 0.5 / 3, "not_thin_wrapper": 0.5 / 3},
        analyses=ANALYSES_OK,
        tests_passed=1, tests_total=3, helper_called=True, helper_result_used=True, thin_wrapper=False,
        exec=ex, notes=())


def syntax_reward() -> CodeReward:
    err = SyntaxErrorInfo(line=1, col=23, message="expected ':'")
    return CodeReward(  # static checks fail, so nothing runs: exec is None
        total=0.25, components={"helper_defined": 0.25, "main_defined": 0.0, "syntax": 0.0, "tests": 0.0,
                                "helper_used": 0.0, "not_thin_wrapper": 0.0},
        analyses=(ANALYSES_OK[0], CodeAnalysis(role="main", defined=False, syntax_error=err, functions=())),
        tests_passed=0, tests_total=3, helper_called=False, helper_result_used=False, thin_wrapper=False,
        exec=None, notes=("main: SyntaxError at line 1, col 23: expected ':'",))


def context(case: str) -> FeedbackContext:
    """`passing`, `failing` (turn 3: two earlier attempts) or `syntax`."""
    if case == "passing":
        history, reward = [[HELPER_OK], [MAIN_OK]], passing_reward()
    elif case == "failing":
        history, reward = [[HELPER_FIRST, HELPER_BAD], [MAIN_FIRST, MAIN_OK]], failing_reward()
    elif case == "syntax":
        history, reward = [[HELPER_OK], [MAIN_SYNTAX]], syntax_reward()
    else:
        raise KeyError(case)
    reward = scored(reward, history)
    return FeedbackContext(problem=PROBLEM, role_names=list(ROLES), role_instructions=list(ROLE_INSTRUCTIONS),
                           initial_messages=[list(m) for m in INITIAL], history=history, reward=reward,
                           entry_point="sum_of_squares", codes=path_codes(history, reward))


def scored(reward: CodeReward, history: list[list[str]]) -> CodeReward:
    """The reward with the code it scored: each agent's latest response through the task's extractor."""
    return dataclasses.replace(reward, codes=tuple(extract_code(h[-1]) for h in history))


def single_agent_context() -> FeedbackContext:
    """code_single: one agent writes the entry point alone."""
    history = [["def sum_of_squares(xs):\n    return sum(x * 2 for x in xs)"]]
    reward = scored(CodeReward(
            total=1.1666666667, components={"main_defined": 0.5, "syntax": 0.5, "tests": 2 / 3},
            analyses=(CodeAnalysis(role="main", defined=True, syntax_error=None, functions=("sum_of_squares",)),),
            tests_passed=1, tests_total=3, helper_called=False, helper_result_used=False, thin_wrapper=False,
            exec=failing_reward().exec, notes=()), history)
    return FeedbackContext(
        problem=PROBLEM, role_names=["main"], role_instructions=["Write `sum_of_squares(xs)`. Output only code."],
        initial_messages=[[{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROBLEM}]],
        history=history, reward=reward, entry_point="sum_of_squares", codes=path_codes(history, reward))


# Canned expert answers, keyed by case (fenced JSON with prose around it, as real models answer).
EXPERT_REPLIES = {
    "passing": 'Looks good.\n```json\n{"helper": "No changes needed.", "main": "No changes needed."}\n```',
    "failing": 'Here are my edits:\n```json\n{"helper": "aux must square its argument: return x * x, not x * 2.", '
               '"main": "No changes needed: main already sums aux(x) over xs."}\n```\nThe helper is the bug.',
    "syntax": '{"helper": "No changes needed.", "main": "Add the missing colon: def sum_of_squares(xs):"}',
}
