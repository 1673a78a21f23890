"""The parser against a corpus of tool calls written the way models write them (valid and broken).

Each line of `toolcall_corpus.jsonl` is a model turn (`text`) containing one `<tool_call>` block, with the
exact `name` and `arguments` a careful reader would take from it, or `expect_error` for calls nothing can
recover. The parser must recover at least 59 of the recoverable ones exactly (same code string, byte for
byte), never turn a recoverable call into a different one, and answer every unrecoverable one with a
structured error that renders as a `<tool_response>`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from comlrl.tasks.tool_agent.call_blocks import find_tool_calls
from comlrl.tasks.tool_agent.call_format import ToolCall, ToolCallError
from comlrl.tasks.tool_agent.call_parser import parse_tool_call

CORPUS = Path(__file__).with_name("toolcall_corpus.jsonl")
MIN_RECOVERED = 59


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def outcome(entry: dict[str, Any]) -> tuple[str, ToolCall | ToolCallError]:
    """("exact" | "error" | "wrong" | "no_span", parse result) for one corpus entry."""
    spans = find_tool_calls(entry["text"])
    if len(spans) != 1:
        return "no_span", ToolCallError("internal", f"{len(spans)} blocks found")
    result = spans[0].parse()
    if isinstance(result, ToolCallError):
        return "error", result
    same = result.name == entry.get("name") and result.arguments == entry.get("arguments")
    return ("exact" if same else "wrong"), result


def table(rows: list[tuple[dict[str, Any], str, ToolCall | ToolCallError]]) -> str:
    """Per-category recovery table, plus the entries that went wrong."""
    total: Counter[str] = Counter()
    good: Counter[str] = Counter()
    lines = [f"{'category':<20} {'ok':>4} / {'n':<4}"]
    problems = []
    for entry, kind, result in rows:
        cat = entry["category"]
        total[cat] += 1
        ok = (kind == "error") if entry.get("expect_error") else (kind == "exact")
        good[cat] += ok
        if not ok:
            got = result.reason if isinstance(result, ToolCallError) else (result.name, result.arguments)
            problems.append(f"  {entry['id']}: {kind}, got {got!r}, want {entry.get('arguments')!r}")
    lines += [f"{cat:<20} {good[cat]:>4} / {total[cat]:<4}" for cat in total]
    return "\n".join(lines + (["failures:", *problems] if problems else []))


def test_corpus_shape() -> None:
    entries = load()
    assert len(entries) >= 60
    assert len({e["id"] for e in entries}) == len(entries)
    recoverable = [e for e in entries if not e.get("expect_error")]
    assert len(recoverable) >= MIN_RECOVERED
    categories = Counter(e["category"] for e in entries)
    assert all(n >= 3 for n in categories.values()), categories
    for e in recoverable:
        assert isinstance(e["name"], str) and isinstance(e["arguments"], dict), e["id"]
    codes = "\n".join(e["arguments"].get("code", "") for e in recoverable)
    for feature in ("'t", '"""', "\\", "f\"", "re.", "é"):  # apostrophes, docstrings, regexes, unicode
        assert feature in codes, feature


def test_corpus_recovery() -> None:
    rows = [(entry, *outcome(entry)) for entry in load()]
    report = table(rows)
    print(report)
    recoverable = [(e, kind) for e, kind, _ in rows if not e.get("expect_error")]
    recovered = sum(kind == "exact" for _, kind in recoverable)
    wrong = [e["id"] for e, kind in recoverable if kind in ("wrong", "no_span")]
    assert recovered >= MIN_RECOVERED, report
    assert not wrong, f"recoverable calls read differently instead of failing: {wrong}\n{report}"
    unrecoverable = [(e, kind, r) for e, kind, r in rows if e.get("expect_error")]
    assert all(kind == "error" for _, kind, _ in unrecoverable), report
    for _, _, result in unrecoverable:
        assert isinstance(result, ToolCallError)
        rendered = result.render()
        assert rendered.startswith("<tool_response>") and rendered.endswith("</tool_response>")
        payload = json.loads(rendered[len("<tool_response>") : -len("</tool_response>")])
        assert payload["error"] and payload["message"] and payload["hint"]


def test_valid_calls_are_recognised_as_well_formed() -> None:
    """`--only-ideal` relies on `repair == "strict"` meaning the model wrote correct JSON."""
    for entry in load():
        kind, result = outcome(entry)
        if entry["category"] == "valid":
            assert isinstance(result, ToolCall) and result.well_formed, entry["id"]
        elif kind == "exact" and entry["category"] not in ("doubled_escapes",):
            assert isinstance(result, ToolCall) and not result.well_formed, (entry["id"], result.repair)


@pytest.mark.parametrize("entry", [e for e in load() if not e.get("expect_error")], ids=lambda e: e["id"])
def test_every_prefix_is_handled(entry: dict[str, Any]) -> None:
    """Token limits cut calls anywhere: every prefix gives a call or a structured error, never a crash."""
    raw = find_tool_calls(entry["text"])[0].raw
    for end in range(0, len(raw), max(1, len(raw) // 12)):
        result = parse_tool_call(raw[:end])
        assert isinstance(result, (ToolCall, ToolCallError))
