"""The architecture of ``src/spade``, checked from its source: the import graph has no cycle.

The graph has one node per module of ``src/spade`` (a package is its ``__init__``) and an edge ``a -> b`` for every
``import``/``from ... import`` statement in ``a`` that names ``b``, wherever it stands: at the top, inside a function
(a function-level import only hides a cycle until the function runs) or under ``TYPE_CHECKING``. Relative imports are
resolved against ``a``'s package. ``from pkg import name`` is an edge to the submodule ``pkg.name`` when there is one,
else to ``pkg``. Importing a submodule runs its package's ``__init__`` first; that implicit step is not an edge, so a
package ``__init__`` may import its submodules (e.g. to fill a registry that they import from a sibling module).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "spade"


def module_files() -> dict[str, Path]:
    """Every module of ``src/spade`` by dotted name (``spade.evals`` for ``spade/evals/__init__.py``)."""
    files = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that the import statements of module ``name`` (file ``path``) name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: level 1 is the package itself, each further level one package up
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.update(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                         for alias in node.names)
    return (found & known) - {name}


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``src/spade`` it imports (module docstring)."""
    files = module_files()
    return {name: imported_modules(name, path, set(files)) for name, path in files.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules reached from ``start`` along one or more edges."""
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module: each is a set of modules that import each other,
    directly or through the others (sorted lists, sorted by their first module)."""
    reach = {module: reachable(graph, module) for module in graph}
    components = {frozenset(other for other in reach[module] if module in reach[other])
                  for module in graph if module in reach[module]}
    return sorted(sorted(component) for component in components)


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycles = import_cycles(graph)
    report = [f"{len(modules)} modules import each other: {', '.join(modules)}\n" + "".join(
        f"  {module} -> {', '.join(sorted(graph[module] & set(modules)))}\n" for module in modules)
        for modules in cycles]
    assert not cycles, "import cycles in src/spade (move the shared code to a lower module):\n" + "".join(report)


def test_cycle_detection_on_a_hand_made_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a", "f"}, "f": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
