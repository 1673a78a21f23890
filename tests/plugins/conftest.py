"""The user modules here are imported by name (`plugins: [rhyme_task, echo_feedback]`), as a user's would be."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
