"""Python an action or a check runs: `main.py` in the sandbox, in a working directory holding the workspace's
files; the harness reports output, the error and the files the code wrote."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from feedback.context import cap

OUTPUT_MARK = "\x00COMLRL-RUN-PYTHON\x00"

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
