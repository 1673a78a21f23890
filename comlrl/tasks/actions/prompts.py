"""The actions task's chat: a short system prompt, a demonstration exchange, and a reminder per user turn.

Why this shape: the embedded SmolLM2-135M-Instruct answered a prose-first prompt ("one or two sentences,
then your action(s) as JSON") with prose only; none of 48 turn-1 answers held a valid action. Small models
copy the form of an earlier assistant turn far better than they follow instructions, and weigh the end of
the last user message most. So the answer is "the JSON block first", the chat opens with a generic
two-turn demonstration (not one of the bundled tasks) whose answers are only that block, and every user
turn ends with a reminder; turn 1's reminder shows an example on the task's own first file (or API, or
workspace), the investigating first step every pattern asks for. Examples use the flat form
(`{"action": "read_file", "path": ...}`), which the 135M model gets right more often than the nested one.
Generation stops right after the block (`STOP_STRINGS`). Measured rates: docs/agentic-tasks.md.
"""

from __future__ import annotations

import json
from typing import Any

from comlrl.tasks.actions.registry import ActionRegistry
from comlrl.tasks.actions.taskfile import ActionProblem

Messages = list[dict[str, str]]

# the end of a ```json block holding one action or a list: nothing after it is read, so nothing is generated
STOP_STRINGS: tuple[str, ...] = ("}\n```", "]\n```")

_READ_HELLO = {"action": "read_file", "path": "hello.py"}
_FIX_HELLO = {"action": "create_file", "path": "hello.py", "content": "print('Hello, world!')\n"}


def block(action: dict[str, Any]) -> str:
    """One action as the answer format shows it: a ```json block."""
    return f"```json\n{json.dumps(action)}\n```"


def ask_format(example: dict[str, Any] | None = None) -> str:
    """The reminder that ends a user turn, optionally with an example action."""
    text = "Reply with your JSON action in a ```json block first"
    return f"{text}, like:\n{block(example)}" if example else f"{text}."


DEMONSTRATION: tuple[dict[str, str], ...] = (
    {"role": "user", "content": "The script hello.py should print 'Hello, world!' but prints nothing. "
                                f"Please fix it.\n\n{ask_format(_READ_HELLO)}"},
    {"role": "assistant", "content": block(_READ_HELLO)},
    {"role": "user", "content": f"Results of turn 1:\n[operator] read_file: ok\nhello.py:\nprint()\n\nNow fix it.\n\n"
                                f"{ask_format()}"},
    {"role": "assistant", "content": block(_FIX_HELLO)},
)

# system prompt + demonstration + the task's first user turn: what a cut of a long history must keep
HEAD_MESSAGES = 1 + len(DEMONSTRATION) + 1


def system_prompt(instructions: str, problem: ActionProblem, registry: ActionRegistry, max_actions: int) -> str:
    """Role, workspace and API, the answer format, the action types; short, because small models lose it."""
    files = ", ".join(p for p, _ in problem.files) or "none yet"
    api = f"The task's API: http://{problem.api.hosts[0]} (JSON)." if problem.api else "No API."
    return (
        f"{instructions}\n"
        f"Workspace files: {files}. {api}\n"
        "Answer every turn with your action as JSON in a ```json block first; nothing after the block is read. "
        f"A JSON list holds up to {max_actions} actions. Results come back in the next turn.\n"
        f"Actions:\n{registry.describe()}"
    )


def first_action(problem: ActionProblem) -> dict[str, Any]:
    """An investigating first step on the task's own resources: read its first file, else ask its API's
    root (the 404 lists the endpoints), else list the workspace."""
    if problem.files:
        return {"action": "read_file", "path": problem.files[0][0]}
    if problem.api:
        return {"action": "api_call", "method": "GET", "url": f"http://{problem.api.hosts[0]}/"}
    return {"action": "run_python", "code": "import os; print(os.listdir())"}


def reminder(problem: ActionProblem, turn: int) -> str:
    """The end of user turn `turn`: the answer format (turn 1 shows it on the task itself)."""
    return "\n\n" + ask_format(first_action(problem) if turn <= 1 else None)


def initial_messages(system: str, problem: ActionProblem) -> Messages:
    """System prompt, the demonstration exchange, then turn 1 of the task."""
    return [{"role": "system", "content": system}, *(dict(m) for m in DEMONSTRATION),
            {"role": "user", "content": problem.prompt + reminder(problem, 1)}]
