"""The tool-call format: the tags, the stop sequences, a parsed `ToolCall` or why it failed (`ToolCallError`),
and the `<tool_response>` block the model reads.

The agent writes `<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>` inside its
`<think>` block; `call_blocks` finds those blocks in a completion and `call_parser` reads one (repairing the
JSON small models really write). When nothing works, a structured `ToolCallError` renders into a
`<tool_response>` the model can act on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
# Stop after a call so the system, not the model, writes the response; stopping on a response opener
# catches models that skip the call and hallucinate a result directly.
STOP_SEQUENCES: tuple[str, ...] = (TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN)
# Known tools and their required string arguments; the single-argument case lets bare code and
# `"arguments": "<code>"` be mapped onto the right key.
DEFAULT_TOOLS: Mapping[str, tuple[str, ...]] = {"python": ("code",)}
# The keys models use for the tool's name and for its arguments (read by `call_parser` and `lenient_json`).
NAME_KEYS = ("name", "tool", "tool_name", "function")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_FORMAT_HINT = (
    'Write exactly <tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call> with the code as '
    'one JSON string: newlines as \\n, double quotes as \\", backslashes as \\\\.'
)


@dataclass(frozen=True)
class ToolCall:
    """A parsed call; `repair` names what had to be fixed ("strict" = well-formed JSON as written)."""

    name: str
    arguments: dict[str, Any]
    repair: str = "strict"
    raw: str = ""

    ok: ClassVar[bool] = True

    @property
    def well_formed(self) -> bool:
        """True when the model wrote valid JSON that needed no repair (the `--only-ideal` criterion)."""
        return self.repair == "strict"

    @property
    def code(self) -> str | None:
        """The code argument when there is one (the python tool)."""
        value = self.arguments.get("code")
        return value if isinstance(value, str) else None

    def to_json(self) -> str:
        """Canonical JSON of the call, e.g. to rewrite a repaired call as well-formed for distillation."""
        payload = {"name": self.name, "arguments": self.arguments}
        return json.dumps(payload, ensure_ascii=False, default=_jsonable)

    def render(self) -> str:
        """The canonical `<tool_call>` block."""
        return f"{TOOL_CALL_OPEN}{self.to_json()}{TOOL_CALL_CLOSE}"


@dataclass(frozen=True)
class ToolCallError:
    """Why a call could not be used, with where it broke, in a form the model can read and act on."""

    reason: str  # empty | too_long | invalid_json | not_an_object | missing_name | missing_arguments |
    #              bad_arguments | unknown_tool | not_text | internal
    message: str
    position: int | None = None
    line: int | None = None
    column: int | None = None
    snippet: str = ""
    raw: str = ""

    ok: ClassVar[bool] = False

    def payload(self) -> dict[str, Any]:
        """The error as a JSON-able dict (the body of the `<tool_response>`)."""
        out: dict[str, Any] = {"error": f"invalid tool call ({self.reason})", "message": self.message}
        if self.line is not None:
            out["at"] = f"line {self.line}, column {self.column}"
        if self.snippet:
            out["near"] = self.snippet
        out["hint"] = _FORMAT_HINT
        return out

    def render(self) -> str:
        """The `<tool_response>` block that goes back to the model instead of an execution result."""
        return format_tool_response(self.payload())


def format_tool_response(payload: Mapping[str, Any]) -> str:
    """Wrap a JSON-able payload as a `<tool_response>` block (the one format the model ever sees)."""
    body = json.dumps(dict(payload), ensure_ascii=False, default=_jsonable)
    return f"{TOOL_RESPONSE_OPEN}{body}{TOOL_RESPONSE_CLOSE}"


def _jsonable(value: Any) -> Any:
    """Python-literal calls can carry sets and bytes; render them rather than fail."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)

