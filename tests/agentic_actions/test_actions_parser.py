"""Parsing structured actions: valid, malformed, unknown-type and schema-violating answers.

Every bad answer becomes an ActionError (then an observation and a format penalty), never an exception.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.tasks.actions import (
    REGISTRY,
    Action,
    ActionContext,
    ActionRegistry,
    Observation,
    Param,
    parse_actions,
)


def fence(obj: object) -> str:
    return f"I will do this.\n```json\n{json.dumps(obj)}\n```"


@pytest.mark.parametrize("text, expected", [
    (fence({"action": "read_file", "parameters": {"path": "app.py"}}), [("read_file", {"path": "app.py"})]),
    (fence({"type": "read_file", "params": {"path": "a"}}), [("read_file", {"path": "a"})]),
    (fence({"action": "read_file", "arguments": '{"path": "a"}'}), [("read_file", {"path": "a"})]),  # JSON string
    ('Looking. {"action": "read_file", "path": "a.py"} Done.', [("read_file", {"path": "a.py"})]),  # bare + flat
    (fence([{"action": "read_file", "parameters": {"path": "a"}},
            {"action": "complete_task", "parameters": {"summary": "ok"}}]),
     [("read_file", {"path": "a"}), ("complete_task", {"summary": "ok"})]),
    ("```json\n{\"action\": \"run_python\", \"parameters\": {\"code\": \"print(1)\nprint(2)\"}}\n```",  # raw newline
     [("run_python", {"code": "print(1)\nprint(2)"})]),
    (fence({"action": "api_call", "parameters": {"method": "post", "url": "http://x.test/a", "body": {"k": [1]}}}),
     [("api_call", {"method": "post", "url": "http://x.test/a", "body": {"k": [1]}})]),
    ("```\n{\"action\": \"read_file\", \"parameters\": {\"path\": \"a\"}}\n```", [("read_file", {"path": "a"})]),
])
def test_valid_actions(text: str, expected: list) -> None:
    r = parse_actions(text)
    assert r.format_ok, r.errors
    assert [(a.type, a.params) for a in r.actions] == expected
    assert "```" not in r.prose


def test_prose_around_the_action_is_kept_and_prose_json_is_ignored() -> None:
    text = 'The config {"port": 1} looks odd.\n' + fence({"action": "read_file", "parameters": {"path": "c"}})
    r = parse_actions(text)
    assert [a.type for a in r.actions] == ["read_file"] and r.format_ok
    assert r.prose.startswith("The config")
    bare = 'The config {"port": 1} looks odd. {"action": "read_file", "parameters": {"path": "c"}}'
    r = parse_actions(bare)
    assert [a.type for a in r.actions] == ["read_file"] and r.format_ok  # {"port": 1} is prose, not an error


@pytest.mark.parametrize("text", [
    '```json\n{"action": "read_file", "parameters": {"path": "app.py"\n```',  # unclosed object
    '```json\n{"action": "read_file", "parameters": {"path": "app.py"}} trailing\n```',  # extra text
    '```json\n{"action": "read_file", \'parameters\': {}}\n```',  # single quotes
    '{"action": "create_file", "parameters": {"path": "a", "content": "x"',  # bare, cut off by max tokens
    '```json\n{"action": "read_file", "parameters": {"path": "a"}}',  # unclosed fence, valid JSON is fine...
])
def test_malformed_json(text: str) -> None:
    r = parse_actions(text)
    if text.endswith('{"path": "a"}}'):  # ...the last case: an unclosed fence with complete JSON parses
        assert [a.type for a in r.actions] == ["read_file"]
        return
    assert not r.actions
    assert [e.kind for e in r.errors] == ["malformed_json"]
    assert "invalid JSON" in r.errors[0].message or "extra text" in r.errors[0].message


def test_unknown_type_lists_the_known_ones() -> None:
    r = parse_actions(fence({"action": "delete_everything", "parameters": {}}))
    assert not r.actions and [e.kind for e in r.errors] == ["unknown_type"]
    assert "delete_everything" in r.errors[0].message and "create_file" in r.errors[0].message
    r = parse_actions(fence({"action": 42, "parameters": {}}))
    assert [e.kind for e in r.errors] == ["unknown_type"]


@pytest.mark.parametrize("obj, fragment", [
    ({"action": "create_file", "parameters": {"path": "a"}}, "missing required parameter 'content'"),
    ({"action": "create_file", "parameters": {"path": 3, "content": "x"}}, "'path' must be a string, got integer"),
    ({"action": "read_file", "parameters": {"path": "a", "mode": "r"}}, "unknown parameter(s) 'mode'"),
    ({"action": "api_call", "parameters": {"method": "FETCH", "url": "http://x"}}, "must be one of"),
    ({"action": "read_file", "parameters": {"path": None}}, "must not be null"),
    ({"action": "read_file", "parameters": ["a"]}, "must be an object, got array"),
    ({"action": "read_file", "parameters": {"path": "a"}, "path": "b"}, "outside \"parameters\""),
    ({"action": "create_file", "parameters": {"path": "a", "content": "x" * 20_001}}, "at most 20000"),
    ({"action": "complete_task", "parameters": {"summary": True}}, "must be a string, got boolean"),
])
def test_schema_violations(obj: dict, fragment: str) -> None:
    r = parse_actions(fence(obj))
    assert not r.actions
    assert [e.kind for e in r.errors] == ["schema"]
    assert fragment in r.errors[0].message


def test_not_an_action_and_no_action() -> None:
    r = parse_actions(fence({"path": "a"}))
    assert [e.kind for e in r.errors] == ["not_an_action"]
    r = parse_actions(fence([1, 2]))
    assert [e.kind for e in r.errors] == ["not_an_action", "not_an_action"]
    r = parse_actions("I think we should read the file first.")
    assert not r.actions and [e.kind for e in r.errors] == ["no_action"]
    assert '"action"' in r.errors[0].message  # tells the model the expected format


def test_valid_and_invalid_actions_mix_and_limit() -> None:
    body = [{"action": "read_file", "parameters": {"path": str(i)}} for i in range(5)]
    body.insert(1, {"action": "nope", "parameters": {}})
    r = parse_actions(fence(body), max_actions=3)
    assert [a.params["path"] for a in r.actions] == ["0", "1", "2"]
    assert [e.kind for e in r.errors] == ["unknown_type", "too_many"]
    assert "2 action(s) beyond the limit of 3" in r.errors[1].message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    r = parse_actions(text)
    assert r.actions or r.errors


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10))
def test_never_raises_on_arbitrary_json(value: object) -> None:
    for text in (fence(value), json.dumps(value), fence({"action": "create_file", "parameters": value})):
        r = parse_actions(text)
        assert r.actions or r.errors
        for a in r.actions:
            assert REGISTRY.get(a.type).validate(a.params) == []  # type: ignore[union-attr]


def test_non_string_input_and_huge_input() -> None:
    assert parse_actions(None).errors[0].kind == "no_action"  # type: ignore[arg-type]
    assert parse_actions("{" * 60_000).errors[0].kind == "malformed_json"


def test_users_register_new_types_without_editing_the_library() -> None:
    reg = REGISTRY.copy()

    @reg.register("word_count", [Param("path"), Param("min_len", "integer", required=False)],
                  description="count words")
    def word_count(action: Action, ctx: ActionContext) -> Observation:
        return Observation(True, str(len(ctx.workspace.read(action.params["path"]).split())))

    assert "word_count" in reg and "word_count" not in REGISTRY  # the default registry is untouched
    assert "word_count(path: string, min_len?: integer): count words" in reg.describe()
    ok = parse_actions(fence({"action": "word_count", "parameters": {"path": "a"}}), reg)
    assert [a.type for a in ok.actions] == ["word_count"]
    bad = parse_actions(fence({"action": "word_count", "parameters": {"path": "a", "min_len": "3"}}), reg)
    assert "'min_len' must be an integer" in bad.errors[0].message
    assert parse_actions(fence({"action": "word_count", "parameters": {"path": "a"}})).errors[0].kind == "unknown_type"
    with pytest.raises(ValueError, match="already registered"):
        reg.register("word_count", [], word_count)
    with pytest.raises(ValueError, match="not one of"):
        Param("x", "decimal")


def test_executor_errors_become_failed_observations() -> None:
    reg = ActionRegistry()
    t = reg.register("boom", [], lambda a, c: 1 / 0)
    obs = t.execute(Action("boom", {}), ActionContext(workspace=None))
    assert not obs.ok and "ZeroDivisionError" in obs.text
    t2 = reg.register("bad_return", [], lambda a, c: "not an observation")
    assert not t2.execute(Action("bad_return", {}), ActionContext(workspace=None)).ok
