"""Sandbox worker: stdlib only, started as `python -S -B -c <this source> <config json>` (PYTHONHASHSEED=0).

It is never imported by the trainer (which would put untrusted code one fork away from the model); the
executor reads this file's text and hands it to a fresh interpreter, usually inside bubblewrap.

Process tree of one worker::

    zygote      long-lived, pre-imported; one job at a time. It is also the *judge*: it runs the
                trusted test code and decides pass/fail (state that tests may change is restored after
                each run).
    └─ template forked once at start-up, before any job: it never holds test data
       └─ candidate  forked from the template per run; own session, rlimits, unprivileged uid, empty
                     environment, scratch cwd. It only answers calls ("run function f on these
                     arguments") with plain data over a pipe.

The assert expressions are evaluated in the judge, on values decoded by a pickle loader that refuses
every class: a result can only be int/float/str/bytes/bool/None and lists/tuples/dicts/sets of them
(subclasses are converted to their base type in the candidate) or an opaque value that carries only a
truth value and a repr and equals nothing, so an object whose `__eq__` always says True cannot cross.
Exiting early, printing, patching builtins or killing its parent only ever produces "no answer" ->
failure, because nothing the candidate writes is read as a verdict. Since candidates are forked from the
template, the tests are never in a candidate's address space. One fork per run (an earlier design forked
a judge too: ~40% more CPU).

Wire format with the trainer: frames of a 4-byte big-endian length then the payload. A job is three
frames (JSON header, solution code, JSON tests); the answer is one JSON frame.
"""

from __future__ import annotations

import _socket
import ast
import builtins
import fcntl
import gc
import io
import json
import operator
import os
import pickle
import resource
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

# Modules solutions commonly use, imported once in the zygote. Kept lean on purpose: every page the zygote
# owns is copied into the page table of every forked candidate (35 modules cost ~4 ms per fork here, these ~1).
PREIMPORT = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "copy")
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
_PLAIN_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_PLAIN_CONTAINERS = (list, tuple, set, frozenset, dict, bytearray)
_MUTABLE = (list, dict, set, bytearray)
_PLAIN_BASES = frozenset((int, float, complex, str, bytes) + _PLAIN_CONTAINERS)  # bool cannot be subclassed


# ----------------------------------------------------------------------------------------------- framing

def _read_exact(fd: int, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise EOFError
        got += k
    view.release()
    return bytes(buf)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_frame(fd: int, payload: bytes) -> None:
    _write_all(fd, len(payload).to_bytes(4, "big") + payload)


def _read_frame(fd: int) -> bytes:
    return _read_exact(fd, int.from_bytes(_read_exact(fd, 4), "big"))


class _Timeout(Exception):
    """A wait on the candidate ran out of time; `clock` says which limit: "cpu" or "wall"."""

    def __init__(self, clock: str) -> None:
        super().__init__(clock)
        self.clock = clock


_CLK_TCK = os.sysconf("SC_CLK_TCK")
_MIN_SLICE_S = 0.02  # shortest wait between two looks at the run's CPU time (overshoot is at most this)
_PAST_BACKSTOP_POLL_S = 0.1  # past the wall backstop, how often a runnable run is checked for sleeping


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 is the state), or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(b")", 1)[1].split()


def _cpu_s(fields: list[bytes]) -> float:
    """utime + stime + cutime + cstime: the process and the children it has waited for (still readable
    for a zombie, until it is reaped)."""
    return sum(int(x) for x in fields[11:15]) / _CLK_TCK


def _session(sid: int) -> list[tuple[int, list[bytes]]]:
    """(pid, /proc/<pid>/stat fields) of every process of session `sid`. The candidate leads its own
    session: these are it and the children it started; one that left with setsid is not among them."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and (int(entry) == sid or int(fields[3]) == sid):
                out.append((int(entry), fields))
    return out


_STATE_NAMES = {b"R": "runnable", b"S": "sleeping", b"D": "waiting for I/O", b"T": "stopped", b"Z": "exited"}


class _Budget:
    """The run's time limit, on the CPU clock: `limit_s` CPU seconds for the candidate's process (load and
    every call, with the children it waited for), the other processes of its session, and the judge's own
    work on this run (the tests' code; not its polling while it waits). A busy machine stretches the wall
    clock, not CPU time, so it cannot turn a correct solution into a timeout.

    The wall clock only ends runs that sleep or block: at `wall_s` (several times the limit) unless a
    process of the candidate's session is runnable then (state R: it is waiting for a CPU, not sleeping),
    in which case the run goes on, up to `cap_s`. A verdict reached on the wall clock is not cached."""

    def __init__(self, limit_s: float, wall_s: float, cap_s: float, t0: float) -> None:
        self.limit_s = limit_s
        self.t0 = t0
        self.wall_deadline = t0 + wall_s
        self.cap_deadline = t0 + max(cap_s, wall_s)
        self.judge0 = time.process_time()
        self.bookkeeping = 0.0  # the judge's CPU spent in `wait` itself (polling /proc): not the run's
        self.wait_t0 = 0.0
        self.pid = 0  # the candidate, once spawned; it leads its own session
        self.own = 0.0  # the candidate's CPU at the last look (kept once it is reaped)
        self.others = 0.0  # its session's other processes at the last full look
        self.peak = 0.0  # the most ever seen: killed children leave /proc, their CPU time still counted
        self.hit = ""  # "cpu" or "wall": the limit this run reached first
        self.note = ""  # for a wall-clock timeout: the run's CPU and its state then, for the message
        self.waiting = False  # the judge is blocked in `wait` (on the candidate), not running the tests' code

    def spent(self, full: bool = False) -> float:
        """CPU seconds used so far. `full` also scans /proc for the candidate's children (the scan repeats
        while any were found, so a child later reaped into the candidate's cutime is not counted twice)."""
        if self.pid:
            fields = _stat_fields(self.pid)
            if fields is not None:
                self.own = _cpu_s(fields)
            if full or self.others:
                self.others = sum(_cpu_s(f) for pid, f in _session(self.pid) if pid != self.pid)
        total = self.own + self.others + self._judge_cpu()
        self.peak = max(self.peak, total)
        return total

    def _judge_cpu(self) -> float:
        """The judge's CPU on this run, less its own bookkeeping while it waits on the candidate (which, on
        a starved run, polls for a while: that must not eat into the solution's limit)."""
        now = time.process_time()
        return now - self.judge0 - self.bookkeeping - (now - self.wait_t0 if self.waiting else 0.0)

    def _states(self) -> set[bytes]:
        return {f[0] for _, f in _session(self.pid)} if self.pid else set()

    def up(self, clock: str) -> _Timeout:
        """Record that the run reached a limit; the exception to raise for it."""
        if not self.hit and clock == "wall":
            states = ", ".join(sorted(_STATE_NAMES.get(s, s.decode(errors="replace")) for s in self._states()))
            capped = "; still runnable at the cap" if time.monotonic() >= self.cap_deadline else ""
            self.note = f"{self.spent():.2f}s of CPU time; solution {states or 'not running'}{capped}"
        self.hit = self.hit or clock
        return _Timeout(clock)

    def wait(self, fd: int, write: bool = False) -> None:
        """Block until `fd` is ready; raises _Timeout once the CPU limit or the wall clock is reached.
        Each wait lasts at most the CPU time still left, so the limit is checked in time on an idle machine
        and only re-checked (not reached) on a busy one; past the backstop, the state is checked often."""
        self.wait_t0 = time.process_time()
        self.waiting = True
        try:
            self._wait(fd, write)
        finally:
            self.waiting = False
            self.bookkeeping += time.process_time() - self.wait_t0

    def _wait(self, fd: int, write: bool) -> None:
        wait_s, full = 0.0, False
        while not _ready(fd, write, wait_s):
            left_cpu = self.limit_s - self.spent(full)
            if left_cpu <= 0:
                raise self.up("cpu")
            now = time.monotonic()
            if now >= self.cap_deadline or (now >= self.wall_deadline and b"R" not in self._states()):
                if _ready(fd, write, 0):  # it answered just now and went back to waiting: not late
                    return
                raise self.up("wall")
            until = self.wall_deadline if now < self.wall_deadline else min(now + _PAST_BACKSTOP_POLL_S,
                                                                            self.cap_deadline)
            wait_s, full = min(until - now, max(left_cpu, _MIN_SLICE_S)), True


def _ready(fd: int, write: bool, wait_s: float) -> bool:
    ready = select.select([] if write else [fd], [fd] if write else [], [], wait_s)
    return bool(ready[0] or ready[1])


def _read_exact_budget(fd: int, n: int, budget: _Budget) -> bytes:
    chunks = []
    got = 0
    while got < n:
        budget.wait(fd)
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all_budget(fd: int, data: bytes, budget: _Budget) -> None:
    view = memoryview(data)
    while view:
        budget.wait(fd, write=True)
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[n:]


# ------------------------------------------------------------------------------------------- plumbing

_LIBC = []
_CFG = {}
_T = {}  # phase timings of the current run (seconds since the job arrived), reported with the verdict


def _prctl(option: int, arg: int) -> None:
    """prctl via ctypes; skipped under root bubblewrap (already no_new_privs, and the pid namespace plus a
    separate uid give what DUMPABLE/PDEATHSIG would), which keeps ctypes out of the zygote."""
    if not _CFG.get("prctl", True):
        return
    try:
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        _LIBC[0].prctl(option, arg, 0, 0, 0)
    except Exception:
        pass


def _short(text: object, limit: int = 500) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "...[truncated]"


def _safe_repr(value: object, limit: int = 200) -> str:
    try:
        return _short(repr(value), limit)
    except BaseException:
        return "<unrepresentable>"


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by signal {name}"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"stopped ({status})"


def _kill_pg(pid: int) -> None:
    for fn, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            fn(target, signal.SIGKILL)
        except OSError:
            pass


def _reap(pid: int, wait_s: float = 2.0) -> int | None:
    """Wait for a (killed) child without polling; returns its wait status or None."""
    end = time.monotonic() + wait_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if done:
                return status
            remaining = end - time.monotonic()
            if remaining <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(remaining, 0.0005))
    finally:
        if pidfd is not None:
            os.close(pidfd)


# ---------------------------------------------------------------------------------------- plain data

class _PlainUnpickler(pickle.Unpickler):
    """Loads only the core builtin types: every class reference (custom objects, subclasses) is refused."""

    def find_class(self, module: str, name: str) -> type:
        if (module, name) == ("builtins", "complex"):
            return complex
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

    def persistent_load(self, pid: object) -> object:
        if (type(pid) is tuple and len(pid) == 3 and type(pid[0]) is str and pid[0] == "opaque"
                and type(pid[1]) in (bool, type(None)) and type(pid[2]) is str):
            return _Opaque(pid[1], _short(pid[2], 1000))
        raise pickle.UnpicklingError("persistent ids other than opaque values are not allowed")


class _Opaque:
    """In the judge: a value the solution returned that is not plain data (a `re.Match`, a generator, a
    custom object). Only its truth value and repr crossed; it is equal to nothing, itself included, so no
    `==` test can pass on it, and it cannot be passed back to the solution."""

    __slots__ = ("_truth", "_text")

    def __init__(self, truth: bool | None, text: str) -> None:
        self._truth = truth
        self._text = text

    def _only(self, what: str) -> str:
        return f"the solution returned {self._text}, which crosses the sandbox only as its truth value and repr; {what}"

    def __bool__(self) -> bool:
        if self._truth is None:
            raise TypeError(self._only("its __bool__ raised in the solution"))
        return self._truth

    def __repr__(self) -> str:
        return self._text

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __getattr__(self, name: str) -> NoReturn:
        raise AttributeError(self._only(f"it has no attribute {name!r} here"))

    def __iter__(self) -> NoReturn:
        raise TypeError(self._only("it cannot be iterated here"))

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(self._only("it cannot be passed back to the solution"))


def _plain_loads(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def _check_plain(value: object, depth: int = 0) -> str | None:
    """None when `value` is plain data (exact builtin types only), else a description of the culprit."""
    t = type(value)
    if t in _PLAIN_SCALARS:
        return None
    if depth > 200:
        return "a value nested more than 200 levels deep"
    if t is dict:
        for k, v in value.items():
            bad = _check_plain(k, depth + 1) or _check_plain(v, depth + 1)
            if bad:
                return bad
        return None
    if t in _PLAIN_CONTAINERS:
        if t is bytearray:
            return None
        for item in value:
            bad = _check_plain(item, depth + 1)
            if bad:
                return bad
        return None
    return f"an object of type {getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t.__name__)}"


class _OpaqueOut:
    """Candidate-side stand-in for a value that is not plain data: only its truth value and repr cross
    (truth None: its `__bool__` raised)."""

    __slots__ = ("truth", "text")

    def __init__(self, value: object) -> None:
        try:
            self.truth = bool(value)
        except Exception:
            self.truth = None
        self.text = _safe_repr(value, 1000)


class _NotPlain(Exception):
    pass


def _to_plain(value: object, opaque: list, depth: int = 0) -> Any:
    """A copy of `value` in exact builtin types: subclasses of plain types (Counter, OrderedDict,
    defaultdict, named tuples, IntEnum, str subclasses) become their base type, read from the base type's
    own storage; any other object becomes an `_OpaqueOut` (also appended to `opaque`). Runs in the
    candidate: whatever a subclass does here stays in its own process."""
    t = type(value)
    if t in _PLAIN_SCALARS:
        return value
    if depth > 200:
        raise _NotPlain("a value nested more than 200 levels deep")
    base = next((b for b in t.__mro__ if b in _PLAIN_BASES), None)
    if base is None:
        out = _OpaqueOut(value)
        opaque.append(out)
        return out
    if base is int:
        return int.__int__(value)
    if base is float:
        return float.__float__(value)
    if base is complex:
        return complex(complex.real.__get__(value), complex.imag.__get__(value))
    if base is str:
        return str.__str__(value)
    if base is bytes:
        return bytes.__getitem__(value, slice(None))
    if base is bytearray:
        return bytearray.copy(value)
    if base is dict:
        return {_to_plain(k, opaque, depth + 1): _to_plain(v, opaque, depth + 1) for k, v in dict.items(value)}
    items = [_to_plain(x, opaque, depth + 1) for x in base.__iter__(value)]
    return items if base is list else base(items)


class _OpaquePickler(pickle.Pickler):
    """Sends `_OpaqueOut` values as persistent ids, the only kind the judge's loader accepts."""

    def persistent_id(self, obj: object) -> tuple | None:
        return ("opaque", obj.truth, obj.text) if type(obj) is _OpaqueOut else None


def _dumps(msg: tuple, opaque: bool) -> bytes:
    if not opaque:
        return pickle.dumps(msg, protocol=5)
    buf = io.BytesIO()
    _OpaquePickler(buf, protocol=5).dump(msg)
    return buf.getvalue()


# ----------------------------------------------------------------------------------------- candidate

def _candidate_main(cfg: dict, job: dict, code: str, req_r: int, rsp_w: int) -> NoReturn:
    """Child of the template process running the untrusted code. Never returns."""
    try:
        os.setsid()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        out = os.open(os.path.join(cfg["io_dir"], "stdout"), flags, 0o600)
        err = os.open(os.path.join(cfg["io_dir"], "stderr"), flags, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        # Move everything we keep above the low fds first, then into place, then close the rest.
        keep = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in (null, out, err, req_r, rsp_w)]
        for target, fd in enumerate(keep):
            os.dup2(fd, target)
        os.closerange(5, 1 << 16)
        os.chdir(cfg["scratch"])
        mem = int(job["memory_mb"]) << 20
        cpu = int(job["timeout_s"]) + 2
        limits = (
            (resource.RLIMIT_AS, mem), (resource.RLIMIT_DATA, mem), (resource.RLIMIT_CPU, cpu),
            (resource.RLIMIT_FSIZE, int(job["fsize_bytes"])), (resource.RLIMIT_NOFILE, int(job["nofile"])),
            (resource.RLIMIT_NPROC, int(job["nproc"])), (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_STACK, int(job.get("stack_bytes", 8 << 20))),
        )
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        uid = cfg.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            if os.getuid() != uid or os.geteuid() != uid:
                os._exit(71)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.environ.clear()
        os.environ.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=cfg["scratch"], TMPDIR=cfg["scratch"],
                          LANG="C.UTF-8")
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=True)
        sys.argv = ["solution.py"]
    except BaseException:
        os._exit(70)

    def send(msg: tuple, opaque: bool = False) -> None:
        try:
            data = _dumps(msg, opaque)
        except BaseException as e:  # an unpicklable payload is reported, never crashes the loop
            data = pickle.dumps(("bad", f"value could not be serialised: {_short(e, 200)}"), protocol=5)
        _write_frame(4, data)

    ns = {"__name__": "__solution__", "__builtins__": builtins}
    try:
        exec(compile(code, "<solution>", "exec", dont_inherit=True), ns)
    except BaseException as e:  # SystemExit at module level lands here too: a load error, not a pass
        try:
            send(("load_error", type(e).__name__, _short(e), getattr(e, "lineno", None)))
        finally:
            os._exit(0)
    names = sorted(k for k, v in list(ns.items()) if callable(v) and type(v).__name__ != "module")
    modules = []  # (bound name, module name): the judge imports the standard ones itself, if the tests use them
    for k, v in list(ns.items()):
        try:
            if isinstance(v, type(sys)) and type(v.__name__) is str:
                modules.append((k, str.__str__(v.__name__)))
        except BaseException:
            pass
    send(("ready", names, sorted(modules)))
    while True:
        try:
            req = pickle.loads(_read_frame(3))
        except BaseException:
            os._exit(0)
        _, name, args, kwargs = req
        fn = ns.get(name)
        if fn is None:
            send(("exc", "NameError", f"name {name!r} is not defined by the solution", "NameError"))
            continue
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:
            base = next((c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c),
                        "Exception")
            try:
                msg = _short(e)
            except BaseException:
                msg = "<unprintable exception>"
            send(("exc", type(e).__name__, msg, base))
            continue
        opaque = []
        if _check_plain(value) is not None:
            try:
                value = _to_plain(value, opaque)
            except BaseException as e:
                send(("bad", f"the solution returned {_short(e, 200)}, which cannot be checked"))
                continue
        mutated = [(i, a) for i, a in enumerate(args) if type(a) in _MUTABLE]
        mutated += [(k, v) for k, v in kwargs.items() if type(v) in _MUTABLE]
        if any(_check_plain(v) for _, v in mutated):
            mutated = []
        send(("ok", value, mutated), bool(opaque))


# --------------------------------------------------------------------------------------------- judge

class _FromCandidate:
    """Marker mixed into exceptions re-raised in the judge on behalf of the candidate."""


class _CandidateGone(BaseException):
    """The candidate process is dead (crash, exit, kill, protocol violation); not catchable as Exception."""


class _TimeUp(BaseException):
    """The run reached its limit; `clock` says which: "cpu" (the limit) or "wall" (the backstop)."""

    def __init__(self, clock: str, message: str = "") -> None:
        super().__init__(message or clock)
        self.clock = clock


class _CandidateTimeout(_TimeUp):
    """Reached while waiting on the candidate."""


class _CandidateExit(BaseException):
    """The candidate raised SystemExit/KeyboardInterrupt/GeneratorExit inside a call."""


class _JudgeAlarm(_TimeUp):
    """Reached while the judge itself was busy (SIGPROF: its CPU; SIGALRM: the wall backstop)."""


_REAP_WAIT_S = 5.0  # a candidate whose pipe hit EOF is exiting; a busy machine may take a while to show it


_CLOCK_NAMES = {"cpu": "CPU-time limit", "wall": "wall-clock backstop"}


def _limit_text(clock: str, job: dict) -> str:
    return f"its {float(job['timeout_s' if clock == 'cpu' else 'wall_s']):.3g}s {_CLOCK_NAMES[clock]}"


_EXC_CACHE = {}


def _candidate_exception(name: str, base_name: str, message: str) -> BaseException:
    name = name[:100] if name.isidentifier() else "SolutionError"
    if len(_EXC_CACHE) > 1000:  # names come from the solution: keep the long-lived judge's memory bounded
        _EXC_CACHE.clear()
    if base_name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        return _CandidateExit(f"{name}: {message}")
    base = getattr(builtins, base_name, None)
    if not (isinstance(base, type) and issubclass(base, BaseException)):
        base = Exception
    key = (name, base)
    cls = _EXC_CACHE.get(key)
    if cls is None:
        try:
            cls = type(name, (base, _FromCandidate), {})
        except TypeError:
            cls = type(name, (Exception, _FromCandidate), {})
        _EXC_CACHE[key] = cls
    try:
        return cls(message)
    except BaseException:
        return type(name, (Exception, _FromCandidate), {})(message)


class _Channel:
    """The judge's end of the call pipe; every answer is validated before anything uses it."""

    def __init__(self, pid: int, req_w: int, rsp_r: int, budget: _Budget, max_value_bytes: int,
                 reaper: Callable[[int, float], int | None]) -> None:
        self.pid = pid
        self.reaper = reaper  # the candidate is the template's child: the template reaps it
        self.req_w = req_w
        self.rsp_r = rsp_r
        self.budget = budget
        self.max_value_bytes = max_value_bytes
        self.dead = None  # reason string once the candidate is gone
        self.status = None
        os.set_blocking(req_w, False)

    def kill(self, reason: str) -> None:
        if self.dead is None:
            self.dead = reason
        _kill_pg(self.pid)
        if self.status is None:
            self.status = self.reaper(self.pid, 2.0)

    def _gone(self, what: str) -> NoReturn:
        # Read before the reap removes /proc/<pid>: a candidate killed by RLIMIT_CPU while the judge waited
        # for its turn on a busy machine ran out of CPU time, it did not crash.
        over = self.budget.spent(full=True) >= self.budget.limit_s
        _kill_pg(self.pid)
        status = self.reaper(self.pid, _REAP_WAIT_S)
        self.status = status
        if over:
            self.budget.up("cpu")
            self.kill(f"{_CLOCK_NAMES['cpu']} reached {what}")
            raise _CandidateTimeout("cpu", self.dead)
        detail = _describe_status(status) if status is not None else "stopped answering"
        self.kill(f"the solution process {detail} {what}")
        raise _CandidateGone(self.dead)

    def _timed_out(self, e: _Timeout, what: str) -> NoReturn:
        self.kill(f"{_CLOCK_NAMES[e.clock]} reached {what}")
        raise _CandidateTimeout(e.clock, self.dead) from None

    def close(self) -> None:
        for fd in (self.req_w, self.rsp_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def recv(self, what: str) -> tuple:
        try:
            n = int.from_bytes(_read_exact_budget(self.rsp_r, 4, self.budget), "big")
            if n > self.max_value_bytes:
                self.kill(f"the solution sent {n} bytes, over the {self.max_value_bytes} byte limit")
                raise _CandidateGone(self.dead)
            data = _read_exact_budget(self.rsp_r, n, self.budget)
        except _Timeout as e:
            self._timed_out(e, what)
        except EOFError:
            self._gone(what)
        try:
            msg = _plain_loads(data)
        except Exception as e:
            self.kill(f"the solution sent something that is not plain data ({_short(e, 200)})")
            raise _CandidateGone(self.dead) from None
        if not (isinstance(msg, tuple) and msg and isinstance(msg[0], str)):
            self.kill("the solution broke the call protocol")
            raise _CandidateGone(self.dead)
        return msg

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        if self.dead is not None:
            raise _CandidateGone(self.dead)
        try:
            payload = pickle.dumps(("call", name, args, kwargs), protocol=5)
        except Exception as e:
            raise TypeError("cannot pass these arguments to the sandboxed solution (only plain data "
                            f"crosses): {_short(e, 200)}") from None
        what = f"while running {name}(...)"
        try:
            _write_all_budget(self.req_w, len(payload).to_bytes(4, "big") + payload, self.budget)
        except _Timeout as e:
            self._timed_out(e, what)
        except OSError:
            self._gone(what)
        msg = self.recv(what)
        kind = msg[0]
        if kind == "ok" and len(msg) == 3 and isinstance(msg[2], list):
            _apply_mutations(args, kwargs, msg[2])
            return msg[1]
        if kind == "exc" and len(msg) == 4 and all(isinstance(x, str) for x in msg[1:]):
            raise _candidate_exception(msg[1], msg[3], msg[2])
        if kind == "bad" and len(msg) == 2 and isinstance(msg[1], str):
            raise _candidate_exception("TypeError", "TypeError", msg[1])
        self.kill("the solution broke the call protocol")
        raise _CandidateGone(self.dead)


def _apply_mutations(args: tuple, kwargs: dict, mutated: list) -> None:
    """Reflect in-place changes the solution made to list/dict/set/bytearray arguments."""
    for key, new in mutated:
        if isinstance(key, int) and 0 <= key < len(args):
            old = args[key]
        elif isinstance(key, str) and key in kwargs:
            old = kwargs[key]
        else:
            continue
        if type(old) is not type(new):
            continue
        if type(old) in (list, bytearray):
            old[:] = new
        elif type(old) in (dict, set):
            old.clear()
            old.update(new)


class _Proxy:
    """Stands for a solution function in the judge: calling it runs the function in the candidate."""

    __slots__ = ("_chan", "_name")

    def __init__(self, chan: _Channel, name: str) -> None:
        self._chan = chan
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._chan.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<sandboxed function {self._name}>"


class _JudgeGlobals(dict):
    """Test namespace. A name the tests do not define resolves, in this order, to: the entry point (even
    over a builtin: the dataset says the tests mean it); a builtin (a solution helper `abs` returning 0
    must not fake `abs(candidate(x) - y) < eps`); the solution's other functions; a standard module the
    solution imported under that name, imported here by the judge from its own library."""

    def __init__(self, chan: _Channel, names: frozenset, entry: str | None, modules: dict[str, str]) -> None:
        super().__init__()
        self.chan = chan
        self.names = names
        self.entry = entry
        self.modules = modules

    def __missing__(self, key: str) -> Any:
        value = None
        if key in self.names and (key == self.entry or not hasattr(builtins, key)):
            value = _Proxy(self.chan, key)
        elif key in self.modules and not hasattr(builtins, key):
            import importlib

            try:
                value = importlib.import_module(self.modules[key])
            except Exception:
                value = None
        if value is None:
            raise KeyError(key)
        self[key] = value
        return value


# Standard modules whose import does something (opens a browser, prints, extends sys.path, needs a display):
# never imported by the judge on a solution's behalf.
_NO_JUDGE_IMPORT = frozenset(("antigravity", "this", "site", "test", "idlelib", "tkinter", "turtle", "turtledemo"))


def _standard_modules(pairs: list) -> dict[str, str]:
    """{bound name: module name} for the solution's imports of standard-library modules, from its (untrusted)
    `ready` message: only well-formed names whose top-level package is in this interpreter's standard
    library; nothing the solution wrote is ever executed or imported from its files."""
    standard = getattr(sys, "stdlib_module_names", frozenset())  # Python >= 3.10; older: none are shared
    out = {}
    for pair in pairs[:1000]:
        if not (type(pair) is tuple and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str):
            continue
        alias, module = pair
        parts = module.split(".")
        top = parts[0]
        if (alias.isidentifier() and len(module) <= 200 and all(p.isidentifier() for p in parts)
                and top in standard and not top.startswith("_") and top not in _NO_JUDGE_IMPORT):
            out[alias] = module
    return out


_CMP_OPS = {
    "Eq": ("==", operator.eq), "NotEq": ("!=", operator.ne), "Lt": ("<", operator.lt),
    "LtE": ("<=", operator.le), "Gt": (">", operator.gt), "GtE": (">=", operator.ge),
    "Is": ("is", operator.is_), "IsNot": ("is not", operator.is_not),
    "In": ("in", lambda a, b: a in b), "NotIn": ("not in", lambda a, b: a not in b),
}


def _instrument(tree: ast.Module) -> ast.Module:
    """Rewrite `assert a OP b` into a judge-side comparison that remembers both sides for the message."""
    class Rewriter(ast.NodeTransformer):
        def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
            return node  # helpers keep their own semantics

        visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

        def visit_Assert(self, node: ast.Assert) -> ast.Assert:
            test = node.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]).__name__ in _CMP_OPS:
                call = ast.Call(
                    func=ast.Name(id="__sbx_cmp__", ctx=ast.Load()),
                    args=[ast.Constant(type(test.ops[0]).__name__), test.left, test.comparators[0]],
                    keywords=[],
                )
                node.test = ast.copy_location(call, test)
            return node

    return ast.fix_missing_locations(Rewriter().visit(tree))


class _Compare:
    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, op: str, left: Any, right: Any) -> Any:
        self.last = None
        symbol, fn = _CMP_OPS[op]
        result = fn(left, right)
        if not result:
            self.last = f"assert {_safe_repr(left)} {symbol} {_safe_repr(right)}"
        return result


class _MissingEntry:
    """Bound to `candidate` when the solution lacks the entry point, so each assert says why it fails."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NameError(f"the solution does not define {self.name}")


_JUDGE_TIMERS = (signal.SIGALRM, signal.SIGPROF)


def _stop_judge_timers() -> None:
    """Disarm before restoring the default handlers: SIGPROF's default action would end the worker."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.setitimer(signal.ITIMER_PROF, 0)
    for sig in _JUDGE_TIMERS:
        signal.signal(sig, signal.SIG_DFL)


def _judge(cfg: dict, job: dict, code: str, tests_blob: bytes, template: _Template, t0: float) -> dict:
    """Run one job: spawn the candidate through the template, then the tests against it; the verdict."""
    budget = _Budget(float(job["timeout_s"]), float(job["wall_s"]), float(job["wall_cap_s"]), t0)
    req_r, req_w = os.pipe()
    rsp_r, rsp_w = os.pipe()
    try:
        pid = template.spawn(job, code, req_r, rsp_w)
    except BaseException:
        for fd in (req_w, rsp_r):
            os.close(fd)
        raise
    finally:
        os.close(req_r)
        os.close(rsp_w)
    tests = json.loads(tests_blob.decode("utf-8", "surrogatepass"))
    asserts = list(tests["asserts"])
    _T["forked"] = time.monotonic() - t0
    budget.pid = pid
    chan = _Channel(pid, req_w, rsp_r, budget, int(job["max_value_bytes"]), template.reap)
    outcomes = [None] * len(asserts)

    def on_alarm(signum: int, frame: object) -> None:
        # The channel's budget handles waits on the candidate; these timers bound the judge's own work (the
        # tests' code, e.g. a comparison of huge values). SIGPROF: the judge alone used the CPU limit (by
        # the itimer's tick-sampled count: re-armed until the run's exact total is over). SIGALRM: the
        # wall backstop, while the judge is not waiting on the candidate.
        if signum == signal.SIGPROF:
            left = budget.limit_s - budget.spent()
            if left > 0:
                signal.setitimer(signal.ITIMER_PROF, max(left, _MIN_SLICE_S))
                return
            raise _JudgeAlarm(budget.up("cpu").clock)
        now = time.monotonic()
        if budget.waiting and now < budget.cap_deadline:
            signal.setitimer(signal.ITIMER_REAL, budget.cap_deadline - now + 0.05)
            return
        budget.up("wall")
        budget.note += "; while the tests' own code ran" if not budget.waiting else ""
        raise _JudgeAlarm("wall")

    for sig in _JUDGE_TIMERS:
        signal.signal(sig, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, budget.limit_s)
    signal.setitimer(signal.ITIMER_REAL, max(budget.wall_deadline - time.monotonic(), 0.001) + 0.05)
    try:
        try:
            status, message = _judge_run(job, tests, asserts, chan, outcomes)
        except _JudgeAlarm as e:
            status, message = "timeout", f"the run hit {_limit_text(e.clock, job)}"
        finally:
            _stop_judge_timers()
    except _JudgeAlarm as e:  # fired between the inner handler and the timers' reset
        status, message = "timeout", f"the run hit {_limit_text(e.clock, job)}"
    if status == "timeout" and budget.note:
        loaded = f"; loaded at {_T['loaded']:.2f}s" if "loaded" in _T else ""
        message += f" ({budget.note}{loaded}; forked at {_T.get('forked', 0.0):.2f}s)"
    _T["judged"] = time.monotonic() - t0
    budget.spent()  # a last look while the candidate is still there: its total goes into the verdict
    reason = chan.dead or ""
    chan.kill("run finished")
    chan.close()
    _T["killed"] = time.monotonic() - t0
    for i, o in enumerate(outcomes):
        if o is None:
            outcomes[i] = ("not_run", None, reason)
    passed = sum(1 for o in outcomes if o[0] == "passed")
    if status == "failed" and asserts and passed == len(asserts):
        status = "passed"
    return {
        "status": status, "message": message, "passed": passed, "total": len(asserts),
        "asserts": [list(o) for o in outcomes], "duration_s": time.monotonic() - t0, "cpu_s": budget.peak,
        "clock": (budget.hit or "wall") if status == "timeout" else "",
        "stdout": _read_capped(os.path.join(cfg["io_dir"], "stdout"), int(job["max_output"])),
        "stderr": _read_capped(os.path.join(cfg["io_dir"], "stderr"), int(job["max_output"])),
        "timing": dict(_T),
    }


def _judge_run(job: dict, tests: dict, asserts: list[str], chan: _Channel, outcomes: list) -> tuple[str, str]:
    """Load the solution, run the test setup, then each assert unit; returns (run status, message)."""
    try:
        hello = chan.recv("while loading the solution")
    except _CandidateTimeout as e:
        return "timeout", f"the solution did not finish loading within {_limit_text(e.clock, job)}"
    except _CandidateGone:
        return "crashed", chan.dead + " while loading"
    _T["loaded"] = time.monotonic() - chan.budget.t0
    if hello[0] == "load_error" and len(hello) == 4:
        chan.kill(f"the solution raised {hello[1]} at module level")
        return "load_error", (f"{hello[1]}: {hello[2]}" if hello[2] else str(hello[1]))
    if hello[0] != "ready" or len(hello) != 3 or not isinstance(hello[1], list) or not isinstance(hello[2], list):
        chan.kill("the solution broke the protocol while loading")
        return "crashed", chan.dead
    names = frozenset(x for x in hello[1] if type(x) is str)
    entry = job.get("entry_point")
    g = _JudgeGlobals(chan, names, entry, _standard_modules(hello[2]))
    compare = _Compare()
    g.update({"__name__": "__tests__", "__builtins__": builtins, "__sbx_cmp__": compare})
    status, message = "failed", ""
    if entry:
        g[job.get("candidate_name") or "candidate"] = _Proxy(chan, entry) if entry in names else _MissingEntry(entry)
        if entry not in names:
            message = f"the solution does not define {entry}"
    try:
        exec(compile(tests.get("setup", ""), "<tests setup>", "exec", dont_inherit=True), g)
    except _TimeUp as e:
        return "timeout", f"the test setup hit {_limit_text(e.clock, job)}"
    except _CandidateGone:
        return "crashed", chan.dead
    except BaseException as e:
        return "test_error", f"the test setup raised {type(e).__name__}: {_short(e, 300)}"
    import ast

    for i, src in enumerate(asserts):
        if chan.dead is not None:
            break
        compare.last = None
        try:
            unit = compile(_instrument(ast.parse(src)), f"<assert {i}>", "exec", dont_inherit=True)
            exec(unit, g)
            outcomes[i] = ("passed", None, "")
        except _TimeUp as e:
            chan.kill(str(e))
            outcomes[i] = ("timeout", None, f"{_CLOCK_NAMES[e.clock]} reached")
            status, message = "timeout", f"the run hit {_limit_text(e.clock, job)}"
        except _CandidateGone as e:
            outcomes[i] = ("error", "SolutionCrashed", str(e))
            status, message = "crashed", str(e)
        except _CandidateExit as e:
            outcomes[i] = ("error", str(e).split(":")[0], f"the solution tried to exit: {_short(e, 200)}")
        except AssertionError as e:
            if isinstance(e, _FromCandidate):
                outcomes[i] = ("error", type(e).__name__, _short(e))
            else:
                detail, text = compare.last or "", _short(e)
                outcomes[i] = ("failed", "AssertionError",
                               f"{text} ({detail})" if text and detail else text or detail)
        except BaseException as e:
            outcomes[i] = ("error", type(e).__name__, _short(e))
    return status, message


def _read_capped(path: str, cap: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError:
        return ""
    text = data[:cap].decode("utf-8", "replace")
    return text + ("\n...[output truncated]" if len(data) > cap else "")


# -------------------------------------------------------------------------------------------- zygote

def _prepare_dirs(cfg: dict) -> None:
    uid = cfg.get("uid")
    for path, mode, owner in ((cfg["scratch"], 0o700, uid), (cfg["io_dir"], 0o700, None)):
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)
        os.mkdir(path, mode)
        if owner is not None:
            os.chown(path, owner, owner)


_LEFTOVER_WAIT_S = 5.0  # how long leftovers may take to die: a killed process only goes once it is scheduled


def _kill_leftovers(cfg: dict, keep: tuple[int, ...] = ()) -> None:
    """Kill whatever the run left behind (daemonised children, threads' processes, fork bombs), and wait
    until they are gone (by time, not by a count of tries: a busy machine is slow to schedule the dying)."""
    me = os.getpid()
    spare = {1, me, *keep}
    if cfg.get("pid_ns"):
        end = time.monotonic() + _LEFTOVER_WAIT_S
        while time.monotonic() < end:
            alive = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) in spare:
                    continue
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        state = f.read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if state not in ("Z", "X"):
                    alive.append(int(entry))
            if not alive:
                return
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.001)
        return
    uid = cfg.get("uid")
    if uid is None:
        return  # no private uid and no pid namespace: process-group kill in the judge is all we have
    pid = os.fork()
    if pid == 0:  # reaper: as the run's private uid, kill(-1) reaches exactly that uid's processes
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(3):
                try:
                    os.kill(-1, signal.SIGKILL)  # returns 0 even when nothing was there: verify below
                except OSError:
                    pass
            end = time.monotonic() + _LEFTOVER_WAIT_S
            while time.monotonic() < end:
                alive = [p for p in _live_pids() if p[1] == uid and p[0] != os.getpid()]
                if not alive:
                    break
                for p, _ in alive:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.001)
        finally:
            os._exit(0)
    _reap(pid, _LEFTOVER_WAIT_S + 1.0)


def _live_pids() -> list[tuple[int, int]]:
    """(pid, real uid) of every process that is not a zombie, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                text = f.read()
        except OSError:
            continue
        state = text.split("State:", 1)[1].split()[0] if "State:" in text else "?"
        uid = int(text.split("Uid:", 1)[1].split()[0]) if "Uid:" in text else -1
        if state not in ("Z", "X"):
            out.append((int(entry), uid))
    return out


class _TemplateDied(Exception):
    pass


def _recv_exact_sock(sock: _socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _send_msg(sock: _socket.socket, obj: dict, fds: tuple[int, ...] = (), extra: bytes = b"") -> None:
    head = json.dumps(obj).encode()
    anc = []
    if fds:
        anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))]
    sock.sendmsg([len(head).to_bytes(4, "big")], anc)
    sock.sendall(head + extra)


def _recv_msg(sock: _socket.socket) -> tuple[dict, list[int]]:
    data, anc, _, _ = sock.recvmsg(4, _socket.CMSG_SPACE(16))
    if not data:
        raise EOFError
    if len(data) < 4:
        data += _recv_exact_sock(sock, 4 - len(data))
    fds = []
    for level, kind, payload in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(payload) - len(payload) % 4, 4)]
    return json.loads(_recv_exact_sock(sock, int.from_bytes(data, "big"))), fds


class _Template:
    """A clean process forked at start-up, before any job: every candidate is forked from it, so no
    candidate inherits memory that ever held tests (the zygote, which judges, does hold them)."""

    def __init__(self, cfg: dict, close_fds: tuple[int, ...]) -> None:
        self.sock, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                self.sock.close()
                for fd in close_fds:
                    os.close(fd)
                self._serve(cfg, theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.sock.settimeout(30.0)

    @staticmethod
    def _serve(cfg: dict, sock: _socket.socket) -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        while True:
            try:
                req, fds = _recv_msg(sock)
            except (EOFError, OSError):
                return
            if req.get("op") == "spawn":
                code = _recv_exact_sock(sock, int(req["code_len"])).decode("utf-8", "surrogatepass")
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    _candidate_main(cfg, req["job"], code, fds[0], fds[1])
                    os._exit(0)
                for fd in fds:
                    os.close(fd)
                _send_msg(sock, {"pid": pid})
            elif req.get("op") == "reap":
                _send_msg(sock, {"status": _reap(int(req["pid"]), float(req["wait_s"]))})
                try:  # collect any earlier candidate that was slow to die
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                except ChildProcessError:
                    pass

    def _ask(self, obj: dict, fds: tuple[int, ...] = (), extra: bytes = b"") -> dict:
        # The judge's time-limit timers must not cut an exchange in half (the next answer would be read
        # as this one's): it is held back until the exchange is complete.
        signal.pthread_sigmask(signal.SIG_BLOCK, set(_JUDGE_TIMERS))
        try:
            _send_msg(self.sock, obj, fds, extra)
            return _recv_msg(self.sock)[0]
        except (OSError, EOFError, ValueError) as e:
            raise _TemplateDied(f"{type(e).__name__}: {e}") from None
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_JUDGE_TIMERS))

    def spawn(self, job: dict, code: str, req_r: int, rsp_w: int) -> int:
        data = code.encode("utf-8", "surrogatepass")
        return int(self._ask({"op": "spawn", "job": job, "code_len": len(data)}, (req_r, rsp_w), data)["pid"])

    def reap(self, pid: int, wait_s: float) -> int | None:
        return self._ask({"op": "reap", "pid": pid, "wait_s": wait_s})["status"]


_JUDGE_STATE = {}


def _snapshot_judge_state() -> None:
    _JUDGE_STATE.update(builtins=dict(builtins.__dict__), recursion=sys.getrecursionlimit(), cwd=os.getcwd(),
                        streams=(sys.stdin, sys.stdout, sys.stderr))


def _restore_judge_state() -> None:
    """Undo what trusted-but-careless test code may have changed in the long-lived judge."""
    if builtins.__dict__ != _JUDGE_STATE["builtins"]:
        builtins.__dict__.clear()
        builtins.__dict__.update(_JUDGE_STATE["builtins"])
    sys.setrecursionlimit(_JUDGE_STATE["recursion"])
    sys.stdin, sys.stdout, sys.stderr = _JUDGE_STATE["streams"]
    try:
        os.chdir(_JUDGE_STATE["cwd"])
    except OSError:
        pass


def _run_job(cfg: dict, job: dict, code: str, tests_blob: bytes, template: _Template) -> dict:
    t0 = time.monotonic()
    _T.clear()
    try:
        _prepare_dirs(cfg)
    except OSError as e:
        return {"status": "sandbox_error", "message": f"could not prepare the scratch dir: {e}"}
    _T["prepared"] = time.monotonic() - t0
    try:
        result = _judge(cfg, job, code, tests_blob, template, t0)
    except _TemplateDied as e:
        if cfg.get("uid") is None:  # not root: the candidate shares the template's uid and can kill it
            result = {"status": "crashed", "fatal": True,
                      "message": f"the candidate template died ({e}); without a separate uid the solution can kill it"}
        else:
            result = {"status": "sandbox_error", "message": f"the candidate template died ({e})", "fatal": True}
    except BaseException as e:
        result = {"status": "sandbox_error", "message": f"judge failed: {type(e).__name__}: {_short(e)}"}
    finally:
        _stop_judge_timers()
        _restore_judge_state()
    _kill_leftovers(cfg, (template.pid,))
    shutil.rmtree(cfg["scratch"], ignore_errors=True)
    if isinstance(result.get("timing"), dict):
        result["timing"]["cleaned"] = time.monotonic() - t0
    return result


def main() -> None:
    sys.path[:] = [p for p in sys.path if p]  # `-c` puts the working directory first; a candidate can write there
    cfg = json.loads(sys.argv[1])
    _CFG.update(cfg)
    proto = (os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # stray prints can never corrupt the protocol
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_DUMPABLE, 0)  # without a separate uid, this keeps /proc/<zygote>/fd out of reach
    for name in PREIMPORT:
        try:
            __import__(name)
        except Exception:
            pass
    os.makedirs(os.path.dirname(cfg["scratch"]) or "/", exist_ok=True)
    gc.collect()
    gc.freeze()  # forked children do not dirty the template's pages by collecting them
    template = _Template(cfg, proto)
    _snapshot_judge_state()
    hello = {"ready": True, "pid": os.getpid(), "python": sys.version.split()[0], "uid": cfg.get("uid")}
    _write_frame(proto[1], json.dumps(hello).encode())
    while True:
        try:
            job = json.loads(_read_frame(proto[0]))
            code = _read_frame(proto[0]).decode("utf-8", "surrogatepass")
            tests_blob = _read_frame(proto[0])
        except EOFError:
            return
        result = _run_job(cfg, job, code, tests_blob, template)
        _write_frame(proto[1], json.dumps(result).encode("utf-8", "surrogatepass"))
        if result.get("fatal"):
            return  # the parent restarts the worker


if __name__ == "__main__":
    main()
