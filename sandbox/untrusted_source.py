"""Parse and compile model-written source in the host process, without its compile-time warnings.

Compiling untrusted code can warn (`(1, 2)(3)`: "'tuple' object is not callable"; `'\\d'`: "invalid escape
sequence"). Those warnings would print the model's text into the trainer's log, and under `-W error` would
turn code that loads fine into a SyntaxError. Everything compiled here carries one pseudo file name, and
one warnings filter at the front of the list ignores that name only: unlike `catch_warnings`, this is safe
from several threads, and the host's own warnings are untouched.
"""

from __future__ import annotations

import ast
import re
import warnings

FILENAME = "<untrusted>"
_MODULE = re.escape(FILENAME) + r"\Z"  # warnings match a compile warning's file name as its module


def _ignore_its_warnings() -> None:
    """Keep the filter first: a later `-W error` or a test framework's filters may have gone in front."""
    first = warnings.filters[0] if warnings.filters else None
    if not (first and first[0] == "ignore" and first[3] is not None and first[3].pattern == _MODULE):
        warnings.filterwarnings("ignore", module=_MODULE)


def parse(code: str, mode: str = "exec") -> ast.AST:
    """`ast.parse` for untrusted code; raises what it raises (SyntaxError, ValueError, RecursionError...)."""
    _ignore_its_warnings()
    return ast.parse(code, FILENAME, mode)


def check_compiles(source: str | ast.Module) -> None:
    """Compile (never run) `source`: raises SyntaxError for what parses but cannot load (`return` at top)."""
    _ignore_its_warnings()
    compile(source, FILENAME, "exec", dont_inherit=True)
