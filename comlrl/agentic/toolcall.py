"""Tool calls out of interleaved reasoning traces, robustly and without ever raising.

The agent writes `<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>` inside its
`<think>` block. Small models rarely produce valid JSON around code: they put raw newlines in strings, leave
the quotes of `print("hi")` or of a docstring unescaped, use Python dict syntax or single quotes, run out of
tokens before the closing braces, fence the JSON, or double every backslash. Strict JSON is always tried
first, so a well-formed call is never reinterpreted; each repair after it targets one of those habits, and
the one that worked is recorded on the call (`repair == "strict"` means well-formed). Quotes are never
replaced globally: strings are read by a tokenizer that knows which quote opened them, so the apostrophe in
`don't` survives. When nothing works, a structured `ToolCallError` renders into a `<tool_response>` the
model can act on.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sandbox.untrusted_source import parse

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
# Stop after a call so the system, not the model, writes the response; stopping on a response opener
# catches models that skip the call and hallucinate a result directly.
STOP_SEQUENCES: tuple[str, ...] = (TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN)
# Known tools and their required string arguments; the single-argument case lets bare code and
# `"arguments": "<code>"` be mapped onto the right key.
DEFAULT_TOOLS: Mapping[str, tuple[str, ...]] = {"python": ("code",)}
MAX_RAW_CHARS = 100_000  # a tool call is a few KB; refuse to spend time on pathological input
LENIENT_STEPS = 20_000  # backtracking budget per lenient pass
LENIENT_SECONDS = 0.25  # per pass; a pathological 100 KB call costs about a second in all
MAX_READINGS = 8  # complete readings compared when the first one's code does not parse

_OPEN_RE = re.compile(r"<tool_call\s*>", re.I)
_CLOSE_RE = re.compile(r"</tool_call\s*>", re.I)
_RESPONSE_RE = re.compile(r"<tool_response\s*>.*?(?:</tool_response\s*>|\Z)", re.I | re.S)
_STRAY_RESPONSE_CLOSE = re.compile(r"</tool_response\s*>", re.I)
_TAG_WRAP = re.compile(r"^\s*<tool_call\s*>(.*?)(?:</tool_call\s*>\s*)?$", re.I | re.S)
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)([^\n]*)$", re.M)
_INVISIBLE = "\ufeff\u200b\u200c\u200d\u2060"
_ESCAPED_JSON = re.compile(r'\s*[\[{]\s*\\+"')
_PAIR_ESCAPE = re.compile(r"\\(.)", re.S)
_NEWLINE_PAIR = re.compile(r"(?<!\\)(?:\\\\)*\\n")  # a backslash-n that is not an escaped backslash + n
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_TOOL_NAME = re.compile(r"[A-Za-z_][\w.\-]{0,63}")
_CODE_LINE = re.compile(r"^\s*(?:def |class |import |from [\w.]+ import |print\(|@\w)")
_NEWLINE_ESCAPE_CODE = re.compile(r"\\n(?:[ \t]+\S|(?:def|class|import|from|return|print|for|if|while)\b)")
_WS = " \t\n\r\f\v\u00a0"
_JSON_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_CONSTANTS: dict[str, tuple[Any, str | None]] = {
    "true": (True, None),
    "false": (False, None),
    "null": (None, None),
    "True": (True, "python_literals"),
    "False": (False, "python_literals"),
    "None": (None, "python_literals"),
}
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_CODE_KEYS = ("code",)
_FORMAT_HINT = (
    'Write exactly <tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call> with the code as '
    'one JSON string: newlines as \\n, double quotes as \\", backslashes as \\\\.'
)


# --- results --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallSpan:
    """Where a `<tool_call>` block sits in the text; `closed` is False when the closing tag is missing."""

    start: int
    end: int
    raw: str
    closed: bool

    def parse(self, **kwargs: Any) -> ToolCall | ToolCallError:
        """Parse the block's content (see `parse_tool_call`)."""
        return parse_tool_call(self.raw, **kwargs)


@dataclass(frozen=True)
class ToolCall:
    """A parsed call; `repair` names what had to be fixed ("strict" = well-formed JSON as written)."""

    name: str
    arguments: dict[str, Any]
    repair: str = "strict"
    raw: str = ""

    ok: ClassVar[bool] = True

    @property
    def well_formed(self) -> bool:
        """True when the model wrote valid JSON that needed no repair (the `--only-ideal` criterion)."""
        return self.repair == "strict"

    @property
    def code(self) -> str | None:
        """The code argument when there is one (the python tool)."""
        value = self.arguments.get("code")
        return value if isinstance(value, str) else None

    def to_json(self) -> str:
        """Canonical JSON of the call, e.g. to rewrite a repaired call as well-formed for distillation."""
        payload = {"name": self.name, "arguments": self.arguments}
        return json.dumps(payload, ensure_ascii=False, default=_jsonable)

    def render(self) -> str:
        """The canonical `<tool_call>` block."""
        return f"{TOOL_CALL_OPEN}{self.to_json()}{TOOL_CALL_CLOSE}"


@dataclass(frozen=True)
class ToolCallError:
    """Why a call could not be used, with where it broke, in a form the model can read and act on."""

    reason: str  # empty | too_long | invalid_json | not_an_object | missing_name | missing_arguments |
    #              bad_arguments | unknown_tool | not_text | internal
    message: str
    position: int | None = None
    line: int | None = None
    column: int | None = None
    snippet: str = ""
    raw: str = ""

    ok: ClassVar[bool] = False

    def payload(self) -> dict[str, Any]:
        """The error as a JSON-able dict (the body of the `<tool_response>`)."""
        out: dict[str, Any] = {"error": f"invalid tool call ({self.reason})", "message": self.message}
        if self.line is not None:
            out["at"] = f"line {self.line}, column {self.column}"
        if self.snippet:
            out["near"] = self.snippet
        out["hint"] = _FORMAT_HINT
        return out

    def render(self) -> str:
        """The `<tool_response>` block that goes back to the model instead of an execution result."""
        return format_tool_response(self.payload())


def format_tool_response(payload: Mapping[str, Any]) -> str:
    """Wrap a JSON-able payload as a `<tool_response>` block (the one format the model ever sees)."""
    body = json.dumps(dict(payload), ensure_ascii=False, default=_jsonable)
    return f"{TOOL_RESPONSE_OPEN}{body}{TOOL_RESPONSE_CLOSE}"


def _jsonable(value: Any) -> Any:
    """Python-literal calls can carry sets and bytes; render them rather than fail."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


# --- locating blocks --------------------------------------------------------------------------------


def find_tool_calls(text: str) -> list[ToolCallSpan]:
    """All `<tool_call>` blocks in order, outside any `<tool_response>`.

    A block ends at its closing tag, at the next opening tag or response, or at the end of the text: servers
    often strip the stop sequence, and token limits cut calls short, so a missing close tag is normal.
    """
    if not isinstance(text, str):
        return []
    responses = [(m.start(), m.end()) for m in _RESPONSE_RE.finditer(text)]
    spans: list[ToolCallSpan] = []
    pos = 0
    while True:
        m = _OPEN_RE.search(text, pos)
        if m is None:
            break
        inside = next((r for r in responses if r[0] <= m.start() < r[1]), None)
        if inside is not None:
            pos = inside[1]
            continue
        begin = m.end()
        close = _CLOSE_RE.search(text, begin)
        limits = [len(text)]
        if close is not None:
            limits.append(close.start())
        nxt = _OPEN_RE.search(text, begin)
        if nxt is not None:
            limits.append(nxt.start())
        limits.extend(r[0] for r in responses if r[0] >= begin)
        stop = min(limits)
        closed = close is not None and close.start() == stop
        raw = text[begin:stop]
        if not closed and stop == len(text):
            raw = _drop_partial_close(raw)
        end = close.end() if closed and close is not None else stop
        spans.append(ToolCallSpan(start=m.start(), end=end, raw=raw, closed=closed))
        pos = max(end, begin)
    return spans


def _drop_partial_close(raw: str) -> str:
    """`...}}</tool_` cut by the token limit: drop the half-written closing tag."""
    for k in range(len(TOOL_CALL_CLOSE) - 1, 1, -1):
        if raw.endswith(TOOL_CALL_CLOSE[:k]):
            return raw[:-k]
    return raw


def strip_fake_responses(text: str) -> tuple[str, int]:
    """Remove `<tool_response>` blocks the model wrote itself; returns the clean text and how many.

    Only the system may report execution results; a hallucinated response would teach the model to
    invent outputs. An unclosed block runs to the end of the text.
    """
    if not isinstance(text, str):
        return "", 0
    clean, n = _RESPONSE_RE.subn("", text)
    return _STRAY_RESPONSE_CLOSE.sub("", clean), n


def close_unfinished_call(text: str) -> str:
    """Append `</tool_call>` when the last call is open (the server stripped the stop sequence)."""
    spans = find_tool_calls(text)
    if spans and not spans[-1].closed and spans[-1].end == len(text):
        return text + TOOL_CALL_CLOSE
    return text


# --- parsing ----------------------------------------------------------------------------------------


def parse_tool_call(
    raw: str,
    *,
    tools: Mapping[str, Sequence[str]] | None = DEFAULT_TOOLS,
    default_name: str | None = "python",
) -> ToolCall | ToolCallError:
    """Parse the content of one `<tool_call>` block; never raises.

    `tools` maps known tool names to their required string arguments (None: accept any name and
    arguments). `default_name` is the tool assumed for bare code or a call without a name (None: refuse).
    """
    try:
        return _parse(raw, tools, default_name)
    except Exception as exc:  # noqa: BLE001 - untrusted input must never crash the rollout
        text = raw if isinstance(raw, str) else ""
        return ToolCallError("internal", f"parser failure ({type(exc).__name__})", raw=text[:2000])


def _parse(
    raw: object, tools: Mapping[str, Sequence[str]] | None, default_name: str | None
) -> ToolCall | ToolCallError:
    if not isinstance(raw, str):
        return ToolCallError("not_text", "the tool call is not text")
    if len(raw) > MAX_RAW_CHARS:
        return ToolCallError("too_long", f"the tool call is longer than {MAX_RAW_CHARS} characters")
    text = raw.replace("\r\n", "\n").strip().strip(_INVISIBLE)  # inside the code, a ZWJ may be meant
    m = _TAG_WRAP.match(text)
    if m:
        text = m.group(1)
    labels: list[str] = []
    body, lang = _strip_fence(text)
    if lang is not None:
        labels.append("fence")
    if not body.strip():
        return ToolCallError("empty", "the tool call is empty", raw=raw)
    decoded = _decode_any(body)
    if decoded is not None:
        obj, more = decoded
        return _to_call(obj, labels + more, raw, tools, default_name)
    if default_name is not None and lang in (None, "", "python", "py", "python3"):
        code = _bare_code(body)
        if code is not None:
            call = {"name": default_name, "arguments": {"code": code}}
            return _to_call(call, [*labels, "bare_code"], raw, tools, default_name)
    return _json_error(body, raw)


def _decode_any(body: str) -> tuple[Any, list[str]] | None:
    """The JSON-ish reading of `body`: as is, then unescaped once, then after leading prose."""
    stripped = body.strip()
    found = _decode(stripped)
    if found is not None:
        return found
    if _ESCAPED_JSON.match(stripped):  # the whole call was written as the inside of a JSON string
        found = _decode(_unescape_all(stripped))
        if found is not None:
            return found[0], ["escaped_json", *found[1]]
    start = min((i for i in (stripped.find("{"), stripped.find("[")) if i > 0), default=-1)
    if start > 0:
        found = _decode(stripped[start:])
        if found is not None and _call_shaped(found[0]):  # not a dict literal inside bare code
            return found[0], ["leading_text", *found[1]]
    return None


def _call_shaped(obj: Any) -> bool:
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    return isinstance(obj, dict) and any(k in obj for k in (*_NAME_KEYS, *_ARGUMENT_KEYS))


def _decode(text: str) -> tuple[Any, list[str]] | None:
    """One text, the repairs in order of faithfulness; returns the value and the repair labels used."""
    if not text:
        return None
    try:
        return json.loads(text), []
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(text, strict=False), ["control_chars"]
    except (ValueError, RecursionError):
        pass
    first = _Lenient(text, truncation=False).parse()
    if first is not None and first[2]:
        return first[0], sorted(first[1])
    if text[0] in "{[" and not _has_python_only_escape(text):  # exact Python semantics beat a guess
        value = _literal_eval(text)
        if value is not None:
            return value, ["python_literal"]
    cut = _Lenient(text, truncation=True).parse()
    best = cut if cut is not None and (cut[2] or first is None) else first
    return None if best is None else (best[0], sorted(best[1]))


def _code_parses(obj: Any) -> bool:
    """Whether the call's code (if it has one) is valid Python; True when there is no code to judge."""
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        return True
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    args = next((obj[k] for k in _ARGUMENT_KEYS if isinstance(obj.get(k), dict)), obj)
    code = args.get("code")
    return not isinstance(code, str) or _parse_python(code) is not None


def _literal_eval(text: str) -> Any:
    """`ast.literal_eval` for Python-repr dicts (single quotes, True/None, triple quotes, trailing commas)."""
    try:
        value = ast.literal_eval(parse(text.lstrip(" \t"), mode="eval"))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _has_python_only_escape(text: str) -> bool:
    r"""Escapes Python and JSON read differently (`\1`, `\0`, `\x41`, `\a`): the lenient parser keeps them
    verbatim, which is what a model that forgot to double a regex backslash meant."""
    return any(m.group(1) not in "\"\\/bfnrtu'\n" for m in _PAIR_ESCAPE.finditer(text))


def _strip_fence(text: str) -> tuple[str, str | None]:
    """Content of a ``` fence (closing fence optional) or of `single backticks`; lang None = no fence."""
    s = text.strip()
    if len(s) > 2 and s[0] == "`" and s[-1] == "`" and not s.startswith("``"):
        return s[1:-1], ""
    m = _FENCE_LINE.search(s)
    if m is None or (m.start() > 0 and s[0] in "{["):
        return text, None
    fence, lang, rest = m.group(1), m.group(2).lower(), m.group(3).strip()
    before = s[: m.start()]
    if before and not lang and not rest and _CODE_LINE.match(textwrap.dedent(before).strip("\n")):
        return before, ""  # code, then a bare closing fence: the opening fence was left out
    body = s[m.end() + 1 :]
    if rest[:1] in ("{", "["):  # ```json{"name": ...}``` on one line
        body = rest + "\n" + body
    # Markdown closes a fence at the first line holding only a fence at least as long; small models often
    # go on with prose and more fenced blocks after it, which are not part of the call.
    own_line = re.search(rf"^[ \t]{{0,3}}{fence[0]}{{{len(fence)},}}[ \t]*$", body, re.M)
    close = own_line.start() if own_line else body.rfind(fence)
    if close >= 0:
        body = body[:close]
    return body, lang


def _bare_code(body: str) -> str | None:
    """Code written without any JSON around it, when it clearly is code (parses, or starts like code)."""
    code = textwrap.dedent(body).strip("\n").rstrip()
    first = code.lstrip()[:1]
    if not code or first in "{[\"'" or '"arguments"' in code:
        return None
    tree = _parse_python(code)
    if tree is not None:
        trivial = all(
            isinstance(n, ast.Expr) and isinstance(n.value, (ast.Name, ast.Constant)) for n in tree.body
        )
        return None if trivial else code
    return code if _CODE_LINE.match(code) else None


def _parse_python(code: str) -> ast.Module | None:
    try:
        return parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _json_error(body: str, raw: str) -> ToolCallError:
    """The strict parser's complaint, located, for the model to fix its call."""
    text = body.strip()
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        lo, hi = max(0, exc.pos - 30), min(len(text), exc.pos + 30)
        snippet = text[lo : exc.pos] + "<<HERE>>" + text[exc.pos : hi]
        return ToolCallError(
            "invalid_json",
            f"could not parse the tool call as JSON: {exc.msg}",
            position=exc.pos,
            line=exc.lineno,
            column=exc.colno,
            snippet=snippet,
            raw=raw,
        )
    except (ValueError, RecursionError):
        pass
    return ToolCallError("invalid_json", "could not parse the tool call as JSON", snippet=text[:60], raw=raw)


def _to_call(
    obj: Any,
    labels: list[str],
    raw: str,
    tools: Mapping[str, Sequence[str]] | None,
    default_name: str | None,
) -> ToolCall | ToolCallError:
    """Normalize the shapes models use for a call onto (name, arguments) and check them against `tools`."""
    labels = list(labels)
    cut = " (the call looks cut off before it was complete)" if "truncated" in labels else ""
    if isinstance(obj, str):  # the call was JSON-encoded twice
        inner = _decode(obj.strip())
        if inner is not None:
            obj, labels = inner[0], [*labels, "double_encoded", *inner[1]]
    if isinstance(obj, list) and len(obj) == 1:
        obj, labels = obj[0], [*labels, "list_wrapped"]
    if not isinstance(obj, dict):
        kind = "a list of several calls" if isinstance(obj, list) else type(obj).__name__
        return ToolCallError(
            "not_an_object", f"expected one JSON object with name and arguments, got {kind}", raw=raw
        )
    if isinstance(obj.get("function"), dict):  # OpenAI style {"type": "function", "function": {...}}
        obj, labels = obj["function"], [*labels, "function_wrapped"]
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    args_key = next((k for k in _ARGUMENT_KEYS if k in obj), None)
    if args_key is not None and args_key != "arguments":
        labels.append("arguments_alias")
    if args_key is None:
        rest = {k: v for k, v in obj.items() if k not in _NAME_KEYS and k != "type"}
        if not rest:
            return ToolCallError(
                "missing_arguments", 'the tool call has no "arguments" object' + cut, raw=raw
            )
        args: Any = rest
        labels.append("flat_arguments")
    else:
        args = obj[args_key]
    if name_key is None:
        if default_name is None or not (isinstance(args, dict) and "code" in args):
            return ToolCallError("missing_name", 'the tool call has no "name"', raw=raw)
        name = default_name
        labels.append("missing_name")
    else:
        name = obj[name_key].strip()
        if name_key != "name":
            labels.append("name_alias")
    if tools is not None and name not in tools and name.lower() in tools:
        name = name.lower()
        labels.append("name_case")
    required = tuple(tools.get(name, ())) if tools is not None else ()
    if isinstance(args, str):
        inner = _decode(args.strip())
        if inner is not None and isinstance(inner[0], dict):
            args = inner[0]
            labels += ["arguments_string", *inner[1]]
        elif len(required) == 1 and not args.lstrip().startswith("{"):
            args = {required[0]: args}
            labels.append("arguments_code")
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        return ToolCallError("bad_arguments", '"arguments" must be a JSON object' + cut, raw=raw)
    if not name:
        return ToolCallError("missing_name", 'the tool call has an empty "name"', raw=raw)
    if tools is not None:
        if name not in tools:
            known = ", ".join(sorted(tools))
            return ToolCallError("unknown_tool", f"unknown tool {name!r}; available: {known}", raw=raw)
        for key in required:
            if not isinstance(args.get(key), str):
                return ToolCallError(
                    "bad_arguments", f'tool {name!r} needs a string argument "{key}"{cut}', raw=raw
                )
    args = dict(args)
    for key in _CODE_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            fixed = undo_doubled_escapes(value)
            if fixed is not None:
                args[key] = fixed
                labels.append("doubled_escapes")
    repair = "+".join(dict.fromkeys(labels)) or "strict"
    return ToolCall(name=name, arguments=args, repair=repair, raw=raw)


def undo_doubled_escapes(code: str) -> str | None:
    r"""The code with one level of escaping removed, or None when it should stay as it is.

    A model that writes `\\n` where it meant `\n` hands over one line full of backslash-n sequences, which
    cannot run. Only such code is considered: one line, containing `\n`, not valid Python as it is. It is
    unescaped when that makes it parse (fully first, then newlines/tabs only, which keeps `'it\\'s'`), or
    when its `\n` sequences are followed by indentation or a statement keyword (broken code, clear
    intent). A `"\n"` inside a string literal of valid code is never touched.
    """
    if "\n" in code or not _NEWLINE_PAIR.search(code) or _parse_python(code) is not None:
        return None  # real newlines mean the model did escape correctly somewhere; valid code stays
    for candidate in (_unescape_all(code), _unescape_newlines(code)):
        if candidate != code and _parse_python(candidate) is not None:
            return candidate
    if _NEWLINE_ESCAPE_CODE.search(code):
        return _unescape_newlines(code)
    return None


def _unescape_all(text: str) -> str:
    r"""One level of JSON-style unescaping (`\"` `\\` `\n` `\t` ...); unknown escapes stay verbatim."""
    table = {**_JSON_ESCAPES, "'": "'"}
    return _PAIR_ESCAPE.sub(lambda m: table.get(m.group(1), m.group(0)), text)


def _unescape_newlines(text: str) -> str:
    table = {"n": "\n", "t": "\t", "r": "\n"}
    return _PAIR_ESCAPE.sub(lambda m: table.get(m.group(1), m.group(0)), text)


# --- the lenient parser -------------------------------------------------------------------------------


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
    name = next((inner[k] for k in _NAME_KEYS if isinstance(inner.get(k), str)), None)
    return name is None or _TOOL_NAME.fullmatch(name.strip()) is not None


class _OutOfBudget(Exception):
    pass


_Alt = tuple[Any, int, frozenset[str]]


class _Lenient:
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
                    if _code_parses(value):
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
        return None if best is None else (best[0], best[1], _code_parses(best[0]))

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
        if c in _JSON_ESCAPES:
            return _JSON_ESCAPES[c], j + 2, None
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
