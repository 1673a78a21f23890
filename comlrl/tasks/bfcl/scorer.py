"""One persistent process that runs what a model's calls make BFCL's backends do, and BFCL's checker.

A call's literal arguments can still make the benchmark's own code compute for minutes
(`MathAPI.power(base=10, exponent=100000000)`) or allocate gigabytes (`MathAPI.square_root(...,
precision=10**9)`), and BFCL's multi-turn checker replays the same calls. So every step of the
environment and every verdict runs here: one child started on first use with multiprocessing's "spawn"
context (no state of the trainer is inherited), its address space capped (`RLIMIT_AS`), Ctrl-C left to the
trainer (the child ignores SIGINT), requests over a `Pipe`.

`Scorer.run(fn, payloads)` sends a batch in one message; the child answers item by item, and each answer
must come within `timeout_s` of the one before (of the batch's start for the first). An item that takes
longer gets `Failed("timeout")`: the child is killed and a fresh one takes the rest of the batch. A child
that dies on an item (its memory cap, a crash) is restarted and the item tried once more, then it gets
`Failed("died")`; an exception the item raises is `Failed("error: ...")`. Nothing here waits without a limit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MEMORY_BYTES = 4 << 30  # the child's address-space cap
START_TIMEOUT_S = 120.0  # a child's start (spawn, imports, warm-up) must finish within this


@dataclass(frozen=True)
class Failed:
    """An item the scoring process gave no result for: "timeout", "died" or "error: <exception>"."""

    reason: str


@contextlib.contextmanager
def _child_spawn() -> Any:
    """While a child is spawned, `__main__` is an empty module: "spawn" re-imports the parent's main module
    in the child, which would run an unguarded user script (or notebook cell) a second time there and
    costs imports; the child needs only this module. And PYTHONHASHSEED is 0, so BFCL's backends answer the
    same calls with the same text in every run (TicketAPI joins a set of field names into its error)."""
    main, seed = sys.modules.get("__main__"), os.environ.get("PYTHONHASHSEED")
    sys.modules["__main__"] = types.ModuleType("__main__")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main
        if seed is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = seed


def _serve(conn: Any, memory_bytes: int, warm_up: Callable[[], None] | None) -> None:
    """The child's loop: cap the address space, warm up, then answer batches until the pipe closes."""
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle: no traceback from here
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if warm_up is not None:
        warm_up()
    conn.send("ready")
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, items = message
        for i, payload in items:
            try:
                answer: tuple[str, Any] = ("ok", fn(payload))
            except Exception as exc:  # noqa: BLE001 - MemoryError included: the item fails, the child goes on
                answer = ("error", f"{type(exc).__name__}: {exc}"[:500])
            try:
                conn.send((i, answer))
            except Exception as exc:  # noqa: BLE001 - an answer that does not pickle
                conn.send((i, ("error", f"unsendable result ({type(exc).__name__})")))


class Scorer:
    """The scoring process seen from the trainer (started on first use; `close()` ends it)."""

    def __init__(self, timeout_s: float = 10.0, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 warm_up: Callable[[], None] | None = None) -> None:
        self.timeout_s = float(timeout_s)
        self.memory_bytes = int(memory_bytes)
        self.warm_up = warm_up
        self._proc: Any = None
        self._conn: Any = None
        self.starts = 0
        self.start_seconds = 0.0  # summed over starts
        self.timeouts = 0
        self.deaths = 0

    @property
    def pid(self) -> int | None:
        """The child's process id (None: not running)."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def _start(self) -> None:
        t0 = time.perf_counter()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.memory_bytes, self.warm_up), daemon=True,
                           name="comlrl-bfcl-scorer")
        with _child_spawn():
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        try:
            ready = parent.poll(START_TIMEOUT_S) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._stop()
            raise RuntimeError(f"the BFCL scoring process did not start (exit code {proc.exitcode}, "
                               f"limit {START_TIMEOUT_S:.0f} s)")
        self.starts += 1
        self.start_seconds += time.perf_counter() - t0

    def _stop(self) -> None:
        """Kill the child (no clean shutdown needed: it holds nothing but copies)."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)

    def _send(self, message: Any) -> bool:
        if self._proc is None or not self._proc.is_alive():
            self._stop()
            self._start()
        try:
            self._conn.send(message)
            return True
        except (BrokenPipeError, EOFError, OSError):
            self._stop()
            return False

    def run(self, fn: Callable[[Any], Any], payloads: Sequence[Any]) -> list[Any]:
        """`fn(payload)` per payload, run in the child (`fn` a module-level function): its result, or a
        `Failed` for an item that timed out, killed its child twice or raised."""
        out: list[Any] = [None] * len(payloads)
        todo = list(range(len(payloads)))
        tries: dict[int, int] = {}
        while todo:
            if not self._send((fn, [(i, payloads[i]) for i in todo])):
                tries[todo[0]] = tries.get(todo[0], 0) + 1
                if tries[todo[0]] > 1:
                    out[todo.pop(0)] = Failed("died")
                continue
            while todo:
                head = todo[0]
                if not self._conn.poll(self.timeout_s):
                    self.timeouts += 1
                    self._stop()
                    out[todo.pop(0)] = Failed("timeout")
                    break
                try:
                    i, (kind, value) = self._conn.recv()
                except (EOFError, OSError):  # the child died on `head`
                    self.deaths += 1
                    self._stop()
                    tries[head] = tries.get(head, 0) + 1
                    if tries[head] > 1:
                        out[todo.pop(0)] = Failed("died")
                    break
                out[i] = value if kind == "ok" else Failed(f"error: {value}")
                todo.remove(i)
        return out

    def close(self) -> None:
        """End the child (a later `run` starts a new one)."""
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (BrokenPipeError, OSError):
                pass
        self._stop()
