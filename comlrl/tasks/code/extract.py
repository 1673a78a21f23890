"""Python code out of chat-model completions, robustly and without ever raising.

Small models wrap code in prose, use several ``` fences (solution, then usage), stop mid-line at the
token limit, repeat the signature line, or answer with a bare function body. The extractor keeps what
can run: imports, functions, classes and constant assignments; it drops top-level calls, prints,
asserts and `__main__` blocks, because those would run (and might crash or hang) before the tests.
When nothing parses it returns the raw candidate, so the reward can still see a syntax error (after the
repairs of `comlrl.tasks.code.salvage`).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Collection
from dataclasses import dataclass

from comlrl.tasks.code.salvage import drop_prose, fix_repeated_headers, parses, salvage

__all__ = ["Extracted", "decorators", "drop_prose", "extract", "extract_code", "fix_repeated_headers",
           "function_header", "salvage", "split_fences"]

MAX_CHARS = 60_000  # completions are a few hundred tokens; refuse to spend time on pathological input
_SPECIAL_TOKEN = re.compile(r"<\|[A-Za-z0-9_\-]{1,40}\|>|</?s>")
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+#.\-]*)[^`]*$")
_PY_LANGS = {"", "python", "py", "python3", "py3", "python2", "ipython", "pycon", "sage"}
_LOOKS_LIKE_CODE = re.compile(r"^\s*(?:async\s+def|def|class|import|from|return)\s", re.M)
_TOP_DEF = re.compile(r"^(?:async\s+def|def|class)\s", re.M)
_BUILTINS = set(dir(builtins))
_RISKY_CALLS = {"input", "print", "open", "exit", "quit", "eval", "exec", "breakpoint", "help"}


@dataclass(frozen=True)
class Extracted:
    """Extracted code plus how it was obtained (for logs and trees; the reward only sees `code`)."""

    code: str
    notes: tuple[str, ...] = ()


def _normalize(text: object) -> str:
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    s = s[:MAX_CHARS].replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    return _SPECIAL_TOKEN.sub("", s)


def split_fences(text: str) -> tuple[list[tuple[str, str]], str]:
    """(language, body) of each fenced block, and the text outside fences.

    A fence left open at the end (output cut by the token limit) runs to the end of the text.
    """
    blocks: list[tuple[str, str]] = []
    outside: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            outside.append(lines[i])
            i += 1
            continue
        marker, lang = m.group(1), m.group(2).lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(marker[0] * 3) and not stripped.strip(marker[0]):
                break
            if stripped.startswith(marker[0] * 3) and _FENCE_OPEN.match(lines[i]) and stripped.strip(marker[0]):
                # a new opening fence inside an unclosed block: the model forgot to close the previous one
                i -= 1
                break
            body.append(lines[i])
            i += 1
        blocks.append((lang, "\n".join(body)))
        i += 1
    return blocks, "\n".join(outside)


def _calls(node: ast.AST) -> set[str]:
    return {
        n.func.id
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def _loaded_names(node: ast.AST) -> set[str]:
    """Free names an expression reads (names bound by comprehensions and lambdas excluded)."""
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            bound |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            bound |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        targets = node.targets
    else:
        targets = [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor) else []
    return {t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)}


def _keep_statement(node: ast.stmt, defined: set[str], known: set[str]) -> bool:
    """Statements that define things and cannot run the model's code at import time.

    An assignment stays only when it reads known names and calls none of the model's functions, so a
    stray `result = a + b` (a body line outside its function) cannot fail at import.
    """
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return True
    if _defined_name(node) is not None:  # `f = lambda ...`, possibly recursive
        return True
    if isinstance(node, ast.Assign | ast.AnnAssign):
        if node.value is None or _calls(node.value) & (defined | _RISKY_CALLS):
            return False
        return _loaded_names(node.value) <= known | _BUILTINS
    if isinstance(node, ast.Try):
        return all(isinstance(s, ast.Import | ast.ImportFrom | ast.Pass) for s in node.body)
    return False


def decorators(node: ast.stmt) -> list[ast.expr]:
    """A definition's decorators (none for other statements): where its source starts."""
    return node.decorator_list if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else []


def _segment(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno] + [d.lineno for d in decorators(node)])
    end = node.end_lineno or node.lineno
    return "\n".join(lines[start - 1 : end])


@dataclass(frozen=True)
class _Part:
    """One kept top-level statement."""

    name: str | None  # the function/class it defines, if any
    source: str
    is_import: bool = False
    stub: bool = False  # a definition with no real body (docstring / pass / ... only)


def _is_stub(node: ast.stmt) -> bool:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in node.body
    )


def _definitions(code: str, tree: ast.Module) -> list[_Part]:
    """Every kept top-level statement of a parsed candidate, in order."""
    lines = code.split("\n")
    defined = {name for n in tree.body if (name := _defined_name(n))}
    out: list[_Part] = []
    known = set(defined)
    for node in tree.body:
        if not _keep_statement(node, defined, known):
            continue
        known |= _bound_names(node)
        is_import = isinstance(node, ast.Import | ast.ImportFrom)
        out.append(_Part(_defined_name(node), _segment(lines, node), is_import, _is_stub(node)))
    return out


def _defined_name(node: ast.stmt) -> str | None:
    """The function/class a statement defines: `def`, `class`, or `name = lambda ...`."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Lambda)
    ):
        return node.targets[0].id
    return None


def _assemble(parts: list[_Part], exclude: Collection[str]) -> str:
    """Join kept statements: imports first (deduplicated), then one definition per name.

    The first real definition wins (small models answer first, then add "usage" or worse variants);
    a stub such as an echoed prompt signature with only its docstring loses to a later real one.
    """
    chosen: dict[str, int] = {}
    for i, part in enumerate(parts):
        if part.name is None:
            continue
        if part.name not in chosen or (parts[chosen[part.name]].stub and not part.stub):
            chosen[part.name] = i
    imports: list[str] = []
    body: list[str] = []
    for i, part in enumerate(parts):
        if part.is_import:
            if part.source not in imports:
                imports.append(part.source)
        elif part.name is None or (chosen[part.name] == i and part.name not in exclude):
            body.append(part.source)
    chunks = (["\n".join(imports)] if imports else []) + body
    return "\n\n\n".join(chunks).strip("\n") + ("\n" if chunks else "")


def _defines(parts: list[_Part], name: str | None) -> bool:
    if name is None:
        return any(p.name is not None for p in parts)
    return any(p.name == name for p in parts)


def function_header(prompt: str, entry_point: str) -> str | None:
    """The `def ...:` line(s) of `entry_point` in a HumanEval prompt, used to wrap body-only answers."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    lines = prompt.split("\n")
    if tree is not None:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
                first_body = node.body[0].lineno if node.body else node.lineno + 1
                header = lines[node.lineno - 1 : max(first_body - 1, node.lineno)]
                return textwrap.dedent("\n".join(header)).rstrip()
    m = re.search(rf"^[ \t]*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(.*?\)[^:\n]*:", prompt, re.M | re.S)
    return textwrap.dedent(m.group(0)).rstrip() if m else None


def _wrap_body(body: str, header: str) -> str | None:
    """`header` + an indented body, salvaged; None when the body holds nothing to run."""
    body = textwrap.dedent(drop_prose(textwrap.dedent(body).strip("\n")))
    if not body.strip() or _TOP_DEF.search(body):
        return None  # it defines something else: a wrong name, not a bare body
    code = header + "\n" + textwrap.indent(body, "    ", lambda line: True)
    saved = salvage(code)
    if saved is None:
        return None
    tree = parses(saved[0])
    if tree is None or not tree.body:
        return None
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    stmts = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not stmts or all(isinstance(s, ast.Pass) for s in stmts):
        return None
    return saved[0]


def extract(
    completion: object,
    entry_point: str | None = None,
    header: str | None = None,
    exclude: Collection[str] = (),
) -> Extracted:
    """Extracted code for the function `entry_point` (None: any definitions); never raises.

    `header` (see `function_header`) lets a body-only answer be wrapped into the function;
    `exclude` names definitions to drop (another agent's role, e.g. the main agent's own `aux`).
    """
    try:
        return _extract(_normalize(completion), entry_point, header, tuple(exclude))
    except Exception:  # untrusted output must never crash the trainer
        try:
            return Extracted(_normalize(completion).strip(), ("error",))
        except Exception:
            return Extracted("", ("error",))


def extract_code(
    completion: object,
    entry_point: str | None = None,
    header: str | None = None,
    exclude: Collection[str] = (),
) -> str:
    """Just the code of `extract` (what the sandbox runs)."""
    return extract(completion, entry_point, header, exclude).code


def _extract(text: str, entry_point: str | None, header: str | None, exclude: tuple[str, ...]) -> Extracted:
    blocks, outside = split_fences(text)
    python_blocks = [body for lang, body in blocks if lang in _PY_LANGS]
    other_blocks = [body for lang, body in blocks if lang not in _PY_LANGS]
    # Try the most code-like sources first: python fences, then other fences, then the prose around them.
    tiers: list[tuple[str, list[str]]] = []
    if python_blocks:
        tiers.append(("fenced", python_blocks))
    if other_blocks:
        tiers.append(("fenced_other", other_blocks))
    if outside.strip():
        tiers.append(("unfenced" if not blocks else "outside_fences", [outside]))

    fallback: tuple[str, tuple[str, ...]] | None = None
    for tier, candidates in tiers:
        parts: list[_Part] = []
        notes: list[str] = [tier]
        for cand in candidates:
            saved = salvage(cand)
            if saved is None:
                continue
            code, repairs = saved
            tree = parses(code)
            if tree is None:
                continue
            parts.extend(_definitions(code, tree))
            notes.extend(r for r in repairs if r not in notes)
        if _defines(parts, entry_point):
            return Extracted(_assemble(parts, exclude), tuple(notes))
        if header is not None and entry_point is not None:
            for cand in candidates:
                wrapped = _wrap_body(cand, header)
                if wrapped is None:
                    continue
                tree = parses(wrapped)
                if tree is None:
                    continue
                more = parts + _definitions(wrapped, tree)
                if _defines(more, entry_point):
                    return Extracted(_assemble(more, exclude), (*notes, "wrapped_body"))
        if fallback is None and parts:
            fallback = (_assemble(parts, exclude), (*notes, "missing_entry_point"))
    if fallback is not None:
        return Extracted(*fallback)
    # Nothing parses: hand back the most code-like raw text so the reward can report the syntax error.
    # Prose without any code gives no code at all (the reward sees "no definition").
    for _, candidates in tiers:
        raw = "\n\n".join(textwrap.dedent(c).strip("\n") for c in candidates if c.strip())
        if _LOOKS_LIKE_CODE.search(raw):
            return Extracted(raw.strip("\n") + "\n", ("unparsed",))
    return Extracted("", ("empty",))
