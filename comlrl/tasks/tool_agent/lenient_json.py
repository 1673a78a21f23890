"""A backtracking JSON reader that tolerates what models write around code (the repairs `call_parser` tries
after strict JSON): unescaped quotes, raw newlines, single quotes, Python literals, truncation.

Readings are bounded in steps and time, so pathological input costs about a second at most.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from typing import Any

from comlrl.tasks.tool_agent.call_format import ARGUMENT_KEYS, NAME_KEYS
from sandbox.untrusted_source import parse

LENIENT_STEPS = 20_000  # backtracking budget per lenient pass
LENIENT_SECONDS = 0.25  # per pass; a pathological 100 KB call costs about a second in all
MAX_READINGS = 8  # complete readings compared when the first one's code does not parse

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_TOOL_NAME = re.compile(r"[A-Za-z_][\w.\-]{0,63}")
_WS = " \t\n\r\f\v\u00a0"
JSON_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_CONSTANTS: dict[str, tuple[Any, str | None]] = {
    "true": (True, None),
    "false": (False, None),
    "null": (None, None),
    "True": (True, "python_literals"),
    "False": (False, "python_literals"),
    "None": (None, "python_literals"),
}


def code_parses(obj: Any) -> bool:
    """Whether the call's code (if it has one) is valid Python; True when there is no code to judge."""
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        return True
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    args = next((obj[k] for k in ARGUMENT_KEYS if isinstance(obj.get(k), dict)), obj)
    code = args.get("code")
    return not isinstance(code, str) or parse_python(code) is not None


def parse_python(code: str) -> ast.Module | None:
    """The code's syntax tree, or None when it is not valid Python."""
    try:
        return parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _plausible(obj: Any) -> bool:
    """A tool name is an identifier: a reading whose name swallowed quotes and braces is wrong.

    Without this, `{"name": "python", "arguments": {"code": "x"}` (one brace missing) also parses
    "completely" with the name running from `python` to the last quote.
    """
    if isinstance(obj, list):
        return all(_plausible(item) for item in obj)
    if not isinstance(obj, dict):
        return True
    inner = obj["function"] if isinstance(obj.get("function"), dict) else obj
    name = next((inner[k] for k in NAME_KEYS if isinstance(inner.get(k), str)), None)
    return name is None or _TOOL_NAME.fullmatch(name.strip()) is not None


class _OutOfBudget(Exception):
    pass


_Alt = tuple[Any, int, frozenset[str]]


class LenientJSON:
    """A backtracking JSON reader that tolerates what models write around code.

    Each syntactic choice (does this quote end the string or belong to the code? is this the end of the
    text or a truncation?) is a generator alternative, tried in order of likelihood; the first reading
    under which the whole text parses wins. A quote only ends a string if what follows continues the JSON,
    which is how `"print("hi")"` keeps its inner quotes. Truncation (closing what the token limit cut) is a
    separate, later pass, because a text can always be "completed" at its end.
    """

    def __init__(self, text: str, truncation: bool) -> None:
        self.s = text
        self.n = len(text)
        self.truncation = truncation
        self.steps = 0
        self.deadline = time.monotonic() + LENIENT_SECONDS

    def parse(self) -> tuple[Any, frozenset[str], bool] | None:
        """The first complete reading whose code parses as Python, else the first complete reading.

        Returns (value, repair flags, code parses). Where quotes make the text ambiguous (`"d = {"k": "v"}}`
        lost its closing quote, or is `d = {"k": "v` closed twice?), runnable code is the tie-breaker.
        """
        i = self._ws(0)
        if i >= self.n or self.s[i] not in "{[":
            return None
        exact: tuple[Any, frozenset[str]] | None = None
        closers: tuple[Any, frozenset[str]] | None = None
        trailing: tuple[Any, frozenset[str]] | None = None
        readings = 0
        try:
            for value, j, flags in self._value(i, frozenset()):
                if not _plausible(value):
                    continue
                rest = self.s[j:].strip()
                if not rest:
                    if code_parses(value):
                        return value, flags, True
                    exact = exact or (value, flags)
                    readings += 1
                    if readings >= MAX_READINGS:
                        break
                elif closers is None and not rest.strip("}] \t\n"):
                    closers = value, flags | {"extra_closing"}
                elif trailing is None and isinstance(value, dict) and self.s[j - 1] == "}":
                    trailing = value, flags | {"trailing_text"}
        except (_OutOfBudget, RecursionError):
            pass
        best = exact or closers or trailing
        return None if best is None else (best[0], best[1], code_parses(best[0]))

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > LENIENT_STEPS or (self.steps % 256 == 0 and time.monotonic() > self.deadline):
            raise _OutOfBudget

    def _ws(self, i: int) -> int:
        s, n = self.s, self.n
        while i < n and s[i] in _WS:
            i += 1
        return i

    def _value(self, i: int, flags: frozenset[str]) -> Iterator[_Alt]:
        self._tick()
        i = self._ws(i)
        if i >= self.n:
            return
        c = self.s[i]
        if c == "{":
            yield from self._object(i + 1, [], flags, False)
        elif c == "[":
            yield from self._array(i + 1, [], flags, False)
        elif c in "\"'":
            yield from self._string(i, flags, key=False)
        else:
            m = _NUMBER.match(self.s, i)
            if m:
                text = m.group()
                try:
                    number: Any = float(text) if any(ch in text for ch in ".eE") else int(text)
                except ValueError:
                    return
                yield number, m.end(), flags
                return
            m = _IDENT.match(self.s, i)
            if m and m.group() in _CONSTANTS:
                value, flag = _CONSTANTS[m.group()]
                yield value, m.end(), (flags | {flag}) if flag else flags

    def _object(
        self, i: int, items: list[tuple[str, Any]], flags: frozenset[str], after_comma: bool
    ) -> Iterator[_Alt]:
        i = self._ws(i)
        if i >= self.n:
            if self.truncation:
                yield dict(items), self.n, flags | {"truncated"}
            return
        if self.s[i] == "}":
            yield dict(items), i + 1, (flags | {"trailing_comma"}) if after_comma else flags
            return
        for key, j, kflags in self._key(i, flags):
            j = self._ws(j)
            if j < self.n and self.s[j] == ":":
                j = self._ws(j + 1)
            elif j < self.n:
                continue
            if j >= self.n:  # cut inside or right after a key: drop the member
                if self.truncation:
                    yield dict(items), self.n, kflags | {"truncated"}
                continue
            for value, k, vflags in self._value(j, kflags):
                k = self._ws(k)
                members = [*items, (key, value)]
                if k >= self.n:
                    if self.truncation:
                        yield dict(members), self.n, vflags | {"truncated"}
                elif self.s[k] == ",":
                    yield from self._object(k + 1, members, vflags, True)
                elif self.s[k] == "}":
                    yield dict(members), k + 1, vflags

    def _array(self, i: int, items: list[Any], flags: frozenset[str], after_comma: bool) -> Iterator[_Alt]:
        i = self._ws(i)
        if i >= self.n:
            if self.truncation:
                yield list(items), self.n, flags | {"truncated"}
            return
        if self.s[i] == "]":
            yield list(items), i + 1, (flags | {"trailing_comma"}) if after_comma else flags
            return
        for value, k, vflags in self._value(i, flags):
            k = self._ws(k)
            members = [*items, value]
            if k >= self.n:
                if self.truncation:
                    yield members, self.n, vflags | {"truncated"}
            elif self.s[k] == ",":
                yield from self._array(k + 1, members, vflags, True)
            elif self.s[k] == "]":
                yield members, k + 1, vflags

    def _key(self, i: int, flags: frozenset[str]) -> Iterator[_Alt]:
        if self.s[i] in "\"'":
            yield from self._string(i, flags, key=True)
            return
        m = _IDENT.match(self.s, i)
        if m:
            yield m.group(), m.end(), flags | {"unquoted_keys"}

    def _string(self, i: int, flags: frozenset[str], key: bool) -> Iterator[_Alt]:
        s, n = self.s, self.n
        q = s[i]
        if q == "'":
            flags = flags | {"single_quotes"}
        if not key and s.startswith(q * 3, i):
            yield from self._triple(i, q, flags)
        buf: list[str] = []
        j = i + 1
        while j < n:
            c = s[j]
            if c == "\\":
                piece, j, flag = self._escape(j, q)
                buf.append(piece)
                if flag:
                    flags = flags | {flag}
                continue
            if c == q:
                self._tick()
                yield "".join(buf), j + 1, flags
                if key:  # keys never hold quotes: do not search further (keeps backtracking cheap)
                    return
                flags = flags | {"unescaped_quotes"}
            elif c < " ":
                if key:
                    return
                flags = flags | {"control_chars"}
            buf.append(c)
            j += 1
        if self.truncation:  # a cut key is dropped by the caller (it sees the end of the text)
            yield "".join(buf), n, flags | {"truncated"}

    def _triple(self, i: int, q: str, flags: frozenset[str]) -> Iterator[_Alt]:
        """A Python triple-quoted string used as a JSON value (`"code": \"\"\"def f(): ...\"\"\"`)."""
        s, n = self.s, self.n
        flags = flags | {"triple_quotes"}
        buf: list[str] = []
        j = i + 3
        while j < n:
            if s[j] == "\\":
                piece, j, flag = self._escape(j, q)
                buf.append(piece)
                if flag and flag != "invalid_escape":
                    flags = flags | {flag}
                continue
            if s.startswith(q * 3, j):
                self._tick()
                yield "".join(buf), j + 3, flags
            buf.append(s[j])
            j += 1
        if self.truncation:
            yield "".join(buf), n, flags | {"truncated"}

    def _escape(self, j: int, q: str) -> tuple[str, int, str | None]:
        """Decode the escape at `j`; unknown escapes stay verbatim (`\\d` in a regex means `\\d`)."""
        s = self.s
        if j + 1 >= self.n:
            return "", self.n, None
        c = s[j + 1]
        if c in JSON_ESCAPES:
            return JSON_ESCAPES[c], j + 2, None
        if c == "'":
            return "'", j + 2, None if q == "'" else "invalid_escape"
        if c == "u":
            code = _hex4(s, j + 2)
            if code is None:
                return "\\u", j + 2, "invalid_escape"
            if 0xD800 <= code < 0xDC00 and s.startswith("\\u", j + 6):
                low = _hex4(s, j + 8)
                if low is not None and 0xDC00 <= low < 0xE000:
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), j + 12, None
            return chr(code), j + 6, None
        if c == "\n":  # a Python line continuation inside code written with raw newlines
            return "\\", j + 1, "invalid_escape"
        return "\\" + c, j + 2, "invalid_escape"


def _hex4(s: str, i: int) -> int | None:
    chunk = s[i : i + 4]
    if len(chunk) == 4 and all(ch in "0123456789abcdefABCDEF" for ch in chunk):
        return int(chunk, 16)
    return None
