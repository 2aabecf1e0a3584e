"""Compile paper/main.tex into a PDF from the generated tables, figures and numbers.

    python paper/scripts/build_pdf.py --engine latexmk --tex paper/main.tex --paper-dir results/paper \
        --build-dir results/paper/build --out results/paper/main.pdf [--inputs FILE ...]

The path scheme of paper/main.tex: every table, figure and number file is named relative to the folder that
holds tables/, figures/ and numbers/ (``--paper-dir``, i.e. <results_dir>/paper/). This script empties the
scratch folder ``--build-dir``, copies main.tex and those files there (``--inputs``: the files to copy, each
below ``--paper-dir``; default: everything in the three folders), runs the engine in it, and moves the PDF to
``--out`` atomically (a failed compile leaves no PDF and keeps the scratch folder with the log).

Engines (config key paper.latex_engine): ``latexmk`` (pdflatex, as many passes as needed), ``pdflatex`` (run
twice, for references) or ``tectonic``. When the engine is not on PATH the script stops with status 2 and says
how to install one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENGINES = ("latexmk", "pdflatex", "tectonic")
FOLDERS = ("tables", "figures", "numbers")
INSTALL_HINT = ("install one: on Debian/Ubuntu `apt-get install latexmk texlive-latex-recommended "
                "texlive-latex-extra` (latexmk, pdflatex), or tectonic (https://tectonic-typesetting.github.io, "
                "a single binary; then set paper.latex_engine: tectonic)")


class BuildError(RuntimeError):
    """The PDF cannot be built (no engine, a bad input, or the compile failed)."""


def engine_command(engine: str, tex_name: str) -> list[list[str]]:
    """The commands that compile ``tex_name`` in the current folder with ``engine`` (run in order)."""
    if engine == "latexmk":
        return [["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", tex_name]]
    if engine == "pdflatex":
        once = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", tex_name]
        return [once, once]
    if engine == "tectonic":
        return [["tectonic", "--keep-logs", tex_name]]
    raise BuildError(f"unknown LaTeX engine {engine!r} (config key paper.latex_engine; allowed: {', '.join(ENGINES)})")


def check_engine(engine: str) -> str:
    """The engine's path; BuildError naming the engine, the config key and how to get one when it is absent."""
    engine_command(engine, "main.tex")  # rejects unknown names
    found = shutil.which(engine)
    if found is None:
        raise BuildError(f"LaTeX engine '{engine}' (config key paper.latex_engine) is not on PATH; {INSTALL_HINT}")
    return found


def stage(tex: Path, paper_dir: Path, build_dir: Path, inputs: list[Path] | None) -> Path:
    """Fill the emptied ``build_dir`` with main.tex and the generated files; returns the staged main.tex."""
    if not tex.is_file():
        raise BuildError(f"missing LaTeX source {tex}")
    if build_dir.resolve() == paper_dir.resolve() or build_dir.resolve() in paper_dir.resolve().parents:
        raise BuildError(f"the scratch folder {build_dir} must not hold the paper folder {paper_dir} (it is emptied)")
    if build_dir.exists():
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    paper_dir = paper_dir.resolve()
    if inputs is None:
        inputs = [p for folder in FOLDERS for p in sorted((paper_dir / folder).glob("*")) if p.is_file()]
    for path in inputs:
        path = Path(path).resolve()
        try:
            relative = path.relative_to(paper_dir)
        except ValueError:
            raise BuildError(f"input {path} is not below the paper folder {paper_dir}") from None
        if not path.is_file():
            raise BuildError(f"missing input {path}")
        target = build_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    staged = build_dir / tex.name
    shutil.copy2(tex, staged)
    return staged


def compile_pdf(engine: str, staged: Path, log=None) -> Path:
    """Run the engine in the staged folder; the PDF it wrote (BuildError with the log's tail on failure)."""
    for command in engine_command(engine, staged.name):
        result = subprocess.run(command, cwd=staged.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", check=False)
        if log is not None:
            log.write(result.stdout)
        if result.returncode != 0:
            tail = "\n".join(result.stdout.splitlines()[-25:])
            raise BuildError(f"{' '.join(command)} failed with status {result.returncode} in {staged.parent}:\n{tail}")
    pdf = staged.with_suffix(".pdf")
    if not pdf.is_file():
        raise BuildError(f"{engine} finished but wrote no {pdf}")
    return pdf


def move_atomic(source: Path, out: Path) -> Path:
    """Copy ``source`` next to ``out`` and rename it into place (the scratch folder may be on another disk)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def page_count(log_text: str) -> int | None:
    """Pages of the PDF as the engine's log states them ("Output written on main.pdf (N pages"); None if absent."""
    import re

    found = re.findall(r"Output written on .*?\((\d+) pages?", log_text)
    return int(found[-1]) if found else None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Compile paper/main.tex with the generated tables, figures, numbers")
    parser.add_argument("--engine", required=True, help=f"LaTeX engine ({', '.join(ENGINES)})")
    parser.add_argument("--tex", type=Path, required=True, help="the LaTeX source (paper/main.tex)")
    parser.add_argument("--paper-dir", type=Path, required=True, help="folder with tables/, figures/, numbers/")
    parser.add_argument("--build-dir", type=Path, required=True, help="scratch folder (emptied first)")
    parser.add_argument("--out", type=Path, required=True, help="the PDF to write")
    parser.add_argument("--inputs", type=Path, nargs="*", help="generated files to copy (default: all three folders)")
    args = parser.parse_args(argv)
    check_engine(args.engine)
    staged = stage(args.tex, args.paper_dir, args.build_dir, args.inputs)
    log_path = args.build_dir / "engine.log"
    with open(log_path, "w", encoding="utf-8") as log:
        pdf = compile_pdf(args.engine, staged, log)
    move_atomic(pdf, args.out)
    tex_log = staged.with_suffix(".log")
    pages = page_count(tex_log.read_text(errors="replace") if tex_log.is_file() else log_path.read_text())
    print(f"wrote {args.out} ({pages if pages is not None else '?'} pages) with {args.engine}; scratch: {args.build_dir}")


def run(argv=None) -> int:
    try:
        main(argv)
    except BuildError as exc:
        print(f"build_pdf.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(run())
