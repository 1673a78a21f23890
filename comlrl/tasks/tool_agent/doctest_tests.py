"""Tests from the `>>>` examples in a HumanEval-style prompt's docstring.

The docstring examples are the part of the specification the model actually reads, so asserts built
from them reward code that agrees with the prompt even when a dataset's own tests are few. Only examples
whose expected output is a Python literal become tests: printed output, tracebacks, ellipses and object
reprs cannot be compared with `==`, so they are skipped with a reason instead of producing tests that
fail for correct code. Everything is done on the AST (the call is renamed to `candidate`, the expected
value is re-rendered), so formatting quirks in the prompt cannot produce broken test code.
"""

from __future__ import annotations

import ast
import inspect
import re
import warnings
from dataclasses import dataclass

# Only to find the docstring of a prompt that does not parse; the examples themselves are read via the AST.
_DOCSTRING_QUOTE = re.compile(r"[rRuU]?(\"\"\"|''')")
_FLOAT_TOLERANCE = "1e-06"
_MAX_REJOIN = 8


@dataclass(frozen=True)
class DoctestExample:
    """One `>>>` example: its source (continuation lines joined), expected output and docstring line."""

    source: str
    want: str
    lineno: int


@dataclass(frozen=True)
class SkippedExample:
    """An example that did not become a test, and why (for logs and for checking the extractor)."""

    example: DoctestExample
    reason: str


@dataclass(frozen=True)
class DoctestExtraction:
    """The tests (each a snippet ending in an assert) and the examples left out."""

    tests: tuple[str, ...]
    skipped: tuple[SkippedExample, ...]
    entry_point: str | None


def extract_doctest_tests(
    prompt: str, entry_point: str | None = None, candidate: str = "candidate"
) -> list[str]:
    """Assert snippets (`assert candidate(...) == expected`) from the prompt's docstring examples."""
    return list(extract_doctests(prompt, entry_point, candidate).tests)


def extract_doctests(
    prompt: str, entry_point: str | None = None, candidate: str = "candidate"
) -> DoctestExtraction:
    """Tests plus skipped examples; `entry_point` defaults to the last function with a docstring."""
    if not isinstance(prompt, str):
        return DoctestExtraction((), (), entry_point)
    name, docstring = find_docstring(prompt, entry_point)
    if docstring is None or name is None:
        return DoctestExtraction((), (), name)
    tests: list[str] = []
    skipped: list[SkippedExample] = []
    setup: list[str] = []
    tainted = {name}
    for example in parse_examples(docstring):
        test, reason, statement = _convert(example, name, candidate, tainted)
        if statement is not None:
            setup.append(statement)
        elif test is not None:
            snippet = "\n".join([*setup, test])
            if snippet not in tests:
                tests.append(snippet)
        else:
            skipped.append(SkippedExample(example, reason))
    return DoctestExtraction(tuple(tests), tuple(skipped), name)


def check_function(tests: list[str] | tuple[str, ...], candidate: str = "candidate") -> str:
    """HumanEval-style `def check(candidate):` source running the given test snippets."""
    body = [f"    {line}" for test in tests for line in test.splitlines()] or ["    pass"]
    return f"def check({candidate}):\n" + "\n".join(body) + "\n"


# --- locating the docstring ---------------------------------------------------------------------------


def find_docstring(prompt: str, entry_point: str | None = None) -> tuple[str | None, str | None]:
    """(function name, cleaned docstring) of `entry_point`, or of the last function that has one."""
    tree = _parse_prompt(prompt)
    if tree is None:
        return entry_point, _docstring_by_text(prompt, entry_point)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    if entry_point is not None:
        functions = [n for n in ast.walk(tree) if isinstance(n, kinds) and n.name == entry_point]
    else:
        functions = [n for n in tree.body if isinstance(n, kinds)][::-1]
    chosen = next((f for f in functions if ast.get_docstring(f) is not None), None)
    if chosen is None:
        return entry_point, None
    return chosen.name, ast.get_docstring(chosen, clean=True)


def _parse_prompt(prompt: str) -> ast.Module | None:
    """The prompt as a module; a prompt cut after its docstring gets a `pass` body to parse."""
    for source in (prompt, prompt.rstrip() + "\n    pass\n"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _docstring_by_text(prompt: str, entry_point: str | None) -> str | None:
    """Last resort for prompts that do not parse: the first triple-quoted block after the `def` line."""
    start = 0
    if entry_point:
        at = prompt.find(f"def {entry_point}")
        if at < 0:
            return None
        start = at
    m = _DOCSTRING_QUOTE.search(prompt, start)
    if m is None:
        return None
    quote = m.group(1)
    end = prompt.find(quote, m.end())
    literal = prompt[m.start() : end + 3] if end >= 0 else None
    if literal is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = ast.literal_eval(literal)
            if isinstance(value, str):
                return inspect.cleandoc(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return inspect.cleandoc(prompt[m.end() : end if end >= 0 else len(prompt)])


# --- examples -----------------------------------------------------------------------------------------


def parse_examples(docstring: str) -> list[DoctestExample]:
    """`>>>` examples the way doctest reads them: `...` continues the source, and the expected output
    runs to a blank line, the next `>>>`, or a line indented less than the prompt (prose resuming)."""
    lines = docstring.expandtabs().splitlines()
    examples: list[DoctestExample] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith(">>>"):
            i += 1
            continue
        indent = len(lines[i]) - len(stripped)
        lineno = i
        source = [_after_prompt(stripped)]
        i += 1
        while i < len(lines) and _is_continuation(lines[i].lstrip()):
            source.append(_after_prompt(lines[i].lstrip()))
            i += 1
        code = "\n".join(source)
        # In a docstring that is not raw, `"a\\nb"` in an example is a real newline by the time the
        # docstring is read, splitting the example over the next lines (HumanEval/51): re-join them.
        joined = 0
        while not _parses(code) and i < len(lines) and lines[i].strip() and joined < _MAX_REJOIN:
            if lines[i].lstrip().startswith(">>>"):
                break
            code, i, joined = code + "\\n" + lines[i], i + 1, joined + 1
        want: list[str] = []
        while i < len(lines):
            line = lines[i]
            content = line.lstrip()
            if not content or content.startswith(">>>"):
                break
            if len(line) - len(content) < indent:  # prose resumes, or the rest of a split literal
                if not (joined and want and not _is_literal("\n".join(want))):
                    break
                want[-1] += "\\n" + line
            else:
                want.append(line[indent:])
            i += 1
        examples.append(DoctestExample(code, "\n".join(want), lineno))
    return examples


def _parses(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _is_literal(text: str) -> bool:
    return _literal(text.strip()) is not None


def _after_prompt(line: str) -> str:
    """The code after `>>> ` or `... ` (the space is optional, as doctest users write both)."""
    rest = line[3:]
    return rest[1:] if rest.startswith(" ") else rest


def _is_continuation(stripped: str) -> bool:
    return stripped == "..." or stripped.startswith("... ")


# --- examples to asserts ------------------------------------------------------------------------------


class _Rename(ast.NodeTransformer):
    """The function under test is called `candidate` inside `check(candidate)`."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node)
        return node


def _convert(
    example: DoctestExample, name: str, candidate: str, tainted: set[str]
) -> tuple[str | None, str, str | None]:
    """(assert, "", None) for a test, (None, reason, None) for a skip, (None, "", stmt) for setup code.

    Setup statements (assignments, imports, calls without output) are replayed before every later
    test, as doctest runs examples in order; `tainted` tracks names that depend on the function.
    """
    directives = _directives(example.source)
    if "+SKIP" in directives:
        return None, "marked +SKIP", None
    parsed = _parse_example(example)
    if parsed is None:
        return None, "example source does not parse", None
    module, want = parsed
    if not module.body:
        return None, "empty example", None
    single_expr = len(module.body) == 1 and isinstance(module.body[0], ast.Expr)
    if not want:
        if single_expr and _uses(module, tainted):
            expr = module.body[0].value  # type: ignore[attr-defined]
            if isinstance(expr, ast.Compare):  # `>>> f(2) == 4` with the `True` line left out
                return f"assert {ast.unparse(_Rename(name, candidate).visit(expr))}", "", None
            if not _is_call_with_args(expr, tainted):
                return None, "no expected output", None
        _taint(module, tainted)
        return None, "", ast.unparse(_Rename(name, candidate).visit(module))
    if not single_expr:
        return None, "statement with output", None
    expr = module.body[0].value  # type: ignore[attr-defined]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "print":
        return None, "prints its result", None
    if not _uses(module, tainted):
        return None, f"does not call {name}", None
    if want.startswith("Traceback (most recent call last)"):
        return None, "expects an exception", None
    if "+ELLIPSIS" in directives and "..." in want:
        return None, "output uses an ellipsis", None
    expected = _literal(want)
    if expected is None:
        return None, "expected output is not a Python literal", None
    expected_node, value = expected
    actual = ast.unparse(_Rename(name, candidate).visit(expr))
    rendered = ast.unparse(expected_node)
    if value is None:
        return f"assert {_paren(expr, actual)} is None", "", None
    if type(value) is float:  # docstrings round; HumanEval's own tests compare floats with a tolerance
        return f"assert abs({_paren(expr, actual, atom=True)} - {rendered}) < {_FLOAT_TOLERANCE}", "", None
    return f"assert {_paren(expr, actual)} == {rendered}", "", None


def _parse_example(example: DoctestExample) -> tuple[ast.Module, str] | None:
    """The example's source as a module, and its expected output text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(example.source), example.want.strip()
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _directives(source: str) -> str:
    """The `# doctest: +OPTION` text of an example (empty when it has none)."""
    marker = source.find("doctest:")
    return source[marker:] if marker >= 0 and "#" in source[:marker] else ""


def _literal(want: str) -> tuple[ast.expr, object] | None:
    """The expected output as an expression node plus its value, when it is a Python literal."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = ast.parse(want, mode="eval").body
            value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return node, value


def _paren(expr: ast.expr, text: str, atom: bool = False) -> str:
    """Parenthesize what binds looser than `==` (a comparison would chain: `f(x) == 2 == True`), or,
    with `atom`, anything but a primary (`abs(a | b - 0.5)` would subtract first)."""
    primary = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.List, ast.Dict, ast.Set)
    if atom and not isinstance(expr, primary):
        return f"({text})"
    if isinstance(expr, (ast.Compare, ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.UnaryOp)):
        return f"({text})"
    return text


def _uses(tree: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(tree))


def _is_call_with_args(expr: ast.expr, names: set[str]) -> bool:
    """`sort_in_place(xs)` with no output: a mutating call whose effect a later example shows."""
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in names
        and any(isinstance(a, ast.Name) for a in expr.args)
    )


def _taint(module: ast.Module, tainted: set[str]) -> None:
    """Names assigned from the function, or passed to it (it may mutate them), depend on it."""
    if not _uses(module, tainted):
        return
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            tainted.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in tainted:
            tainted.update(a.id for a in node.args if isinstance(a, ast.Name))
