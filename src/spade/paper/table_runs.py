"""Which run and checkpoint stands for each row of the paper tables, and our results there.

The run mapping ``paper/table_runs.yaml`` (its keys are documented in the file itself) names, for each row of
Tables 1, 2, 3 and 6, the run(s) and the step rule of the checkpoint that stand for it, and the runs Tables 7 and 8
read. This module holds what the table scripts, the table rules (``rules/paper_common.smk``) and the other paper
modules use of it:

* :func:`load_table_runs` (validation, with errors naming the file and the key; the key checkers
  :func:`check_keys`, :func:`mapping_error`, :func:`mapping_runs`, :func:`mapping_step_rule`,
  :func:`mapping_int` also validate the number and comparison mappings), :func:`mapped_runs`, :func:`step_rules`;
* :data:`COLUMN_METRICS`: the benchmark metric of ours behind each paper column (overridable in the mapping);
* :func:`run_files` and :func:`run_fingerprint`: the files of the mapped run folders a table reads and the
  Snakemake parameter that reruns the table when one changes;
* our evaluation results (:func:`load_results`, :class:`ResultIndex`), the checkpoint a step rule picks
  (:func:`resolve_step`: ``base``, a step number, ``last`` or ``selected``) and a run's provenance
  (:func:`run_provenance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from spade.paper.report import (
    SORT_KEYS,
    TIDY_COLUMNS,
    TRAINING_BENCHMARK,
    ReportInputError,
    eval_files,
    files_fingerprint,
    read_json,
    read_tidy,
    read_yaml,
    tidy_results,
)

STEP_WORDS = ("selected", "last", "base")

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


def vendi_settings(path, key: str, section: dict) -> dict:
    """The ``vendi`` settings of a mapping section (size, draws, balance_by, seed), defaults filled in and checked."""
    vendi = section.get("vendi") or {}
    if not isinstance(vendi, dict):
        raise mapping_error(path, f"{key}.vendi", f"must be a mapping, got {vendi!r}")
    check_keys(path, f"{key}.vendi", vendi, tuple(VENDI_DEFAULTS))
    vendi = {**VENDI_DEFAULTS, **vendi}
    vendi["size"] = mapping_int(path, f"{key}.vendi.size", vendi["size"], 2)
    vendi["draws"] = mapping_int(path, f"{key}.vendi.draws", vendi["draws"], 1)
    vendi["seed"] = mapping_int(path, f"{key}.vendi.seed", vendi["seed"], 0)
    if vendi["balance_by"] not in BALANCE_BY:
        raise mapping_error(
            path, f"{key}.vendi.balance_by", f"must be one of {', '.join(BALANCE_BY)}, got {vendi['balance_by']!r}"
        )
    return vendi


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
    vendi = vendi_settings(path, key, section)
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
        raise mapping_error(path, "metrics",
                            f"must be a mapping of paper column -> 'benchmark:metric', got {metrics!r}")
    parsed_metrics = {}
    for column, spec in metrics.items():
        if column not in COLUMN_METRICS:
            raise mapping_error(path, f"metrics.{column}",
                                f"is not a paper column (known: {', '.join(COLUMN_METRICS)})")
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


# ----- our results of the mapped runs -----------------------------------------------------------------------
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


def run_provenance(run_dir: Path) -> dict:
    """config hash, git commit and seed of a run, from its ``summary.json`` (empty if absent)."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return {}
    prov = read_json(path).get("provenance") or {}
    return {key: prov.get(key) for key in ("config_hash", "git_commit", "seed")}
