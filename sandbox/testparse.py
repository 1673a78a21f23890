"""Split test code into setup + independent assert units, from the AST (never regexes over code).

Supported shapes:

* HumanEval: module-level setup (imports, ``METADATA``, helpers) and ``def check(candidate): ...``; the
  body of ``check`` is unrolled at module level with ``candidate`` bound to the entry point.
* Plain assert lists (MBPP style): module-level statements where asserts call the entry point by name.

Rules (documented in docs/sandbox.md):

* An *assert unit* is one top-level statement that contains an ``assert`` anywhere inside it. A ``for``
  loop (or ``with``/``if``/``try``) that contains asserts is ONE unit: it is not unrolled, because its
  iterations share state (random generators, accumulators) and unrolling would change what is tested.
* Leading non-assert statements that do not touch the candidate go to ``setup``. Any other non-assert
  statement is attached to the next assert unit (e.g. ``r = candidate(x)`` stays with ``assert r == 1``).
  Non-assert statements after the last assert are dropped (nothing checks them).
* If a unit reads a name that an earlier unit writes (assigns, deletes, or mutates with ``.append`` and
  friends), the units in between are merged into one, so every unit runs correctly given only ``setup``:
  that is what makes ``slice_asserts`` safe for feedback.
* Asserts whose test is a constant that is true (``assert True, "..."``) test nothing and are dropped.
* A ``check`` that uses ``return``/``yield``/``global``/``nonlocal`` at its top level is kept whole: one
  unit ``check(candidate)``.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "add", "discard",
    "setdefault", "popitem", "appendleft", "extendleft", "popleft", "rotate", "intersection_update",
    "difference_update", "symmetric_difference_update", "write", "seed", "shuffle",
})


@dataclass(frozen=True)
class ParsedTests:
    """Test code split for execution: `setup` runs first, then each assert unit in order.

    `entry_point` is the solution function under test; `candidate_name` is the name the asserts use for it
    (the parameter of HumanEval's ``check``).
    """

    setup: str
    asserts: tuple[str, ...]
    entry_point: str | None = None
    candidate_name: str = "candidate"

    def sliced(self, sandbox_slice: int | str | None) -> ParsedTests:
        """The same tests keeping only the asserts `slice_asserts` selects (setup is always kept)."""
        return ParsedTests(self.setup, tuple(slice_asserts(self.asserts, sandbox_slice)), self.entry_point,
                           self.candidate_name)


def normalize_slice(sandbox_slice: int | str | None) -> int | None:
    """`sandbox_slice` as an int (first n / last |n|) or None for all; anything else is a ValueError."""
    if sandbox_slice is None:
        return None
    if isinstance(sandbox_slice, bool):
        raise ValueError(f"sandbox_slice={sandbox_slice!r} is not allowed; expected an integer, 0, 'all' or None")
    if isinstance(sandbox_slice, int):
        return None if sandbox_slice == 0 else sandbox_slice
    if isinstance(sandbox_slice, str):
        text = sandbox_slice.strip().lower()
        if text in ("all", "none", "null"):
            return None
        try:
            n = int(text)
        except ValueError:
            pass
        else:
            return None if n == 0 else n
    raise ValueError(f"sandbox_slice={sandbox_slice!r} is not allowed; expected an integer, 0, 'all' or None")


def slice_asserts(items: Sequence[T], sandbox_slice: int | str | None = 1) -> list[T]:
    """1 = first (default), n > 0 = first n, 0 / None / 'all' = all, n < 0 = last |n|."""
    n = normalize_slice(sandbox_slice)
    if n is None:
        return list(items)
    return list(items[:n]) if n > 0 else list(items[n:])


# ------------------------------------------------------------------------------------------ analysis

def _contains_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _trivial_assert(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assert) and isinstance(node.test, ast.Constant) and bool(node.test.value)


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _reads(nodes: Sequence[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(nodes: Sequence[ast.AST]) -> set[str]:
    """Names a statement may rebind or mutate (conservative: method calls that usually mutate count)."""
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                out.add(n.id)
            elif isinstance(n, ast.Attribute | ast.Subscript) and isinstance(n.ctx, ast.Store | ast.Del):
                if (b := _base_name(n)) is not None:
                    out.add(b)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATING_METHODS:
                if (b := _base_name(n.func.value)) is not None:
                    out.add(b)
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(n.name)
            elif isinstance(n, ast.alias):
                out.add((n.asname or n.name).split(".")[0])
    return out


def _top_level_flow(body: Sequence[ast.stmt]) -> bool:
    """True when the statements use return/yield/global/nonlocal outside nested scopes."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _segment(source: str, lines: list[str], node: ast.stmt) -> str:
    """Source text of a statement, starting at column 0, keeping string contents byte for byte."""
    defs = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    decorators = node.decorator_list if isinstance(node, defs) else []
    first = min([node.lineno] + [d.lineno for d in decorators])
    end = node.end_lineno or node.lineno
    if decorators:
        text = "\n".join(lines[first - 1:end])
        col = len(lines[first - 1]) - len(lines[first - 1].lstrip())
    else:
        text = ast.get_source_segment(source, node, padded=True) or ast.unparse(node)
        col = node.col_offset
    dedented = textwrap.dedent(text)
    try:
        same = ast.dump(ast.parse(dedented).body[0]) == ast.dump(node)
    except SyntaxError:
        same = False
    if same:
        return dedented
    # Continuation lines may sit at any indentation; only the first line must start at column 0.
    head, _, rest = text.partition("\n")
    return head[col:] + ("\n" + rest if rest else "")


def _split(stmts: Sequence[ast.stmt], candidate_names: set[str], src: str, lines: list[str]
           ) -> tuple[list[str], list[str]]:
    setup: list[str] = []
    units: list[list[ast.stmt]] = []
    pending: list[ast.stmt] = []
    in_prefix = True
    for st in stmts:
        if _trivial_assert(st):
            continue
        if _contains_assert(st):
            units.append(pending + [st])
            pending = []
            in_prefix = False
        elif in_prefix and not (_reads([st]) & candidate_names):
            setup.append(_segment(src, lines, st))
        else:
            in_prefix = False
            pending.append(st)
    # Merge a unit into its predecessors when it reads what they write, so each unit stands alone.
    merged: list[list[ast.stmt]] = []
    for unit in units:
        reads = _reads(unit)
        cut = None
        for j in range(len(merged) - 1, -1, -1):
            if _writes(merged[j]) & reads:
                cut = j
        if cut is None:
            merged.append(unit)
        else:
            group = [st for u in merged[cut:] for st in u] + unit
            del merged[cut:]
            merged.append(group)
    return setup, ["\n".join(_segment(src, lines, st) for st in unit) for unit in merged]


def _find_check(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            return node
    return None


def _is_check_call(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "check")


def parse_tests(test_code: str, entry_point: str | None = None, prompt: str | None = None) -> ParsedTests:
    """Parse HumanEval-style or plain-assert test code; raises ValueError when it does not parse.

    `prompt`, when given, contributes its imports and helper functions (everything but the entry point)
    to the setup, so tests such as HumanEval/32 use the dataset's `poly`, not one the solution redefines.
    """
    try:
        tree = ast.parse(test_code)
    except SyntaxError as e:  # a null byte has no line
        raise ValueError(f"test code does not parse: {f'line {e.lineno}: ' if e.lineno else ''}{e.msg}") from None
    lines = test_code.splitlines()
    head = [preamble_from_prompt(prompt, entry_point)] if prompt else []
    head = [h for h in head if h]
    check = _find_check(tree)
    if check is None:
        names = {entry_point} if entry_point else set()
        setup, units = _split(tree.body, names, test_code, lines)
        return ParsedTests("\n".join(head + setup), tuple(units), entry_point)
    cand = check.args.args[0].arg
    module_setup = [_segment(test_code, lines, st) for st in tree.body if st is not check and not _is_check_call(st)]
    body = list(check.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # docstring
    if _top_level_flow(body):
        setup = "\n".join(head + module_setup + [_segment(test_code, lines, check)])
        return ParsedTests(setup, (f"check({cand})",), entry_point, cand)
    names = {cand} | ({entry_point} if entry_point else set())
    setup, units = _split(body, names, test_code, lines)
    return ParsedTests("\n".join(head + module_setup + setup), tuple(units), entry_point, cand)


def preamble_from_prompt(prompt: str, entry_point: str | None = None) -> str:
    """Imports and helper definitions of a problem prompt, without the entry point (or "" if unparsable).

    HumanEval prompts end inside the entry point's docstring, so the prompt is parsed with a `pass` body
    completed where needed.
    """
    tree = None
    for candidate in (prompt, prompt + "\n    pass\n", prompt + '"""\n    pass\n'):
        try:
            tree = ast.parse(candidate)
            source = candidate
            break
        except SyntaxError:
            continue
    if tree is None:
        return ""
    lines = source.splitlines()
    keep = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            keep.append(_segment(source, lines, node))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name != entry_point:
            keep.append(_segment(source, lines, node))
    return "\n".join(keep)
