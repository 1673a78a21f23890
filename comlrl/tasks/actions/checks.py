"""Success checks of a task (file exists, content, JSON value, API called, Python passes, completed) and
their registry (`register_check` adds a kind task files may name)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.actions.harness import run_in_sandbox
from comlrl.tasks.actions.http_api import ApiState, is_subset


@dataclass(frozen=True)
class Check:
    """A success check of a task: `kind` names a function of `CHECKS`, `params` its arguments."""

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def describe(self) -> str:
        if self.description:
            return self.description
        p = dict(self.params)
        if self.kind == "file_exists":
            return f"file {p.get('path')} exists"
        if self.kind == "file_contains":
            what = p.get("text") if "text" in p else f"/{p.get('pattern')}/"
            return f"file {p.get('path')} contains {what!r}"
        if self.kind == "json_value":
            return f"{p.get('path')}: {p.get('key')} == {json.dumps(p.get('equals'))}"
        if self.kind == "api_called":
            return f"{p.get('method', 'any method')} {p.get('path')} was called"
        if self.kind == "python":
            return "a Python test passes: " + " ".join(str(p.get("code", "")).split())[:80]
        if self.kind == "completed":
            return "complete_task was called"
        return f"{self.kind} {json.dumps(p)[:80]}"


@dataclass(frozen=True)
class CheckResult:
    description: str
    passed: bool
    detail: str = ""


@dataclass
class CheckContext:
    """What a check may inspect: the final files, API calls, whether complete_task ran, the sandbox."""

    files: dict[str, str]
    api: ApiState
    completed: bool
    sandbox: Any = None


CheckFn = Callable[[Mapping[str, Any], CheckContext], tuple[bool, str]]


def _dig(value: Any, dotted: str) -> Any:
    for part in str(dotted).split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(dotted)
    return value


def _check_file_exists(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    return (p["path"] in c.files, "" if p["path"] in c.files else "missing")


def _check_file_contains(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    text = c.files.get(p["path"])
    if text is None:
        return False, "missing"
    if "text" in p:
        hay, needle = (text, str(p["text"])) if p.get("case", True) else (text.lower(), str(p["text"]).lower())
        return needle in hay, ""
    return re.search(str(p["pattern"]), text, re.M) is not None, ""


def _check_json_value(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    text = c.files.get(p["path"])
    if text is None:
        return False, "missing"
    try:
        value = _dig(json.loads(text), p["key"])
    except (ValueError, KeyError):
        return False, "key not found or invalid JSON"
    return value == p["equals"], f"got {json.dumps(value)[:60]}"


def _check_api_called(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    for call in c.api.calls:
        if p.get("method") and call["method"] != str(p["method"]).upper():
            continue
        if call["path"].rstrip("/") != "/" + str(p["path"]).strip("/"):
            continue
        if int(call.get("status", 500)) >= 400:
            continue
        if "body" in p and not is_subset(p["body"], call.get("body")):
            continue
        return True, ""
    return False, f"{len(c.api.calls)} call(s), none matching"


def _check_python(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    run = run_in_sandbox(c.sandbox, str(p["code"]), c.files)
    return run.ok, (run.error or "")[-200:]


def _check_completed(p: Mapping[str, Any], c: CheckContext) -> tuple[bool, str]:
    return c.completed, ""


CHECKS: dict[str, tuple[CheckFn, tuple[str, ...]]] = {
    "file_exists": (_check_file_exists, ("path",)),
    "file_contains": (_check_file_contains, ("path",)),
    "json_value": (_check_json_value, ("path", "key", "equals")),
    "api_called": (_check_api_called, ("path",)),
    "python": (_check_python, ("code",)),
    "completed": (_check_completed, ()),
}


def register_check(kind: str, fn: CheckFn, required: Sequence[str] = ()) -> None:
    """Add a success-check kind usable in task files: fn(params, CheckContext) -> (passed, detail)."""
    CHECKS[kind] = (fn, tuple(required))


def evaluate_checks(checks: Sequence[Check], ctx: CheckContext) -> tuple[CheckResult, ...]:
    out = []
    for chk in checks:
        fn = CHECKS.get(chk.kind)
        if fn is None:
            out.append(CheckResult(chk.describe(), False, f"unknown check kind {chk.kind!r}"))
            continue
        try:
            ok, detail = fn[0](chk.params, ctx)
        except Exception as exc:  # noqa: BLE001 - a broken check fails, it does not stop training
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        out.append(CheckResult(chk.describe(), bool(ok), detail))
    return tuple(out)
