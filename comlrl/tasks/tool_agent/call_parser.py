"""Parse one tool call out of what a model wrote, robustly and without ever raising.

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
from collections.abc import Mapping, Sequence
from typing import Any

from comlrl.tasks.tool_agent.call_format import (
    ARGUMENT_KEYS,
    DEFAULT_TOOLS,
    NAME_KEYS,
    ToolCall,
    ToolCallError,
)
from comlrl.tasks.tool_agent.lenient_json import JSON_ESCAPES, LenientJSON, parse_python
from sandbox.untrusted_source import parse

MAX_RAW_CHARS = 100_000  # a tool call is a few KB; refuse to spend time on pathological input

_TAG_WRAP = re.compile(r"^\s*<tool_call\s*>(.*?)(?:</tool_call\s*>\s*)?$", re.I | re.S)
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)([^\n]*)$", re.M)
_INVISIBLE = "\ufeff\u200b\u200c\u200d\u2060"
_ESCAPED_JSON = re.compile(r'\s*[\[{]\s*\\+"')
_PAIR_ESCAPE = re.compile(r"\\(.)", re.S)
_NEWLINE_PAIR = re.compile(r"(?<!\\)(?:\\\\)*\\n")  # a backslash-n that is not an escaped backslash + n
_CODE_LINE = re.compile(r"^\s*(?:def |class |import |from [\w.]+ import |print\(|@\w)")
_NEWLINE_ESCAPE_CODE = re.compile(r"\\n(?:[ \t]+\S|(?:def|class|import|from|return|print|for|if|while)\b)")
_CODE_KEYS = ("code",)


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
    return isinstance(obj, dict) and any(k in obj for k in (*NAME_KEYS, *ARGUMENT_KEYS))


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
    first = LenientJSON(text, truncation=False).parse()
    if first is not None and first[2]:
        return first[0], sorted(first[1])
    if text[0] in "{[" and not _has_python_only_escape(text):  # exact Python semantics beat a guess
        value = _literal_eval(text)
        if value is not None:
            return value, ["python_literal"]
    cut = LenientJSON(text, truncation=True).parse()
    best = cut if cut is not None and (cut[2] or first is None) else first
    return None if best is None else (best[0], sorted(best[1]))


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
    tree = parse_python(code)
    if tree is not None:
        trivial = all(
            isinstance(n, ast.Expr) and isinstance(n.value, (ast.Name, ast.Constant)) for n in tree.body
        )
        return None if trivial else code
    return code if _CODE_LINE.match(code) else None


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
    name_key = next((k for k in NAME_KEYS if isinstance(obj.get(k), str)), None)
    args_key = next((k for k in ARGUMENT_KEYS if k in obj), None)
    if args_key is not None and args_key != "arguments":
        labels.append("arguments_alias")
    if args_key is None:
        rest = {k: v for k, v in obj.items() if k not in NAME_KEYS and k != "type"}
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
    if "\n" in code or not _NEWLINE_PAIR.search(code) or parse_python(code) is not None:
        return None  # real newlines mean the model did escape correctly somewhere; valid code stays
    for candidate in (_unescape_all(code), _unescape_newlines(code)):
        if candidate != code and parse_python(candidate) is not None:
            return candidate
    if _NEWLINE_ESCAPE_CODE.search(code):
        return _unescape_newlines(code)
    return None


def _unescape_all(text: str) -> str:
    r"""One level of JSON-style unescaping (`\"` `\\` `\n` `\t` ...); unknown escapes stay verbatim."""
    table = {**JSON_ESCAPES, "'": "'"}
    return _PAIR_ESCAPE.sub(lambda m: table.get(m.group(1), m.group(0)), text)


def _unescape_newlines(text: str) -> str:
    table = {"n": "\n", "t": "\t", "r": "\n"}
    return _PAIR_ESCAPE.sub(lambda m: table.get(m.group(1), m.group(0)), text)

