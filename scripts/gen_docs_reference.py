"""Write docs/reference/config.md: every configuration key, with its type, default and help, from the schema.

    python scripts/gen_docs_reference.py           # rewrite docs/reference/config.md
    python scripts/gen_docs_reference.py --check   # exit 1, naming the file, when it is not what this writes

The keys are the dataclasses of `comlrl.config.schema.run_schema()` walked recursively: `RunConfig`'s sections
and the options sections of the registered tasks (`task.<name>.*`) and algorithms (`algorithm.<name>.*`), in
schema order, exactly the keys of `schema_keys()` in a fresh process (the built-in tasks and algorithms: no
`plugins` module is imported). A key's help is the comment written beside its field in the
source (a trailing `# ...`, after any comment lines directly above the field), read with `ast` and `tokenize`
from the file that defines the dataclass; a field with no comment gets an empty help cell. Nothing here loads
a model: the schema imports no torch.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import io
import re
import sys
import tokenize
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MD = ROOT / "docs" / "reference" / "config.md"
COMMAND = "python scripts/gen_docs_reference.py"
# a comment that is an instruction to a tool, not help for a person
TOOL_COMMENT = re.compile(r"^(noqa|type:|pragma|fmt:|ruff:|pyright:|mypy:)", re.IGNORECASE)


def _schema() -> Any:
    """The schema's default config (every registered task's and algorithm's options included), imported from
    this checkout, whichever checkout the venv's editable install points at."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from comlrl.config.schema import default_config

    return default_config()


@functools.cache
def _file_parts(path: str) -> tuple[ast.Module, dict[int, tuple[int, str]], frozenset[int]]:
    """The file's syntax tree, its comments by line (column, text), and the lines that hold only a comment."""
    text = Path(path).read_text(encoding="utf-8")
    comments: dict[int, tuple[int, str]] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return ast.parse(text), comments, frozenset(set(comments) - code_lines)


def _class_node(cls: type) -> tuple[ast.ClassDef, str] | None:
    """The class statement of `cls` in its source file (found by qualified name), and the file; None for a
    class made at run time (`make_dataclass`), which has no source of its own."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return None
    if path is None or not Path(path).is_file():
        return None
    tree, _, _ = _file_parts(path)
    body: list[ast.stmt] = tree.body
    node: ast.ClassDef | None = None
    for name in cls.__qualname__.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if node is None:
            return None
        body = node.body
    return (node, path) if node is not None else None


def _help_in(node: ast.ClassDef, path: str) -> dict[str, str]:
    """Each annotated field of the class statement: the comment lines directly above it at its own indent, the
    comments on its lines (the trailing `# ...`), the comment-only lines after it indented deeper (the trailing
    comment's continuation), and a string literal right after it (an attribute docstring), joined."""
    _, comments, comment_only = _file_parts(path)
    out: dict[str, str] = {}
    for i, stmt in enumerate(node.body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        col, end = stmt.col_offset, stmt.end_lineno or stmt.lineno
        above, line = [], stmt.lineno - 1
        while line in comment_only and comments[line][0] == col:
            above.insert(0, comments[line][1])
            line -= 1
        beside = [comments[n][1] for n in range(stmt.lineno, end + 1) if n in comments]
        line = end + 1
        while line in comment_only and comments[line][0] > col:
            beside.append(comments[line][1])
            line += 1
        parts = [*above, *beside]
        after = node.body[i + 1] if i + 1 < len(node.body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            parts.append(inspect.cleandoc(after.value.value))
        text = " ".join(p for p in parts if p and not TOOL_COMMENT.match(p))
        out[stmt.target.id] = " ".join(text.split())
    return out


def _owner(cls: type, name: str) -> type | None:
    """The class in `cls`'s bases (itself first) whose own body declares the field `name`."""
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return klass
    return None


def field_help(cls: type, name: str) -> str:
    """The help text of field `name` of dataclass `cls`, from the source of the class that declares it ('' if
    it has no comment)."""
    owner = _owner(cls, name)
    found = _class_node(owner) if owner is not None else None
    return _help_in(*found).get(name, "") if found else ""


def class_doc(cls: type) -> str:
    """The first paragraph of the docstring written in the source of `cls` (or of its nearest base that has
    one: a class made at run time has none); '' without one. Not `__doc__`: a dataclass without a docstring
    gets its signature there."""
    for klass in cls.__mro__:
        found = _class_node(klass)
        if found and (doc := ast.get_docstring(found[0])):
            return " ".join(doc.split("\n\n")[0].split())
    return ""


def _type_text(t: Any) -> str:
    return t if isinstance(t, str) else getattr(t, "__qualname__", repr(t))


def _default_text(value: Any) -> str:
    """The default as it is written in a YAML config or a `key=value` override."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True).strip()
    return text.removesuffix("...").strip()


_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "_": "&#95;", "*": "&#42;", "[": "&#91;",
             "]": "&#93;", "`": "&#96;", "\\": "&#92;"}


def _code(text: str) -> str:
    """Inline code inside a table cell: backticks, or, where the text holds a pipe or a backtick (which would
    split the cell on GitHub, or show a backslash on the site), an HTML <code> with them as entities."""
    if "|" not in text and "`" not in text:
        return f"`{text}`"
    return "<code>" + "".join(_ENTITIES.get(c, c) for c in text) + "</code>"


def _prose(text: str) -> str:
    """Help text inside a table cell: its `code` spans kept, pipes and angle brackets of the prose escaped."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            out.append(_code(part[1:-1]))
        else:
            out.append(part.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(out)


def _rows(obj: Any, prefix: str = "") -> tuple[list[tuple[str, str, str, str]], list[tuple[str, Any]]]:
    """(key, type, default, help) of each leaf field of the section `obj`, and its subsections (key, value)."""
    leaves, sections = [], []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            sections.append((f"{prefix}{f.name}", value))
        else:
            help_text = field_help(type(obj), f.name)
            leaves.append((f"{prefix}{f.name}", _type_text(f.type), _default_text(value), help_text))
    return leaves, sections


def _table(leaves: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    lines += [f"| {_code(k)} | {_code(t)} | {_code(d)} | {_prose(h)} |" for k, t, d, h in leaves]
    return [*lines, ""]


def _source_name(cls: type) -> str:
    """`path/to/file.py` (`ClassName`) of the class that declares a section (a run-time class: its base's),
    named from the module (the same wherever the checkout is)."""
    for klass in cls.__mro__:
        found = _class_node(klass)
        if found:
            module = Path(*klass.__module__.split("."))
            rel = module / "__init__.py" if Path(found[1]).name == "__init__.py" else module.with_suffix(".py")
            return f"`{rel.as_posix()}` (`{klass.__qualname__}`)"
    return f"`{cls.__qualname__}`"


def _section(key: str, value: Any, level: int, stats: dict[str, int]) -> list[str]:
    leaves, sections = _rows(value, f"{key}.")
    lines = [f"{'#' * level} `{key}`", ""]
    doc = class_doc(type(value))
    if doc:
        lines += [_prose(doc), ""]
    lines += [f"Declared in {_source_name(type(value))}.", ""]
    if leaves:
        lines += _table(leaves)
    stats["keys"] += len(leaves)
    stats["no_help"] += sum(1 for *_, h in leaves if not h)
    for sub_key, sub in sections:
        lines += _section(sub_key, sub, min(level + 1, 4), stats)
    return lines


def render(stats: dict[str, int] | None = None) -> str:
    """The text of docs/reference/config.md; `stats` (if given) gets `keys` and `no_help` (keys without help)."""
    stats = {} if stats is None else stats
    stats.update(keys=0, no_help=0)
    cfg = _schema()
    leaves, sections = _rows(cfg)
    lines = [
        "# Configuration keys",
        "",
        f"<!-- Generated by `{COMMAND}` from the schema; do not edit by hand. -->",
        "",
        f"This page is generated from the configuration schema (`comlrl/config/schema.py`, `run_schema()`) by "
        f"`{COMMAND}`; CI fails when it is out of date (`{COMMAND} --check`). Each key's description is the "
        "comment beside its field in the source file named under each section.",
        "",
        "A key is set in a YAML config (`training:` then `  steps: 20`) or as an override "
        "(`comlrl-train --config configs/align_T2_G4.yaml training.steps=20`); defaults are written as YAML. "
        "What the settings mean together, with examples: [Configuration](../configuration.md).",
        "",
        "## Top level",
        "",
        *_table(leaves),
    ]
    stats["keys"] += len(leaves)
    stats["no_help"] += sum(1 for *_, h in leaves if not h)
    for key, value in sections:
        lines += _section(key, value, 2, stats)
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if docs/reference/config.md is not what this would write")
    args = parser.parse_args(argv)
    stats: dict[str, int] = {}
    text = render(stats)
    rel = CONFIG_MD.relative_to(ROOT).as_posix() if CONFIG_MD.is_relative_to(ROOT) else str(CONFIG_MD)
    if args.check:
        current = CONFIG_MD.read_text(encoding="utf-8") if CONFIG_MD.is_file() else None
        if current != text:
            print(f"{rel} is stale: run `{COMMAND}` and commit it", file=sys.stderr)
            return 1
        return 0
    CONFIG_MD.parent.mkdir(parents=True, exist_ok=True)
    CONFIG_MD.write_text(text, encoding="utf-8")
    print(f"wrote {rel}: {stats['keys']} keys, {stats['no_help']} without a help comment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
