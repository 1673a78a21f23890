"""Isolation levels for the sandbox workers: which interpreter they run, which host paths they cannot see,
the command line of each level (bubblewrap, unshare, a plain subprocess) and the strongest one that works.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger("sandbox")

LEVELS = ("bwrap", "unshare", "subprocess")
_MASKED = ("/root", "/home", "/work", "/mnt", "/media", "/srv", "/run", "/var/tmp", "/opt", "/var/lib",
           "/var/log", "/var/cache", "/var/mail", "/var/spool", "/boot", "/lost+found")
_SYSTEM = ("/usr", "/etc", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/tmp", "/dev", "/proc", "/sys")
_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
_announced: set[str] = set()
_probe_cache: dict[tuple[str, str], bool] = {}


class SandboxUnavailable(RuntimeError):
    """The requested isolation level cannot run on this machine."""


# --------------------------------------------------------------------------------------- interpreter

def _world_usable(path: str) -> bool:
    """True when every directory down to `path` is searchable and the file readable by any user."""
    p = Path(path)
    try:
        for parent in reversed(p.parents):
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
        return bool(p.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


@functools.cache
def _stdlib_dir(python: str) -> str | None:
    try:
        out = subprocess.run([python, "-I", "-S", "-c", "import os; print(os.path.dirname(os.__file__))"],
                             capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.cache
def pick_python(explicit: str | None = None) -> str:
    """Interpreter for the workers. As root, candidates run as an unprivileged uid that must be able to
    read the interpreter and its stdlib (a root-owned pyenv under /root is not), so prefer the system one."""
    if explicit:
        return explicit
    if os.geteuid() != 0:
        return sys.executable
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or "", sys.executable):
        if not cand or not os.path.exists(cand):
            continue
        real = os.path.realpath(cand)
        lib = _stdlib_dir(real)
        if lib and _world_usable(real) and _world_usable(os.path.join(lib, "os.py")):
            return real
    logger.warning("no interpreter readable by an unprivileged uid found; candidates may fail to import")
    return sys.executable


def _masks(python: str) -> tuple[str, ...]:
    return _masks_for(python, os.getcwd(), os.path.expanduser("~"))


@functools.cache
def _masks_for(python: str, cwd: str, home: str) -> tuple[str, ...]:
    """Host directories hidden behind empty tmpfs in the bwrap sandbox (never the interpreter's own)."""
    real = os.path.realpath(python)
    lib = _stdlib_dir(real) or ""
    needed = [real, lib]
    extra = [cwd, home, str(Path(__file__).resolve().parent.parent)]
    out = []
    for path in list(_MASKED) + extra:
        path = os.path.realpath(path)
        if path == "/" or any(path == p or path.startswith(p + "/") for p in _SYSTEM):
            continue  # never hide the system itself (and /tmp is a private tmpfs already)
        if not os.path.isdir(path) or any(path == o or path.startswith(o + "/") for o in out):
            continue
        if any(n == path or n.startswith(path + os.sep) for n in needed if n):
            continue
        out.append(path)
    return tuple(out)


# ------------------------------------------------------------------------------------------ isolation

# The whole environment of a worker. A fixed hash seed gives the same code the same verdict in every worker and
# every run: a solution returning `list(set(words))` otherwise passes or fails by the worker's random seed.
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


def command(level: str, python: str, source: str, cfg: dict, tmpfs_bytes: int) -> list[str]:
    """The worker's command line. `-S` (no site-packages), not `-I`, whose `-E` would drop PYTHONHASHSEED: the
    environment is WORKER_ENV alone. `-c` puts the working directory first on the import path: the worker starts
    where no candidate can write (`/`, or bubblewrap's fresh /tmp) and takes it off the path before any job."""
    tail = [python, "-S", "-B", "-c", source, json.dumps(cfg)]
    root = os.geteuid() == 0
    if level == "bwrap":
        ns = (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
              if root else ["--unshare-all"])
        argv = ["bwrap", *ns, "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev",
                "--proc", "/proc", "--perms", "0755", "--size", str(tmpfs_bytes), "--tmpfs", "/tmp"]
        for path in _masks(python):
            argv += ["--tmpfs", path]
        argv += ["--clearenv"]
        for name, value in WORKER_ENV.items():
            argv += ["--setenv", name, value]
        if root:
            argv += ["--cap-drop", "ALL"]
            for cap in _CAPS:
                argv += ["--cap-add", cap]
        return argv + ["--chdir", "/tmp", *tail]
    if level == "unshare":
        return ["unshare", "--net", "--ipc", "--uts", *([] if root else ["--map-root-user"]), "--", *tail]
    return tail


def _probe(level: str, python: str) -> bool:
    key = (level, python)
    if key not in _probe_cache:
        if level != "subprocess" and shutil.which("bwrap" if level == "bwrap" else "unshare") is None:
            _probe_cache[key] = False
        else:
            argv = command(level, python, "pass", {}, 1 << 20)
            try:
                rc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                                    env={"PATH": "/usr/bin:/bin"}).returncode
            except (OSError, subprocess.TimeoutExpired):
                rc = -1
            _probe_cache[key] = rc == 0
    return _probe_cache[key]


def detect_isolation(requested: str = "auto", python: str | None = None) -> str:
    """Strongest available level for `requested` ("auto" tries bwrap, then unshare, then subprocess)."""
    if requested not in ("auto", *LEVELS):
        raise ValueError(f"isolation={requested!r} is not allowed; expected auto, bwrap, unshare or subprocess")
    python = pick_python(python)
    order = LEVELS if requested == "auto" else (requested,)
    for level in order:
        if _probe(level, python):
            if level not in _announced:
                _announced.add(level)
                log = logger.info if level == "bwrap" else logger.warning
                weaker = " (bubblewrap unavailable: weaker isolation)" if requested == "auto" else " (as requested)"
                log("sandbox isolation level: %s%s (python %s, %s)", level,
                    "" if level == "bwrap" else weaker, python,
                    "uid drop" if os.geteuid() == 0 else "no uid drop (not root)")
            return level
    raise SandboxUnavailable(f"isolation level {requested!r} is not available on this machine")
