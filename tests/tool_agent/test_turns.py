"""Reading one tool round, rendering the tool's answer and scoring the round (no sandbox needed)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from comlrl.tasks.tool_agent.call_format import ToolCall, ToolCallError
from comlrl.tasks.tool_agent.turns import (
    HINT_ACCEPTED,
    HINT_BAD_CALL,
    HINT_DONE,
    HINT_ERROR,
    analyze_turn,
    observation,
    observation_message,
    reward_range,
    run_error,
    turn_reward,
)

PROMPT = 'def add(a: int, b: int) -> int:\n    """Return the sum.\n    >>> add(2, 3)\n    5\n    """\n'


def call(code: str) -> str:
    return "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"


@dataclass(frozen=True)
class A:  # an AssertResult stand-in
    source: str
    status: str
    error_type: str | None = None
    message: str = ""


@dataclass(frozen=True)
class R:  # an ExecResult stand-in
    status: str
    passed: int
    total: int
    stdout: str = ""
    message: str = ""
    syntax_error: object = None
    asserts: tuple = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


def test_tool_call_round_is_cut_after_the_first_call() -> None:
    text = ("<think>\nI add the two numbers and print one case.\n" + call("def add(a, b):\n    return a + b")
            + "\n<tool_response>{\"stdout\": \"5\"}</tool_response>\nIt works!\n" + call("print(1)"))
    a = analyze_turn(text, "add", PROMPT)
    assert a.kind == "tool_call" and isinstance(a.call, ToolCall) and a.call_repair == "strict"
    assert a.code == "def add(a, b):\n    return a + b"
    assert a.fake_responses == 1 and a.extra_calls == 1 and not a.well_formed
    assert a.clean.endswith("</tool_call>") and "tool_response" not in a.clean and "It works" not in a.clean
    assert a.think_blocks == 1 and not a.think_closed and a.reasoned


def test_server_stripped_close_tag_is_restored() -> None:
    text = '<think>\nLet me run it now please.\n<tool_call>\n{"name": "python", "arguments": {"code": "x = 1"}}\n'
    a = analyze_turn(text, "add")
    assert a.kind == "tool_call" and a.code == "x = 1" and a.well_formed
    assert a.clean.endswith('}}</tool_call>')


def test_repaired_call_is_usable_but_not_well_formed() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "print("hi")\nx = 1"}}</tool_call>'
    a = analyze_turn(text, "add")
    assert a.kind == "tool_call" and a.code == 'print("hi")\nx = 1'
    assert a.call_repair != "strict" and not a.well_formed and not a.reasoned


def test_unreadable_call_is_a_bad_call_with_a_structured_error() -> None:
    a = analyze_turn('thinking hard about this\n<tool_call>{"name": "python", "arguments": {"code": }}</tool_call>')
    assert a.kind == "bad_call" and isinstance(a.call, ToolCallError) and a.code is None
    payload, hint = observation(a, None)
    assert payload["error"].startswith("invalid tool call") and "hint" in payload and hint == HINT_BAD_CALL


def test_final_answer_after_think_and_body_only_answers() -> None:
    text = "The tests passed, so I am done.\n</think>\n\n```python\ndef add(a, b):\n    return a + b\n```"
    a = analyze_turn(text, "add", PROMPT)
    assert a.kind == "final" and "return a + b" in (a.code or "") and a.well_formed and a.reasoned
    body_only = analyze_turn("</think>\n```python\n    return a + b\n```", "add", PROMPT)
    assert body_only.kind == "final" and "def add(a: int, b: int) -> int:" in (body_only.code or "")


def test_prose_only_is_no_action() -> None:
    a = analyze_turn("I am not sure what to do here.", "add", PROMPT)
    assert a.kind == "none" and a.code is None and not a.well_formed
    payload, hint = observation(a, None)
    assert payload == {"error": "no tool call and no final answer found"} and "tool_call" in hint


@pytest.mark.parametrize("bad", [None, 42, ""])
def test_non_text_never_raises(bad: object) -> None:
    assert analyze_turn(bad, "add").kind == "none"  # type: ignore[arg-type]


def test_observation_of_a_partial_pass_names_a_failing_test() -> None:
    a = analyze_turn(call("def add(a, b):\n    return a - b"), "add")
    res = R("failed", 1, 4, stdout="x" * 5000, asserts=(
        A("assert candidate(0, 0) == 0", "passed"), A("assert candidate(2, 3) == 5", "failed", "AssertionError",
                                                      "assert -1 == 5")))
    payload, hint = observation(a, res, max_output_chars=100, show_failed=1)
    assert payload["tests_passed"] == "1/4" and payload["error"] is None
    assert payload["failed"] == ["assert candidate(2, 3) == 5  # AssertionError: assert -1 == 5"]
    assert len(payload["stdout"]) < 200 and "characters cut" in payload["stdout"]
    assert hint.startswith("1/4 tests pass")
    msg = observation_message(payload, hint)
    assert msg.startswith("<tool_response>{") and msg.split("</tool_response>")[1].strip() == hint
    assert json.loads(msg[len("<tool_response>"):msg.index("</tool_response>")])["tests_passed"] == "1/4"
    assert "failed" not in observation(a, res, show_failed=0)[0]
    assert observation(a, res, hints=False)[1] == ""


def test_errors_come_from_the_run_or_the_first_raising_test() -> None:
    a = analyze_turn(call("def add(a, b):\n    return c"), "add")
    raised = R("failed", 0, 2,
               asserts=(A("assert candidate(1, 2) == 3", "error", "NameError", "name 'c' is not defined"),))
    assert run_error(raised) == "NameError: name 'c' is not defined"
    assert observation(a, raised)[1] == HINT_ERROR
    assert run_error(R("load_error", 0, 2, message="ZeroDivisionError: division by zero")) == \
        "load_error: ZeroDivisionError: division by zero"
    assert (run_error(R("failed", 0, 2, message="the solution does not define add"))
            == "the solution does not define add")
    assert run_error(R("passed", 2, 2)) is None and run_error(None) is None


def test_hints_after_all_pass() -> None:
    a = analyze_turn(call("def add(a, b):\n    return a + b"), "add")
    assert observation(a, R("passed", 3, 3))[1] == HINT_DONE
    final = analyze_turn("</think>\n```python\ndef add(a, b):\n    return a + b\n```", "add")
    assert observation(final, R("passed", 3, 3))[1] == HINT_ACCEPTED


def test_reward_terms_and_range() -> None:
    strict = analyze_turn("<think>\nI will test the sum now.\n" + call("def add(a, b):\n    return a + b"), "add")
    r = turn_reward(strict, R("failed", 2, 4))
    assert r.components == {"tests": 0.5, "format": 0.1, "reasoning": 0.05, "fake_response": 0.0}
    assert r.total == pytest.approx(0.65) and not r.all_passed and r.kind == "tool_call"
    full = turn_reward(strict, R("passed", 4, 4), format_weight=0.2)
    assert full.total == pytest.approx(1.3) and full.all_passed
    assert full.total == reward_range(0.2, 0.1)[1]
    repaired = analyze_turn('<tool_call>{"name": "python", "arguments": {"code": "a = \'x\'\nb = 1"}}</tool_call>'
                            '<tool_response>fake</tool_response>', "add")
    rr = turn_reward(repaired, R("failed", 0, 4))
    assert rr.components["format"] == pytest.approx(0.05) and rr.components["fake_response"] == -0.1
    assert rr.total == pytest.approx(-0.05) and rr.fake_responses == 1 and any("fake" in n for n in rr.notes)
    nothing = turn_reward(analyze_turn("no idea <tool_response>x</tool_response>", "add"), None)
    assert nothing.total == reward_range()[0] == -0.1 and nothing.tests_total == 0


def test_final_answer_format_needs_code_that_compiles() -> None:
    cut = analyze_turn("```python\ndef add(a: int, b", "add", PROMPT)
    assert cut.kind == "final"
    assert turn_reward(cut, R("syntax_error", 0, 2)).components["format"] == 0.0
    ok = analyze_turn("```python\ndef add(a, b):\n    return a\n```", "add", PROMPT)
    assert turn_reward(ok, R("failed", 1, 2)).components["format"] == 0.1
