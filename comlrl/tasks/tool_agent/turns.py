"""One round of the tool agent: what the model wrote, what the tool answers, and what the round earns.

A round's completion is reasoning that ends in a `<tool_call>` (generation stops at `</tool_call>`) or in
a final answer (the complete function in a ```python block, after `</think>`). `analyze_turn` reads it:
tool responses the model wrote itself are stripped and counted, only the first call is kept (anything
after it was written without seeing the result), and the code to run is the call's code or the final
answer's function. `observation` renders the sandbox run as the `<tool_response>` the model reads next,
with a short continuation hint; `turn_reward` scores the round (docs/tool-agent.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.code.extract import extract, function_header, split_fences
from comlrl.tasks.tool_agent.call_blocks import find_tool_calls, strip_fake_responses
from comlrl.tasks.tool_agent.call_format import TOOL_CALL_CLOSE, ToolCall, ToolCallError, format_tool_response
from feedback.context import cap

_THINK_OPEN = re.compile(r"<think\s*>", re.I)
_THINK_CLOSE = re.compile(r"</think\s*>", re.I)
_WORD = re.compile(r"[A-Za-z]{2,}")
NO_ACTION_HINT = (
    'Call the tool as <tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>, or give the '
    "final answer: the complete function in one ```python block."
)
HINT_ERROR = "The code did not run cleanly. Read the error, fix the code and call the tool again."
HINT_PARTIAL = "{passed}/{total} tests pass. Find the bug, fix the code and call the tool again."
HINT_BAD_CALL = "The tool call could not be read. Write it again as valid JSON."
HINT_DONE = "All tests pass. Close your thinking with </think> and give the final answer: the complete " \
            "function in one ```python block."
HINT_ACCEPTED = "All tests pass: the final answer is correct."


@dataclass(frozen=True)
class TurnAnalysis:
    """What one completion did; `kind` is "tool_call", "bad_call" (unparsable call), "final" or "none"."""

    raw: str
    clean: str  # fake responses stripped, cut after the first call (closed), i.e. what the model keeps
    kind: str
    call: ToolCall | ToolCallError | None
    final_code: str | None
    fake_responses: int
    extra_calls: int  # calls after the first, dropped with the text around them
    think_blocks: int  # `<think>` tags opened in this turn
    think_closed: bool
    reasoned: bool  # some prose before the action

    @property
    def code(self) -> str | None:
        """The code that runs this round: the call's code or the final answer's function."""
        if self.kind == "tool_call" and isinstance(self.call, ToolCall):
            return self.call.code
        return self.final_code if self.kind == "final" else None

    @property
    def call_repair(self) -> str | None:
        """"strict" for a well-formed call, the repair's name for a repaired one, "error" when unreadable."""
        if isinstance(self.call, ToolCall):
            return self.call.repair
        return "error" if isinstance(self.call, ToolCallError) else None

    @property
    def well_formed(self) -> bool:
        """A strict call or a final answer, and no fake tool response or dropped extra call."""
        ok = self.kind == "final" or (self.kind == "tool_call" and self.call_repair == "strict")
        return ok and self.fake_responses == 0 and self.extra_calls == 0


def _prose_before(text: str) -> bool:
    """At least three words of reasoning outside tags and code before the action."""
    bare = _THINK_OPEN.sub(" ", _THINK_CLOSE.sub(" ", text))
    _, outside = split_fences(bare)
    return len(_WORD.findall(outside)) >= 3


def analyze_turn(text: str, entry_point: str | None = None, prompt: str | None = None) -> TurnAnalysis:
    """Read one completion (never raises); `prompt` lets a body-only final answer be wrapped."""
    raw = text if isinstance(text, str) else ""
    clean, fakes = strip_fake_responses(raw)
    spans = find_tool_calls(clean)
    think_blocks = len(_THINK_OPEN.findall(clean))
    if spans:
        first = spans[0]
        kept = clean[: first.end] if first.closed else clean[: first.end].rstrip() + TOOL_CALL_CLOSE
        call = first.parse()
        return TurnAnalysis(
            raw=raw, clean=kept, kind="tool_call" if isinstance(call, ToolCall) and call.code is not None
            else "bad_call", call=call, final_code=None, fake_responses=fakes, extra_calls=len(spans) - 1,
            think_blocks=len(_THINK_OPEN.findall(kept)), think_closed=bool(_THINK_CLOSE.search(kept)),
            reasoned=_prose_before(clean[: first.start]),
        )
    closes = list(_THINK_CLOSE.finditer(clean))
    answer = clean[closes[-1].end() :] if closes else clean
    final_code: str | None = None
    blocks, _ = split_fences(answer)
    if blocks or (entry_point and re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", answer)):
        header = function_header(prompt, entry_point) if prompt and entry_point else None
        got = extract(answer, entry_point, header)
        final_code = got.code if got.code.strip() else None
    before = clean[: closes[-1].start()] if closes else clean[: clean.find("```")] if "```" in clean else ""
    return TurnAnalysis(
        raw=raw, clean=clean.rstrip(), kind="final" if final_code else "none", call=None, final_code=final_code,
        fake_responses=fakes, extra_calls=0, think_blocks=think_blocks, think_closed=bool(closes),
        reasoned=_prose_before(before),
    )


# --- observations -------------------------------------------------------------------------------------


def run_error(result: Any) -> str | None:
    """The error the model should read: the run's (syntax, load, timeout...) or else the first exception
    the function raised under the tests; None when it ran cleanly and only assertions decided."""
    if result is None:
        return None
    status, message = result.status, (result.message or "").strip()
    if status in ("passed", "failed"):
        if message:  # e.g. "the solution does not define add"
            return message
        raised = next((a for a in result.asserts if a.status == "error"), None)
        if raised is None:
            return None
        return f"{raised.error_type}: {raised.message}" if raised.message else str(raised.error_type)
    if status == "syntax_error" and result.syntax_error is not None:
        return f"SyntaxError: {result.syntax_error}"
    return f"{status}: {message}" if message else status


def observation(
    analysis: TurnAnalysis,
    result: Any,
    *,
    max_output_chars: int = 600,
    show_failed: int = 1,
    hints: bool = True,
) -> tuple[dict[str, Any], str]:
    """(payload of the `<tool_response>`, continuation hint or "") for one analysed round and its run."""
    if isinstance(analysis.call, ToolCallError):
        return analysis.call.payload(), HINT_BAD_CALL if hints else ""
    if analysis.code is None or result is None:
        return {"error": "no tool call and no final answer found"}, NO_ACTION_HINT if hints else ""
    payload: dict[str, Any] = {"stdout": cap(result.stdout or "", max_output_chars)}
    error = run_error(result)
    payload["error"] = cap(error, max_output_chars) if error else None
    payload["tests_passed"] = f"{result.passed}/{result.total}"
    failing = [a for a in result.asserts if a.status in ("failed", "error", "timeout")]
    if show_failed and failing:
        payload["failed"] = [
            cap(f"{a.source.strip()}" + (f"  # {a.error_type}: {a.message}" if a.message else ""), 300)
            for a in failing[:show_failed]
        ]
    hint = ""
    if hints:
        if result.total and result.passed == result.total:
            hint = HINT_ACCEPTED if analysis.kind == "final" else HINT_DONE
        elif error:
            hint = HINT_ERROR
        else:
            hint = HINT_PARTIAL.format(passed=result.passed, total=result.total)
    return payload, hint


def observation_message(payload: Mapping[str, Any], hint: str) -> str:
    """The text of the message that follows the assistant's round: the tool response, then the hint."""
    body = format_tool_response(payload)
    return f"{body}\n{hint}" if hint else body


# --- reward -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolReward:
    """Reward of one round: `total` = tests passed fraction + format terms (docs/tool-agent.md)."""

    total: float
    components: dict[str, float]
    tests_passed: int
    tests_total: int
    kind: str
    call_repair: str | None
    fake_responses: int
    exec: Any = None
    response: str = ""  # the message the model reads next (tool response + hint)
    notes: tuple[str, ...] = field(default_factory=tuple)
    clean: str = ""  # the round as the conversation keeps it (fake responses stripped, cut after the call)
    code: str = ""  # the code the round ran ("" when nothing ran)

    @property
    def scored(self) -> tuple[str, ...]:
        """The code this round ran (one agent)."""
        return (self.code,)

    @property
    def all_passed(self) -> bool:
        """Every test passed (and there was at least one)."""
        return self.tests_total > 0 and self.tests_passed == self.tests_total


def reward_range(format_weight: float = 0.1, fake_response_penalty: float = 0.1) -> tuple[float, float]:
    """(min, max) of `ToolReward.total`."""
    return -float(fake_response_penalty), 1.0 + 1.5 * float(format_weight)


def turn_reward(
    analysis: TurnAnalysis,
    result: Any,
    *,
    format_weight: float = 0.1,
    fake_response_penalty: float = 0.1,
    response: str = "",
) -> ToolReward:
    """Tests fraction of the round's code + well-formed action + reasoning first − fake responses."""
    passed = int(result.passed) if result is not None else 0
    total = int(result.total) if result is not None else 0
    comp = {"tests": passed / total if total else 0.0, "format": 0.0, "reasoning": 0.0, "fake_response": 0.0}
    answer_compiles = result is not None and result.status != "syntax_error"
    if ((analysis.kind == "final" and answer_compiles)
            or (analysis.kind == "tool_call" and analysis.call_repair == "strict")):
        comp["format"] = format_weight
    elif analysis.kind == "tool_call":
        comp["format"] = format_weight / 2
    if analysis.reasoned and analysis.kind in ("tool_call", "final"):
        comp["reasoning"] = format_weight / 2
    if analysis.fake_responses:
        comp["fake_response"] = -fake_response_penalty
    notes = []
    if analysis.fake_responses:
        notes.append(f"{analysis.fake_responses} fake tool response(s) stripped")
    if analysis.extra_calls:
        notes.append(f"{analysis.extra_calls} extra call(s) after the first dropped")
    if analysis.kind == "bad_call" and isinstance(analysis.call, ToolCallError):
        notes.append(f"unreadable call: {analysis.call.reason}")
    error = run_error(result)
    if error:
        notes.append(error[:200])
    return ToolReward(
        total=round(sum(comp.values()), 10), components=comp, tests_passed=passed, tests_total=total,
        kind=analysis.kind, call_repair=analysis.call_repair, fake_responses=analysis.fake_responses,
        exec=result, response=response, notes=tuple(notes), clean=analysis.clean, code=analysis.code or "",
    )
