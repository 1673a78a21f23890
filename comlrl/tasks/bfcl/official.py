"""BFCL's own decoding of a prompting model's reply, as its eval runner applies it: the one source of every
figure this project calls BFCL accuracy.

- single-turn (`decode_ast`): `bfcl_eval.model_handler.utils.default_decode_ast_prompting` in the category's
  return format (Python; simple_java and simple_javascript through BFCL's tree-sitter parsers), as
  `eval_runner._evaluate_single_ast_entry` calls it; a reply it cannot decode is BFCL's
  `ast_decoder:decoder_failed`. The relevance categories decode in the Python format, as BFCL's do.
- multi-turn (`decode_execute`): `default_decode_execute_prompting`, per step, as BFCL's multi-turn
  inference loop and its eval runner call it (an empty or undecodable step is no call).

One guard stands in front of BFCL's Python decoder. It `eval`s the source text of every arithmetic
argument (`ast.BinOp`) in this process, so an argument that adds a call's result to a number would run model text here.
Before the reply reaches it, every `BinOp` of the reply is evaluated by `bounded_value` (literals and
arithmetic on them, with bounded powers and sizes); a reply holding any other arithmetic (a name, a call,
an attribute, a power or repeat too large) is refused with `UNEVALUATED`, where BFCL would evaluate it.
BFCL's own verdict on such a reply is a decode failure for names it does not know and a pass or fail for
builtins; the refusal is counted (`decode_ast(...).refused`) so its share is visible.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from comlrl.tasks.bfcl.calls import bfcl_wrapped
from comlrl.tasks.bfcl.checker import bfcl

UNEVALUATED = "arithmetic on something other than literals (not evaluated here; BFCL would eval it)"
MAX_EXPONENT = 64  # `a ** b` with |b| above this is not evaluated (nor |a| above MAX_BASE)
MAX_BASE = 10 ** 6
MAX_ITEMS = 10_000  # a string or list built by arithmetic may hold at most this many items
ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.MatMult: operator.matmul,
}


class Unbounded(ValueError):
    """An expression `bounded_value` does not evaluate."""


def _sized(value: Any) -> Any:
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_ITEMS:
        raise Unbounded("too large")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4096:
        raise Unbounded("too large")
    return value


def bounded_value(node: ast.AST) -> Any:
    """The value of a literal expression with arithmetic (what BFCL's `eval` of it returns), computed with
    bounds, or `Unbounded`: names, calls, attributes, comprehensions, huge powers, shifts or repeats."""
    if isinstance(node, ast.Constant):
        return _sized(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert | ast.Not):
        inner = bounded_value(node.operand)
        ops = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
        return _apply(ops[type(node.op)], inner)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return _sized([bounded_value(e) for e in node.elts])
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise Unbounded("a ** expansion")
        return {_hashable(bounded_value(k)): bounded_value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = bounded_value(node.left), bounded_value(node.right)
        if isinstance(node.op, ast.Pow) and (not _small(right, MAX_EXPONENT) or not _small(left, MAX_BASE)):
            raise Unbounded("a power too large")
        if isinstance(node.op, ast.LShift) and not _small(right, MAX_EXPONENT):
            raise Unbounded("a shift too large")
        if isinstance(node.op, ast.Mult) and (_repeats(left, right) or _repeats(right, left)):
            raise Unbounded("a repeat too large")
        return _sized(_apply(ARITHMETIC[type(node.op)], left, right))
    raise Unbounded(type(node).__name__)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    try:
        hash(value)
    except TypeError:
        raise Unbounded("an unhashable key") from None
    return value


def _small(value: Any, limit: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and \
        abs(value) <= limit


def _repeats(seq: Any, count: Any) -> bool:
    """`seq * count` would build more than MAX_ITEMS items."""
    return isinstance(seq, str | bytes | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_ITEMS


def _apply(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (ArithmeticError, TypeError, ValueError) as exc:  # BFCL's eval would raise too: a decode failure
        raise Unbounded(f"{type(exc).__name__}") from None


def guarded(text: str) -> str:
    """'' when BFCL's Python decoder may read `text`, else why not (`UNEVALUATED`): the same cleaning as
    BFCL's (backticks, newlines and spaces stripped, brackets added, quotes stripped), then every `BinOp`
    must evaluate within bounds. Text that does not parse is passed on: BFCL's decoder fails on it
    before evaluating anything."""
    try:
        tree = ast.parse(bfcl_wrapped(text).strip().strip("'"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            try:
                bounded_value(node)
            except (Unbounded, RecursionError):
                return UNEVALUATED
    return ""


@dataclass(frozen=True)
class Official:
    """BFCL's decoding of one reply: `calls` as its checker reads them (`[{name: {param: value}}]`; None when
    BFCL's decoder failed), `error` why it failed, `refused` when the guard kept it from BFCL's decoder."""

    calls: list[dict] | None
    error: str = ""
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.calls is not None

    @property
    def called(self) -> bool:
        """Some call decoded (BFCL's `is_empty_output` is false): what the relevance rule reads."""
        return self.calls is not None and not bfcl().utils.is_empty_output(self.calls)


@functools.cache
def _handler_utils() -> Any:
    """`bfcl_eval.model_handler.utils` (BFCL's prompting decoders; it imports tree-sitter's Java and
    JavaScript grammars)."""
    bfcl()  # the checker's stand-in for BFCL's model table goes in first
    from bfcl_eval.model_handler import utils

    return utils


def return_format(category: str) -> Any:
    """The reply format BFCL decodes a category in (its eval runner's rule; relevance: Python)."""
    fmt = bfcl().enums.ReturnFormat
    if category.endswith("java") and "relevance" not in category:
        return fmt.JAVA
    if category.endswith("javascript") and "relevance" not in category:
        return fmt.JAVASCRIPT
    return fmt.PYTHON


def decode_ast(text: str, category: str) -> Official:
    """One single-turn reply through BFCL's `default_decode_ast_prompting` (never raises)."""
    fmt = return_format(category)
    if fmt == bfcl().enums.ReturnFormat.PYTHON and (why := guarded(text)):
        return Official(None, why, refused=True)
    try:
        return Official(_handler_utils().default_decode_ast_prompting(text, fmt, has_tool_call_tag=False))
    except Exception as exc:  # noqa: BLE001 - BFCL's runner counts any exception as decoder_failed
        return Official(None, f"Invalid syntax. Failed to decode AST. {type(exc).__name__}: {exc}"[:300])


@dataclass(frozen=True)
class Step:
    """One multi-turn reply through BFCL's `default_decode_execute_prompting`: the call strings its checker
    executes (empty: no call, which ends the user turn), the same calls as `[{name: {param: value}}]`, and
    why it did not decode."""

    strings: tuple[str, ...] = ()
    calls: tuple[dict, ...] = ()
    error: str = ""
    refused: bool = False

    @property
    def called(self) -> bool:
        return bool(self.strings)


def decode_execute(text: str) -> Step:
    """One multi-turn reply as BFCL decodes it (never raises): an empty decoded list (`[]`, or BFCL's
    `is_empty_execute_response`) and a failure are both no call."""
    if why := guarded(text):
        return Step(error=why, refused=True)
    utils = _handler_utils()
    try:
        decoded = utils.default_decode_ast_prompting(text, bfcl().enums.ReturnFormat.PYTHON, has_tool_call_tag=False)
        strings = utils.decoded_output_to_execution_list(decoded)
    except Exception as exc:  # noqa: BLE001 - BFCL's loop: a reply that does not decode ends the user turn
        return Step(error=f"{type(exc).__name__}: {exc}"[:300])
    if bfcl().multi_turn_utils.is_empty_execute_response(strings):
        return Step()
    return Step(tuple(strings), tuple(decoded))
