"""Shared test helpers (tests/llm_server.py) import by module name from every test folder."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
