"""What a run prints on a terminal (issue 36, defect 11): the progress bar's last frame once, and log lines on
lines of their own, not glued to a bar frame. A real pseudo-terminal, the tiny model."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

import pytest
from trainer_helpers import ENTRY, ROOT, TINY, env


def _on_a_terminal(args: list[str], columns: int = 100, timeout: float = 600) -> str:
    """Everything the command wrote to its terminal (stdout and stderr are the pty)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the trainer, its output a terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, str(ENTRY), *args], env())
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 5)[0]:
            continue  # nothing yet: look at the deadline again (a hung child must not hang the suite)
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    if time.monotonic() >= deadline:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    out = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, out[-3000:]
    return out


@pytest.mark.slow
def test_the_last_frame_is_drawn_once_and_log_lines_stand_alone(tmp_path, tiny_model):
    out = _on_a_terminal(["--config", "configs/align_T2_G4.yaml", *TINY, "logging.progress_bar=true",
                          "training.steps=2", "evaluation.greedy=false", "evaluation.probe_problems=0",
                          f"training.output_dir={tmp_path / 'run'}"])
    assert out.count("trained | step 2/2") == 1, out[-2000:]
    # a log line starts its own line: no timestamp right after a bar frame's text
    glued = re.findall(r"[^\r\n]\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} comlrl", out)
    assert not glued, out[-3000:]
    assert "before training:" in out and "done: 2 steps" in out
