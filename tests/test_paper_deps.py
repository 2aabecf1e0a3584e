"""spade.paper.deps: the shared spade.paper modules a paper script depends on (the `lib` input of its rule)."""

from __future__ import annotations

import pytest

from spade.paper.deps import PAPER_DIR, imported_paper_modules, script_libs


def names(paths) -> list[str]:
    return [path.stem for path in paths]


def test_direct_function_level_and_transitive_imports(tmp_path):
    package = tmp_path / "paper"
    package.mkdir()
    (package / "a.py").write_text("from spade.paper.b import thing\n")
    (package / "b.py").write_text("from . import c\n")
    (package / "c.py").write_text("import os\n")
    (package / "unused.py").write_text("")
    script = tmp_path / "fig_x.py"
    script.write_text(
        "import numpy\nfrom spade.analysis import diversity\nfrom spade.paper import a as alias, missing_module\n"
        "def main():\n    import spade.paper.c\n"
    )
    assert imported_paper_modules(script, package) == {"a", "c"}  # a module with no file is nothing to declare
    assert names(script_libs(script, package)) == ["a", "b", "c"]
    assert all(path.parent == package.resolve() for path in script_libs(script, package))
    assert names(script_libs(package / "b.py", package)) == ["b", "c"]  # a module of the package lists itself


def test_real_scripts():
    libs = names(script_libs(PAPER_DIR.parents[2] / "paper" / "scripts" / "table5_hyperparameters.py"))
    assert "tables" in libs and "figures" not in libs
    cards = names(script_libs(PAPER_DIR / "env_cards.py"))
    assert {"env_cards", "env_cards_archive", "env_cards_pages"} <= set(cards)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.py"):
        script_libs(tmp_path / "nope.py")
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    with pytest.raises(SyntaxError) as err:
        script_libs(broken)
    assert err.value.filename == str(broken)
