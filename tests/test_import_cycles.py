"""No import cycles between the modules of comlrl, counting every import: at module level, inside functions and
under `if TYPE_CHECKING:` (the import contracts skip the last kind, so a type-only arrow up goes unseen there).

The graph is read with `ast` (nothing is imported): `from a.b import c` is an arrow to a.b.c when that is a
module, else to a.b; relative imports resolve against the importing module's package.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "comlrl"
# cycles whose removal is under way elsewhere, each a sorted tuple of its modules (empty when none)
KNOWN: set[tuple[str, ...]] = set()


def modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (its file, whether it is a package's __init__)."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of comlrl it imports anywhere in its file."""
    mods = modules()
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, (path, is_package) in mods.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
            for target in targets:
                while target and target not in mods:  # `import a.b.c` of a name inside a module: its module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


def _describe(component: tuple[str, ...], graph: dict[str, set[str]]) -> str:
    members = set(component)
    arrows = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return f"{', '.join(component)} ({'; '.join(arrows)})"


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "comlrl.errors" in graph["comlrl.config.schema"]  # module level
    assert "comlrl.run.model_card" in graph["comlrl.run.report"]  # inside a function
    assert "comlrl.config.schema" in graph["comlrl.run.atropos"]  # under `if TYPE_CHECKING:`
    assert len(graph) > 100


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert cycles(graph) == [("a", "b", "c"), ("d", "e")]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_comlrl_imports_itself_round_a_cycle() -> None:
    graph = import_graph()
    found = [c for c in cycles(graph) if c not in KNOWN]
    assert not found, "import cycles between modules of comlrl:\n" + "\n".join(_describe(c, graph) for c in found)
    stale = KNOWN - set(cycles(graph))
    assert not stale, f"entries of KNOWN that are gone (remove them): {sorted(stale)}"


def test_learn_imports_no_config_not_even_for_types() -> None:
    """learn/ sits below config/ (the config reads the algorithms' tables): it names what it reads of a run's
    config in its own Protocols (`comlrl.learn.units.LearnConfig`) instead of importing the config's types."""
    graph = import_graph()
    up = sorted(f"{a} -> {b}" for a in graph if a.startswith("comlrl.learn") for b in graph[a]
                if b.startswith("comlrl.config"))
    assert not up, f"learn/ imports the config: {up}"


def test_learn_imports_nothing_above_it_not_even_for_types() -> None:
    """learn/ sits below the policies, the engines, the config and the run: it names what it needs of them in
    its own Protocols (`comlrl.learn.learner.TrainedPolicies`, `WeightsListener`, `comlrl.learn.units.LearnConfig`)
    and reads `Sample` from the tree's layer (`comlrl.tree.nodes`), so no import of it reaches up."""
    graph = import_graph()
    above = ("comlrl.policy", "comlrl.engines", "comlrl.config", "comlrl.run")
    up = sorted(f"{a} -> {b}" for a in graph if a.startswith("comlrl.learn") for b in graph[a]
                if any(b == p or b.startswith(p + ".") for p in above))
    assert not up, f"learn/ imports from above it: {up}"


def test_tree_names_its_samples_without_the_policies() -> None:
    """`Node.completions` holds `comlrl.tree.nodes.Sample`s; the tree imports nothing of the policies."""
    from comlrl.tree.nodes import Node, Sample

    assert Sample.__module__ == Node.__module__ == "comlrl.tree.nodes"
    graph = import_graph()
    up = sorted(f"{a} -> {b}" for a in graph if a.startswith("comlrl.tree") for b in graph[a]
                if b.startswith("comlrl.policy"))
    assert not up, f"tree/ imports the policies: {up}"
