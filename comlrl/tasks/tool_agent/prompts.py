"""The tool agent's chat messages: the system prompt, the first user message and the later rounds.

The tool response goes back as a `user` message holding `<tool_response>...</tool_response>` (and the
continuation hint): every chat template and every OpenAI-compatible server accepts it, unlike a `tool`
role, which needs template support and call ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import problem_text

Messages = list[dict[str, str]]

TOOL_SYSTEM_PROMPT = """You are an expert Python programmer with a Python tool.
Think step by step inside <think> ... </think>. To run code, write inside your thinking
<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>
with the code as one JSON string, and stop there. The system runs the code against the problem's tests and answers
<tool_response>{"stdout": "...", "error": null, "tests_passed": "p/t"}</tool_response>
Never write a <tool_response> yourself. Fix your code until the tests pass, then close your thinking with </think>
and give the final answer: the complete function in one ```python block.

Example:
<think>
I return twice the input and print one case to check it.
<tool_call>{"name": "python", "arguments": \
{"code": "def double(x):\\n    return 2 * x\\n\\nprint(double(3))"}}</tool_call>"""

TOOL_INSTRUCTIONS = (
    "Write the complete function from the problem, with the same name and signature. Test it with the "
    "python tool, then give the final answer."
)


def initial_messages(problem: Problem) -> Messages:
    """System prompt, then the problem and what to write."""
    return [
        {"role": "system", "content": TOOL_SYSTEM_PROMPT},
        {"role": "user", "content": f"{problem_text(problem.prompt)}\n\n{TOOL_INSTRUCTIONS}\n"
                                    f"Write `{problem.entry_point}`."},
    ]


def continue_messages(messages: Messages, assistant: str, observation: str) -> Messages:
    """The conversation after one round: the assistant's (cleaned) round and the tool's answer."""
    return [*messages, {"role": "assistant", "content": assistant}, {"role": "user", "content": observation}]


def conversation(first: Messages, rounds: Sequence[tuple[str, str]]) -> Messages:
    """The whole chat: first messages, then (assistant, observation) per round ("" observation: none)."""
    out = list(first)
    for assistant, obs in rounds:
        out.append({"role": "assistant", "content": assistant})
        if obs:
            out.append({"role": "user", "content": obs})
    return out
