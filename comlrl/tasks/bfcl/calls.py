"""The project's lenient decoder of a reply's function calls: a shaping signal and a logged metric
(`decoded_lenient`), never accuracy. What BFCL would score is BFCL's own decoder's reading of the same text
(comlrl/tasks/bfcl/official.py), which accepts only the call list itself; this one also finds the calls
inside prose, a fenced block or JSON, so a small model that wraps a right call still learns its arguments.

Accepted forms (pure; nothing here runs model text):

- the Python-call form BFCL's prompt asks for, `[func(a=1, b='x'), other(c=[1, 2])]` (a bare `func(a=1)`
  too), as BFCL decodes prompting models' replies: surrounding backticks, spaces and newlines stripped,
  the list brackets added when missing. A reply that is exactly that is `exact`; otherwise the first
  fenced code block, then the first bracketed list of calls inside the text, is taken (small models add
  prose around the call), and the decode is still accepted but not `exact`;
- JSON: a list (or one object) of `{"name"|"function": ..., "arguments"|"parameters": {...}}`.

Argument values are literals, decoded as BFCL's decoder does: constants, negative numbers, lists, tuples,
dicts, a bare name as its string (`unit=celsius`), and arithmetic on numbers (`2**10`, bounded). Keyword
arguments only: BFCL's decoder drops positional ones. A nested call, an attribute (`math.pi`) or any other
expression makes the reply undecodable, as it does in BFCL; the reply is then "not a call" with the reason.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

MAX_POWER = 64  # `a ** b` is evaluated for |b| <= this (and |a| <= 1e6): BFCL evaluates arithmetic arguments
MAX_CANDIDATES = 40  # bracketed spans tried per reply when the whole reply is not a call list
FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)
NAME = re.compile(r"[A-Za-z_][\w.]*\Z")
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


class NotACall(ValueError):
    """A reply, or a part of it, that does not decode into calls (the message says why)."""


@dataclass(frozen=True)
class Call:
    """One decoded call: the function's name and its keyword arguments (literal values), with each
    argument's source text (what BFCL's Java and JavaScript decoders keep)."""

    name: str
    args: dict[str, Any]
    source: dict[str, str] = field(default_factory=dict, compare=False)

    def text(self) -> str:
        """The call as canonical Python (`name(a=1, b='x')`): literals only, so it is safe to evaluate."""
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"


@dataclass(frozen=True)
class Decoded:
    """What a reply decoded into: its calls (empty when nothing decoded), the form and why not."""

    calls: tuple[Call, ...] = ()
    form: str = ""  # "python" | "json" | "" (nothing decoded)
    exact: bool = False  # the whole reply was the call list, as BFCL's prompt asks
    error: str = ""  # why nothing decoded ("" when something did)

    @property
    def ok(self) -> bool:
        return bool(self.form)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value(node: ast.AST) -> Any:
    """A literal argument value (BFCL's decoder's rules), or NotACall."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        if _number(inner):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise NotACall("a ** expansion in a dict argument")
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            key = _value(k)  # type: ignore[arg-type]
            if not isinstance(key, str | int | float | bool | tuple) or isinstance(key, tuple) and not key:
                raise NotACall("a dict key that is not a literal")
            out[key] = _value(v)
        return out
    if isinstance(node, ast.Name):
        return node.id  # BFCL keeps a bare name as its text
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        left, right = _value(node.left), _value(node.right)
        if _number(left) and _number(right):
            if isinstance(node.op, ast.Pow) and (abs(right) > MAX_POWER or abs(left) > 1e6):
                raise NotACall("a power too large to evaluate")
            try:
                result = BINOPS[type(node.op)](left, right)
            except (ArithmeticError, ValueError) as exc:
                raise NotACall(f"arithmetic that fails ({exc})") from None
            if isinstance(result, complex) or isinstance(result, float) and not math.isfinite(result):
                raise NotACall("arithmetic without a finite real result")
            return result
    what = type(node).__name__
    raise NotACall(f"an argument that is not a literal ({'a nested call' if what == 'Call' else what})")


def _name(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotACall("a call whose function is not a name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call(node: ast.AST, text: str) -> Call:
    if not isinstance(node, ast.Call):
        raise NotACall(f"an item that is not a call ({type(node).__name__})")
    args, source = {}, {}
    for kw in node.keywords:
        if kw.arg is None:
            raise NotACall("a ** argument")
        args[kw.arg] = _value(kw.value)
        source[kw.arg] = ast.get_source_segment(text, kw.value) or ""
    return Call(_name(node.func), args, source)


def _python_calls(text: str) -> tuple[Call, ...]:
    """The calls of a Python expression that is a call or a list/tuple of calls, or NotACall."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise NotACall(f"not Python call syntax ({type(exc).__name__})") from None
    body = tree.body
    items = body.elts if isinstance(body, ast.List | ast.Tuple) else [body]
    return tuple(_call(item, text) for item in items)


def bfcl_wrapped(text: str) -> str:
    """A reply as BFCL's prompting decoder reads it: backticks/newlines/spaces stripped, brackets added."""
    core = text.strip("`\n ")
    return ("" if core.startswith("[") else "[") + core + ("" if core.endswith("]") else "]")


def _json_calls(text: str) -> tuple[Call, ...]:
    start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    if start < 0:
        raise NotACall("no JSON list or object")
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotACall(f"invalid JSON ({type(exc).__name__})") from None
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict):
            raise NotACall("a JSON item that is not an object")
        name = item.get("name", item.get("function"))
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                raise NotACall("JSON arguments that are not an object") from None
        if not isinstance(name, str) or not NAME.match(name) or not isinstance(args, dict):
            raise NotACall("a JSON call without a function name and an arguments object")
        calls.append(Call(name, dict(args), {k: json.dumps(v) for k, v in args.items()}))
    return tuple(calls)


def _spans(text: str) -> list[str]:
    """Bracketed spans `[...]` of the text, shortest first from each opening bracket (the first few)."""
    opens = [i for i, c in enumerate(text) if c == "["][:8]
    closes = [i for i, c in enumerate(text) if c == "]"]
    out = [text[o : c + 1] for o in opens for c in closes if c > o]
    return out[:MAX_CANDIDATES]


def decode(text: str) -> Decoded:
    """The calls of one reply (see the module docstring for the accepted forms); never raises."""
    try:
        return Decoded(_python_calls(bfcl_wrapped(text)), "python", exact=True)
    except NotACall as exc:
        first_error = str(exc)
    fenced = [m.group(1) for m in FENCE.finditer(text)]
    for candidate in [*fenced, *(bfcl_wrapped(f) for f in fenced), *_spans(text)]:
        try:
            calls = _python_calls(candidate)
        except NotACall:
            continue
        if calls:
            return Decoded(calls, "python")
    for candidate in [*fenced, text]:
        try:
            return Decoded(_json_calls(candidate), "json")
        except NotACall:
            continue
    return Decoded(error=first_error)


def checker_output(calls: tuple[Call, ...] | list[Call], language: str = "python") -> list[dict[str, dict]]:
    """Calls in the shape BFCL's AST checker reads, `[{name: {param: value}}]`. Java and JavaScript
    values are source text, as BFCL's tree-sitter decoders give them (a string literal without quotes)."""
    if language == "python":
        return [{c.name: dict(c.args)} for c in calls]
    return [{c.name: {k: v if isinstance(v, str) else c.source.get(k, str(v)) for k, v in c.args.items()}}
            for c in calls]
