"""The paper's Tables 1, 2, 3, 5, 6, 7 and 8, each with the reported values beside ours and the difference.

Each table has its own script in ``paper/scripts/`` (``table<N>_<name>.py``). The scripts are thin: the
logic lives here so that it is tested once (``tests/test_paper_tables.py``). Inputs, per table:

* Tables 1, 2, 3, 6 (benchmark scores): our evaluation results, either tidy results tables (``--results``,
  the format of :mod:`spade.paper.report`) or the run folders under ``--runs-root`` (their
  ``eval/<benchmark>/step_<NNNNNN>.json`` files, read with :func:`spade.paper.report.tidy_results`), the run
  mapping ``paper/table_runs.yaml`` (which run and which checkpoint stands for which paper row; the
  ``selected`` rule reads ``<runs-root>/<run>/selected_checkpoint.json``) and the reported CSV.
  Paper columns are fixed benchmark metrics (:data:`COLUMN_METRICS`, overridable in the mapping). Our
  values are fractions, shown times 100 to match the paper's percent; the averages are unweighted means of
  the shown columns as in the paper (Table 1, 3, 6: the 8 games columns; Table 2: BFCL, tau2 and ACEBench
  averages, then their mean), and "gain vs base" is the row's average minus its base row's average.
* Table 5 (hyperparameters): the recipe files ``configs/recipes/games.yaml`` and ``tool_use.yaml``,
  validated into :class:`spade.config.SpadeConfig` (no model card or run layer), so a changed recipe value
  changes the table.
* Table 7 (environment quality per training phase): one run folder: ``envs/set_<step>.json`` (learnable
  share, program length, hidden state variables, through :mod:`spade.analysis`) and ``metrics.jsonl``
  (agent win rate and turns per episode, weighted by episodes). The two LLM-rubric rows need an LLM judge,
  which this repository does not have: they read "not computed".
* Table 8 (diversity): the ``envs/set_<step>.json`` archives of each mapped run: Vendi/n with SBERT
  all-MiniLM-L6-v2 and with TF-IDF + LSA embeddings, mean pairwise cosine distance with SBERT.

Tables 7 and 8 count only environments the designer wrote (``source == "designer"``; slots backfilled
from the built-in library are not designer output) that validated.

Marks instead of numbers: ``not run`` (no result of ours for the cell: no run mapped, no run folder, no
selected checkpoint, or no result for that benchmark at that step), ``no data`` (the run exists but has
nothing in that phase), ``not computed`` (a quantity this repository does not measure), ``too few (...)``
(fewer environments than one Vendi draw needs), and ``—`` where the paper gives no value or a difference
has no meaning. A mark is never replaced by a number from elsewhere.

Every artifact gets a provenance sidecar (:func:`spade.paper.report.provenance_record`) with the input files and
their SHA-256, and one record per cell of ours: the run, step, benchmark, metric, value, n, standard
error, config hash, git commit, seeds and the file it came from.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spade.paper.report import (
    NOT_RUN,
    SORT_KEYS,
    TIDY_COLUMNS,
    TRAINING_BENCHMARK,
    ReportInputError,
    eval_files,
    files_fingerprint,
    latex_escape,
    provenance_record,
    read_json,
    read_metrics,
    read_tidy,
    read_yaml,
    sidecar_path,
    tidy_results,
    write_json_atomic,
    write_text_atomic,
)
from spade.paper.scale import banner, off_scale

NO_DATA = "no data"
NOT_COMPUTED = "not computed"
TOO_FEW = "too few"
BLANK = "—"
MARKS = (NOT_RUN, NO_DATA, NOT_COMPUTED)

OURS, REPORTED, DIFF, PUBLISHED = "ours", "reported", "diff", "published"
STEP_WORDS = ("selected", "last", "base")
PERCENT = 100.0  # our scores are fractions; the paper prints percent

# paper column -> (benchmark, metric) of our tidy results (docs/EVALUATION.md)
COLUMN_METRICS = {
    "aime25": ("aime", "avg@32/2025"),
    "aime26": ("aime", "avg@32/2026"),
    "gpqa_diamond": ("gpqa_diamond", "accuracy"),
    "lcb_v6": ("livecodebench", "pass@1"),
    "rg_math": ("reasoning_gym_hard", "math"),
    "rg_algorithmic": ("reasoning_gym_hard", "algorithmic"),
    "rg_cognition": ("reasoning_gym_hard", "cognition"),
    "rg_logic": ("reasoning_gym_hard", "logic"),
    "gem": ("gem_games", "win_rate"),
    "bfcl_base": ("bfcl_multi_turn", "accuracy/base"),
    "bfcl_miss_func": ("bfcl_multi_turn", "accuracy/miss_func"),
    "bfcl_miss_param": ("bfcl_multi_turn", "accuracy/miss_param"),
    "bfcl_long_ctx": ("bfcl_multi_turn", "accuracy/long_context"),
    "tau2_retail": ("tau2", "pass^1/retail"),
    "tau2_airline": ("tau2", "pass^1/airline"),
    "tau2_telecom": ("tau2", "pass^1/telecom"),
    "ace_multi_step": ("acebench", "multi_step"),
    "ace_multi_turn": ("acebench", "multi_turn"),
}


# ----- the run mapping (paper/table_runs.yaml) --------------------------------------------------------------
BENCHMARK_TABLES = ("table1", "table2", "table3", "table6")
_TOP_KEYS = ("default_step", "metrics", "tables")
_TABLE_KEYS = {**{name: ("rows",) for name in BENCHMARK_TABLES}, "table7": ("run", "phases"),
               "table8": ("rows", "field", "vendi", "collapsed_below")}
_ROW_KEYS = ("reported", "run", "step", "base")
VENDI_DEFAULTS = {"size": 100, "draws": 20, "balance_by": "skill", "seed": 0}
BALANCE_BY = ("skill", "none")


def mapping_error(path, key: str, message: str) -> ReportInputError:
    return ReportInputError(f"{path}: key '{key}' {message}")


def check_keys(path, key: str, data: dict, allowed: Sequence[str]) -> None:
    extra = sorted(set(data) - set(allowed), key=str)
    if extra:
        where = f"{key}.{extra[0]}" if key else str(extra[0])
        raise mapping_error(path, where, f"is not a known key (known: {', '.join(allowed)})")


def mapping_step_rule(path, key: str, value):
    if isinstance(value, bool) or not (value in STEP_WORDS or (isinstance(value, int) and value >= 0)):
        raise mapping_error(path, key, f"must be one of {', '.join(STEP_WORDS)} or a step number >= 0, got {value!r}")
    return value


def mapping_runs(path, key: str, value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) and value.strip():
        return [value]
    if (isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value)
            and len(set(value)) == len(value)):
        return list(value)
    raise mapping_error(path, key, f"must be a run name, a list of distinct run names or null, got {value!r}")


def _row_key(path, key: str, value) -> dict:
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        raise mapping_error(path, key, f"must be a mapping of reported column -> value, got {value!r}")
    if any(v is None or isinstance(v, (dict, list)) for v in value.values()):
        raise mapping_error(path, key, f"values must be plain text, got {value!r}")
    return {k: str(v) for k, v in value.items()}


def mapping_int(path, key: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise mapping_error(path, key, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _row_entries(path, key: str, section: dict, allowed: Sequence[str]) -> list[tuple[str, dict]]:
    """(where, entry) of each entry of ``<key>.rows``, checked to be mappings with only ``allowed`` keys."""
    rows = section.get("rows")
    if not isinstance(rows, list):
        raise mapping_error(path, f"{key}.rows", f"must be a list of row entries, got {rows!r}")
    out = []
    for i, row in enumerate(rows):
        where = f"{key}.rows[{i}]"
        if not isinstance(row, dict):
            raise mapping_error(path, where, f"must be a mapping, got {row!r}")
        check_keys(path, where, row, allowed)
        out.append((where, row))
    return out


def _benchmark_rows(path, key: str, section: dict, default_step) -> list[dict]:
    out = []
    for where, row in _row_entries(path, key, section, _ROW_KEYS):
        if "reported" not in row:
            raise mapping_error(path, f"{where}.reported", "is missing")
        if "run" not in row:
            raise mapping_error(path, f"{where}.run", "is missing (write `run: null` for a row we have no run for)")
        base = row.get("base")
        out.append({"where": where, "reported": _row_key(path, f"{where}.reported", row["reported"]),
                    "runs": mapping_runs(path, f"{where}.run", row["run"]),
                    "step": mapping_step_rule(path, f"{where}.step", row.get("step", default_step)),
                    "base": None if base is None else _row_key(path, f"{where}.base", base)})
    return out


def _table7(path, key: str, section: dict) -> dict:
    runs = mapping_runs(path, f"{key}.run", section.get("run"))
    if len(runs) > 1:
        raise mapping_error(path, f"{key}.run", f"must name one run (or null), got {runs!r}")
    phases = section.get("phases")
    if not isinstance(phases, dict) or not phases:
        raise mapping_error(path, f"{key}.phases",
                   f"must map each reported phase column to [first step, last step], got {phases!r}")
    parsed = {}
    for name, bounds in phases.items():
        where = f"{key}.phases.{name}"
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise mapping_error(path, where, f"must be [first step, last step], got {bounds!r}")
        first, last = (mapping_int(path, where, b, 0) for b in bounds)
        if first > last:
            raise mapping_error(path, where, f"first step {first} is after last step {last}")
        parsed[str(name)] = (first, last)
    return {"runs": runs, "phases": parsed}


def _table8(path, key: str, section: dict) -> dict:
    parsed_rows = []
    for where, row in _row_entries(path, key, section, ("reported", "run")):
        if "reported" not in row or "run" not in row:
            raise mapping_error(path, where, "needs both 'reported' and 'run' (null for no run)")
        runs = mapping_runs(path, f"{where}.run", row["run"])
        if len(runs) > 1:
            raise mapping_error(path, f"{where}.run", f"must name one run (or null), got {runs!r}")
        parsed_rows.append({"where": where, "reported": _row_key(path, f"{where}.reported", row["reported"]),
                            "runs": runs})
    vendi = section.get("vendi") or {}
    if not isinstance(vendi, dict):
        raise mapping_error(path, f"{key}.vendi", f"must be a mapping, got {vendi!r}")
    check_keys(path, f"{key}.vendi", vendi, tuple(VENDI_DEFAULTS))
    vendi = {**VENDI_DEFAULTS, **vendi}
    vendi["size"] = mapping_int(path, f"{key}.vendi.size", vendi["size"], 2)
    vendi["draws"] = mapping_int(path, f"{key}.vendi.draws", vendi["draws"], 1)
    vendi["seed"] = mapping_int(path, f"{key}.vendi.seed", vendi["seed"], 0)
    if vendi["balance_by"] not in BALANCE_BY:
        raise mapping_error(path, f"{key}.vendi.balance_by",
                   f"must be one of {', '.join(BALANCE_BY)}, got {vendi['balance_by']!r}")
    below = section.get("collapsed_below", 0.2)
    if isinstance(below, bool) or not isinstance(below, (int, float)) or not 0.0 <= below <= 1.0:
        raise mapping_error(path, f"{key}.collapsed_below", f"must be a number in [0, 1], got {below!r}")
    text_field = section.get("field", "code")
    if not isinstance(text_field, str) or not text_field:
        raise mapping_error(path, f"{key}.field", f"must be an archive field name, got {text_field!r}")
    return {"rows": parsed_rows, "vendi": vendi, "collapsed_below": float(below), "field": text_field}


def load_table_runs(path: str | Path) -> dict:
    """The validated run mapping (``paper/table_runs.yaml``; its keys are documented in the file itself).

    Returns ``{"path", "default_step", "metrics": {column: (benchmark, metric)}, "tables": {...}}``. A
    missing file, bad YAML, an unknown key or a bad value raises :class:`ReportInputError` naming the file
    and the key.
    """
    path = Path(path)
    data = read_yaml(path, "run mapping")
    if not isinstance(data, dict):
        raise ReportInputError(f"{path} must hold a mapping at the top level")
    check_keys(path, "", data, _TOP_KEYS)
    default_step = mapping_step_rule(path, "default_step", data.get("default_step", "selected"))
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise mapping_error(path, "metrics", f"must be a mapping of paper column -> 'benchmark:metric', got {metrics!r}")
    parsed_metrics = {}
    for column, spec in metrics.items():
        if column not in COLUMN_METRICS:
            raise mapping_error(path, f"metrics.{column}", f"is not a paper column (known: {', '.join(COLUMN_METRICS)})")
        benchmark, _, metric = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if not benchmark or not metric:
            raise mapping_error(path, f"metrics.{column}", f"must be 'benchmark:metric', got {spec!r}")
        parsed_metrics[column] = (benchmark, metric)
    tables = data.get("tables") or {}
    if not isinstance(tables, dict):
        raise mapping_error(path, "tables", f"must be a mapping of table name -> section, got {tables!r}")
    check_keys(path, "tables", tables, tuple(_TABLE_KEYS))
    parsed_tables = {}
    for name, section in tables.items():
        key = f"tables.{name}"
        if not isinstance(section, dict):
            raise mapping_error(path, key, f"must be a mapping, got {section!r}")
        check_keys(path, key, section, _TABLE_KEYS[name])
        if name in BENCHMARK_TABLES:
            parsed_tables[name] = {"rows": _benchmark_rows(path, key, section, default_step)}
        elif name == "table7":
            parsed_tables[name] = _table7(path, key, section)
        else:
            parsed_tables[name] = _table8(path, key, section)
    return {"path": str(path), "default_step": default_step, "metrics": parsed_metrics, "tables": parsed_tables}


def table_section(mapping: dict, table: str) -> dict:
    section = mapping["tables"].get(table)
    if section is None:
        raise ReportInputError(f"{mapping['path']}: key 'tables.{table}' is missing")
    return section


def mapped_runs(mapping: dict, table: str) -> list[str]:
    """Every run name the mapping gives for ``table`` (sorted; [] when the table has no section)."""
    section = mapping["tables"].get(table) or {}
    rows = section.get("rows", [section] if "runs" in section else [])
    return sorted({run for row in rows for run in row["runs"]})


def step_rules(mapping: dict, table: str) -> dict[str, set]:
    """run -> the step rules the mapping uses for it in ``table`` (tables 7 and 8 read whole runs: {'all'})."""
    section = mapping["tables"].get(table) or {}
    rules: dict[str, set] = {}
    for row in section.get("rows", [section] if "runs" in section else []):
        for run in row["runs"]:
            rules.setdefault(run, set()).add(row.get("step", "all"))
    return rules


# ----- run folders: which files a table reads, and a cheap fingerprint of them ------------------------------
_EVAL_FILES = ("summary.json", "selected_checkpoint.json", "eval/*/step_*.json")
RUN_FILE_PATTERNS = {**{name: _EVAL_FILES for name in BENCHMARK_TABLES},
                     "table7": ("summary.json", "metrics.jsonl", "envs/set_*.json"),
                     "table8": ("summary.json", "envs/set_*.json")}


def run_files(runs_root: str | Path, runs: Sequence[str], table: str) -> list[Path]:
    """The files of the named run folders that the script of ``table`` reads (those that exist), sorted."""
    found = set()
    for run in runs:
        folder = Path(runs_root) / run
        if folder.is_dir():
            for pattern in RUN_FILE_PATTERNS[table]:
                found.update(p for p in folder.glob(pattern) if p.is_file())
    return sorted(found)


def run_fingerprint(runs_root: str | Path, runs: Sequence[str], table: str) -> str:
    """The Snakemake parameter of a table's rule: :func:`spade.paper.report.files_fingerprint` of :func:`run_files`."""
    return files_fingerprint(runs, run_files(runs_root, runs, table))


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


# ----- our results -----------------------------------------------------------------------------------------
SOURCE = "source"


def _empty_results() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in TIDY_COLUMNS + [SOURCE]})


def load_results(results: Sequence[str | Path] = (), runs_root: str | Path | None = None,
                 runs: Sequence[str] = ()) -> tuple[pd.DataFrame, list[Path]]:
    """Our evaluation results as one tidy table with a ``source`` column, and the files read.

    ``results``: tidy results CSVs (:func:`spade.paper.report.read_tidy`); ``runs``: run names whose folders under
    ``runs_root`` are read (every evaluation result in them; a missing or empty folder is skipped: that run
    has not been done). Training rows are dropped. The same (run, step, benchmark, metric) given twice with
    different values raises :class:`ReportInputError` naming both sources.
    """
    frames, inputs = [], []
    for csv in map(Path, results):
        frame = read_tidy(csv)
        frame[SOURCE] = str(csv)
        frames.append(frame)
        inputs.append(csv)
    if runs_root is not None:
        for run in runs:
            folder = Path(runs_root) / run
            files = eval_files(folder)
            if not files:
                continue
            frame = tidy_results([folder], files)
            names = sorted(set(frame["run"].dropna()) - {run})
            if names:
                raise ReportInputError(f"run folder {folder} holds results of run(s) {', '.join(names)}; the run "
                                       "mapping names runs by their folder under the runs root")
            by_key = {(p.parent.name, int(p.stem.split("_")[1])): str(p) for p in files}
            frame[SOURCE] = [by_key.get((b, int(s)), str(folder)) for b, s in zip(frame["benchmark"], frame["step"])]
            frames.append(frame)
            inputs += files + [p for p in (folder / "summary.json",) if p.is_file()]
    frames = [f[f["benchmark"] != TRAINING_BENCHMARK] for f in frames]
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty_results(), inputs
    table = pd.concat(frames, ignore_index=True)
    for _, group in table[table.duplicated(SORT_KEYS, keep=False)].groupby(SORT_KEYS, sort=False):
        values = group["value"].astype(float)
        if (values - values.iloc[0]).abs().max() > 1e-12:
            first = group.iloc[0]
            raise ReportInputError(
                f"run {first['run']!r} step {first['step']} {first['benchmark']} {first['metric']} has different "
                f"values in {' and '.join(sorted(set(group[SOURCE])))}")
    table = table.drop_duplicates(SORT_KEYS, keep="first").reset_index(drop=True)
    return table, inputs


def _plain(value):
    """A JSON-friendly scalar (NaN / NA -> None)."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    return value


class ResultIndex:
    """Look-ups of single results in a tidy table by (run, step, benchmark, metric)."""

    def __init__(self, tidy: pd.DataFrame):
        self.tidy = tidy
        self._rows = {(r["run"], int(r["step"]), r["benchmark"], r["metric"]): r
                      for r in tidy.to_dict("records")}
        self._steps: dict[str, set] = {}
        for run, step, _, _ in self._rows:
            self._steps.setdefault(run, set()).add(step)

    def get(self, run: str, step: int, benchmark: str, metric: str) -> dict | None:
        row = self._rows.get((run, int(step), benchmark, metric))
        if row is None:
            return None
        return {key: _plain(row.get(key)) for key in TIDY_COLUMNS + [SOURCE]}

    def steps(self, run: str) -> list[int]:
        return sorted(self._steps.get(run, ()))


@dataclass(frozen=True)
class StepChoice:
    """The checkpoint a step rule picks for a run: ``step`` None when it cannot be resolved (``reason``)."""

    run: str
    rule: object
    step: int | None
    source: str | None = None
    reason: str = ""


def resolve_step(run: str, rule, results: ResultIndex, runs_root: str | Path | None = None) -> StepChoice:
    """The step of ``run`` that the rule picks (see ``paper/table_runs.yaml``).

    ``base``: 0; an integer: itself; ``last``: the largest step > 0 with any evaluation result of the run;
    ``selected``: ``<runs_root>/<run>/selected_checkpoint.json`` (absent: unresolved; malformed:
    :class:`ReportInputError` naming the file).
    """
    if rule == "base":
        return StepChoice(run, rule, 0)
    if isinstance(rule, int) and not isinstance(rule, bool):
        return StepChoice(run, rule, rule)
    if rule == "last":
        trained = [s for s in results.steps(run) if s > 0]
        if not trained:
            return StepChoice(run, rule, None, reason=f"run {run} has no evaluation of a trained checkpoint")
        return StepChoice(run, rule, max(trained))
    if rule != "selected":
        raise ReportInputError(f"unknown step rule {rule!r}")
    if runs_root is None:
        return StepChoice(run, rule, None, reason=f"run {run}: no runs folder given to find its selected checkpoint")
    path = Path(runs_root) / run / "selected_checkpoint.json"
    if not path.is_file():
        return StepChoice(run, rule, None, reason=f"run {run} has no {path.name} (not selected yet, or not run)")
    record = read_json(path)
    step = record.get("step") if isinstance(record, dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ReportInputError(f"{path}: key 'step' must be a step number, got {step!r}")
    return StepChoice(run, rule, step, str(path))


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


def _signed(value: float, decimals: int) -> str:
    text = f"{value:+.{decimals}f}"
    return f"{0.0:+.{decimals}f}" if float(text) == 0 else text


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# ----- Tables 1, 2, 3 and 6: benchmark scores ----------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """A value column: ``metric`` (a paper column of :data:`COLUMN_METRICS`), ``mean`` (of ``parts``),
    ``gain`` (``parts[0]`` minus that of the base row) or ``step`` (the checkpoint used)."""

    key: str
    header: str
    kind: str = "metric"
    parts: tuple = ()


@dataclass(frozen=True)
class BenchmarkTable:
    name: str
    caption: str
    label: str
    key_columns: tuple
    label_columns: tuple  # (reported column, header)
    columns: tuple
    published: tuple | None = None  # (column, value): rows of published reference systems
    backbone: str = ""  # the paper's backbone of every row; "" = read per row by row_backbone

    def value_columns(self) -> list[str]:
        return [c.key for c in self.columns]

    def row_backbone(self, row: dict) -> str:
        """The backbone a reported row belongs to (Table 1: its column; Table 2: the model's first word)."""
        if self.backbone:
            return self.backbone
        return row["backbone"] if "backbone" in row else row["model"].split(" ")[0]


GAMES_COLUMNS = (Column("aime25", "AIME25"), Column("aime26", "AIME26"), Column("gpqa_diamond", "GPQA-D"),
                 Column("lcb_v6", "LCB-v6"), Column("rg_math", "RG-Math"), Column("rg_algorithmic", "RG-Algo"),
                 Column("rg_cognition", "RG-Cog"), Column("rg_logic", "RG-Logic"))
GAMES_KEYS = tuple(c.key for c in GAMES_COLUMNS)
GAMES_AVG = Column("avg", "Avg.", "mean", GAMES_KEYS)
GAIN = Column("delta_vs_base", "Gain vs base", "gain", ("avg",))

PAPER_30B = "Qwen3-30B-A3B-Instruct-2507"  # the backbone of the paper's Tables 3, 6, 7 and 8

TABLE1 = BenchmarkTable(
    "table1", "Table 1: transfer of games training to reasoning benchmarks (percent)", "tab:games",
    ("backbone", "method"), (("backbone", "Backbone"), ("method", "Method")), GAMES_COLUMNS + (GAMES_AVG, GAIN))

TABLE2 = BenchmarkTable(
    "table2", "Table 2: multi-turn tool use (percent)", "tab:tool-use", ("section", "model"), (("model", "Model"),),
    (Column("bfcl_base", "BFCL base"), Column("bfcl_miss_func", "miss func"), Column("bfcl_miss_param", "miss param"),
     Column("bfcl_long_ctx", "long ctx"),
     Column("bfcl_avg", "BFCL avg", "mean", ("bfcl_base", "bfcl_miss_func", "bfcl_miss_param", "bfcl_long_ctx")),
     Column("tau2_retail", "tau2 retail"), Column("tau2_airline", "airline"), Column("tau2_telecom", "telecom"),
     Column("tau2_avg", "tau2 avg", "mean", ("tau2_retail", "tau2_airline", "tau2_telecom")),
     Column("ace_multi_step", "ACE multi-step"), Column("ace_multi_turn", "multi-turn"),
     Column("ace_avg", "ACE avg", "mean", ("ace_multi_step", "ace_multi_turn")),
     Column("avg", "Avg.", "mean", ("bfcl_avg", "tau2_avg", "ace_avg")), GAIN),
    published=("section", "reference"))

TABLE3 = BenchmarkTable(
    "table3", "Table 3: ablations at 30B (percent)", "tab:ablations", ("setting",),
    (("setting", "Setting"), ("ed_design", "ED design"), ("ed_trained", "ED trained"),
     ("corpus_grounding", "Corpus"), ("env_memory", "Memory")), GAMES_COLUMNS + (GAMES_AVG,),
    backbone=PAPER_30B)

TABLE6 = BenchmarkTable(
    "table6", "Table 6: all ablations at 30B, with the checkpoint used and the GEM games (percent)",
    "tab:ablations-full", ("setting",), (("setting", "Setting"),),
    (Column("checkpoint", "Checkpoint", "step"),) + GAMES_COLUMNS + (Column("gem", "GEM"), GAMES_AVG),
    backbone=PAPER_30B)

BENCHMARK_SPECS = {spec.name: spec for spec in (TABLE1, TABLE2, TABLE3, TABLE6)}


def _row_name(spec: BenchmarkTable, key: tuple) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(spec.key_columns, key))


def _check_row_key(spec: BenchmarkTable, mapping: dict, where: str, given: dict, known: set) -> tuple:
    if set(given) != set(spec.key_columns):
        raise ReportInputError(f"{mapping['path']}: key '{where}' must give exactly the column(s) "
                               f"{', '.join(spec.key_columns)}, got {', '.join(given)}")
    key = tuple(given[c] for c in spec.key_columns)
    if key not in known:
        raise ReportInputError(f"{mapping['path']}: key '{where}' ({_row_name(spec, key)}) matches no row of the "
                               "reported table")
    return key


def ours_row(spec: BenchmarkTable, entry: dict, results: ResultIndex, runs_root, metrics: dict) -> dict:
    """Our values of one mapped row (column -> number or None), their provenance and what is missing."""
    choices = [resolve_step(run, entry["step"], results, runs_root) for run in entry["runs"]]
    values, cells, missing = {}, {}, []
    if not choices:
        missing.append("no run mapped")
    missing += [c.reason for c in choices if c.step is None]
    resolved = bool(choices) and all(c.step is not None for c in choices)
    if resolved:
        missing += [f"run {c.run} has no evaluation results" for c in choices if not results.steps(c.run)]
    absent = []  # metrics a run with results lacks at the chosen step
    for column in spec.columns:
        if column.kind == "metric":
            benchmark, metric = metrics[column.key]
            found = [results.get(c.run, c.step, benchmark, metric) for c in choices] if resolved else []
            if resolved and all(found):
                values[column.key] = _mean([r["value"] for r in found]) * PERCENT
                cells[column.key] = {"kind": "metric", "benchmark": benchmark, "metric": metric, "scale": PERCENT,
                                     "results": found}
            else:
                values[column.key] = None
                absent += [f"{benchmark}:{metric}" for c, r in zip(choices, found)
                           if r is None and results.steps(c.run)]
        elif column.kind == "mean":
            parts = [values[p] for p in column.parts]
            values[column.key] = _mean(parts) if all(v is not None for v in parts) else None
            if values[column.key] is not None:
                cells[column.key] = {"kind": "mean", "of": list(column.parts)}
        elif column.kind == "step":
            ran = resolved and all(results.steps(c.run) for c in choices)
            values[column.key] = [c.step for c in choices] if ran else None
            if ran:
                cells[column.key] = {"kind": "step", "rule": entry["step"],
                                     "sources": [c.source for c in choices if c.source]}
    if absent:
        steps = "/".join(str(c.step) for c in choices)
        missing.append(f"no result at step {steps} for {', '.join(dict.fromkeys(absent))}")
    return {"values": values, "cells": cells, "missing": missing, "choices": choices}


def build_benchmark_table(spec: BenchmarkTable, mapping: dict, reported_path: str | Path, results: ResultIndex,
                          runs_root: str | Path | None = None) -> tuple[Table, list[dict]]:
    """Table 1, 2, 3 or 6: per reported row, our line, the reported line and the difference line.

    Returns the table and the provenance of each of our cells.
    """
    section = table_section(mapping, spec.name)
    metrics = {**COLUMN_METRICS, **mapping["metrics"]}
    label_keys = [c for c, _ in spec.label_columns]
    columns = list(dict.fromkeys(list(spec.key_columns) + label_keys + spec.value_columns()))
    rows = read_reported(reported_path, columns)
    keys = [tuple(row[c] for c in spec.key_columns) for row in rows]
    if len(set(keys)) != len(keys):
        raise ReportInputError(f"{reported_path}: two rows share the key {spec.key_columns}")
    published = {k for k, row in zip(keys, rows) if spec.published and row[spec.published[0]] == spec.published[1]}
    ours_keys = set(keys) - published
    entries = {}
    for entry in section["rows"]:
        key = _check_row_key(spec, mapping, f"{entry['where']}.reported", entry["reported"], ours_keys)
        if key in entries:
            raise ReportInputError(f"{mapping['path']}: key '{entry['where']}.reported' repeats the row "
                                   f"{_row_name(spec, key)}")
        if entry["base"] is not None:
            if not any(c.kind == "gain" for c in spec.columns):
                raise ReportInputError(f"{mapping['path']}: key '{entry['where']}.base' is not used by {spec.name} "
                                       "(it has no gain column)")
            entry = {**entry, "base_key": _check_row_key(spec, mapping, f"{entry['where']}.base", entry["base"],
                                                         ours_keys)}
        entries[key] = entry
    unmapped = [key for key in keys if key in ours_keys and key not in entries]
    if unmapped:
        raise ReportInputError(f"{mapping['path']}: key 'tables.{spec.name}.rows' has no entry for the reported row "
                               f"{_row_name(spec, unmapped[0])} (write `run: null` if we have no run for it)")

    ours = {key: ours_row(spec, entry, results, runs_root, metrics) for key, entry in entries.items()}
    for key, entry in entries.items():  # gains need every row's average first
        for column in (c for c in spec.columns if c.kind == "gain"):
            base_key = entry.get("base_key")
            if base_key is None:
                ours[key]["values"][column.key] = BLANK
                continue
            mine, base = ours[key]["values"][column.parts[0]], ours[base_key]["values"][column.parts[0]]
            ours[key]["values"][column.key] = mine - base if mine is not None and base is not None else None
            if ours[key]["values"][column.key] is not None:
                ours[key]["cells"][column.key] = {"kind": "gain", "of": column.parts[0],
                                                  "base_row": _row_name(spec, base_key)}

    offs, off_backbones = [], []  # runs whose values sit under a backbone/step budget they did not train
    groups, cells, missing = [], [], []
    for line_no, (key, row) in enumerate(zip(keys, rows), start=2):
        labels = [row[c] for c in label_keys]
        reported_text = [row[c.key] or BLANK for c in spec.columns]
        if key in published:  # one group for all published rows
            if not groups or groups[-1][-1].kind != PUBLISHED:
                groups.append([])
            groups[-1].append(Line(labels, PUBLISHED, reported_text))
            continue
        mine = ours[key]
        backbone = spec.row_backbone(row)
        base_row = entries[key]["step"] == "base"  # the untrained model: only the model must match
        off = off_scale(runs_root, entries[key]["runs"], backbone, model_only=base_row)
        ours_text, diff_text = [], []
        for column in spec.columns:
            value = mine["values"][column.key]
            reported = reported_number(reported_path, line_no, column.key, row[column.key])
            if column.kind == "step":
                ours_text.append(NOT_RUN if value is None else "/".join(map(str, value)))
                diff_text.append(BLANK)
            elif value is BLANK:
                ours_text.append(BLANK)
                diff_text.append(BLANK)
            elif value is None:
                ours_text.append(NOT_RUN)
                diff_text.append(NOT_RUN)
            else:
                ours_text.append(f"{value:.1f}")
                diff_text.append(BLANK if reported is None or off else _signed(value - reported, 1))
            if value is not None and value is not BLANK:
                cells.append({"row": _row_name(spec, key), "column": column.key, "value": value,
                              "shown": ours_text[-1], "reported": reported, **mine["cells"].get(column.key, {})})
        steps = sorted({c.step for c in mine["choices"] if c.step is not None and results.steps(c.run)})
        detail = ("step " if len(steps) == 1 else "steps ") + "/".join(map(str, steps)) if steps else ""
        if len(entries[key]["runs"]) > 1:
            detail += f"{', ' if detail else ''}mean of {len(entries[key]['runs'])} runs"
        if steps:  # a value of ours is shown: name the run(s) and, off the paper's scale, say so
            detail = ", ".join(f"run {run}" for run in entries[key]["runs"]) + f", {detail}"
            if off:
                detail += "; TOY SCALE: " + "; ".join(s.label() for s in off) + ", not comparable"
                offs += off
                off_backbones.append(backbone)
        groups.append([Line(labels, OURS, ours_text, detail), Line([""] * len(labels), REPORTED, reported_text),
                       Line([""] * len(labels), DIFF, diff_text)])
        if mine["missing"]:
            runs = ", ".join(entries[key]["runs"])
            label = " / ".join(text for text in labels if text) + (f" (run {runs})" if runs else "")
            missing.append(f"{label}: {'; '.join(mine['missing'])}")
    table = Table(spec.caption, spec.label, [h for _, h in spec.label_columns], [c.header for c in spec.columns],
                  groups, benchmark_notes(spec, mapping, reported_path), missing,
                  banner=banner(offs, off_backbones))
    return table, cells


def benchmark_notes(spec: BenchmarkTable, mapping: dict, reported_path) -> list[str]:
    notes = [
        (f"ours: our run for the row (run mapping {shown_path(mapping['path'])}) at the checkpoint its step rule "
         "picks; scores in percent, averages are unweighted means of the shown columns as in the paper."),
        (f"reported: the paper's value ({shown_path(reported_path)}); Δ: ours − reported in points, from "
        "unrounded ours."),
        "not run: no result of ours for that cell (never filled from elsewhere); —: no value or no difference.",
    ]
    if spec.published:
        notes.append("reported (published): numbers other systems published, as the paper quotes them; we do not "
                     "run those systems.")
    return notes


def benchmark_table_main(spec: BenchmarkTable, script: str, argv=None) -> None:
    """The command line of the scripts of Tables 1, 2, 3 and 6."""
    parser = argparse.ArgumentParser(description=f"{spec.caption}, ours beside the paper's")
    parser.add_argument("--mapping", type=Path, required=True, help="run mapping (paper/table_runs.yaml)")
    parser.add_argument("--reported", type=Path, required=True, help="reported CSV (paper/reported/...)")
    parser.add_argument("--runs-root", type=Path, help="folder of the run folders (results/runs): their eval "
                        "results and selected_checkpoint.json files are read")
    parser.add_argument("--results", type=Path, nargs="*", default=[], help="tidy results CSVs to read as well")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    mapping = load_table_runs(args.mapping)
    runs = mapped_runs(mapping, spec.name)
    tidy, inputs = load_results(args.results, args.runs_root, runs)
    results = ResultIndex(tidy)
    table, cells = build_benchmark_table(spec, mapping, args.reported, results, args.runs_root)
    selected = [args.runs_root / run / "selected_checkpoint.json" for run in runs] if args.runs_root else []
    inputs = [args.mapping, args.reported, *inputs, *[p for p in selected if p.is_file()]]
    used = tidy[tidy["run"].isin(runs)] if len(tidy) else None
    outputs = write_table(table, args.out, script, inputs, cells, used, mapping=str(args.mapping),
                          paper_table=spec.name)
    report_written(outputs, table)


def report_written(outputs: Sequence[Path], table: Table) -> None:
    print(f"wrote {', '.join(map(str, outputs))}")
    for item in table.missing:
        print(f"not run / no data: {item}")


# ----- Table 5: hyperparameters from the recipes --------------------------------------------------------------
@dataclass(frozen=True)
class Hyperparameter:
    """One row of Table 5: how the recipe value is written (``text``), the numbers compared with the paper's
    (``numbers``; the reported numbers are read from its text, outside parentheses when ``strip``), an on/off
    setting compared with the paper's yes/on/no/off (``flag``), and the config keys it reads."""

    key: str
    keys: tuple
    text: Callable
    numbers: Callable = lambda c: ()
    flag: Callable | None = None
    strip: bool = True
    comparable: bool = True


def _g(x) -> str:
    return f"{x:g}"


HYPERPARAMETERS = (
    Hyperparameter("learning_rate", ("train.learning_rate",), lambda c: f"{_g(c.train.learning_rate)} (constant)",
                   lambda c: (c.train.learning_rate,)),
    Hyperparameter("optimizer", ("train.adam_beta1", "train.adam_beta2", "train.weight_decay"),
                   lambda c: f"AdamW, betas ({_g(c.train.adam_beta1)}, {_g(c.train.adam_beta2)}), weight decay "
                             f"{_g(c.train.weight_decay)}",
                   lambda c: (c.train.adam_beta1, c.train.adam_beta2, c.train.weight_decay), strip=False),
    Hyperparameter("kl_coef", ("train.kl_coef",), lambda c: _g(c.train.kl_coef), lambda c: (c.train.kl_coef,)),
    Hyperparameter("clip_eps_low_high", ("train.eps_low", "train.eps_high"),
                   lambda c: f"{_g(c.train.eps_low)}/{_g(c.train.eps_high)}",
                   lambda c: (c.train.eps_low, c.train.eps_high)),
    Hyperparameter("truncated_importance_sampling", ("train.tis",), lambda c: "yes" if c.train.tis else "no",
                   flag=lambda c: c.train.tis),
    Hyperparameter("reward_normalization", (), lambda c: "not a config key (z-score per group, spade.core.advantages)",
                   comparable=False),
    Hyperparameter("rollout_batch_envs", ("selfplay.envs_per_skill", "selfplay.active_skills"),
                   lambda c: str(c.selfplay.envs_per_skill * c.selfplay.active_skills),
                   lambda c: (c.selfplay.envs_per_skill * c.selfplay.active_skills,)),
    Hyperparameter("global_batch", ("train.global_batch",), lambda c: str(c.train.global_batch),
                   lambda c: (c.train.global_batch,)),
    Hyperparameter("group_size", ("selfplay.group_size",), lambda c: str(c.selfplay.group_size),
                   lambda c: (c.selfplay.group_size,)),
    Hyperparameter("total_rollouts", ("selfplay.total_steps",), lambda c: str(c.selfplay.total_steps),
                   lambda c: (c.selfplay.total_steps,)),
    Hyperparameter("envs_per_rollout", ("selfplay.envs_per_skill", "selfplay.active_skills", "selfplay.skills"),
                   lambda c: f"{c.selfplay.envs_per_skill * c.selfplay.active_skills} ({c.selfplay.envs_per_skill} x "
                             f"{c.selfplay.active_skills} active skills of {len(c.selfplay.skills)})",
                   lambda c: (c.selfplay.envs_per_skill * c.selfplay.active_skills, c.selfplay.envs_per_skill,
                              c.selfplay.active_skills, len(c.selfplay.skills)), strip=False),
    Hyperparameter("regeneration_interval_k", ("selfplay.regen_interval",), lambda c: str(c.selfplay.regen_interval),
                   lambda c: (c.selfplay.regen_interval,)),
    Hyperparameter("ed_temperature", ("designer.temperature",), lambda c: _g(c.designer.temperature),
                   lambda c: (c.designer.temperature,)),
    Hyperparameter("ed_max_tokens", ("designer.max_new_tokens",), lambda c: str(c.designer.max_new_tokens),
                   lambda c: (c.designer.max_new_tokens,)),
    Hyperparameter("ra_temperature", ("agent.temperature",), lambda c: _g(c.agent.temperature),
                   lambda c: (c.agent.temperature,)),
    Hyperparameter("ra_max_tokens", ("agent.max_new_tokens",), lambda c: str(c.agent.max_new_tokens),
                   lambda c: (c.agent.max_new_tokens,)),
    Hyperparameter("max_turns", ("agent.max_turns",), lambda c: str(c.agent.max_turns), lambda c: (c.agent.max_turns,)),
    Hyperparameter("max_context", ("agent.max_context_tokens",), lambda c: str(c.agent.max_context_tokens),
                   lambda c: (c.agent.max_context_tokens,)),
    Hyperparameter("ed_reward_blend",
                   ("designer.reward", "reward.plateau_weight", "reward.band_low", "reward.band_high",
                    "reward.regret_weight"),
                   lambda c: (f"plateau {_g(c.reward.plateau_weight)} band [{_g(c.reward.band_low)}, "
                              f"{_g(c.reward.band_high)}] + floored regret {_g(c.reward.regret_weight)}"
                              if c.designer.reward == "regret" else f"{c.designer.reward} (not the regret blend)"),
                   lambda c: ((c.reward.plateau_weight, c.reward.band_low, c.reward.band_high, c.reward.regret_weight)
                              if c.designer.reward == "regret" else (math.nan,))),
    Hyperparameter("regret_scale", ("reward.regret_scale",), lambda c: _g(c.reward.regret_scale),
                   lambda c: (c.reward.regret_scale,)),
    Hyperparameter("plateau_ramp", ("reward.ramp",), lambda c: _g(c.reward.ramp), lambda c: (c.reward.ramp,)),
    Hyperparameter("ed_update_delay", ("selfplay.regen_interval",),
                   lambda c: f"{c.selfplay.regen_interval} rollouts (= k)", lambda c: (c.selfplay.regen_interval,)),
    Hyperparameter("corpus", ("corpus.enabled", "corpus.offline_max_docs"),
                   lambda c: f"{c.corpus.offline_max_docs} docs at most" if c.corpus.enabled else "off",
                   lambda c: (c.corpus.offline_max_docs if c.corpus.enabled else math.nan,)),
    Hyperparameter("env_memory", ("memory.enabled", "memory.cap"),
                   lambda c: f"{'on' if c.memory.enabled else 'off'} (cap {c.memory.cap})",
                   lambda c: (c.memory.cap,), flag=lambda c: c.memory.enabled, strip=False),
)
HYPERPARAMETER_KEYS = {h.key: h for h in HYPERPARAMETERS}

_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(k?)(?![\w.])")
_TOOL_USE = re.compile(r"tool use\s+(\d+(?:\.\d+)?)")
_FLAG_WORDS = {"yes": True, "on": True, "no": False, "off": False}


def _strip_parentheses(text: str) -> str:
    while True:
        stripped = re.sub(r"\([^()]*\)", "", text)
        if stripped == text:
            return text
        text = stripped


def text_numbers(text: str) -> list[float]:
    """The numbers written in a reported cell, in order ("15k" = 15000; digits inside words such as
    "Qwen3-8B" are not numbers)."""
    return [float(number) * (1000.0 if k else 1.0) for number, k in _NUMBER.findall(text)]


def compare_hyperparameter(spec: Hyperparameter, config, reported: str, tool_use: bool = False) -> str:
    """``same`` when the recipe's numbers (and on/off setting) are the paper's, ``differs`` otherwise, ``n/a``
    where the value is not a config key. For the tool-use recipe a "tool use N" remark in the paper's text
    replaces its first number."""
    if not spec.comparable:
        return "n/a"
    if not reported:
        return BLANK
    expected = text_numbers(_strip_parentheses(reported) if spec.strip else reported)
    if tool_use and (remark := _TOOL_USE.search(reported)):
        expected = [float(remark.group(1))] + expected[1:]
    ours = spec.numbers(config)
    same = len(expected) >= len(ours) and all(
        math.isclose(float(a), b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(ours, expected))
    if spec.flag is not None:
        words = reported.strip().split()
        wanted = _FLAG_WORDS.get(words[0].strip(",;").lower()) if words else None
        same = same and wanted is not None and wanted == bool(spec.flag(config))
    return "same" if same else "differs"


def load_recipe(path: str | Path):
    """A recipe file validated as a run configuration (recipe layer only: no model card, no run file)."""
    from spade.config import ConfigError, load_config

    try:
        return load_config(path, layered=False)
    except ConfigError as exc:
        raise ReportInputError(f"recipe {path}: {exc}") from None


def build_table5(recipes: dict, reported_path: str | Path) -> tuple[Table, list[dict]]:
    """Table 5 from the recipes: ``recipes`` = {"games": path, "tool_use": path}."""
    configs = {name: load_recipe(path) for name, path in recipes.items()}
    rows = read_reported(reported_path, ("hyperparameter", "value"))
    seen, lines, cells = set(), [], []
    for line_no, row in enumerate(rows, start=2):
        key = row["hyperparameter"]
        spec = HYPERPARAMETER_KEYS.get(key)
        if spec is None:
            raise ReportInputError(f"{reported_path}, line {line_no}: hyperparameter {key!r} is not one we render "
                                   f"(known: {', '.join(HYPERPARAMETER_KEYS)})")
        seen.add(key)
        lines.append(_table5_line(spec, configs, recipes, row["value"], cells))
    for spec in HYPERPARAMETERS:  # rows the paper's table lacks still show our value
        if spec.key not in seen:
            lines.append(_table5_line(spec, configs, recipes, "", cells))
    notes = [
        ("Ours: the value in each recipe file, validated as a run configuration; a run file or the model card may "
        "override it for one run (the paper's per-model exceptions in parentheses live there)."),
        (f"Reported: the paper's Table 5 ({shown_path(reported_path)}), games; where it notes a tool-use value "
        "that value is compared with the tool-use recipe."),
        ("same / differs: the recipe's numbers (and on/off setting) against the numbers of the paper's text outside "
        "its parenthetical remarks; n/a: not a config key of ours."),
    ]
    headers = ["Ours: games recipe", "Ours: tool-use recipe", "Reported (paper)", "Games vs reported",
               "Tool use vs reported"]
    table = Table("Table 5: hyperparameters, as set in our recipes and as reported", "tab:hyperparameters",
                  ["Hyperparameter"], headers, [lines], notes, kind_header=None, value_align="l")
    return table, cells


def _table5_line(spec: Hyperparameter, configs: dict, recipes: dict, reported: str, cells: list) -> Line:
    games, tool_use = configs["games"], configs["tool_use"]
    values = [spec.text(games), spec.text(tool_use), reported or BLANK,
              compare_hyperparameter(spec, games, reported), compare_hyperparameter(spec, tool_use, reported, True)]
    cells.append({"row": spec.key, "config_keys": list(spec.keys), "reported": reported,
                  "games": {"recipe": str(recipes["games"]), "shown": values[0], "comparison": values[3]},
                  "tool_use": {"recipe": str(recipes["tool_use"]), "shown": values[1], "comparison": values[4]}})
    return Line([spec.key], "", values)


# ----- run folders for Tables 7 and 8 ------------------------------------------------------------------------
def run_provenance(run_dir: Path) -> dict:
    """config hash, git commit and seed of a run, from its ``summary.json`` (empty if absent)."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return {}
    prov = read_json(path).get("provenance") or {}
    return {key: prov.get(key) for key in ("config_hash", "git_commit", "seed")}


def scale_detail(run: str, off: list) -> str:
    """The row detail of a run's values: its name and, off the paper's scale (spade.paper.scale.off_scale), its scale."""
    return f"run {run}" + (f"; TOY SCALE: {off[0].label()}, not comparable" if off else "")


_SET_FILE = re.compile(r"^set_(\d+)\.json$")  # as spade.analysis.read_env_sets


def env_sets_with_paths(run_dir: Path) -> list[tuple[Path, dict]]:
    from spade.analysis import read_env_sets, set_step

    try:
        sets = read_env_sets(run_dir)
        folder = run_dir / "envs"
        found = [(int(m.group(1)), p) for p in folder.glob("set_*.json") if (m := _SET_FILE.match(p.name))]
        files = [p for _, p in sorted(found)]
        steps = [set_step(s) for s in sets]
    except ValueError as exc:
        raise ReportInputError(f"environment archives of {run_dir}: {exc}") from None
    return [(path, {**data, "_step": step}) for path, data, step in zip(files, sets, steps)]


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ----- Table 7: environment quality per training phase ------------------------------------------------------
TABLE7_SIGNALS = {
    "learnable-band fraction (win rate in [0.2; 0.8])": ("learnable_share", 2),
    "RA win rate": ("agent_win_rate", 2),
    "well-posed (LLM rubric)": ("rubric", 2),
    "verifiable terminal answer (LLM rubric)": ("rubric", 2),
    "interaction depth (turns per episode)": ("turns", 1),
    "program length (LOC)": ("program_length", 0),
    "hidden state variables": ("hidden_state_variables", 1),
}


EMPTY_PHASE = {"learnable_share": "no environment set regenerated", "agent_win_rate": "no metrics.jsonl record",
               "turns": "no metrics.jsonl record", "program_length": "no valid designer-written environment",
               "hidden_state_variables": "no valid designer-written environment"}


def env_quality(run_dir: str | Path, phases: dict) -> tuple[dict, list[Path], list[str]]:
    """Table 7 measures of one run per phase: ``{measure: {phase: {"value", "n", "inputs"}}}`` (value None:
    nothing in the phase), the files read, and the environments whose code could not be analysed.

    learnable_share: learnable slots / all slots of the sets regenerated in the phase (spec 9: RA win rate in
    [0.2, 0.8], empty slots count 0). agent_win_rate, turns: per-step ``agent_win_rate`` / ``mean_turns`` of
    ``metrics.jsonl`` in the phase, weighted by ``episodes``. program_length, hidden_state_variables: mean over
    the valid designer-written environments of those sets (:mod:`spade.analysis.code_stats`).
    """
    from spade.analysis import (
        designer_written,
        hidden_state_variables,
        learnable_count,
        program_length,
        slot_win_rates,
    )

    run_dir = Path(run_dir)
    sets = env_sets_with_paths(run_dir)
    metrics_path = run_dir / "metrics.jsonl"
    records = read_metrics(metrics_path) if metrics_path.is_file() else []
    inputs = [p for p, _ in sets] + ([metrics_path] if records else [])
    measures: dict = {name: {} for name in ("learnable_share", "agent_win_rate", "turns", "program_length",
                                            "hidden_state_variables")}
    skipped = []
    for phase, (first, last) in phases.items():
        in_phase = [(p, s) for p, s in sets if first <= s["_step"] <= last]
        files = [str(p) for p, _ in in_phase]
        slots = learnable = 0
        for path, env_set in in_phase:
            try:
                rates = slot_win_rates(env_set)
                learnable += learnable_count(rates)
            except ValueError as exc:
                raise ReportInputError(f"{path}: {exc}") from None
            slots += len(rates)
        measures["learnable_share"][phase] = {"value": learnable / slots if slots else None, "n": slots,
                                              "learnable": learnable, "inputs": files}
        steps = [r for r in records if first <= r["step"] <= last and _finite(r.get("episodes"))
                 and r["episodes"] > 0]
        for measure, key in (("agent_win_rate", "agent_win_rate"), ("turns", "mean_turns")):
            used = [r for r in steps if _finite(r.get(key))]
            episodes = sum(r["episodes"] for r in used)
            value = sum(r[key] * r["episodes"] for r in used) / episodes if episodes else None
            measures[measure][phase] = {"value": value, "n": episodes, "steps": len(used),
                                        "inputs": [str(metrics_path)] if used else []}
        lengths, variables = [], []
        for path, env_set in in_phase:
            for env in env_set["environments"]:
                if not designer_written(env) or not isinstance(env.get("code"), str):
                    continue
                try:
                    length = program_length(env["code"])
                    names = hidden_state_variables(env["code"], env.get("class_name"))
                except (ValueError, SyntaxError) as exc:
                    skipped.append(f"{path} {env.get('env_id')}: {exc}")
                    continue
                lengths.append(length)
                variables.append(len(names))
        for measure, values in (("program_length", lengths), ("hidden_state_variables", variables)):
            measures[measure][phase] = {"value": _mean(values) if values else None, "n": len(values),
                                        "inputs": files}
    return measures, inputs, skipped


def build_table7(mapping: dict, reported_path: str | Path, runs_root: str | Path | None) -> tuple[Table, list, list]:
    """Table 7: per signal, our line, the reported line and the difference, one column per phase. Returns the
    table, the provenance of our cells and the files read."""
    section = table_section(mapping, "table7")
    phases = section["phases"]
    rows = read_reported(reported_path, ["signal", *phases])
    run = section["runs"][0] if section["runs"] else None
    run_dir = Path(runs_root) / run if run and runs_root is not None else None
    measures, inputs, skipped, missing = None, [], [], []
    if run is None:
        missing.append("no run mapped to Table 7")
    elif run_dir is None or not run_dir.is_dir():
        missing.append(f"run {run}: no run folder" + (f" {run_dir}" if run_dir else " (no runs root given)"))
    else:
        measures, inputs, skipped = env_quality(run_dir, phases)
        prov = run_provenance(run_dir)
    off = off_scale(runs_root, [run], PAPER_30B) if measures is not None else []
    groups, cells = [], []
    for line_no, row in enumerate(rows, start=2):
        signal = row["signal"]
        if signal not in TABLE7_SIGNALS:
            raise ReportInputError(f"{reported_path}, line {line_no}: signal {signal!r} is not one we compute "
                                   f"(known: {'; '.join(TABLE7_SIGNALS)})")
        measure, decimals = TABLE7_SIGNALS[signal]
        ours_text, reported_text, diff_text = [], [], []
        for phase in phases:
            reported = reported_number(reported_path, line_no, phase, row[phase])
            reported_text.append(row[phase] or BLANK)
            if measure == "rubric":
                ours_text.append(NOT_COMPUTED)
                diff_text.append(BLANK)
                continue
            if measures is None:
                ours_text.append(NOT_RUN)
                diff_text.append(NOT_RUN)
                continue
            entry = measures[measure][phase]
            if entry["value"] is None:
                ours_text.append(NO_DATA)
                diff_text.append(NO_DATA)
                first, last = phases[phase]
                missing.append(f"{signal}, {phase}: run {run} has {EMPTY_PHASE[measure]} in steps {first}-{last}")
                continue
            ours_text.append(f"{entry['value']:.{decimals}f}")
            diff_text.append(BLANK if reported is None or off else _signed(entry["value"] - reported, decimals))
            cells.append({"row": signal, "column": phase, "measure": measure, "run": run, "steps": phases[phase],
                          "shown": ours_text[-1], "reported": reported, **entry, **prov})
        groups.append([Line([signal], OURS, ours_text, scale_detail(run, off) if measures is not None else ""),
                       Line([""], REPORTED, reported_text), Line([""], DIFF, diff_text)])
    missing += [f"code not analysed: {item}" for item in skipped]
    headers = [f"{phase.split('_')[0]} (steps {a}-{b})" for phase, (a, b) in phases.items()]
    notes = [
        ("ours: learnable share = learnable slots / all slots of the environment sets regenerated in the phase (win "
        "rate in [0.2, 0.8], empty slots count 0); RA win rate and turns per episode: per-step metrics.jsonl values "
        "weighted by episodes; program length (non-blank, non-comment, non-docstring lines) and hidden state "
        "variables: mean over valid designer-written environments (static analysis, spade.analysis)."),
        "not computed: the LLM-rubric signals need an LLM judge, which this repository does not have.",
        f"reported: the paper's Table 7 ({shown_path(reported_path)}); Δ: ours − reported.",
        "not run: no run mapped or no run folder; no data: the run has nothing in that phase.",
    ]
    table = Table("Table 7: quality of generated environments early, mid and late in training", "tab:env-quality",
                  ["Signal"], headers, groups, notes, missing, banner=banner(off, [PAPER_30B]))
    return table, cells, inputs


# ----- Table 8: diversity ------------------------------------------------------------------------------------
TABLE8_COLUMNS = (("sample", "Envs"), ("vendi_per_n", "Vendi/n (SBERT)"),
                  ("mean_pairwise_distance", "Mean pairwise dist."), ("tfidf_lsa_vendi_per_n", "Vendi/n (TF-IDF+LSA)"),
                  ("reading", "Reading"))


def mean_pairwise_distance(embeddings) -> float:
    """Mean cosine distance 1 - cos(x_i, x_j) over the pairs i < j of ``embeddings`` [n >= 2, d]."""
    import numpy as np

    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"embeddings must be [n >= 2, d], got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1)
    if (norms == 0).any():
        raise ValueError("embeddings hold a zero vector (cosine undefined)")
    unit = x / norms[:, None]
    total = unit.sum(axis=0)
    n = len(x)
    mean_cos = (float(total @ total) - n) / (n * (n - 1))  # sum over i != j of cos / number of ordered pairs
    return 1.0 - mean_cos


def default_embedders(seed: int = 0) -> dict:
    from spade.analysis import sbert_embeddings, tfidf_lsa_embeddings

    return {"sbert": sbert_embeddings, "tfidf_lsa": lambda texts: tfidf_lsa_embeddings(texts, seed=seed)}


def diversity(run_dir: str | Path, text_field: str, vendi: dict, collapsed_below: float,
              embedders: dict) -> tuple[dict, list[Path]]:
    """Table 8 measures of one run: ``{"sample", "vendi_per_n", "mean_pairwise_distance",
    "tfidf_lsa_vendi_per_n", "reading"}`` over its valid designer-written environments (a value is None where
    the run has too few environments), and the files read."""
    from spade.analysis import designer_written, vendi_per_n

    sets = env_sets_with_paths(Path(run_dir))
    envs = [env for _, s in sets for env in s["environments"] if designer_written(env)]
    texts = [env.get(text_field) for env in envs]
    bad = [env.get("env_id") for env, text in zip(envs, texts) if not isinstance(text, str) or not text.strip()]
    if bad:
        raise ReportInputError(f"environment archives of {run_dir}: environment {bad[0]} has no text field "
                               f"{text_field!r}")
    groups = [env.get("skill") for env in envs] if vendi["balance_by"] == "skill" else None
    out = {"sample": len(texts), "vendi_per_n": None, "mean_pairwise_distance": None, "tfidf_lsa_vendi_per_n": None,
           "reading": None, "draws": {}}
    try:
        if len(texts) >= 2:
            sbert = embedders["sbert"](texts)
            out["mean_pairwise_distance"] = mean_pairwise_distance(sbert)
            if len(texts) >= vendi["size"]:
                summary = vendi_per_n(sbert, vendi["size"], vendi["draws"], groups, vendi["seed"])
                out["vendi_per_n"], out["draws"]["sbert_sd"] = summary.mean, summary.sd
                lsa = vendi_per_n(embedders["tfidf_lsa"](texts), vendi["size"], vendi["draws"], groups, vendi["seed"])
                out["tfidf_lsa_vendi_per_n"], out["draws"]["tfidf_lsa_sd"] = lsa.mean, lsa.sd
    except ValueError as exc:
        raise ReportInputError(f"diversity of {run_dir}: {exc}") from None
    if out["vendi_per_n"] is not None:
        out["reading"] = "collapsed" if out["vendi_per_n"] < collapsed_below else "diverse"
    return out, [p for p, _ in sets]


def build_table8(mapping: dict, reported_path: str | Path, runs_root: str | Path | None,
                 embedders: dict | None = None) -> tuple[Table, list, list]:
    """Table 8: per mapped run, our line, the reported line and the difference. ``embedders`` = {"sbert": f,
    "tfidf_lsa": f} with f(texts) -> [n, d] (default: :func:`default_embedders`, loaded only when needed)."""
    section = table_section(mapping, "table8")
    vendi = section["vendi"]
    columns = [key for key, _ in TABLE8_COLUMNS]
    rows = read_reported(reported_path, ["run", *columns])
    by_label = {row["run"]: (line_no, row) for line_no, row in enumerate(rows, start=2)}
    entries = {}
    for entry in section["rows"]:
        where = f"{entry['where']}.reported"
        if set(entry["reported"]) != {"run"}:
            raise ReportInputError(f"{mapping['path']}: key '{where}' must give exactly the column run")
        label = entry["reported"]["run"]
        if label not in by_label:
            raise ReportInputError(f"{mapping['path']}: key '{where}' (run={label}) matches no row of {reported_path}")
        if label in entries:
            raise ReportInputError(f"{mapping['path']}: key '{where}' repeats the row run={label}")
        entries[label] = entry
    unmapped = [label for label in by_label if label not in entries]
    if unmapped:
        raise ReportInputError(f"{mapping['path']}: key 'tables.table8.rows' has no entry for the reported row "
                               f"run={unmapped[0]} (write `run: null` if we have no run for it)")
    groups, cells, inputs, missing, offs = [], [], [], [], []
    for label, (line_no, row) in by_label.items():
        runs = entries[label]["runs"]
        run = runs[0] if runs else None
        run_dir = Path(runs_root) / run if run and runs_root is not None else None
        ours = None
        if run is None:
            missing.append(f"{label}: no run mapped")
        elif run_dir is None or not run_dir.is_dir():
            missing.append(f"{label} (run {run}): no run folder")
        else:
            if embedders is None:
                embedders = default_embedders(vendi["seed"])
            ours, files = diversity(run_dir, section["field"], vendi, section["collapsed_below"], embedders)
            inputs += files
            if ours["vendi_per_n"] is None:
                missing.append(f"{label} (run {run}): {ours['sample']} designer-written environments; Vendi/n needs "
                               f"{vendi['size']}")
        off = off_scale(runs_root, [run], PAPER_30B) if ours is not None else []
        offs += off
        ours_text, reported_text, diff_text = [], [], []
        for key in columns:
            text = row[key]
            reported_text.append(text or BLANK)
            if ours is None:
                ours_text += [NOT_RUN]
                diff_text += [NOT_RUN]
                continue
            value = ours[key]
            if value is None:
                mark = (f"{TOO_FEW} (n = {ours['sample']})" if key != "mean_pairwise_distance" and ours["sample"] >= 2
                        else NO_DATA)
                ours_text.append(mark)
                diff_text.append(mark)
                continue
            if key == "reading":
                ours_text.append(value)
                diff_text.append(BLANK if not text or off else ("same" if value == text else "differs"))
            elif key == "sample":
                ours_text.append(str(value))
                reported = reported_number(reported_path, line_no, key, text)
                diff_text.append(BLANK if reported is None or off else f"{value - reported:+.0f}")
            else:
                ours_text.append(f"{value:.2f}")
                reported = reported_number(reported_path, line_no, key, text)
                diff_text.append(BLANK if reported is None or off else _signed(value - reported, 2))
            cells.append({"row": label, "column": key, "run": run, "value": value, "shown": ours_text[-1],
                          "reported": text, "field": section["field"], "vendi": vendi,
                          "draw_sd": ours["draws"], "inputs": [str(p) for p in files], **run_provenance(run_dir)})
        groups.append([Line([label], OURS, ours_text, scale_detail(run, off) if ours is not None else ""),
                       Line([""], REPORTED, reported_text), Line([""], DIFF, diff_text)])
    notes = [
        ("ours: valid designer-written environments of the whole run (their source code); Vendi/n = Vendi score "
        f"(cosine kernel) / {vendi['size']}, mean over {vendi['draws']} draws of {vendi['size']} environments "
        f"balanced over {vendi['balance_by']} (seed {vendi['seed']}), with SBERT all-MiniLM-L6-v2 and with TF-IDF + "
        "LSA-128 embeddings; mean pairwise distance: 1 − cosine over all pairs (SBERT)."),
        (f"reading (our rule, the paper gives none): collapsed when SBERT Vendi/n < {section['collapsed_below']:g}, "
        "else diverse."),
        f"reported: the paper's Table 8 ({shown_path(reported_path)}); Δ: ours − reported.",
        "not run: no run mapped or no run folder; too few: fewer environments than one draw needs; no data: none.",
    ]
    headers = [header for _, header in TABLE8_COLUMNS]
    table = Table("Table 8: diversity of generated environments", "tab:diversity", ["Run"], headers, groups, notes,
                  missing, banner=banner(offs, [PAPER_30B]))
    return table, cells, inputs


def run_folder_table_main(table_name: str, script: str, argv=None) -> None:
    """The command line of the scripts of Tables 7 and 8 (they read run folders, not the tidy table)."""
    title = {"table7": "Table 7: environment quality per training phase", "table8": "Table 8: diversity"}[table_name]
    parser = argparse.ArgumentParser(description=f"{title}, ours beside the paper's")
    parser.add_argument("--mapping", type=Path, required=True, help="run mapping (paper/table_runs.yaml)")
    parser.add_argument("--reported", type=Path, required=True, help="reported CSV (paper/reported/...)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder of the run folders (results/runs)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    mapping = load_table_runs(args.mapping)
    build = build_table7 if table_name == "table7" else build_table8
    table, cells, inputs = build(mapping, args.reported, args.runs_root)
    runs = mapped_runs(mapping, table_name)
    summaries = [args.runs_root / run / "summary.json" for run in runs]
    inputs = [args.mapping, args.reported, *inputs, *[p for p in summaries if p.is_file()]]
    provenance = {run: run_provenance(args.runs_root / run) for run in runs if (args.runs_root / run).is_dir()}
    outputs = write_table(table, args.out, script, inputs, cells, None, mapping=str(args.mapping),
                          paper_table=table_name, runs=provenance)
    report_written(outputs, table)


def table5_main(script: str, argv=None) -> None:
    parser = argparse.ArgumentParser(description="Table 5: hyperparameters from the recipes, beside the paper's")
    parser.add_argument("--games", type=Path, required=True, help="games recipe (configs/recipes/games.yaml)")
    parser.add_argument("--tool-use", type=Path, required=True, help="tool-use recipe (configs/recipes/tool_use.yaml)")
    parser.add_argument("--reported", type=Path, required=True, help="reported CSV (paper/reported/...)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    recipes = {"games": args.games, "tool_use": args.tool_use}
    table, cells = build_table5(recipes, args.reported)
    outputs = write_table(table, args.out, script, [args.games, args.tool_use, args.reported], cells, None,
                          recipes={k: str(v) for k, v in recipes.items()})
    report_written(outputs, table)
