"""What every dataset loader shares: `DatasetError` (one line naming the file, line and field), reading a
plain or gzip-compressed JSON Lines file, and the check that a problem's tests parse (`comlrl.tasks.datasets`
and `comlrl.tasks.hf_dataset` use them)."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import IO

from sandbox.testparse import ParsedTests, parse_tests


class DatasetError(ValueError):
    """Bad dataset input; the message is one line naming the file, line and field."""


def open_text(path: Path) -> IO[str]:
    """Plain or gzip-compressed text, chosen by the file's suffix (HumanEval ships .jsonl.gz)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def check_json_lines(path: Path) -> None:
    """Every non-empty line of a JSON Lines file parses; else one `DatasetError` naming `file:line` (from 1),
    as the jsonl loader reports it (the datasets library reports rows from 0, in three lines)."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                try:
                    json.loads(line.rstrip("\r\n"))
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{lineno}: invalid JSON ({exc.msg}: column {exc.colno})") from None


@functools.cache
def parsed_tests(test: str, entry_point: str | None, prompt: str | None) -> ParsedTests:
    """A problem's tests as the sandbox runs them (`sandbox.testparse`), parsed once per process: at load, where
    a test that does not parse is a one-line error naming its row (`checked_tests`), then from the cache."""
    return parse_tests(test, entry_point, prompt=prompt)


def checked_tests(test: str, entry_point: str | None, prompt: str | None, where: str) -> None:
    """DatasetError naming `where` (file:line, or the row) when the tests do not parse; before this check a
    dataset with one broken test ran until a policy first wrote code that compiled for that problem, then
    stopped the run with a traceback."""
    try:
        parsed_tests(test, entry_point, prompt)
    except (ValueError, RecursionError, MemoryError) as exc:  # ValueError: ast's null bytes too
        why = str(exc).removeprefix("test code does not parse: ") if isinstance(exc, ValueError) else \
            type(exc).__name__
        raise DatasetError(f"{where}: field 'test' does not parse: {why}") from None
