"""Robust extraction of edits from what expert models actually send back."""

from __future__ import annotations

import pytest

from feedback import parse_edits

R = ["helper", "main"]


@pytest.mark.parametrize(
    "reply,expected",
    [
        ('{"helper": "a", "main": "b"}', {"helper": "a", "main": "b"}),
        ('Sure!\n```json\n{"helper": "use x", "main": "call aux"}\n```\nHope this helps {not json}',
         {"helper": "use x", "main": "call aux"}),
        ('Example: {"helper": "x"}. Answer: {"helper": "b", "main": "c"} -- trailing prose',
         {"helper": "b", "main": "c"}),
        ('```json\n{"helper": "return x + 1", "main": "def f(x):\\n    return aux(',  # truncated mid-string
         {"helper": "return x + 1", "main": "def f(x):\n    return aux("}),
        ('{"helper": "ab", "main": "xy", "extra": [1, 2', {"helper": "ab", "main": "xy"}),  # truncated later
        ('{"helper": "ab", "ma', {"helper": "ab"}),  # truncated inside a key
        ('{"HELPER": "x", "Main": "y"}', {"helper": "x", "main": "y"}),
        ('["a", "b"]', {"helper": "a", "main": "b"}),
        ('{"edits": {"helper": "q", "main": "r"}}', {"helper": "q", "main": "r"}),
        ('{"agent0": "p", "agent1": "q"}', {"helper": "p", "main": "q"}),
        ("{'helper': 'single quotes', 'main': None}", {"helper": "single quotes", "main": ""}),
        ('{"helper": ["line 1", "line 2"], "main": {"replace": "x"}}',
         {"helper": "line 1\nline 2", "main": '{"replace": "x"}'}),
        ('text "main": "unterminated value with \\"quote', {"main": 'unterminated value with "quote'}),
    ],
)
def test_parse_edits(reply, expected):
    assert parse_edits(reply, R) == expected


@pytest.mark.parametrize("reply", ["", "   ", "I cannot help with that.", "{}", '{"other": "x"}', "[1, 2, 3]",
                                   "{" * 5000])
def test_unusable_replies_give_none(reply):
    assert parse_edits(reply, R) is None
