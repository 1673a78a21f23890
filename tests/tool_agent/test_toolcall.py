"""Tool-call locating, parsing and repair: the contracts the rollout loop and the trace filters rely on."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.tasks.tool_agent.call_blocks import close_unfinished_call, find_tool_calls, strip_fake_responses
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES, ToolCall, ToolCallError, format_tool_response
from comlrl.tasks.tool_agent.call_parser import parse_tool_call, undo_doubled_escapes


def call(code: str) -> str:
    return json.dumps({"name": "python", "arguments": {"code": code}})


def code_of(raw: str) -> str:
    result = parse_tool_call(raw)
    assert isinstance(result, ToolCall), result
    assert result.code is not None
    return result.code


# --- locating blocks ----------------------------------------------------------------------------------


def test_several_calls_in_order_with_offsets() -> None:
    text = (
        f"<think>\nFirst try.\n<tool_call>{call('print(1)')}</tool_call>\n"
        "<tool_response>{\"stdout\": \"1\\n\"}</tool_response>\nNow the fix.\n"
        f"<tool_call>\n{call('print(2)')}\n</tool_call>"
    )
    spans = find_tool_calls(text)
    assert [s.closed for s in spans] == [True, True]
    assert [code_of(s.raw) for s in spans] == ["print(1)", "print(2)"]
    assert text[spans[0].start :].startswith("<tool_call>")
    assert text[: spans[1].end].endswith("</tool_call>")


def test_missing_close_tag_runs_to_end_or_next_call() -> None:
    text = f"<tool_call>{call('a = 1')}\n<tool_call>{call('b = 2')}"
    first, second = find_tool_calls(text)
    assert not first.closed and not second.closed
    assert code_of(first.raw) == "a = 1" and code_of(second.raw) == "b = 2"
    assert second.end == len(text)


def test_half_written_close_tag_is_dropped() -> None:
    (span,) = find_tool_calls(f"<tool_call>{call('x = 1')}</tool_ca")
    assert not span.closed and span.raw == call("x = 1")


def test_calls_inside_tool_responses_are_not_calls() -> None:
    text = f'<tool_response>{{"stdout": "<tool_call>{{}}</tool_call>"}}</tool_response><tool_call>{call("y")}'
    (span,) = find_tool_calls(text)
    assert code_of(span.raw) == "y"


def test_fenced_json_inside_the_tag() -> None:
    (span,) = find_tool_calls(f"<tool_call>\n```json\n{call('print(3)')}\n```\n</tool_call>")
    result = span.parse()
    assert isinstance(result, ToolCall) and result.code == "print(3)" and result.repair == "fence"


def test_no_calls_and_non_text() -> None:
    assert find_tool_calls("just thinking, no tools") == []
    assert find_tool_calls(None) == []  # type: ignore[arg-type]


def test_stop_sequences_and_closing_an_unfinished_call() -> None:
    assert "</tool_call>" in STOP_SEQUENCES and "<tool_response>" in STOP_SEQUENCES
    text = f"<think>check\n<tool_call>{call('print(1)')}"
    closed = close_unfinished_call(text)
    assert closed == text + "</tool_call>"
    assert close_unfinished_call(closed) == closed
    assert close_unfinished_call("no call") == "no call"


def test_strip_fake_responses_counts_blocks() -> None:
    text = (
        f"<tool_call>{call('print(1)')}</tool_call>\n<tool_response>{{\"stdout\": \"1\"}}</tool_response>\n"
        "So it works.\n<tool_response>made up</tool_response> then <tool_response>unclosed"
    )
    clean, n = strip_fake_responses(text)
    assert n == 3
    assert "tool_response" not in clean and "So it works." in clean and "<tool_call>" in clean
    assert strip_fake_responses("nothing here") == ("nothing here", 0)


# --- repairs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code", "repair"),
    [
        (call("print('ok')"), "print('ok')", "strict"),
        ('{"name": "python", "arguments": {"code": "a = 1\nb = 2"}}', "a = 1\nb = 2", "control_chars"),
        ('{"name": "python", "arguments": {"code": "print("hi")"}}', 'print("hi")', "unescaped_quotes"),
        ('{"name": "python", "arguments": {"code": "x = 1",},}', "x = 1", "trailing_comma"),
        ("{'name': 'python', 'arguments': {'code': 'print(\"it\\'s\")'}}", 'print("it\'s")', "single_quotes"),
        ('{"name": "python", "arguments": {"code": "x = 2"', "x = 2", "truncated"),
        (call("a = 1\\nb = 2"), "a = 1\nb = 2", "doubled_escapes"),
        ('{"name": "python", "arguments": "{\\"code\\": \\"z = 3\\"}"}', "z = 3", "arguments_string"),
        ("import os\nprint(os.sep)", "import os\nprint(os.sep)", "bare_code"),
        ('{"name": "python", "arguments": {"code": "print(r\\"\\d\\")"}}', 'print(r"\\d")', "invalid_escape"),
    ],
)
def test_each_repair_is_recorded(raw: str, code: str, repair: str) -> None:
    result = parse_tool_call(raw)
    assert isinstance(result, ToolCall), result
    assert result.code == code
    assert result.repair == repair


# Shapes SmolLM2-135M wrote inside an unclosed <tool_call> (tests/tool_agent/model_toolcalls.jsonl): the call
# is the first fenced block; prose and more blocks after it are not part of it, nor is the prose after a
# closing fence whose opener was left out.
FIRST = 'def add(a, b):\n    """Sum."""\n    return a + b'


@pytest.mark.parametrize("raw", [
    f"\n```python\n{FIRST}\n```\n\nHere's how you can test it:\n```python\nprint(add(2, 3))\n```\n\nDone.",
    f"\n```python\n{FIRST}\n```\n\nTest the function:\n```python\nprint(add(2,",
    f"\n{FIRST}\n```\n\nIn Python 3, `add` returns the sum. Example:\n```python\nprint(add(1, 2))\n```",
])
def test_the_first_fenced_block_is_the_call(raw: str) -> None:
    result = parse_tool_call(raw)
    assert isinstance(result, ToolCall) and result.code == FIRST and result.repair in ("fence+bare_code",), result


def test_a_fence_that_is_part_of_the_code_still_closes_at_the_end() -> None:
    raw = '```python\nprint("```")\nx = 1\n```'
    result = parse_tool_call(raw)
    assert isinstance(result, ToolCall) and result.code == 'print("```")\nx = 1'


def test_python_literal_fallback_for_tuples() -> None:
    result = parse_tool_call("{'name': 'python', 'arguments': {'code': 'print(1)', 'shape': (2, 3)}}")
    assert isinstance(result, ToolCall) and result.repair == "python_literal"
    assert result.arguments == {"code": "print(1)", "shape": (2, 3)}


def test_apostrophes_survive_single_quoted_json() -> None:
    """No global quote replacement: the apostrophes in code and comments are untouched."""
    raw = "{'name': 'python', 'arguments': {'code': \"# don't panic\\nprint('it\\\\'s', \\\"won't\\\")\"}}"
    assert code_of(raw) == "# don't panic\nprint('it\\'s', \"won't\")"


def test_doubled_escapes_only_when_the_code_cannot_run_as_is() -> None:
    assert undo_doubled_escapes('print("a\\nb")') is None  # a Python escape inside a string: keep
    assert undo_doubled_escapes("x = 1\ny = '\\\\n'") is None  # has real newlines: escaped correctly
    assert undo_doubled_escapes("def f():\\n    return 1") == "def f():\n    return 1"
    assert undo_doubled_escapes("print(1)") is None


def test_truncation_prefers_runnable_code() -> None:
    raw = '{"name": "python", "arguments": {"code": "d = {\\"k\\": 1}\\nprint(d[\\"k\\"])"}'
    assert code_of(raw) == 'd = {"k": 1}\nprint(d["k"])'


def test_name_with_quotes_is_not_a_reading() -> None:
    """One brace missing must not be read as a name that swallows the rest of the call."""
    result = parse_tool_call('{"name": "python", "arguments": {"code": "print(5)"}')
    assert isinstance(result, ToolCall) and result.name == "python" and result.code == "print(5)"


def test_tools_none_accepts_any_tool() -> None:
    raw = '{"name": "search", "arguments": {"query": "x"}}'
    assert isinstance(parse_tool_call(raw), ToolCallError)
    result = parse_tool_call(raw, tools=None)
    assert isinstance(result, ToolCall) and result.arguments == {"query": "x"}


def test_default_name_none_refuses_bare_code() -> None:
    assert isinstance(parse_tool_call("print(1)", default_name=None), ToolCallError)


def test_canonical_rendering_round_trips() -> None:
    result = parse_tool_call("{'name': 'python', 'arguments': {'code': 'print(\"é\")'}}")
    assert isinstance(result, ToolCall)
    (span,) = find_tool_calls(result.render())
    again = span.parse()
    assert isinstance(again, ToolCall) and again.well_formed and again.arguments == result.arguments


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("Let me think about what to run.", "invalid_json"),
        ('{"name": "python"}', "missing_arguments"),
        ('{"arguments": {"query": "x"}}', "missing_name"),
        ('{"name": "shell", "arguments": {"cmd": "ls"}}', "unknown_tool"),
        ('{"name": "python", "arguments": {"code": 5}}', "bad_arguments"),
        ('{"name": "python", "arguments": [1]}', "bad_arguments"),
        ("[1, 2]", "not_an_object"),
        ("x" * 200_000, "too_long"),
    ],
)
def test_structured_errors(raw: str, reason: str) -> None:
    result = parse_tool_call(raw)
    assert isinstance(result, ToolCallError)
    assert result.reason == reason and result.message and not result.ok


def test_error_locates_the_problem_and_renders_for_the_model() -> None:
    result = parse_tool_call('{"name": "python", "arguments": {code: print(1)}}')
    assert isinstance(result, ToolCallError) and result.reason == "invalid_json"
    assert result.line == 1 and result.column is not None and result.position is not None
    assert "<<HERE>>" in result.snippet
    rendered = result.render()
    assert rendered.startswith("<tool_response>") and rendered.endswith("</tool_response>")
    payload = json.loads(rendered[len("<tool_response>") : -len("</tool_response>")])
    assert payload["at"] == f"line 1, column {result.column}"
    assert '"name": "python"' in payload["hint"]


def test_format_tool_response_is_json() -> None:
    out = format_tool_response({"stdout": "é\n", "tests_passed": "2/3"})
    assert json.loads(out[len("<tool_response>") : -len("</tool_response>")]) == {
        "stdout": "é\n",
        "tests_passed": "2/3",
    }


# --- properties ---------------------------------------------------------------------------------------

# Printable text plus the characters that break naive parsers (repr would write other controls as \x..).
CODE_CHARS = st.characters(
    whitelist_categories=("Lu", "Ll", "Nd", "Po", "Ps", "Pe", "Sm"), whitelist_characters=" \n\t'\"\\{}[]:,é"
)
CODES = st.text(CODE_CHARS, max_size=60)


@settings(max_examples=150, deadline=None)
@given(CODES)
def test_strict_json_is_exact(code: str) -> None:
    result = parse_tool_call(call(code))
    assert isinstance(result, ToolCall)
    assert (result.repair == "strict" and result.code == code) or result.repair == "doubled_escapes"


@settings(max_examples=150, deadline=None)
@given(CODES)
def test_python_repr_is_exact(code: str) -> None:
    """Single-quoted (Python repr) calls: tokenizer-aware, so apostrophes and quotes come back exactly."""
    result = parse_tool_call(repr({"name": "python", "arguments": {"code": code}}))
    assert isinstance(result, ToolCall)
    assert result.code == code or result.repair.endswith("doubled_escapes")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_never_raises(raw: str) -> None:
    for text in (raw, "{" + raw, '{"name": "python", "arguments": {"code": "' + raw):
        assert isinstance(parse_tool_call(text), (ToolCall, ToolCallError))
        assert isinstance(find_tool_calls("<tool_call>" + text), list)
