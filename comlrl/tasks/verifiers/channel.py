"""The trainer's end of the verifiers worker (comlrl/tasks/verifiers/worker.py): a child process of the interpreter
that has verifiers, spoken to in JSON lines.

Loading the environment is checked at start-up (a missing interpreter, verifiers not installed there, an
environment that fails to load: one ConfigError line each); a worker that dies or stops answering mid-run is a
`RunStopped` naming it, so the step ends with the checkpoint intact.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from comlrl.errors import ConfigError, RunStopped

log = logging.getLogger("comlrl")
WORKER = Path(__file__).with_name("worker.py")


class Channel:
    """One worker process: `ask(request)` sends a line and waits for the answer's line."""

    def __init__(self, python: str, timeout_s: float) -> None:
        self.python, self.timeout_s = python, timeout_s
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
        env.pop("PYTHONPATH", None)  # the worker imports verifiers from its own interpreter, nothing of this run's
        try:
            self.proc = subprocess.Popen([python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=env, bufsize=1)
        except OSError as exc:
            raise ConfigError(f"config error: task.verifiers.python={python!r} cannot be run: {exc.strerror}") from None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: list[str] = []  # the worker's last stderr lines, for the line that says why it stopped
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._log, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.tail = [*self.tail[-19:], line.rstrip()]
            log.debug("verifiers worker: %s", line.rstrip())

    def why(self) -> str:
        """The worker's last error line (a traceback's last line), or its exit status."""
        for line in reversed(self.tail):
            if line and not line.startswith(" ") and ("Error" in line or "error" in line):
                return line.strip()
        code = self.proc.poll()
        return f"exit status {code}" if code is not None else f"no answer in {self.timeout_s:g} s"

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """The worker's answer; `RunStopped` when it died or did not answer in time."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=self.timeout_s)
        except (BrokenPipeError, OSError, queue.Empty):
            line = None
        if line is None:
            raise RunStopped(f"the verifiers worker ({self.python}) stopped: {self.why()}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
