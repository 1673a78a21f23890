"""Repairs that make a small model's broken code parse: prose lines dropped, a repeated signature line
merged, missing bodies indented, a cut-off tail truncated to the last line that parses (`salvage`).

`comlrl.tasks.code.extract` tries them when a completion's code does not parse as written.
"""

from __future__ import annotations

import ast
import re
import textwrap

from sandbox.untrusted_source import parse

MAX_SALVAGE_STEPS = 400

_CODE_START = re.compile(
    r"^(?:(?:def|async|class|import|from|if|elif|else|for|while|try|except|finally|with|return|raise|pass"
    r"|break|continue|assert|global|nonlocal|del|yield|lambda|print)\b|@|#|[)\]}]|\"|')"
)
_ASSIGN_OR_CALL = re.compile(r"^[A-Za-z_][\w.]*\s*(?:\[[^\]]*\]\s*)?(?:[-+*/%&|^]?=(?!=)|:\s*[\w\[\]., |]+=|\()")
_DEF_HEADER = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")


def parses(code: str) -> ast.Module | None:
    """The module `code` parses to, or None (never raises)."""
    try:
        return parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _syntax_error_line(code: str) -> int | None:
    try:
        parse(code)
    except SyntaxError as exc:
        return exc.lineno
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return None


def _is_code_line(stripped: str) -> bool:
    """Whether a column-0 line can start Python code (prose like 'Here is the code:' cannot)."""
    if not stripped:
        return True
    if not (_CODE_START.match(stripped) or _ASSIGN_OR_CALL.match(stripped)):
        return False
    if re.match(r"(?:async\s+)?def\s|class\s|import\s|from\s", stripped):
        return True  # a broken definition is the model's syntax error, not prose to hide
    if stripped[-1] in ":,([{\\" or stripped.startswith(("#", "@", ")", "]", "}", '"', "'")):
        return True
    return parses(stripped) is not None


def drop_prose(code: str) -> str:
    """Remove column-0 lines that are not Python (explanations between or around code)."""
    out: list[str] = []
    in_string: str | None = None
    for line in code.split("\n"):
        if in_string is None and line[:1] not in (" ", "\t") and not _is_code_line(line.strip()):
            continue
        out.append(line)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1 and in_string in (None, quote):
                in_string = None if in_string == quote else quote
    return "\n".join(out)


def fix_repeated_headers(code: str) -> str:
    """Drop a `def` line whose body is missing because the signature was written twice."""
    lines = code.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        m = _DEF_HEADER.match(line)
        if m and line.rstrip().endswith(":"):
            nxt = next((lines[j] for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            m2 = _DEF_HEADER.match(nxt) if nxt is not None else None
            if m2 and m2.group(1) == m.group(1) and m2.group(2) == m.group(2):
                continue
        out.append(line)
    return "\n".join(out)


def indent_missing_bodies(code: str) -> str:
    """Indent the body of a top-level `def` whose body was written at column 0."""
    lines = code.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = _DEF_HEADER.match(line)
        if not (m and not m.group(1) and line.rstrip().endswith(":")):
            continue
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or lines[j][:1] in (" ", "\t"):
            continue
        while i < len(lines) and not re.match(r"^(def|async\s+def|class|@|import|from)\b", lines[i]):
            out.append("    " + lines[i] if lines[i].strip() else lines[i])
            i += 1
    return "\n".join(out)


def _truncate_to_parse(code: str) -> str | None:
    """Cut from the first syntax error (or the last line) until the rest parses: output cut mid-way."""
    lines = code.rstrip().split("\n")
    for _ in range(MAX_SALVAGE_STEPS):
        if not lines:
            return None
        candidate = "\n".join(lines)
        if parses(candidate) is not None:
            return candidate
        lineno = _syntax_error_line(candidate)
        if lineno is not None and 1 < lineno <= len(lines):
            lines = lines[: lineno - 1]
        else:
            lines = lines[:-1]
        while lines and not lines[-1].strip():
            lines.pop()
    return None


def _expand_tabs(code: str) -> str:
    """Tabs as 4 spaces (what models mean), or 8 (what Python means) when only that parses."""
    four = code.expandtabs(4)
    if parses(four) is None and parses(code.expandtabs(8)) is not None:
        return code.expandtabs(8)
    return four


def salvage(code: str) -> tuple[str, list[str]] | None:
    """The code made parseable with the fewest repairs, and the repairs made; None when hopeless."""
    code = textwrap.dedent(code).strip("\n")
    if not code.strip():
        return None
    notes: list[str] = []
    if parses(code) is not None:
        return code, notes
    for name, repair in (
        ("tabs", _expand_tabs),
        ("prose", drop_prose),
        ("repeated_def", fix_repeated_headers),
        ("body_indent", indent_missing_bodies),
    ):
        repaired = repair(code)
        if repaired != code:
            code = textwrap.dedent(repaired).strip("\n")
            notes.append(name)
            if parses(code) is not None:
                return code, notes
    cut = _truncate_to_parse(code)
    if cut is None:
        return None
    notes.append("truncated")
    return cut, notes
