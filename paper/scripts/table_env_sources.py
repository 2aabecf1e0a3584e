"""The environment-source comparison (ours, not in the paper; issue 7, item 4): one row per source of environments.

    python paper/scripts/table_env_sources.py --mapping paper/comparison_runs.yaml --runs-root results/runs \
        --out results/paper/tables/env_sources.md

One row per environment source (SPADE's designer one-shot, with feedback revisions, a fixed library pool,
mechanism families, Fixed-env GRPO's one-shot pool, the calibration-band designer reward, a fixed external
designer, ...), each mapped to one of our runs by the source mapping
(:func:`spade.paper.comparison.load_comparison_runs`; config key ``paper.comparison_runs``). Columns, all read
from what a run writes (``metrics.jsonl``, ``envs/set_*.json``, ``eval/<benchmark>/step_NNNNNN.json``):

* valid-environment rate with its Wilson interval (:func:`spade.analysis.valid_env_rate`): valid design
  attempts / design attempts over the regeneration records (each feedback revision is an attempt);
* generated tokens per valid environment (:func:`spade.analysis.generation_metrics.tokens_per_valid_env`);
* learnable share: slot-windows whose agent win rate over the window lies in the learnable band (spec 9:
  [0.2, 0.8], :func:`spade.analysis.learnable_count`) / all slot-windows of the archives (empty slots count 0,
  as in figure 6 and Table 7);
* diversity: Vendi/n (cosine kernel) over the distinct environments the source supplied (designer-written for
  a designer source, the pool's own environments for a pool source; never library backfill), with n shown;
* held-out gain, one column per suite of the mapping: the mean of the suite's metrics at the run's last (or
  selected, or given) checkpoint minus the same mean at step 0 of the base run, in points.

A pool source generates nothing: its valid rate and tokens read ``n/a`` (the reason is in the sidecar), never
0. Other marks: ``not run`` (no run mapped, or no run folder), ``no data`` (the run exists but lacks what the
cell needs; the reason is listed under the table), ``too few (n = k)`` (fewer environments than a Vendi score
needs) and ``no valid env (T tokens)`` (tokens were spent and nothing validated: the cost is unbounded).

Writes Markdown, LaTeX (.tex) and a provenance sidecar with every cell, mark and reason, and under ``comparison``
the data the figure (paper/scripts/fig_env_sources.py) draws, so the table and the figure always show the same
numbers.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spade.analysis import (
    designer_written,
    learnable_count,
    slot_win_rates,
    valid_env_rate,
    vendi_per_n,
    vendi_score,
)
from spade.analysis.generation_metrics import tokens_per_valid_env
from spade.core.env_source import POOL_MODES  # modes whose environments come from a fixed pool
from spade.paper.comparison import BASE_COLUMNS, EMBEDDINGS, comparison_runs, load_comparison_runs
from spade.paper.env_tables import default_embedders, env_sets_with_paths
from spade.paper.report import NOT_RUN, ReportInputError, read_metrics, run_script
from spade.paper.scale import PAPER_30B, banner, off_scale, run_scale
from spade.paper.table_runs import ResultIndex, load_results, resolve_step, run_provenance
from spade.paper.tables import (
    NO_DATA,
    PERCENT,
    TOO_FEW,
    Line,
    Table,
    report_written,
    shown_path,
    signed,
    write_table,
)

SCRIPT = "paper/scripts/table_env_sources.py"
NA = "n/a"
NO_VALID = "no valid env"


def columns(mapping: dict) -> list[tuple[str, str]]:
    """(key, header) of every value column: the four source measures, then one gain column per held-out suite."""
    confidence = f"{mapping['confidence'] * 100:g}%"
    base = [(k, h.replace("[CI]", f"[{confidence} CI]")) for k, h in BASE_COLUMNS]
    return base + [(h["key"], f"Δ {h['header']} (points)") for h in mapping["heldout"]]


# ----- the cells ---------------------------------------------------------------------------------------------
@dataclass
class Cell:
    """One value of the comparison: ``value`` (None where the cell holds a mark), the text shown, its status
    (``ok`` or the mark), the reason for a mark, and details for the sidecar (counts, interval, steps, files)."""

    value: float | None
    shown: str
    status: str = "ok"
    reason: str = ""
    details: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"value": self.value, "shown": self.shown, "status": self.status, "reason": self.reason,
                **self.details}


def _mark(status: str, reason: str, shown: str | None = None, **details) -> Cell:
    return Cell(None, shown or status, status, reason, details)


@dataclass
class SourceData:
    """What one source's run folder gives, before the diversity and gain columns are filled."""

    entry: dict
    run_dir: Path | None
    cells: dict = field(default_factory=dict)
    texts: list = field(default_factory=list)  # distinct environments' texts (Vendi)
    groups: list = field(default_factory=list)  # their skills (balanced draws)
    env_ids: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    mode: str | None = None  # the run's logged env_source (fixed modes and the external designer only)


def _env_source(records: list[dict]) -> str | None:
    for record in records:
        if record.get("env_source"):
            return str(record["env_source"])
    return None


def _check_kind(mapping: dict, entry: dict, mode: str | None, metrics_path: Path) -> None:
    """A source's kind must match what its run did: a pool run logs a pool mode as ``env_source``."""
    pool_run = mode in POOL_MODES
    if (entry["kind"] == "pool") != pool_run:
        what = f"env_source {mode!r}" if mode else "no env_source (a designer run)"
        raise ReportInputError(f"{mapping['path']}: key '{entry['where']}.kind' is {entry['kind']!r}, but run "
                               f"{entry['run']} logged {what} in {metrics_path}; write kind: "
                               f"{'pool' if pool_run else 'designer'}")


def _generation_cells(entry: dict, records: list[dict], mode: str | None, confidence: float) -> dict:
    """Valid-environment rate and tokens per valid environment (n/a for a pool: nothing was generated)."""
    if entry["kind"] == "pool":
        why = (f"a fixed pool ({mode or 'pool'} mode) generates no environment: there are no design attempts to "
               "validate")
        return {"valid_env_rate": _mark(NA, why),
                "tokens_per_valid_env": _mark(NA, why.replace("to validate", "and no designer tokens"))}
    cells = {}
    try:
        rate = valid_env_rate(records, confidence)
    except ValueError as exc:
        cells["valid_env_rate"] = _mark(NO_DATA, f"metrics.jsonl: {exc}")
    else:
        cells["valid_env_rate"] = Cell(
            rate.rate, f"{rate.rate:.2f} [{rate.low:.2f}, {rate.high:.2f}] ({rate.successes}/{rate.trials})",
            details={"successes": rate.successes, "trials": rate.trials, "low": rate.low, "high": rate.high,
                     "confidence": rate.confidence})
    try:
        cost = tokens_per_valid_env(records)
    except ValueError as exc:
        cells["tokens_per_valid_env"] = _mark(NO_DATA, f"metrics.jsonl: {exc}")
    else:
        details = {"tokens": cost.tokens, "valid": cost.valid, "attempts": cost.attempts}
        if cost.per_valid is None:
            cells["tokens_per_valid_env"] = _mark(
                NO_VALID, f"{cost.tokens} designer tokens over {cost.attempts} attempts and no valid environment "
                          "(the cost per valid environment is unbounded)", f"{NO_VALID} ({cost.tokens} tokens)",
                **details)
        else:
            cells["tokens_per_valid_env"] = Cell(cost.per_valid, f"{cost.per_valid:.0f}", details=details)
    return cells


def _supplied(entry: dict, env: dict) -> bool:
    """An environment the source itself supplied: designer-written (designer) or from the pool (pool); a
    library environment that backfilled an empty slot is neither."""
    if entry["kind"] == "designer":
        return designer_written(env)
    return bool(env.get("valid")) and not str(env.get("source", "")).startswith(("backfill", "designer"))


def read_source(mapping: dict, entry: dict, runs_root: Path | None) -> SourceData:
    """Generation and learnability cells of one source, and the texts its diversity is computed on."""
    run = entry["run"]
    run_dir = Path(runs_root) / run if run and runs_root is not None else None
    data = SourceData(entry, run_dir if run_dir is not None and run_dir.is_dir() else None)
    if data.run_dir is None:
        why = "no run mapped" if not run else f"run {run}: no run folder under {runs_root}"
        data.cells = {key: _mark(NOT_RUN, why) for key, _ in columns(mapping)}
        return data
    metrics_path = data.run_dir / "metrics.jsonl"
    records = read_metrics(metrics_path) if metrics_path.is_file() else []
    data.inputs += [metrics_path] if records else []
    data.mode = _env_source(records)
    if records:
        _check_kind(mapping, entry, data.mode, metrics_path)
    data.cells.update(_generation_cells(entry, records, data.mode, mapping["confidence"]))
    sets = env_sets_with_paths(data.run_dir)
    data.inputs += [p for p, _ in sets]
    low, high = mapping["band"]
    learnable = slots = 0
    seen = set()
    for path, env_set in sets:
        try:
            rates = slot_win_rates(env_set)
            learnable += learnable_count(rates, low, high)
        except ValueError as exc:
            raise ReportInputError(f"{path}: {exc}") from None
        slots += len(rates)
        for env in env_set["environments"]:
            env_id = env.get("env_id")
            if not _supplied(entry, env) or env_id in seen:  # fixed modes archive the same environments per window
                continue
            text = env.get(mapping["field"])
            if not isinstance(text, str) or not text.strip():
                raise ReportInputError(f"{path}: environment {env_id} has no text field {mapping['field']!r}")
            seen.add(env_id)
            data.texts.append(text)
            data.groups.append(env.get("skill"))
            data.env_ids.append(env_id)
    if slots:
        data.cells["learnable_share"] = Cell(learnable / slots, f"{learnable / slots:.2f} ({learnable}/{slots})",
                                             details={"learnable": learnable, "slots": slots, "band": [low, high],
                                                      "archives": len(sets)})
    else:
        data.cells["learnable_share"] = _mark(NO_DATA, f"run {run} has no environment-set archive (envs/set_*.json)")
    return data


def vendi_size(mapping: dict, data: list[SourceData]) -> int | None:
    """Environments per Vendi draw: the mapping's number, or (``common``) the fewest distinct environments of any
    source that has at least ``min_envs``, so that every row is drawn at the same size; None when none has."""
    size = mapping["vendi"]["size"]
    if size != "common":
        return size
    counts = [len(d.texts) for d in data if d.run_dir is not None and len(d.texts) >= mapping["vendi"]["min_envs"]]
    return min(counts) if counts else None


def fill_diversity(mapping: dict, data: list[SourceData], embedders: dict | None) -> int | None:
    """The Vendi/n cell of every source with a run folder. All texts are embedded in one call (one TF-IDF
    vocabulary for all rows). Returns the draw size used."""
    vendi = mapping["vendi"]
    size = vendi_size(mapping, data)
    present = [d for d in data if d.run_dir is not None]
    for d in present:
        if len(d.texts) < vendi["min_envs"]:
            who = "designer-written" if d.entry["kind"] == "designer" else "pool"
            d.cells["vendi_per_n"] = _mark(TOO_FEW, f"run {d.entry['run']} has {len(d.texts)} distinct valid {who} "
                                                    f"environment(s); Vendi/n needs {vendi['min_envs']}",
                                           f"{TOO_FEW} (n = {len(d.texts)})", n=len(d.texts))
    scored = [d for d in present if len(d.texts) >= vendi["min_envs"]]
    if not scored:
        return size
    if embedders is None:
        embedders = default_embedders(vendi["seed"])
    texts = [t for d in scored for t in d.texts]
    try:
        x = np.asarray(embedders[EMBEDDINGS[mapping["embedding"]]](texts), dtype=np.float64)
    except ValueError as exc:
        raise ReportInputError(f"diversity embeddings ({mapping['embedding']}): {exc}") from None
    start = 0
    for d in scored:
        n = len(d.texts)
        rows = x[start:start + n]
        start += n
        details = {"n_envs": n, "embedding": mapping["embedding"], "field": mapping["field"], "env_ids": d.env_ids}
        try:
            if n >= size:
                groups = d.groups if vendi["balance_by"] == "skill" else None
                summary = vendi_per_n(rows, size, vendi["draws"], groups, vendi["seed"])
                value = summary.mean
                details.update(size=size, draws=vendi["draws"], balance_by=vendi["balance_by"], seed=vendi["seed"],
                               sd=None if math.isnan(summary.sd) else summary.sd)
                shown = f"{value:.2f} (n = {size})" if n == size else f"{value:.2f} (n = {size} of {n})"
            else:  # an integer size above this source's count: all of its environments, once
                value = vendi_score(rows) / n
                details.update(size=n, draws=1, sd=None)
                shown = f"{value:.2f} (n = {n})"
        except ValueError as exc:
            raise ReportInputError(f"diversity of run {d.entry['run']}: {exc}") from None
        d.cells["vendi_per_n"] = Cell(value, shown, details=details)
    return size


def _step_for(mapping: dict, run: str, parts: list, results: ResultIndex, runs_root: Path) -> tuple[int | None, str]:
    """The trained step of ``run`` whose suite is compared with the base, or None and the reason."""
    rule = mapping["step"]
    if rule == "last":
        steps = [s for s in results.steps(run) if s > 0 and all(results.get(run, s, b, m) for b, m in parts)]
        return (max(steps), "") if steps else (None, f"run {run} has no trained checkpoint evaluated on every part")
    choice = resolve_step(run, rule, results, runs_root)
    return choice.step, choice.reason


def _suite_mean(results: ResultIndex, run: str, step: int, parts: list) -> tuple[float | None, list, list]:
    found = [results.get(run, step, b, m) for b, m in parts]
    absent = [f"{b}:{m}" for (b, m), r in zip(parts, found) if r is None]
    if absent:
        return None, [], absent
    return sum(r["value"] for r in found) / len(found), found, []


def fill_gains(mapping: dict, data: list[SourceData], runs_root: Path | None) -> list[Path]:
    """The held-out gain cells of every source with a run folder; returns the evaluation files read."""
    if not mapping["heldout"]:
        return []
    present = [d for d in data if d.run_dir is not None]
    base_run = mapping["base_run"]
    runs = sorted({d.entry["run"] for d in present} | ({base_run} if base_run else set()))
    tidy, inputs = load_results(runs_root=runs_root, runs=runs)
    results = ResultIndex(tidy)
    for d in present:
        run = d.entry["run"]
        base = base_run or run
        for suite in mapping["heldout"]:
            key, parts = suite["key"], suite["parts"]
            names = ", ".join(f"{b}:{m}" for b, m in parts)
            if base_run and not (Path(runs_root) / base_run).is_dir():
                d.cells[key] = _mark(NOT_RUN, f"base run {base_run}: no run folder under {runs_root}")
                continue
            step, why = _step_for(mapping, run, parts, results, runs_root)
            if step is None:
                d.cells[key] = _mark(NO_DATA, f"{suite['header']}: {why} ({names})")
                continue
            mine, found, absent = _suite_mean(results, run, step, parts)
            base_mean, base_found, base_absent = _suite_mean(results, base, 0, parts)
            if mine is None or base_mean is None:
                lacking = ([f"run {run} step {step}: {', '.join(absent)}"] if absent else []) + (
                    [f"base run {base} step 0: {', '.join(base_absent)}"] if base_absent else [])
                d.cells[key] = _mark(NO_DATA, f"{suite['header']}: no result for {'; '.join(lacking)}")
                continue
            gain = (mine - base_mean) * PERCENT
            d.cells[key] = Cell(gain, f"{signed(gain, 1)} (step {step})",
                                details={"step": step, "step_rule": mapping["step"], "base_run": base, "base_step": 0,
                                         "score": mine * PERCENT, "base_score": base_mean * PERCENT,
                                         "parts": [f"{b}:{m}" for b, m in parts], "results": found,
                                         "base_results": base_found})
    return inputs


# ----- the table ---------------------------------------------------------------------------------------------
def build_comparison(mapping: dict, runs_root: str | Path | None,
                     embedders: dict | None = None) -> tuple[Table, list[dict], list[Path], dict]:
    """The comparison table, one provenance record per cell (marks included, with their reasons), the files
    read, and the data the figure draws (``{"columns", "sources"}``). ``embedders`` = {"sbert": f,
    "tfidf_lsa": f} with f(texts) -> [n, d] (default :func:`spade.paper.env_tables.default_embedders`, loaded only
    when some source has environments to embed)."""
    runs_root = Path(runs_root) if runs_root is not None else None
    data = [read_source(mapping, entry, runs_root) for entry in mapping["sources"]]
    size = fill_diversity(mapping, data, embedders)
    inputs = [p for d in data for p in d.inputs] + fill_gains(mapping, data, runs_root)
    cols = columns(mapping)
    lines, cells, missing, na_reasons, sources, offs = [], [], [], {}, [], []
    for d in data:
        entry, run = d.entry, d.entry["run"]
        prov = run_provenance(d.run_dir) if d.run_dir is not None else {}
        offs += off_scale(runs_root, [run], PAPER_30B) if d.run_dir is not None else []  # rows stand for 30B runs
        shown_run = f"{run} ({run_scale(runs_root, run).label()})" if d.run_dir is not None else (run or "—")
        lines.append(Line([entry["label"], shown_run], "", [d.cells[key].shown for key, _ in cols]))
        for key, header in cols:
            cell = d.cells[key]
            cells.append({"row": entry["label"], "column": key, "run": run, "kind": entry["kind"], "mode": d.mode,
                          **cell.record(), **prov})
            if cell.status == NA:
                na_reasons.setdefault(cell.reason, []).append(f"{entry['label']} ({header})")
        marks = (NOT_RUN, NO_DATA, TOO_FEW, NO_VALID)
        marked = [(key, d.cells[key]) for key, _ in cols if d.cells[key].status in marks]
        if marked and all(c.status == NOT_RUN for _, c in marked) and len(marked) == len(cols):
            missing.append(f"{entry['label']}: {marked[0][1].reason}")
        else:
            missing += [f"{entry['label']}, {key}: {cell.reason}" for key, cell in marked]
        sources.append({"label": entry["label"], "kind": entry["kind"], "run": run, "scale": shown_run, "mode": d.mode,
                        "cells": {key: d.cells[key].record() for key, _ in cols}})
    notes = comparison_notes(mapping, size)
    notes += [f"n/a ({', '.join(where)}): {reason}." for reason, where in na_reasons.items()]
    table = Table("Environment sources compared: generation cost, learnability, diversity and held-out gain",
                  "tab:env-sources", ["Environment source", "Run (model, steps)"], [h for _, h in cols], [lines],
                  notes, missing, kind_header=None, banner=banner(offs, [PAPER_30B]))
    return table, cells, inputs, {"columns": [{"key": k, "header": h} for k, h in cols], "sources": sources,
                                  "vendi_size": size, "banner": table.banner}


def comparison_notes(mapping: dict, size: int | None) -> list[str]:
    """The notes under the table: how each column is measured (Vendi draws of ``size`` environments) and where the
    sources and runs are set."""
    low, high = mapping["band"]
    vendi = mapping["vendi"]
    if size is None:
        drawn = "no source has enough environments for a Vendi score"
    else:
        chosen = "the fewest any source has" if vendi["size"] == "common" else "set in the mapping"
        drawn = (f"draws of {size} environments ({chosen}), {vendi['draws']} draws balanced over "
                 f"{vendi['balance_by']} (seed {vendi['seed']}); a source with fewer uses all of its environments once")
    base = f"step 0 of run {mapping['base_run']}" if mapping["base_run"] else "step 0 of the row's own run"
    notes = [
        (f"Valid-env rate: valid design attempts / design attempts over the regeneration steps of metrics.jsonl (a "
         f"feedback revision is an attempt), with its {mapping['confidence'] * 100:g}% Wilson interval; tokens / valid "
         "env: designer completion tokens of those attempts / valid ones (hints and backfill not counted)."),
        (f"Learnable share: slot-windows whose agent win rate over the window lies in [{low:g}, {high:g}] / all "
         "slot-windows of envs/set_*.json (empty slots count 0; a fixed source has one window per k steps on the same "
         "environments)."),
        (f"Vendi/n: Vendi score (cosine kernel, {mapping['embedding']} embedding of {mapping['field']}) / n over the "
         f"distinct valid environments the source supplied (designer-written, or the pool's; library backfill "
         f"excluded): {drawn}. Values at different n are not comparable; n is shown."),
    ]
    if mapping["heldout"]:
        notes.append(f"Δ held-out: mean of the suite's metrics at the run's {mapping['step']} checkpoint minus {base}, "
                     "in points (×100).")
    notes.append(f"Sources and runs: {shown_path(mapping['path'])}. not run: no run mapped or no run folder; no data: "
                 "the run lacks what the cell needs (listed below).")
    return notes


def main(argv=None) -> None:
    """Command line: the table of the sources the mapping names, from the run folders under ``--runs-root``."""
    parser = argparse.ArgumentParser(description="Environment sources compared (table)")
    parser.add_argument("--mapping", type=Path, required=True, help="source mapping (paper/comparison_runs.yaml)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder of the run folders (results/runs)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    mapping = load_comparison_runs(args.mapping)
    table, cells, inputs, figure_data = build_comparison(mapping, args.runs_root)
    runs = comparison_runs(mapping)
    summaries = [args.runs_root / run / "summary.json" for run in runs]
    inputs = [args.mapping, *inputs, *[p for p in summaries if p.is_file()]]
    provenance = {run: run_provenance(args.runs_root / run) for run in runs if (args.runs_root / run).is_dir()}
    outputs = write_table(table, args.out, SCRIPT, inputs, cells, None, mapping=str(args.mapping),
                          comparison=figure_data, runs=provenance)
    report_written(outputs, table)


if __name__ == "__main__":
    sys.exit(run_script(main))
