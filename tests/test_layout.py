"""The tree explains itself: module sizes, docs/ARCHITECTURE.md matches the tree, and the README routes to every page.

- A module of ``src/spade`` over ``MAX_LINES`` lines must say why it is one cohesive thing: a sentence starting
  "Size:" in its docstring.
- Every package of ``src/spade`` is a row of the "Layout" table of docs/ARCHITECTURE.md and appears in the rest of
  that page; every path the table names exists; every ``spade.*`` name that docs/ARCHITECTURE.md quotes imports.
- The README fits on one screen's worth of scrolling (at most ``README_MAX_LINES`` lines), links every page of
  ``docs/`` exactly once, and every relative link in it and in the ``docs/`` pages points at a file that exists.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "spade"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_LINES = 600
README_MAX_LINES = 160  # issue 41: what to run, how long, what it shows; everything else lives in docs/
LIBRARY_GAMES = PACKAGE / "envs" / "library"  # environment sources loaded into the sandbox, not package code


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if LIBRARY_GAMES not in p.parents or p.parent == LIBRARY_GAMES)


def packages() -> list[str]:
    """The packages directly under src/spade, as ``src/spade/<name>/``."""
    return sorted(f"src/spade/{p.parent.name}/" for p in PACKAGE.glob("*/__init__.py"))


def layout_table() -> str:
    text = ARCHITECTURE.read_text()
    match = re.search(r"^## Layout\n(.*?)(?=^## )", text, re.S | re.M)
    if match is None:
        raise AssertionError("docs/ARCHITECTURE.md has no '## Layout' section")
    return match.group(1)


def oversized(path: Path) -> str | None:
    """A message when the module is over MAX_LINES lines and its docstring gives no "Size:" reason, else None."""
    text = path.read_text()
    lines = text.count("\n")
    if lines <= MAX_LINES:
        return None
    doc = ast.get_docstring(ast.parse(text)) or ""
    if re.search(r"\bSize:\s+\S", doc):
        return None
    return f"{path}: {lines} lines, over {MAX_LINES}, and its docstring has no 'Size:' reason"


def test_modules_are_small_or_say_why():
    problems = [msg for msg in map(oversized, modules()) if msg]
    assert not problems, "\n".join(problems)


def test_size_check_catches_a_large_module(tmp_path):
    body = "x = 1\n" * (MAX_LINES + 5)
    plain = tmp_path / "plain.py"
    plain.write_text('"""A module."""\n' + body)
    reasoned = tmp_path / "reasoned.py"
    reasoned.write_text('"""A module.\n\nSize: one table of constants that reads best in one place.\n"""\n' + body)
    small = tmp_path / "small.py"
    small.write_text('"""A module."""\nx = 1\n')
    assert "plain.py" in oversized(plain)
    assert oversized(reasoned) is None
    assert oversized(small) is None


def test_layout_table_names_every_package_and_only_existing_paths():
    table = layout_table()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = [p for row in rows for p in re.findall(r"`([^`]+)`", row.split("|")[1])]
    ignored = {line.strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}  # outputs, e.g. results/
    missing_paths = [p for p in named if p.strip("/") not in ignored and not any(ROOT.glob(p.lstrip("./")))]
    assert not missing_paths, f"the layout table of docs/ARCHITECTURE.md names paths that do not exist: {missing_paths}"
    missing_packages = [pkg for pkg in packages() if pkg not in named]
    assert not missing_packages, f"packages missing from the layout table of docs/ARCHITECTURE.md: {missing_packages}"


def test_architecture_doc_names_every_package_and_real_modules():
    text = ARCHITECTURE.read_text()
    missing = [pkg for pkg in packages() if f"spade.{Path(pkg).name}" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not mention the packages {missing}"
    broken = []
    for name in sorted(set(re.findall(r"`(spade(?:\.\w+)+)", text))):
        if not resolves(name):
            broken.append(name)
    assert not broken, f"docs/ARCHITECTURE.md names modules or attributes that do not exist: {broken}"


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of src/spade, or a module followed by attributes that exist."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize(
    "name, expected",
    [
        ("spade.core.rewards", True),
        ("spade.core.rewards.regret", True),
        ("spade.core.nothing_here", False),
        ("spade.core.rewards.nope", False),
    ],
)
def test_resolves(name, expected):
    assert resolves(name) is expected


README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    """The targets of the page's Markdown links that point into the repository (no scheme, no pure anchor)."""
    return [target for target in LINK.findall(page.read_text())
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines, over {README_MAX_LINES}: move the detail to a "
                                       f"docs/ page named by its reader's question and link it")


def test_readme_links_every_docs_page_once():
    linked = [Path(target.split("#")[0]).as_posix() for target in relative_links(README)]
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    counts = {page: linked.count(page) for page in pages}
    unlinked = [page for page, n in counts.items() if n == 0]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
    repeated = [page for page, n in counts.items() if n > 1]
    assert not repeated, f"docs pages the README links more than once: {repeated}"


@pytest.mark.parametrize("page", ["README.md", "REPRODUCING.md", *sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))])
def test_relative_links_resolve(page):
    path = ROOT / page
    broken = [t for t in relative_links(path) if not (path.parent / t.split("#")[0]).exists()]
    assert not broken, f"{page} links to files that do not exist: {broken}"


def test_link_checks_catch_a_missing_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](docs/A.md) [b](https://example.org/x.md) [c](#anchor) [d](docs/B.md#part)\n")
    assert relative_links(page) == ["docs/A.md", "docs/B.md#part"]
