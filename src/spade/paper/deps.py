"""Which shared ``spade.paper`` modules a paper script depends on: the ``lib`` input of its Snakemake rule.

A table, figure or number group keeps its own code in its script (``paper/scripts/<stem>.py``, the rule's ``script``
input); what it shares with other scripts lives in ``spade.paper``. The rule declares those shared module files as
inputs, so that editing one reruns exactly the artifacts that use it, and editing a script reruns that artifact alone.

``script_libs`` reads the import statements (those inside functions included) of the script and, transitively, of
every ``spade.paper`` module it reaches, so the list cannot drift from the code. Imports of other packages (plumbing,
``spade.analysis``, ...) are not followed: those are the method's code, not the reporting code.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PAPER_DIR = Path(__file__).resolve().parent
PACKAGE = "spade.paper"


def imported_paper_modules(path: Path, paper_dir: Path | None = None) -> set[str]:
    """The ``spade.paper`` modules that the Python file ``path`` imports (names, e.g. ``"figures"``) and that exist as
    files in ``paper_dir`` (default: this package's folder).

    A SyntaxError names the file: a script that does not parse fails its own job anyway, but the workflow reads these
    imports when it plans, so the error must say which file to fix.
    """
    paper_dir = Path(paper_dir or PAPER_DIR).resolve()
    stat = Path(path).stat()
    found = _named_modules(str(path), stat.st_mtime_ns, stat.st_size, Path(path).resolve().parent == paper_dir)
    return {name for name in found if (paper_dir / f"{name}.py").is_file()}


@functools.lru_cache(maxsize=None)
def _named_modules(path: str, mtime_ns: int, size: int, inside: bool) -> frozenset[str]:
    """The ``spade.paper`` module names that the file's import statements name (``inside``: it is a module of the
    package, so relative imports count). Cached by the file's path, modification time and size: planning the workflow
    reads each shared module once, not once per script that reaches it, and an edited file is read again."""
    tree = ast.parse(Path(path).read_text(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and inside:  # from .report import x / from . import report
                module = f"{PACKAGE}.{node.module}" if node.module else PACKAGE
            elif node.level == 0:
                module = node.module or ""
            else:
                continue
            if module == PACKAGE:
                found |= {alias.name for alias in node.names}
            elif module.startswith(PACKAGE + "."):
                found.add(module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith(PACKAGE + ".")}
    return frozenset(found)


def script_libs(path: str | Path, paper_dir: str | Path | None = None) -> list[Path]:
    """The files of every ``spade.paper`` module that ``path`` imports, directly or through another of them, sorted.

    ``paper_dir`` is the folder of the package's source files to read and list (default: this package's folder; the
    workflow passes its own checkout's ``src/spade/paper``). ``path`` may itself be a module there (the environment
    cards' command): it is then part of the list.
    """
    path = Path(path)
    paper_dir = Path(paper_dir or PAPER_DIR).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such script or module: {path}")
    seen: set[str] = set()
    todo = [path]
    if path.resolve().parent == paper_dir:
        seen.add(path.stem)
    while todo:
        for name in imported_paper_modules(todo.pop(), paper_dir) - seen:
            seen.add(name)
            todo.append(paper_dir / f"{name}.py")
    return sorted(paper_dir / f"{name}.py" for name in seen)
