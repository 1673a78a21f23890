"""The task file (JSONL): one `ActionProblem` per line, validated; errors name the file, line and field."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from comlrl.tasks.actions.checks import CHECKS, Check
from comlrl.tasks.actions.http_api import ApiSpec, Endpoint
from comlrl.tasks.actions.patterns import PATTERNS, fill
from comlrl.tasks.actions.workspace import WorkspaceError, path_parts


class TaskFileError(ValueError):
    """A bad task file; the message names the file, the line and the field."""


@dataclass(frozen=True)
class ActionProblem:
    """One task of a task file; `prompt` (turn-1 user message) and `entry_point` (the pattern's name) make
    it look like a `Problem` to the trainer."""

    task_id: str
    pattern: str
    goal: str
    prompt: str
    entry_point: str
    files: tuple[tuple[str, str], ...] = ()
    api: ApiSpec | None = None
    checks: tuple[Check, ...] = ()
    user_turns: tuple[str, ...] = ()  # overrides the pattern's follow-ups
    test: str = ""

    def fields(self) -> dict[str, str]:
        return {"goal": self.goal, "host": self.api.hosts[0] if self.api else "none",
                "files": ", ".join(p for p, _ in self.files) or "none"}

    def user_turn(self, turn: int) -> str:
        if turn > 1 and self.user_turns:
            return fill(self.user_turns[min(turn - 2, len(self.user_turns) - 1)], self.fields())
        return PATTERNS[self.pattern].user_turn(turn, **self.fields())


def _need(rec: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if key not in rec:
        raise TaskFileError(f"{where}: missing field '{key}'")
    if not isinstance(rec[key], typ):
        raise TaskFileError(f"{where}: field '{key}' has the wrong type ({type(rec[key]).__name__})")
    return rec[key]


def problem_from_record(rec: Any, where: str = "<record>") -> ActionProblem:
    """Validate one task record (see docs/agentic-tasks.md for the format)."""
    if not isinstance(rec, dict):
        raise TaskFileError(f"{where}: expected a JSON object")
    task_id = _need(rec, "task_id", str, where)
    pattern = _need(rec, "pattern", str, where)
    if pattern not in PATTERNS:
        raise TaskFileError(f"{where}: unknown pattern {pattern!r}; registered: {', '.join(PATTERNS)}")
    goal = _need(rec, "goal", str, where)
    files = rec.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise TaskFileError(f"{where}: field 'files' must map paths to text")
    for path in files:
        try:
            path_parts(path)
        except WorkspaceError as exc:
            raise TaskFileError(f"{where}: files: {exc}") from None
    api = None
    if rec.get("api") is not None:
        raw = rec["api"]
        if not isinstance(raw, dict):
            raise TaskFileError(f"{where}: field 'api' must be an object")
        hosts = raw.get("hosts") or ([raw["host"]] if raw.get("host") else [])
        if not hosts or not all(isinstance(h, str) and re.fullmatch(r"[a-z0-9.-]+", h) for h in hosts):
            raise TaskFileError(f"{where}: api needs 'host' (a lower-case host name)")
        eps = []
        for i, e in enumerate(raw.get("endpoints", [])):
            w = f"{where}: api.endpoints[{i}]"
            if not isinstance(e, dict) or not isinstance(e.get("path"), str) or not e["path"].startswith("/"):
                raise TaskFileError(f"{w}: needs 'path' starting with '/'")
            if not isinstance(e.get("status", 200), int) or not isinstance(e.get("when", []), list) or not all(
                    isinstance(c, dict) for c in e.get("when", [])) or not isinstance(e.get("require") or {}, dict):
                raise TaskFileError(f"{w}: 'status' must be an integer, 'when' a list of objects, 'require' an object")
            eps.append(Endpoint(method=str(e.get("method", "GET")).upper(), path=e["path"],
                                status=int(e.get("status", 200)), response=e.get("response"),
                                store=e.get("store"), from_store=e.get("from_store"), require=e.get("require"),
                                when=tuple(e.get("when", ()))))
        api = ApiSpec(tuple(hosts), tuple(eps))
    checks = []
    for i, c in enumerate(_need(rec, "checks", list, where)):
        w = f"{where}: checks[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("type"), str):
            raise TaskFileError(f"{w}: needs 'type'")
        if c["type"] not in CHECKS:
            raise TaskFileError(f"{w}: unknown check type {c['type']!r}; known: {', '.join(CHECKS)}")
        params = {k: v for k, v in c.items() if k not in ("type", "description")}
        for req in CHECKS[c["type"]][1]:
            if req not in params:
                raise TaskFileError(f"{w}: check {c['type']} needs '{req}'")
        if c["type"] == "file_contains" and "text" not in params and "pattern" not in params:
            raise TaskFileError(f"{w}: file_contains needs 'text' or 'pattern'")
        checks.append(Check(c["type"], params, str(c.get("description", ""))))
    if not checks:
        raise TaskFileError(f"{where}: a task needs at least one success check")
    turns = rec.get("user_turns", [])
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise TaskFileError(f"{where}: field 'user_turns' must be a list of strings")
    base = ActionProblem(task_id, pattern, goal, "", pattern, tuple(sorted(files.items())), api, tuple(checks),
                         tuple(turns))
    return replace(base, prompt=base.user_turn(1))


def load_action_tasks(path: str | os.PathLike[str]) -> list[ActionProblem]:
    """Every task of a JSONL task file, validated; TaskFileError names the line of the first problem."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise TaskFileError(f"{p}: task file does not exist")
    out: list[ActionProblem] = []
    seen: set[str] = set()
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise TaskFileError(f"{where}: invalid JSON ({exc})") from None
        prob = problem_from_record(rec, where)
        if prob.task_id in seen:
            raise TaskFileError(f"{where}: duplicate task_id {prob.task_id!r}")
        seen.add(prob.task_id)
        out.append(prob)
    if not out:
        raise TaskFileError(f"{p}: no tasks found")
    return out
