"""What every dataset loader shares: `DatasetError` (one line naming the file, line and field) and reading a
plain or gzip-compressed JSON Lines file (`comlrl.tasks.datasets` and `comlrl.tasks.hf_dataset` use them)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import IO


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
