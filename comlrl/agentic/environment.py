"""The multi-turn environment of the action task: workspaces, a loopback API, patterns, success checks.

A trajectory's state is the replay of its joint actions: every state lives in its own scratch directory
(copied from its parent's, then changed by the turn's actions), with its own API state, so sibling
trajectories of a turn tree never see each other's files or calls, and the same history always gives the
same state.

    Workspace        a directory; paths are relative, `..`, absolute paths and symlinks are refused
    ApiServer        a real HTTP server on 127.0.0.1 serving each task's scripted endpoints
    Pattern          scripts the user turns (troubleshooting, setup workflow, iterative improvement)
    Check            a success check (file exists, content, JSON value, API called, Python passes, completed)
    ActionProblem    one task of the task file (JSONL)
    Environment      executes a turn's actions and returns the next state with its observations
"""

from __future__ import annotations

import copy
import errno
import hashlib
import http.client
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from comlrl.agentic.actions import (
    REGISTRY,
    ActionContext,
    ActionError,
    ActionRegistry,
    Observation,
    parse_actions,
)
from feedback.context import cap

log = logging.getLogger("comlrl.agentic")

TRAJECTORY_HEADER = "X-Comlrl-Trajectory"
OUTPUT_MARK = "\x00COMLRL-RUN-PYTHON\x00"
MAX_OBS_CHARS = 1500


class WorkspaceError(ValueError):
    """A path or write the workspace refuses; the message becomes the action's observation."""


class TaskFileError(ValueError):
    """A bad task file; the message names the file, the line and the field."""


# ------------------------------------------------------------------------------------------ workspace


def path_parts(rel: Any) -> list[str]:
    """The components of a relative workspace path; WorkspaceError for empty, absolute or `..` paths."""
    if not isinstance(rel, str) or not rel.strip():
        raise WorkspaceError("the path is empty")
    if "\x00" in rel or len(rel) > 200:
        raise WorkspaceError(f"invalid path {rel[:60]!r}")
    norm = rel.strip().replace("\\", "/")
    if norm.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", norm):
        raise WorkspaceError(f"{rel!r}: absolute paths are not allowed; use a path relative to the workspace")
    parts = [p for p in PurePosixPath(norm).parts if p not in ("", ".")]
    if ".." in parts:
        raise WorkspaceError(f"{rel!r}: '..' is not allowed; stay inside the workspace")
    if not parts:
        raise WorkspaceError(f"{rel!r} names the workspace itself, not a file")
    return parts


class Workspace:
    """One trajectory's scratch directory. Every path is relative and stays inside `root`."""

    def __init__(self, root: str | os.PathLike[str], *, max_file_chars: int = 20_000, max_files: int = 64,
                 max_total_chars: int = 400_000) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_file_chars = max_file_chars
        self.max_files = max_files
        self.max_total_chars = max_total_chars

    def resolve(self, rel: str) -> Path:
        """The absolute path of a workspace path; WorkspaceError for anything that could leave the root."""
        parts = path_parts(rel)
        target = self.root.joinpath(*parts)
        probe = self.root
        for part in parts:
            probe = probe / part
            if probe.is_symlink():
                raise WorkspaceError(f"{rel!r}: symbolic links are not allowed in the workspace")
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(target)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise WorkspaceError(f"{rel!r} escapes the workspace")
        return target

    def exists(self, rel: str) -> bool:
        try:
            return self.resolve(rel).is_file()
        except WorkspaceError:
            return False

    def read(self, rel: str, limit: int = 4000) -> str:
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a directory; files in it: {', '.join(self.list(rel)) or 'none'}")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise WorkspaceError(f"{rel} does not exist") from None
        except OSError as exc:
            raise WorkspaceError(f"{rel}: cannot read ({errno.errorcode.get(exc.errno or 0, exc)})") from None
        with os.fdopen(fd, "rb") as f:
            data = f.read(self.max_file_chars * 4 + 4)
        return cap(data.decode("utf-8", errors="replace"), limit)

    def write(self, rel: str, content: str) -> None:
        if not isinstance(content, str):
            raise WorkspaceError("the content must be text")
        if len(content) > self.max_file_chars:
            raise WorkspaceError(f"{rel}: {len(content)} characters is above the limit of {self.max_file_chars}")
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a directory")
        files = self.list()
        if not path.is_file():
            if len(files) >= self.max_files:
                raise WorkspaceError(f"the workspace already holds {len(files)} files (the limit)")
        total = sum((self.root / f).stat().st_size for f in files if (self.root / f) != path) + len(content)
        if total > self.max_total_chars:
            raise WorkspaceError(f"the workspace would hold {total} characters (limit {self.max_total_chars})")
        parent = path.parent
        for anc in [parent, *parent.parents]:
            if anc == self.root or self.root not in anc.parents:
                break
            if anc.exists() and not anc.is_dir():
                raise WorkspaceError(f"{rel!r}: {anc.relative_to(self.root)} is a file, not a directory")
        parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)

    def list(self, under: str = "") -> list[str]:
        """Relative paths of the regular files (symlinks are never followed nor listed)."""
        base = self.resolve(under) if under else self.root
        out = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    out.append(p.relative_to(self.root).as_posix())
        return out

    def snapshot(self) -> dict[str, str]:
        """Every file's text (for run_python, checks and the judge)."""
        return {rel: (self.root / rel).read_text(encoding="utf-8", errors="replace") for rel in self.list()}

    def copy_to(self, dst: str | os.PathLike[str]) -> Workspace:
        shutil.copytree(self.root, dst, symlinks=True, dirs_exist_ok=False)
        return Workspace(dst, max_file_chars=self.max_file_chars, max_files=self.max_files,
                         max_total_chars=self.max_total_chars)


# ---------------------------------------------------------------------------------------------- API


def _subset(want: Any, got: Any) -> bool:
    """`want` is contained in `got`: dict keys recursively, everything else by equality."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _subset(v, got[k]) for k, v in want.items())
    return bool(want == got)


@dataclass(frozen=True)
class Endpoint:
    """One scripted endpoint. `store` saves the JSON body under a key; `from_store` answers with it;
    `require` rejects bodies without those fields (422); `when` lists conditional answers
    `{"stored": {key: subset}, "status": .., "response": ..}` tried before the default."""

    method: str
    path: str
    status: int = 200
    response: Any = None
    store: str | None = None
    from_store: str | None = None
    require: Mapping[str, Any] | None = None
    when: tuple[Mapping[str, Any], ...] = ()


@dataclass
class ApiState:
    """Calls made and values stored by one trajectory (forked with its workspace)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    store: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiSpec:
    hosts: tuple[str, ...]
    endpoints: tuple[Endpoint, ...] = ()

    def answer(self, method: str, path: str, body: Any, state: ApiState) -> tuple[int, Any]:
        path = "/" + path.strip("/")
        same_path = [e for e in self.endpoints if e.path.rstrip("/") == path.rstrip("/") or e.path == path]
        ep = next((e for e in same_path if e.method == method), None)
        if ep is None:
            listing = [f"{e.method} {e.path}" for e in self.endpoints]
            if same_path:
                return 405, {"error": f"method {method} not allowed on {path}",
                             "allowed": [e.method for e in same_path]}
            return 404, {"error": f"no endpoint {method} {path}", "endpoints": listing}
        if ep.require is not None and not _subset(dict(ep.require), body):
            return 422, {"error": "the request body must contain " + json.dumps(dict(ep.require))}
        if ep.store is not None:
            state.store[ep.store] = body
        for cond in ep.when:
            if all(_subset(v, state.store.get(k)) for k, v in dict(cond.get("stored", {})).items()):
                return int(cond.get("status", ep.status)), cond.get("response")
        if ep.from_store is not None and ep.from_store in state.store:
            return ep.status, state.store[ep.from_store]
        return ep.status, ep.response


class ApiServer:
    """A threaded HTTP server on 127.0.0.1:<free port>; `resolve(trajectory id)` gives (spec, state)."""

    def __init__(self, resolve: Callable[[str], tuple[ApiSpec, ApiState] | None]) -> None:
        self._resolve = resolve
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _go(self) -> None:
                server._handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _go  # noqa: N815 - http.server's naming

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="comlrl-action-api", daemon=True)
        self._thread.start()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = min(int(h.headers.get("content-length", 0) or 0), 65536)
        raw = h.rfile.read(n) if n else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        found = self._resolve(h.headers.get(TRAJECTORY_HEADER, ""))
        if found is None:
            status, payload = 403, {"error": "unknown client"}
        else:
            spec, state = found
            path = urlsplit(h.path).path
            with self.lock:
                status, payload = spec.answer(h.command, path, body, state)
                state.calls.append({"method": h.command, "path": "/" + path.strip("/"), "body": body,
                                    "status": status})
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ------------------------------------------------------------------------------------------- python

_HARNESS = r'''
import io, json, os, sys, traceback
_MARK = %(mark)r
_files = json.loads(%(files)r)
for _p, _c in _files.items():
    _d = os.path.dirname(_p)
    if _d:
        os.makedirs(_d, exist_ok=True)
    with open(_p, "w", encoding="utf-8") as _f:
        _f.write(_c)
sys.path.insert(0, os.getcwd())
_real_out = sys.stdout
_out, _err = io.StringIO(), io.StringIO()
sys.stdout, sys.stderr = _out, _err
_error = None
try:
    exec(compile(%(code)r, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit as _e:
    if _e.code not in (None, 0):
        _error = "SystemExit: %%s" %% (_e.code,)
except BaseException as _e:
    _tb = traceback.format_exception(type(_e), _e, _e.__traceback__)
    _error = "".join(_tb[-3:]).strip()
finally:
    sys.stdout, sys.stderr = _real_out, sys.__stderr__
_new = {}
_total = 0
for _dp, _dn, _fn in os.walk(".", followlinks=False):
    _dn[:] = sorted(d for d in _dn if d != "__pycache__")
    for _n in sorted(_fn):
        _p = os.path.normpath(os.path.join(_dp, _n))
        if os.path.islink(_p) or not os.path.isfile(_p) or os.path.getsize(_p) > 20000 or len(_new) >= 64:
            continue
        try:
            with open(_p, encoding="utf-8") as _f:
                _c = _f.read()
        except (OSError, UnicodeDecodeError):
            continue
        if _files.get(_p) != _c and _total + len(_c) <= 40000:
            _new[_p] = _c
            _total += len(_c)
_s, _t = _out.getvalue(), _err.getvalue()
_real_out.write(_MARK + json.dumps({"stdout": _s[:3000], "stderr": _t[:3000], "error": _error,
                                    "files": _new}) + "\n")
'''


@dataclass(frozen=True)
class PythonRun:
    """The outcome of code run in the sandbox with a workspace's files."""

    ok: bool
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)  # files the code wrote or changed

    def render(self) -> str:
        parts = [f"exit: {'ok' if self.ok else 'error'}"]
        if self.stdout.strip():
            parts.append("stdout:\n" + cap(self.stdout.rstrip(), 800))
        if self.stderr.strip():
            parts.append("stderr:\n" + cap(self.stderr.rstrip(), 400))
        if self.error:
            parts.append("error:\n" + cap(self.error, 500))
        if self.files:
            parts.append("files written: " + ", ".join(sorted(self.files)))
        return "\n".join(parts)


def run_in_sandbox(sandbox: Any, code: str, files: Mapping[str, str]) -> PythonRun:
    """Run `code` as `main.py` in a sandbox whose working directory holds `files`. Never raises."""
    if sandbox is None:
        return PythonRun(False, error="no sandbox is available to run Python")
    from sandbox.testparse import ParsedTests

    harness = _HARNESS % {"mark": OUTPUT_MARK, "files": json.dumps(dict(files)), "code": code}
    try:
        res = sandbox.run(harness, ParsedTests(setup="", asserts=()))
    except Exception as exc:  # noqa: BLE001 - infrastructure failures are observations too
        return PythonRun(False, error=f"sandbox error: {type(exc).__name__}: {exc}")
    out = res.stdout or ""
    at = out.rfind(OUTPUT_MARK)
    if at < 0:
        why = {"timeout": "timed out", "crashed": "crashed (killed or out of memory)"}.get(res.status, res.status)
        return PythonRun(False, stdout=cap(out, 1500), error=f"the program {why}: {res.message}".strip())
    try:
        data = json.loads(out[at + len(OUTPUT_MARK):].strip().splitlines()[0])
    except (ValueError, IndexError):
        return PythonRun(False, error="the program's output could not be read")
    files_out = {str(k): str(v) for k, v in dict(data.get("files") or {}).items()}
    err = data.get("error")
    return PythonRun(err is None, str(data.get("stdout", "")), str(data.get("stderr", "")), err, files_out)


# -------------------------------------------------------------------------------------------- checks


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
        if "body" in p and not _subset(p["body"], call.get("body")):
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


# ------------------------------------------------------------------------------------------ patterns


@dataclass(frozen=True)
class Pattern:
    """Scripts the user: `opening` is turn 1, `followups[t-2]` turn t (the last one repeats).

    Placeholders: {goal}, {host} (the API host or "none"), {files} (the initial files).
    """

    name: str
    opening: str
    followups: tuple[str, ...]
    description: str = ""

    def user_turn(self, turn: int, **fields: str) -> str:
        if turn <= 1:
            template = self.opening
        else:
            template = self.followups[min(turn - 2, len(self.followups) - 1)] if self.followups else "Continue."
        return fill(template, fields)


def fill(template: str, fields: Mapping[str, str]) -> str:
    """Replace `{name}` placeholders; any other braces (JSON examples) stay as they are."""
    for name, value in fields.items():
        template = template.replace("{" + name + "}", value)
    return template


PATTERNS: dict[str, Pattern] = {}


def register_pattern(pattern: Pattern, *, replace: bool = False) -> Pattern:
    """Make a conversation pattern available to task files by its name."""
    if pattern.name in PATTERNS and not replace:
        raise ValueError(f"pattern {pattern.name!r} is already registered (pass replace=True)")
    PATTERNS[pattern.name] = pattern
    return pattern


register_pattern(Pattern(
    "troubleshooting",
    "Something is wrong and I need your help.\n{goal}\nPlease investigate first (read the files, query the "
    "service), then fix the root cause.",
    ("Thanks. Based on what you found, please fix the root cause now.",
     "Please verify that the fix works (run it or check the service again) and tell me the result.",
     "If everything works, call complete_task with a short summary; otherwise keep fixing."),
    "the user reports a fault; investigate, fix, verify",
))
register_pattern(Pattern(
    "setup_workflow",
    "Please set this up for me.\n{goal}\nWork step by step, one or two actions per turn.",
    ("Good. Continue with the next setup step.",
     "Check that everything is set up and consistent, and fix what is missing.",
     "Finish up: call complete_task with a summary of what you set up."),
    "a multi-step setup the agents carry out in order",
))
register_pattern(Pattern(
    "iterative_improvement",
    "I would like to improve something.\n{goal}\nStart by looking at the current version.",
    ("Now make the improvement.",
     "Test the improved version with run_python and refine it if needed.",
     "When you are satisfied, call complete_task with a summary of the changes."),
    "inspect, improve, test, refine",
))


# ------------------------------------------------------------------------------------------ problems


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


# -------------------------------------------------------------------------------------- trajectories


@dataclass(frozen=True)
class ActionOutcome:
    type: str
    ok: bool
    text: str
    novel: bool = True  # first time this exact action (type + parameters) ran in the trajectory


@dataclass(frozen=True)
class AgentTurn:
    agent: int
    role: str
    prose: str
    outcomes: tuple[ActionOutcome, ...]
    errors: tuple[ActionError, ...]
    skipped: int = 0  # valid actions not run because the task was completed earlier in the turn


@dataclass(frozen=True)
class TurnRecord:
    turn: int
    agents: tuple[AgentTurn, ...]
    after_done: bool = False  # the trajectory had already ended: nothing ran


@dataclass
class TrajectoryState:
    """Everything after replaying a history; `dir/files` is the workspace."""

    key: str
    task_id: str
    dir: Path
    api: ApiState
    history: tuple[tuple[str, ...], ...] = ()
    transcript: tuple[TurnRecord, ...] = ()
    done: bool = False
    finished_by: str | None = None  # complete_task | turn_limit
    summary: str = ""
    seen: frozenset[str] = frozenset()
    checks: tuple[CheckResult, ...] = ()

    @property
    def turn(self) -> int:
        return len(self.history)

    def workspace(self) -> Workspace:
        return Workspace(self.dir / "files")


def trajectory_key(task_id: str, history: Iterable[Sequence[str]]) -> str:
    """sha256 of the task and each turn's texts: equal histories share one state."""
    h = hashlib.sha256(task_id.encode())
    for texts in history:
        h.update(b"\x01" + json.dumps(list(texts), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def render_turn(record: TurnRecord, limit: int = MAX_OBS_CHARS) -> str:
    """The observations of one turn, as the agents read them in the next prompt."""
    if record.after_done:
        return "The task was already completed; nothing was executed."
    lines = []
    for at in record.agents:
        for o in at.outcomes:
            lines.append(f"[{at.role}] {o.type}: {'ok' if o.ok else 'FAILED'}\n{cap(o.text, limit // 2)}")
        for e in at.errors:
            lines.append(f"[{at.role}] action error ({e.kind}): {e.message}")
        if at.skipped:
            lines.append(f"[{at.role}] {at.skipped} action(s) skipped: the task was already completed")
    return cap("\n".join(lines) or "No actions.", limit * 2)


class Environment:
    """Executes joint actions: parse each agent's answer, run its actions in the state's copy, check."""

    def __init__(
        self,
        *,
        registry: ActionRegistry | None = None,
        sandbox: Any = None,
        role_names: Sequence[str] = ("agent",),
        max_actions_per_turn: int = 3,
        max_turns: int = 4,
        root: str | os.PathLike[str] | None = None,
        http_timeout_s: float = 5.0,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        self.sandbox = sandbox
        self.role_names = list(role_names)
        self.max_actions = int(max_actions_per_turn)
        self.max_turns = int(max_turns)
        self.http_timeout_s = float(http_timeout_s)
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="comlrl-actions-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._live: dict[str, tuple[ApiSpec, ApiState]] = {}
        self._live_lock = threading.Lock()
        self._dirs = itertools.count()
        self.server = ApiServer(self._lookup)
        self._finalizer = weakref.finalize(self, _cleanup, self.server, self.root)

    # -- API plumbing ----------------------------------------------------------------------------------

    def _lookup(self, key: str) -> tuple[ApiSpec, ApiState] | None:
        with self._live_lock:
            return self._live.get(key)

    def api_call(self, problem: ActionProblem, state: TrajectoryState, method: str, url: str, body: Any) -> Observation:
        """A real HTTP request to the loopback server, only for the task's allowed hosts."""
        if problem.api is None:
            return Observation(False, "this task has no API: api_call is not available")
        try:
            parts = urlsplit(url.strip())
            host = (parts.hostname or "").lower()
            port = parts.port
        except ValueError as exc:
            return Observation(False, f"invalid URL {url!r}: {exc}")
        allowed = ", ".join(problem.api.hosts)
        if parts.scheme not in ("http", "https"):
            return Observation(False, f"only http(s) URLs are allowed (got {url!r}); use http://{problem.api.hosts[0]}/...")
        if host not in problem.api.hosts or parts.username or parts.password or port not in (None, 80, 443):
            return Observation(False, f"host {host or url!r} is not allowed; allowed hosts: {allowed}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Host": host, TRAJECTORY_HEADER: state.key, "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=self.http_timeout_s)
        try:
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read(65536).decode("utf-8", errors="replace")
            status = resp.status
        except (OSError, http.client.HTTPException) as exc:
            return Observation(False, f"{method} {url} failed: {type(exc).__name__}: {exc}")
        finally:
            conn.close()
        return Observation(200 <= status < 300, f"{method} {url} -> HTTP {status}\n{cap(data, 1200)}",
                           {"status": status, "body": data})

    # -- states ----------------------------------------------------------------------------------------

    def _new_dir(self, key: str) -> Path:
        """A fresh directory per state (two states of one history never share one)."""
        with self._live_lock:
            n = next(self._dirs)
        return self.root / f"{key[:24]}-{n}"

    def reset(self, problem: ActionProblem) -> TrajectoryState:
        """The initial state: a fresh workspace with the task's files and an empty API state."""
        key = trajectory_key(problem.task_id, ())
        d = self._new_dir(key)
        ws = Workspace(d / "files")
        for path, content in problem.files:
            ws.write(path, content)
        state = TrajectoryState(key, problem.task_id, d, ApiState())
        state.checks = self.check(problem, state)
        return state

    def discard(self, state: TrajectoryState) -> None:
        shutil.rmtree(state.dir, ignore_errors=True)

    def check(self, problem: ActionProblem, state: TrajectoryState) -> tuple[CheckResult, ...]:
        ctx = CheckContext(state.workspace().snapshot(), state.api, state.finished_by == "complete_task", self.sandbox)
        return evaluate_checks(problem.checks, ctx)

    def step(self, problem: ActionProblem, parent: TrajectoryState, texts: Sequence[str]) -> TrajectoryState:
        """The state after one joint action (agent 0's actions first). Never raises on model output."""
        history = (*parent.history, tuple(texts))
        key = trajectory_key(problem.task_id, history)
        turn = len(history)
        d = self._new_dir(key)
        ws = Workspace(parent.dir / "files").copy_to(d / "files")
        api = copy.deepcopy(parent.api)
        state = TrajectoryState(key, problem.task_id, d, api, history, parent.transcript, parent.done,
                                parent.finished_by, parent.summary, parent.seen)
        if parent.done:
            state.transcript = (*parent.transcript, TurnRecord(turn, (), after_done=True))
            state.checks = parent.checks
            return state
        seen = set(parent.seen)
        agents: list[AgentTurn] = []
        with self._live_lock:
            if problem.api is not None:
                self._live[key] = (problem.api, api)
        try:
            for a, text in enumerate(texts):
                role = self.role_names[a] if a < len(self.role_names) else f"agent{a}"
                parsed = parse_actions(text, self.registry, self.max_actions)
                ctx = ActionContext(
                    workspace=ws, agent=a, role=role,
                    run_python=lambda code, _ws=ws: self._run_python(_ws, code),
                    api_call=lambda m, u, b, _s=state: self.api_call(problem, _s, m, u, b),
                    extra={"problem": problem, "state": state},
                )
                outcomes: list[ActionOutcome] = []
                skipped = 0
                for action in parsed.actions:
                    if state.done:
                        skipped += 1
                        continue
                    atype = self.registry.get(action.type)
                    assert atype is not None  # parse_actions only returns registered types
                    obs = atype.execute(action, ctx)
                    k = action.key()
                    outcomes.append(ActionOutcome(action.type, obs.ok, obs.text, novel=k not in seen))
                    seen.add(k)
                    if obs.ok and (obs.terminal or atype.terminal):
                        state.done, state.finished_by = True, "complete_task"
                        state.summary = str(dict(obs.data).get("summary", ""))
                agents.append(AgentTurn(a, role, parsed.prose, tuple(outcomes), parsed.errors, skipped))
        finally:
            with self._live_lock:
                self._live.pop(key, None)
        if not state.done and turn >= self.max_turns:
            state.done, state.finished_by = True, "turn_limit"
        state.seen = frozenset(seen)
        state.transcript = (*parent.transcript, TurnRecord(turn, tuple(agents)))
        state.checks = self.check(problem, state)
        return state

    def replay(self, problem: ActionProblem, history: Sequence[Sequence[str]]) -> TrajectoryState:
        """The state of a history from scratch (intermediate states are discarded)."""
        state = self.reset(problem)
        for texts in history:
            nxt = self.step(problem, state, texts)
            self.discard(state)
            state = nxt
        return state

    def _run_python(self, ws: Workspace, code: str) -> Observation:
        run = run_in_sandbox(self.sandbox, code, ws.snapshot())
        kept, refused = [], []
        for path, content in run.files.items():
            try:
                ws.write(path, content)
                kept.append(path)
            except WorkspaceError as exc:
                refused.append(f"{path} ({exc})")
        text = run.render()
        if refused:
            text += "\nfiles not kept: " + "; ".join(refused)
        return Observation(run.ok, text, {"stdout": run.stdout, "error": run.error, "files": kept})

    def close(self) -> None:
        self._finalizer()


def _cleanup(server: ApiServer, root: Path) -> None:
    try:
        server.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
