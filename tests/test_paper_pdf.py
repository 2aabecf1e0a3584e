"""paper/scripts/build_pdf.py: the message without an engine, staging of the generated files, a real compile."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_build_pdf():
    spec = importlib.util.spec_from_file_location("build_pdf", ROOT / "paper" / "scripts" / "build_pdf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def paper_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A results/paper folder with one table, one number file, and a main.tex inputting both."""
    paper = tmp_path / "results" / "paper"
    (paper / "tables").mkdir(parents=True)
    (paper / "numbers").mkdir()
    (paper / "tables" / "t.tex").write_text("\\begin{tabular}{l}\\toprule x \\\\ \\bottomrule\\end{tabular}\n")
    (paper / "numbers" / "n.tex").write_text("\\newcommand{\\NumX}{4.2}\n\\newcommand{\\NumXReported}{5.0}\n")
    tex = tmp_path / "main.tex"
    tex.write_text("\\documentclass{article}\\usepackage{booktabs}\\input{numbers/n}\\begin{document}"
                   "ours \\NumX{} (paper: \\NumXReported)\\input{tables/t}\\end{document}\n")
    return paper, tex


def test_missing_engine_names_engine_key_and_how_to_install(tmp_path, monkeypatch, capsys):
    build_pdf = load_build_pdf()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    paper, tex = paper_folder(tmp_path)
    status = build_pdf.run(["--engine", "tectonic", "--tex", str(tex), "--paper-dir", str(paper),
                            "--build-dir", str(paper / "build"), "--out", str(paper / "main.pdf")])
    err = capsys.readouterr().err
    assert status == 2 and "'tectonic'" in err and "paper.latex_engine" in err and "apt-get install latexmk" in err
    assert not (paper / "main.pdf").exists()
    assert build_pdf.run(["--engine", "lualatex", "--tex", str(tex), "--paper-dir", str(paper), "--build-dir",
                          str(paper / "build"), "--out", str(paper / "main.pdf")]) == 2
    assert "allowed: latexmk, pdflatex, tectonic" in capsys.readouterr().err


def test_stage_copies_inputs_below_the_paper_folder(tmp_path):
    build_pdf = load_build_pdf()
    paper, tex = paper_folder(tmp_path)
    build = paper / "build"
    (build / "old").mkdir(parents=True)
    staged = build_pdf.stage(tex, paper, build, [paper / "tables" / "t.tex"])
    assert staged == build / "main.tex" and (build / "tables" / "t.tex").is_file()
    assert not (build / "numbers").exists() and not (build / "old").exists()  # only what was given; emptied first
    with pytest.raises(build_pdf.BuildError, match="not below"):
        build_pdf.stage(tex, paper, build, [tex])
    with pytest.raises(build_pdf.BuildError, match="must not hold"):
        build_pdf.stage(tex, paper, paper.parent, None)
    assert build_pdf.page_count("Output written on main.pdf (14 pages, 341405 bytes).") == 14
    assert build_pdf.page_count("no pdf") is None


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no pdflatex on PATH")
def test_compiles_with_pdflatex(tmp_path, capsys):
    build_pdf = load_build_pdf()
    paper, tex = paper_folder(tmp_path)
    out = paper / "main.pdf"
    assert build_pdf.run(["--engine", "pdflatex", "--tex", str(tex), "--paper-dir", str(paper), "--build-dir",
                          str(paper / "build"), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF") and re.search(r"\(1 pages?\)", capsys.readouterr().out)
