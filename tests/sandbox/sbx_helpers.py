"""Helpers shared by the sandbox tests (a uniquely named module: conftest names clash across folders)."""

from __future__ import annotations

import os

from sandbox import Sandbox
from sandbox.testparse import ParsedTests, parse_tests


def check_body(body: str, entry_point: str = "f") -> ParsedTests:
    """HumanEval-style tests from the lines of a `check` body."""
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return parse_tests(f"def check(candidate):\n{lines}\n", entry_point)


def processes_of(uids: set[int]) -> list[str]:
    """Live host processes (zombies excluded: already dead) whose real uid is one of `uids`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) in uids and not fields["State"].strip().startswith(("Z", "X")):
            out.append(f"{entry} {fields['Name'].strip()} {fields['State'].strip()}")
    return out


def worker_uids(box: Sandbox) -> set[int]:
    return {w.uid for w in box._workers if w.uid is not None}
