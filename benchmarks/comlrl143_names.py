"""The public names of an unpacked CoMLRL wheel, module by module: what docs/comlrl-compat.md's name table and
tests/test_comlrl_wider_api.py's embedded list are written from (issue 69). Reads the source with `ast`, so the
wheel is never imported (it needs torch, wandb and its own dependencies).

    python benchmarks/comlrl143_names.py /tmp/comlrl143/x/comlrl          # one "module: name, name" line each
    python benchmarks/comlrl143_names.py /tmp/comlrl143/x/comlrl --json   # {module: [names]}

A public name is one a module defines at its top level (class, function, constant) without a leading
underscore; a package's `__init__` gives what it re-exports (its `__all__`, else what it imports from the
package). Names a module merely imports for its own use (typing, torch, helpers of the package) are left out:
each name is listed where it is defined and where a package re-exports it.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def _defined(tree: ast.Module, package: str, init: bool) -> list[str]:
    """Top-level classes, functions and constants; for a package's `__init__`, what it imports from the package."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif init and isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith(package)):
            names += [a.asname or a.name for a in node.names]
    return [n for n in names if not n.startswith("_")]


def public_names(root: Path) -> dict[str, list[str]]:
    """{module: its public names} for every module of the package at `root` (sorted by module)."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        init = path.name == "__init__.py"
        declared = _all(tree) if init else None
        names = declared if declared is not None else _defined(tree, root.name, init)
        out[_module_name(root, path)] = list(dict.fromkeys(n for n in names if n != "__version__"))
    return dict(sorted(out.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the unpacked wheel's package folder (.../comlrl)")
    parser.add_argument("--json", action="store_true", help="print {module: [names]} as JSON")
    args = parser.parse_args()
    names = public_names(args.package.resolve())
    if args.json:
        print(json.dumps(names, indent=1))
    else:
        for module, found in names.items():
            print(f"{module}: {', '.join(found)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
