"""The signatures docs/architecture.md shows are the code's: every documented name exists, and every
documented parameter list names the parameters the code has, in order (issue 25: docs that cannot drift).

A head line names a module-level object (`    comlrl.tree.rollout.expand_trees(roots, shape, ...)`); the lines
indented under it name its members (`        .run(code, tests) -> ExecResult`, `score_turns(turns) -> ...`,
`num_agents: int`). A parameter list ending in `...` may leave out parameters; one without lists them all.
Types, defaults and comments are the doc's own words and are not compared.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
HEAD = re.compile(r"^    (?P<name>(?:comlrl|feedback|sandbox)(?:\.\w+)+)(?P<rest>.*)$")
MEMBER = re.compile(r"^\.?(?P<name>[A-Za-z_]\w*)(?P<rest>.*)$")


def _strip_comment(line: str) -> str:
    depth, quote = 0, ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "#" and depth == 0:
            return line[:i].rstrip()
    return line.rstrip()


def _balanced(text: str) -> bool:
    return text.count("(") <= text.count(")")


def _blocks() -> Iterator[tuple[int, str, list[tuple[int, str]]]]:
    """(line number, head text, member lines) of every signature block from the contracts section on."""
    text = DOC.read_text()
    start, end = text.index("## Contracts between packages"), len(text)
    first = text[:start].count("\n") + 1
    lines = text[start:end].splitlines()
    i = 0
    while i < len(lines):
        m = HEAD.match(_strip_comment(lines[i]))
        if not m:
            i += 1
            continue
        head, lineno = _strip_comment(lines[i]), first + i
        i += 1
        while not _balanced(head) and i < len(lines):  # a parameter list over several lines
            head += " " + _strip_comment(lines[i]).strip()
            i += 1
        members: list[tuple[int, str]] = []
        while i < len(lines) and lines[i].startswith("        ") and not HEAD.match(lines[i]):
            line = _strip_comment(lines[i]).strip()
            number = first + i
            i += 1
            while line and not _balanced(line) and i < len(lines):
                line += " " + _strip_comment(lines[i]).strip()
                i += 1
            if line:
                members.append((number, line))
        yield lineno, head.strip(), members


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for name in parts[k:]:
            obj = inspect.getattr_static(obj, name)
        return obj
    raise ImportError(dotted)


def _params(rest: str) -> list[str] | None:
    """The parameter names of a `(...)` right after the name, or None when there is none (or it says what
    kind of class it is: `(Protocol)`, `(ABC; ...)`)."""
    if not rest.startswith("(") or re.match(r"\((Protocol|ABC)\b", rest):
        return None
    depth, out, item = 0, [], ""
    for ch in rest[1:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                out.append(item)
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append(item)
            item = ""
        else:
            item += ch
    names = []
    for raw in out:
        raw = raw.strip()
        if not raw or raw in ("*", "/"):
            continue
        names.append(re.split(r"[:=]", raw, maxsplit=1)[0].strip().lstrip("*"))
    return names


def _code_params(obj: Any) -> list[str]:
    target = obj.__func__ if isinstance(obj, classmethod | staticmethod) else obj
    sig = inspect.signature(target)
    return [p for p in sig.parameters if p not in ("self", "cls")]


def _check(where: str, obj: Any, rest: str) -> list[str]:
    doc = _params(rest)
    if doc is None or isinstance(obj, property):
        return []
    code = _code_params(obj)
    if "..." in doc:
        shown = [n for n in doc if n != "..."]
        it = iter(code)
        if not all(any(n == c for c in it) for n in shown):
            return [f"{where}: documented ({', '.join(doc)}), code ({', '.join(code)})"]
        return []
    return [] if doc == code else [f"{where}: documented ({', '.join(doc)}), code ({', '.join(code)})"]


def _member(owner: Any, name: str) -> Any:
    """The class attribute `name`, or None for a declared field or an attribute its methods set on self."""
    for klass in inspect.getmro(owner):
        if name in vars(klass):
            return vars(klass)[name]
        if name in vars(klass).get("__annotations__", {}):
            return None
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{name}\b\s*(?::[^=]+)?=", source):
            return None
    raise AttributeError(name)


BLOCKS = list(_blocks())


def test_the_contracts_section_shows_signatures() -> None:
    assert len(BLOCKS) >= 40, [b[1] for b in BLOCKS]


def test_every_documented_head_is_a_block_of_its_own() -> None:
    """A head whose `(` closes only inside its comment swallowed the rest of the page (57 blocks went
    unchecked): every head line of the section must start a block."""
    text = DOC.read_text()
    section = text[text.index("## Contracts between packages"):].splitlines()
    heads = [line for line in section if HEAD.match(_strip_comment(line))]
    assert len(BLOCKS) == len(heads), sorted(set(heads) - {"    " + b[1] for b in BLOCKS})[:3]


@pytest.mark.parametrize(("lineno", "head", "members"), BLOCKS, ids=[f"line{b[0]}" for b in BLOCKS])
def test_documented_signatures_are_the_codes(lineno: int, head: str, members: list[tuple[int, str]]) -> None:
    m = HEAD.match("    " + head)
    assert m is not None
    try:
        obj = _resolve(m["name"])
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"docs/architecture.md:{lineno}: {m['name']} does not exist ({exc})")
    problems = _check(f"docs/architecture.md:{lineno} {m['name']}", obj, m["rest"].strip())
    if inspect.isclass(obj):
        for number, line in members:
            for part in line.split(" ; "):
                mm = MEMBER.match(part.strip())
                if not mm or part.strip()[0] in "\"'([{" or " " in mm["name"]:
                    continue
                if not (part.strip().startswith(".") or re.match(r"^\w+(\(|:| ->|$)", part.strip())):
                    continue  # prose under the head (what a field means), not a member
                try:
                    member = _member(obj, mm["name"])
                except AttributeError:
                    problems.append(f"docs/architecture.md:{number}: {obj.__name__}.{mm['name']} does not exist")
                    continue
                if member is not None and callable(inspect.unwrap(member)
                                                   if not isinstance(member, classmethod | staticmethod)
                                                   else member.__func__):
                    problems += _check(f"docs/architecture.md:{number} {obj.__name__}.{mm['name']}", member,
                                       mm["rest"].strip())
    assert not problems, "\n".join(problems)
