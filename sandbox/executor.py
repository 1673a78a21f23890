"""Run untrusted solutions against parsed tests in a pool of isolated worker processes.

Each worker is a fresh interpreter (never a fork of the trainer, which may hold a 500 MB model) started
once, inside bubblewrap when available (`sandbox.isolation`); it forks a judge and a candidate per run
(see `_worker.py`). The parent only moves bytes: code and tests in, a verdict decided by the judge out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from .isolation import WORKER_ENV, SandboxUnavailable, command, detect_isolation, pick_python
from .results import AssertResult, ExecResult, SyntaxErrorInfo
from .testparse import ParsedTests
from .untrusted_source import check_compiles

logger = logging.getLogger("sandbox")

WORKER_SOURCE_PATH = Path(__file__).with_name("_worker.py")
CACHE_VERSION = "3"  # bumped when a verdict for the same job can change
# `timeout_s` limits the run's CPU time (load stretches the wall clock, not CPU time). The wall clock only ends
# runs that sleep or block, at WALL_BACKSTOP_FACTOR x the limit; one still runnable there (waiting for a CPU)
# goes on, up to WALL_CAP_PER_BACKSTOP x the backstop. A verdict reached on the wall clock is not cached.
WALL_BACKSTOP_FACTOR, WALL_CAP_PER_BACKSTOP = 5.0, 4.0
_WORKER_START_TIMEOUT_S = 30.0
_RESULT_GRACE_S = 15.0  # past the wall-clock cap, before the parent declares the worker dead (covers cleanup)
_MAX_JOBS_PER_WORKER = 20_000  # then the worker is replaced (~0.3 s), bounding what the judge accumulates
UID_SPAN = 1_000_000  # private uids are drawn from [uid_base, uid_base + UID_SPAN)


def free_uid(base: int) -> int:
    """A uid no live process holds, drawn at random: two sandboxes on one machine (data-parallel ranks, test
    workers) never share one, so one's cleanup (kill(-1) as that uid) cannot reach the other's runs."""
    while True:
        uid = base + secrets.randbelow(UID_SPAN)
        if not _uid_in_use(uid):
            return uid


def _uid_in_use(uid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    text = f.read()
            except OSError:
                continue
            if "Uid:" in text and int(text.split("Uid:", 1)[1].split()[0]) == uid:
                return True
    return False
_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------- worker

def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    """Read n bytes before the deadline (poll, not select: a trainer can hold more than 1024 fds)."""
    chunks, got = [], 0
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class _WorkerDied(Exception):
    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry  # the job never reached the worker: safe to run it on a fresh one


class _Worker:
    """One long-lived sandboxed interpreter; used by one thread at a time."""

    def __init__(self, index: int, level: str, python: str, source: str, tmpfs_bytes: int, uid_base: int):
        self.index = index
        self.level = level
        self.proc: subprocess.Popen | None = None
        root = os.geteuid() == 0
        uid = free_uid(uid_base) if root else None
        self.base: str | None = None
        if level == "bwrap":
            cfg = {"scratch": "/tmp/run", "io_dir": "/tmp/.io", "uid": uid, "pid_ns": True, "prctl": not root}
        else:
            self.base = tempfile.mkdtemp(prefix=f"comlrl-sandbox-{index}-")
            os.chmod(self.base, 0o711)
            cfg = {"scratch": os.path.join(self.base, "run"), "io_dir": os.path.join(self.base, "io"),
                   "uid": uid, "pid_ns": False, "prctl": True}
        self.uid = uid
        self.argv = command(level, python, source, cfg, tmpfs_bytes)
        self.jobs = 0

    def start(self) -> None:
        self.jobs = 0
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=WORKER_ENV, cwd="/",
                                     close_fds=True, start_new_session=True)
        try:
            hello = json.loads(self._read_frame(time.monotonic() + _WORKER_START_TIMEOUT_S))
        except (TimeoutError, EOFError, ValueError) as e:
            self.kill()
            raise SandboxUnavailable(f"sandbox worker failed to start ({type(e).__name__})") from None
        if not hello.get("ready"):
            self.kill()
            raise SandboxUnavailable("sandbox worker failed to start")

    def _read_frame(self, deadline: float) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        n = int.from_bytes(_read_exact(fd, 4, deadline), "big")
        return _read_exact(fd, n, deadline)

    def run(self, frames: Sequence[bytes], wait_s: float) -> dict:
        """Send one job; returns the verdict dict. Raises _WorkerDied (worker killed) on any failure."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            fd = self.proc.stdin.fileno()
            data = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            self.kill()
            raise _WorkerDied(f"could not send the job ({e})", retry=True) from None
        try:
            raw = json.loads(self._read_frame(time.monotonic() + wait_s))
            self.jobs += 1
            if raw.get("fatal") or self.jobs >= _MAX_JOBS_PER_WORKER:
                self.kill()  # cannot go on / bound the long-lived judge's memory: next job starts afresh
            return raw
        except TimeoutError:
            self.kill()
            raise _WorkerDied("timeout") from None
        except (EOFError, ValueError) as e:
            self.kill()
            raise _WorkerDied(f"worker ended without a verdict ({type(e).__name__})") from None

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.kill()
        except OSError:
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        self.kill()
        if self.base:
            shutil.rmtree(self.base, ignore_errors=True)


def _shutdown(workers: list[_Worker], pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.close()


# --------------------------------------------------------------------------------------------- sandbox

def syntax_error_of(code: str) -> SyntaxErrorInfo | None:
    """Compile (never run) `code`; the parent does this to skip executing code that cannot load."""
    try:
        check_compiles(code)
    except SyntaxError as e:
        return SyntaxErrorInfo(e.lineno or 0, e.offset or 0, e.msg)
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        return SyntaxErrorInfo(0, 0, f"{type(e).__name__}: {e}")
    return None


@dataclass
class SandboxConfig:
    """The `sandbox` config section: what `Sandbox` is built with (`Sandbox.of`)."""

    workers: int = 0  # 0 = one per core
    timeout_s: float = 5.0
    memory_mb: int = 512
    isolation: str = "auto"  # auto | bwrap | unshare | subprocess
    cache: bool = True


class Sandbox:
    """Pool of isolated workers with batch submission and a content-addressed result cache.

    `workers` None/0 = one per usable core. `timeout_s` bounds the CPU time of each whole run (load + all
    asserts); the wall clock ends a sleeping run at `wall_backstop_factor` x that (see WALL_BACKSTOP_FACTOR).
    `memory_mb` bounds its address space. Thread-safe: several threads may call `run`/`run_many` at once.
    """

    def __init__(self, workers: int | None = None, timeout_s: float = 5.0, memory_mb: int = 512,
                 isolation: str = "auto", cache: bool = True, *, python: str | None = None, nproc: int = 32,
                 nofile: int = 64, fsize_mb: int = 16, max_output_bytes: int = 64 * 1024,
                 max_value_mb: int = 16, tmpfs_mb: int = 128, uid_base: int = 65000,
                 cache_size: int = 100_000, wall_backstop_factor: float = WALL_BACKSTOP_FACTOR) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if wall_backstop_factor < 1:
            raise ValueError("wall_backstop_factor must be >= 1")
        if memory_mb < 64:
            raise ValueError("memory_mb must be >= 64")
        n = workers or len(os.sched_getaffinity(0)) or 1
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.python = pick_python(python)
        self._level = detect_isolation(isolation, self.python)
        self._limits = {
            "timeout_s": self.timeout_s, "wall_s": self.timeout_s * wall_backstop_factor,
            "wall_cap_s": self.timeout_s * wall_backstop_factor * WALL_CAP_PER_BACKSTOP,
            "memory_mb": self.memory_mb, "nproc": int(nproc), "nofile": int(nofile),
            "fsize_bytes": int(fsize_mb) << 20, "max_output": int(max_output_bytes),
            "max_value_bytes": int(max_value_mb) << 20,
        }
        self.cache_enabled = bool(cache)
        self._cache: OrderedDict[str, ExecResult] = OrderedDict()
        self._cache_size = int(cache_size)
        self._cache_lock = threading.Lock()
        self.stats = {"requested": 0, "cache_hits": 0, "executed": 0, "syntax_errors": 0, "worker_restarts": 0}
        source = WORKER_SOURCE_PATH.read_text()
        self._workers = [_Worker(i, self._level, self.python, source, int(tmpfs_mb) << 20, uid_base)
                         for i in range(n)]
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="sandbox")
        self._free: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._pool)
        try:
            for f in [self._pool.submit(w.start) for w in self._workers]:
                f.result()
        except BaseException:
            self.close()
            raise
        for w in self._workers:
            self._free.put(w)
        self._closed = False

    # -- public API ------------------------------------------------------------------------------------
    @classmethod
    def of(cls, cfg: SandboxConfig, workers: int | None = None) -> Sandbox:
        """The sandbox of a `sandbox` config section; `workers` (when given) replaces cfg.workers=0."""
        return cls(workers=cfg.workers or workers, timeout_s=cfg.timeout_s, memory_mb=cfg.memory_mb,
                   isolation=cfg.isolation, cache=cfg.cache)

    @property
    def isolation(self) -> str:
        return self._level

    @property
    def workers(self) -> int:
        return len(self._workers)

    def run(self, code: str, tests: ParsedTests) -> ExecResult:
        """Run one solution against its tests (see `run_many`)."""
        return self.run_many([(code, tests)])[0]

    def run_many(self, jobs: Sequence[tuple[str, ParsedTests]]) -> list[ExecResult]:
        """Run jobs in parallel on the pool; identical jobs (same code, tests and limits) run once."""
        if self._closed:
            raise RuntimeError("Sandbox is closed")
        out: list[ExecResult | None] = [None] * len(jobs)
        todo: dict[str, list[int]] = {}
        with self._cache_lock:
            self.stats["requested"] += len(jobs)
            for i, (code, tests) in enumerate(jobs):
                key = self.cache_key(code, tests)
                hit = self._cache.get(key) if self.cache_enabled else None
                if hit is not None:
                    self._cache.move_to_end(key)
                    self.stats["cache_hits"] += 1
                    out[i] = replace(hit, cached=True)
                elif key in todo and self.cache_enabled:
                    self.stats["cache_hits"] += 1
                    todo[key].append(i)
                else:
                    todo.setdefault(key if self.cache_enabled else f"{key}:{i}", []).append(i)
        futures = {key: self._pool.submit(self._execute, *jobs[idx[0]]) for key, idx in todo.items()}
        for key, fut in futures.items():
            result = fut.result()
            first, *rest = todo[key]
            out[first] = result
            for j in rest:
                out[j] = replace(result, cached=True)
            if self.cache_enabled and result.about_the_code:
                with self._cache_lock:
                    self._cache[key] = result
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        return [r for r in out if r is not None]

    def cache_key(self, code: str, tests: ParsedTests) -> str:
        """sha256 of everything that can change a verdict: code, tests, entry point and limits."""
        blob = json.dumps([CACHE_VERSION, code, tests.setup, list(tests.asserts), tests.entry_point,
                           tests.candidate_name, sorted(self._limits.items())], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def close(self) -> None:
        """Kill the workers and remove their scratch space."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------------
    def _not_run(self, tests: ParsedTests, status: str = "not_run", message: str = "") -> tuple[AssertResult, ...]:
        return tuple(AssertResult(i, src, status, None, message) for i, src in enumerate(tests.asserts))

    def _execute(self, code: str, tests: ParsedTests) -> ExecResult:
        t0 = time.perf_counter()
        err = syntax_error_of(code)
        if err is not None:
            with self._cache_lock:
                self.stats["syntax_errors"] += 1
            return ExecResult("syntax_error", self._not_run(tests), 0, len(tests.asserts), 0.0, self._level,
                              syntax_error=err, message=f"SyntaxError: {err}")
        header = dict(self._limits, entry_point=tests.entry_point, candidate_name=tests.candidate_name)
        frames = (json.dumps(header).encode(), code.encode("utf-8", "surrogatepass"),
                  json.dumps({"setup": tests.setup, "asserts": list(tests.asserts)}).encode("utf-8", "surrogatepass"))
        worker = self._free.get()
        try:
            try:
                raw = worker.run(frames, self._limits["wall_cap_s"] + _RESULT_GRACE_S)
            except _WorkerDied as e:
                if not e.retry:
                    raise
                raw = worker.run(frames, self._limits["wall_cap_s"] + _RESULT_GRACE_S)
        except (_WorkerDied, SandboxUnavailable) as e:
            with self._cache_lock:
                self.stats["worker_restarts"] += 1
            timed_out = str(e) == "timeout"
            raw = {"status": "timeout" if timed_out else "sandbox_error", "clock": "wall",
                   "message": "the sandbox worker stopped answering" if timed_out else str(e)}
        finally:
            self._free.put(worker)
        with self._cache_lock:
            self.stats["executed"] += 1
        return self._to_result(raw, tests, time.perf_counter() - t0)

    def _to_result(self, raw: dict, tests: ParsedTests, duration: float) -> ExecResult:
        status = raw.get("status", "sandbox_error")
        message = str(raw.get("message", ""))
        rows = raw.get("asserts")
        if isinstance(rows, list) and len(rows) == len(tests.asserts):
            asserts = tuple(AssertResult(i, src, str(r[0]), r[1], str(r[2] or ""))
                            for i, (src, r) in enumerate(zip(tests.asserts, rows, strict=True)))
        else:
            if rows is not None:
                status, message = "sandbox_error", "the verdict does not match the tests"
            asserts = self._not_run(tests, "timeout" if status == "timeout" else "not_run", message)
        passed = sum(a.status == "passed" for a in asserts)
        if status == "passed" and passed != len(asserts):
            status = "failed"
        clock = ("cpu" if raw.get("clock") == "cpu" else "wall") if status == "timeout" else ""
        cpu_s = round(float(raw["cpu_s"]), 6) if isinstance(raw.get("cpu_s"), (int, float)) else 0.0
        return ExecResult(status, asserts, passed, len(asserts), round(duration, 6), self._level,
                          str(raw.get("stdout", "")), str(raw.get("stderr", "")), None, message,
                          timeout_clock=clock, cpu_s=cpu_s)
