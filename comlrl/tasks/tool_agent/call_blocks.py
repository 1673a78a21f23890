"""Where the `<tool_call>` blocks sit in a completion, and the `<tool_response>` blocks the model faked.

A block ends at its closing tag, at the next opening tag or response, or at the end of the text: servers
often strip the stop sequence and token limits cut calls short. Only the system may report execution
results, so responses the model wrote itself are found and stripped here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from comlrl.tasks.tool_agent.call_format import TOOL_CALL_CLOSE, ToolCall, ToolCallError
from comlrl.tasks.tool_agent.call_parser import parse_tool_call

_OPEN_RE = re.compile(r"<tool_call\s*>", re.I)
_CLOSE_RE = re.compile(r"</tool_call\s*>", re.I)
_RESPONSE_RE = re.compile(r"<tool_response\s*>.*?(?:</tool_response\s*>|\Z)", re.I | re.S)
_STRAY_RESPONSE_CLOSE = re.compile(r"</tool_response\s*>", re.I)


@dataclass(frozen=True)
class ToolCallSpan:
    """Where a `<tool_call>` block sits in the text; `closed` is False when the closing tag is missing."""

    start: int
    end: int
    raw: str
    closed: bool

    def parse(self, **kwargs: Any) -> ToolCall | ToolCallError:
        """Parse the block's content (see `parse_tool_call`)."""
        return parse_tool_call(self.raw, **kwargs)


def find_tool_calls(text: str) -> list[ToolCallSpan]:
    """All `<tool_call>` blocks in order, outside any `<tool_response>`.

    A block ends at its closing tag, at the next opening tag or response, or at the end of the text: servers
    often strip the stop sequence, and token limits cut calls short, so a missing close tag is normal.
    """
    if not isinstance(text, str):
        return []
    responses = [(m.start(), m.end()) for m in _RESPONSE_RE.finditer(text)]
    spans: list[ToolCallSpan] = []
    pos = 0
    while True:
        m = _OPEN_RE.search(text, pos)
        if m is None:
            break
        inside = next((r for r in responses if r[0] <= m.start() < r[1]), None)
        if inside is not None:
            pos = inside[1]
            continue
        begin = m.end()
        close = _CLOSE_RE.search(text, begin)
        limits = [len(text)]
        if close is not None:
            limits.append(close.start())
        nxt = _OPEN_RE.search(text, begin)
        if nxt is not None:
            limits.append(nxt.start())
        limits.extend(r[0] for r in responses if r[0] >= begin)
        stop = min(limits)
        closed = close is not None and close.start() == stop
        raw = text[begin:stop]
        if not closed and stop == len(text):
            raw = _drop_partial_close(raw)
        end = close.end() if closed and close is not None else stop
        spans.append(ToolCallSpan(start=m.start(), end=end, raw=raw, closed=closed))
        pos = max(end, begin)
    return spans


def _drop_partial_close(raw: str) -> str:
    """`...}}</tool_` cut by the token limit: drop the half-written closing tag."""
    for k in range(len(TOOL_CALL_CLOSE) - 1, 1, -1):
        if raw.endswith(TOOL_CALL_CLOSE[:k]):
            return raw[:-k]
    return raw


def strip_fake_responses(text: str) -> tuple[str, int]:
    """Remove `<tool_response>` blocks the model wrote itself; returns the clean text and how many.

    Only the system may report execution results; a hallucinated response would teach the model to
    invent outputs. An unclosed block runs to the end of the text.
    """
    if not isinstance(text, str):
        return "", 0
    clean, n = _RESPONSE_RE.subn("", text)
    return _STRAY_RESPONSE_CLOSE.sub("", clean), n


def close_unfinished_call(text: str) -> str:
    """Append `</tool_call>` when the last call is open (the server stripped the stop sequence)."""
    spans = find_tool_calls(text)
    if spans and not spans[-1].closed and spans[-1].end == len(text):
        return text + TOOL_CALL_CLOSE
    return text

