"""The paper tables as the scripts print them: ours beside the paper's reported values, with the difference.

What every table script (``paper/scripts/table<N>_<name>.py``) and the environment-source comparison's table
(``paper/scripts/table_env_sources.py``) share:

* the marks printed instead of numbers: ``not run`` (no result of ours for the cell: no run mapped, no run folder,
  no selected checkpoint, or no result for that benchmark at that step), ``no data`` (the run exists but has
  nothing in that phase), ``not computed`` (a quantity this repository does not measure), ``too few (...)``
  (fewer environments than one Vendi draw needs), and ``—`` where the paper gives no value or a difference has no
  meaning. A mark is never replaced by a number from elsewhere;
* the reported values (:func:`read_reported`, :func:`reported_number`: the CSVs of ``paper/reported/``);
* the printed table (:class:`Table` of groups of :class:`Line`: ours, reported, Δ), its Markdown
  (:func:`render_markdown`) and booktabs LaTeX (:func:`render_latex`), and :func:`write_table`, which writes both
  and the provenance sidecar (:func:`spade.paper.report.provenance_record`: the input files with their SHA-256,
  and one record per cell of ours: the run, step, benchmark, metric, value, n, standard error, config hash, git
  commit, seeds and the file it came from).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spade.paper.report import (
    NOT_RUN,
    TIDY_COLUMNS,
    ReportInputError,
    latex_escape,
    provenance_record,
    sidecar_path,
    write_json_atomic,
    write_text_atomic,
)

NO_DATA = "no data"
NOT_COMPUTED = "not computed"
TOO_FEW = "too few"
BLANK = "—"
MARKS = (NOT_RUN, NO_DATA, NOT_COMPUTED)

OURS, REPORTED, DIFF, PUBLISHED = "ours", "reported", "diff", "published"
PERCENT = 100.0  # our scores are fractions; the paper prints percent


# ----- reported values -------------------------------------------------------------------------------------
def read_reported(path: str | Path, columns: Sequence[str]) -> list[dict]:
    """The rows of a reported CSV as text (empty = no value), checking that ``columns`` are there."""
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"missing reported table {path}")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path} is not a readable CSV: {exc}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ReportInputError(f"{path} lacks the column(s) {', '.join(missing)}")
    return [{k: str(v).strip() for k, v in row.items()} for row in frame.to_dict("records")]


def reported_number(path, line: int, column: str, text: str) -> float | None:
    """The number in a reported cell; None for an empty cell; ReportInputError naming file, line and column."""
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ReportInputError(f"{path}, line {line}, column {column}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ReportInputError(f"{path}, line {line}, column {column}: {text!r} is not a finite number")
    return value


# ----- the rendered table -----------------------------------------------------------------------------------
@dataclass
class Line:
    """One printed row: label cells (empty on the continuation lines of a group), the kind of the values
    (ours, reported, diff, published; '' for a table without a kind column), a detail for the kind cell
    (e.g. the step) and the value cells."""

    labels: list[str]
    kind: str
    cells: list[str]
    detail: str = ""


@dataclass
class Table:
    caption: str
    label: str
    label_headers: list[str]
    headers: list[str]
    groups: list[list[Line]]
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    kind_header: str | None = "Source"
    value_align: str = "r"  # "l" for text columns (Table 5)
    banner: str = ""  # shown above the table: values of ours that are not at the paper's scale (spade.paper.scale)

    def lines(self) -> list[Line]:
        return [line for group in self.groups for line in group]


KIND_TEXT = {OURS: "ours", REPORTED: "reported", DIFF: "Δ (ours − reported)", PUBLISHED: "reported (published)"}


def _kind_cell(line: Line) -> str:
    text = KIND_TEXT.get(line.kind, line.kind)
    return f"{text}, {line.detail}" if line.detail else text


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(table: Table) -> str:
    """The table as GitHub Markdown: caption, table, then notes and what is missing."""
    headers = table.label_headers + ([table.kind_header] if table.kind_header else []) + table.headers
    value = "---:" if table.value_align == "r" else "---"
    align = ["---"] * (len(table.label_headers) + (1 if table.kind_header else 0)) + [value] * len(table.headers)
    out = [f"**{_md(table.caption)}**", ""]
    if table.banner:
        out += [f"> **{_md(table.banner)}**", ""]
    out += ["| " + " | ".join(map(_md, headers)) + " |", "|" + "|".join(align) + "|"]
    for line in table.lines():
        cells = line.labels + ([_kind_cell(line)] if table.kind_header else []) + line.cells
        out.append("| " + " | ".join(map(_md, cells)) + " |")
    if table.notes:
        out += [""] + [f"- {_md(note)}" for note in table.notes]
    if table.missing:
        out += ["", "Not run / no data:", ""] + [f"- {_md(item)}" for item in table.missing]
    return "\n".join(out) + "\n"


_TEX_UNICODE = {"Δ": r"$\Delta$", "−": "$-$", "—": "---", "–": "--", "×": r"$\times$", "≥": r"$\geq$",
                "≤": r"$\leq$", "±": r"$\pm$"}


def tex(text: str) -> str:
    """LaTeX text: the special characters escaped and the few non-ASCII signs we print turned into macros."""
    out = latex_escape(str(text))
    for char, macro in _TEX_UNICODE.items():
        out = out.replace(char, macro)
    return "{}" + out if out.startswith("[") else out  # a row starting with [ would be read as \\[length]


def _tex_cell(text: str) -> str:
    if text in MARKS or text.startswith(TOO_FEW):
        return r"\textit{" + tex(text) + "}"
    if re.fullmatch(r"-\d+(\.\d+)?", text):  # a negative number: a real minus sign
        return "$-$" + text[1:]
    return tex(text)


_PAPER_NUMBER = re.compile(r"^Table \d+:\s*")  # LaTeX numbers its floats itself


def render_latex(table: Table, script: str = "") -> str:
    """The table as a booktabs LaTeX float (``table*``: the benchmark tables are wide). The caption drops its
    "Table N:" prefix (LaTeX numbers the float; the paper's number is in the label and the comment line)."""
    n_labels = len(table.label_headers) + (1 if table.kind_header else 0)
    spec = "l" * n_labels + table.value_align * len(table.headers)
    headers = table.label_headers + ([table.kind_header] if table.kind_header else []) + table.headers
    body = []
    for i, group in enumerate(table.groups):
        if i:
            body.append(r"\midrule")
        for line in group:
            cells = [tex(c) for c in line.labels] + ([tex(_kind_cell(line))] if table.kind_header else [])
            body.append(" & ".join(cells + [_tex_cell(c) for c in line.cells]) + r" \\")
    notes = " ".join(tex(note) for note in table.notes)
    source = f" by {script}" if script else ""
    number = _PAPER_NUMBER.match(table.caption)
    caption = _PAPER_NUMBER.sub("", table.caption)
    paper = f"{number.group(0).strip(': ')} of the paper, " if number else ""
    return "\n".join([
        f"% {paper}generated{source}; do not edit. Needs \\usepackage{{booktabs}}.",
        r"\begin{table*}[t]", r"\centering\scriptsize", r"\setlength{\tabcolsep}{3pt}",
        r"\caption{" + (r"\textbf{" + tex(table.banner) + "} " if table.banner else "")
        + tex(caption[:1].upper() + caption[1:]) + "}", r"\label{" + table.label + "}",
        r"\begin{tabular}{" + spec + "}", r"\toprule", " & ".join(tex(h) for h in headers) + r" \\", r"\midrule",
        *body, r"\bottomrule", r"\end{tabular}",
        *([r"\par\smallskip", r"\parbox{\linewidth}{\raggedright " + notes + "}"] if notes else []),
        r"\end{table*}", ""])


def write_table(table: Table, out: str | Path, script: str, inputs: Sequence[Path], cells: list,
                tidy: pd.DataFrame | None = None, **extra) -> list[Path]:
    """Write ``out`` (Markdown), the LaTeX of the same stem (.tex) and the provenance sidecar of ``out``."""
    out = Path(out)
    if out.suffix != ".md":
        raise ReportInputError(f"--out must name the Markdown file (.md), got {out}")
    tex_path = out.with_suffix(".tex")
    write_text_atomic(out, render_markdown(table))
    write_text_atomic(tex_path, render_latex(table, script))
    tidy_columns = None if tidy is None else tidy[[c for c in TIDY_COLUMNS if c in tidy.columns]]
    record = provenance_record(script, [Path(p) for p in inputs], [out, tex_path], tidy_columns, cells=cells,
                               missing=table.missing, banner=table.banner, **extra)
    write_json_atomic(sidecar_path(out), record)
    return [out, tex_path, sidecar_path(out)]


def shown_path(path) -> str:
    """A path as the tables print it: relative to the working directory (the repository root under Snakemake)
    when it lies below it, else its name; the sidecar keeps the full path."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def signed(value: float, decimals: int) -> str:
    """A difference with its sign, ``decimals`` places; one that rounds to zero reads +0.0 (never -0.0)."""
    text = f"{value:+.{decimals}f}"
    return f"{0.0:+.{decimals}f}" if float(text) == 0 else text


def mean(values: Sequence[float]) -> float:
    """The unweighted mean of ``values`` (not empty)."""
    return sum(values) / len(values)


def report_written(outputs: Sequence[Path], table: Table) -> None:
    """Print what a script wrote and what of its table is not run or has no data."""
    print(f"wrote {', '.join(map(str, outputs))}")
    for item in table.missing:
        print(f"not run / no data: {item}")
