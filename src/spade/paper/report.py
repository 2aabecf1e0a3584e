"""Turn run folders into tidy result tables, and the shared helpers of the paper scripts.

The paper scripts in ``paper/scripts/`` each make one artifact from explicit input paths; the logic they
share lives here, so that it is tested once.

The tidy table (:func:`tidy_results`) has one row per (run, step, benchmark, metric):

* every evaluation result ``eval/<benchmark>/step_<NNNNNN>.json`` (``spade.evals``; step 0 is the base model
  before training) contributes its ``rows`` as they are: for example benchmark ``heldout_library`` with metrics
  ``win_rate``, ``mean_return`` and ``win_rate/<env>``, or ``reasoning_gym_hard`` with ``math``, ...;
* benchmark ``training``: per training step, from ``metrics.jsonl``, the metrics named in
  :data:`TRAINING_METRICS` wherever the log holds a finite value.

``n`` and ``stderr`` mean, per metric:

* evaluation rows: ``n`` items and ``stderr`` the standard error of the mean over items (sample standard
  deviation / sqrt(n); NaN for one item), as the benchmark computed them (``spade.evals.base``).
* training ``agent_win_rate``: ``n`` = ``episodes`` of that step, binomial ``stderr`` as above.
* training ``agent_mean_return``: ``n`` = ``episodes``; no ``stderr`` (per-episode returns are not logged).
* ``valid_env_rate``: ``n`` = ``design_attempts``; ``backfilled_share`` and ``mean_regret``: ``n`` =
  ``slots`` of the set designed at that step (the regret is the mean over the slots where it is defined;
  that count is not logged). ``closed_learnable_share`` is logged at the step where a set closes; its ``n``
  is ``slots`` of the regeneration record of ``closed_set_step`` (empty when that record is absent).
  None of these has a ``stderr``.

Provenance columns (config hash, git commit, master seed, evaluation seed) come from each eval file's
``provenance``; training rows take the run's ``summary.json`` provenance, or, without one, the provenance
all eval files of the run agree on (empty otherwise); they have no evaluation seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from spade.core.failures import counts_text, summed

TIDY_COLUMNS = ["run", "step", "benchmark", "metric", "value", "n", "stderr", "config_hash", "git_commit", "seed",
                "eval_seed"]
SORT_KEYS = ["run", "step", "benchmark", "metric"]
EVAL_BENCHMARK = "heldout_library"
TRAINING_BENCHMARK = "training"
PROVENANCE_KEYS = ("config_hash", "git_commit", "seed", "eval_seed")  # eval_seed: evaluation rows only
NOT_RUN = "not run"

# training metric -> the record key that gives its n (None: looked up specially)
TRAINING_METRICS = {
    "agent_win_rate": "episodes",
    "agent_mean_return": "episodes",
    "valid_env_rate": "design_attempts",
    "backfilled_share": "slots",
    "mean_regret": "slots",
    "closed_learnable_share": None,
}

_EVAL_NAME = re.compile(r"^step_(\d+)\.json$")
ROW_KEYS = ("run", "step", "benchmark", "metric", "value", "n", "stderr")


class ReportInputError(ValueError):
    """An input of a report (run folder, metrics log, eval file, table) is missing or malformed."""


# ----- small statistics ----------------------------------------------------------------------------
def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def binomial_stderr(p: float, n) -> float:
    """``sqrt(p (1 - p) / n)``; NaN where ``n`` is missing or not positive."""
    if not _finite(p) or not _finite(n) or n <= 0:
        return math.nan
    return math.sqrt(p * (1.0 - p) / n)


# ----- reading run folders ---------------------------------------------------------------------------
def read_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportInputError(f"missing input file {path}") from None
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path} is not valid JSON: {exc}") from None


def read_yaml(path: str | Path, what: str):
    """A YAML input file's content; ReportInputError naming ``what`` and the file when absent or malformed."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"missing {what} {path}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ReportInputError(f"{path} is not valid YAML: {exc}") from None


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a ``metrics.jsonl``, in file order (blank lines skipped)."""
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"missing metrics log {path}")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportInputError(f"{path}, line {number}: not valid JSON ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ReportInputError(f"{path}, line {number}: expected an object with an integer 'step'")
        records.append(record)
    return records


def eval_files(run_dir: str | Path) -> list[Path]:
    """The ``eval/<benchmark>/step_<NNNNNN>.json`` files of a run, by benchmark and step."""
    folder = Path(run_dir) / "eval"
    if not folder.is_dir():
        return []
    found = [(bench.name, int(m.group(1)), p) for bench in folder.iterdir() if bench.is_dir()
             for p in bench.iterdir() if (m := _EVAL_NAME.match(p.name)) and p.is_file()]
    return [p for *_, p in sorted(found)]


def run_inputs(run_dir: str | Path) -> list[Path]:
    """The files of a run folder besides its evaluation results that :func:`tidy_results` reads."""
    run_dir = Path(run_dir)
    return [run_dir / name for name in ("metrics.jsonl", "summary.json") if (run_dir / name).is_file()]


def _provenance(record: dict) -> dict:
    prov = record.get("provenance") or {}
    return {key: prov.get(key) for key in PROVENANCE_KEYS}


def _row(run, step, benchmark, metric, value, n=None, stderr=math.nan, prov=None) -> dict:
    prov = prov or {}
    return {"run": run, "step": step, "benchmark": benchmark, "metric": metric, "value": float(value),
            "n": n, "stderr": stderr, **{key: prov.get(key) for key in PROVENANCE_KEYS}}


def _eval_rows(run: str, path: Path) -> list[dict]:
    record = read_json(path)
    if not isinstance(record.get("rows"), list):
        raise ReportInputError(f"eval file {path} has no 'rows' list (is it an evaluation result of spade.evals?)")
    prov, rows = _provenance(record), []
    for row in record["rows"]:
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise ReportInputError(f"eval file {path}: a row lacks the key(s) {', '.join(missing)}")
        if _finite(row["value"]):
            stderr = row["stderr"] if _finite(row["stderr"]) else math.nan
            rows.append(_row(run, int(row["step"]), row["benchmark"], row["metric"], row["value"], row["n"], stderr,
                             prov))
    return rows


def _training_rows(run: str, records: list[dict], prov: dict) -> list[dict]:
    slots_at = {r["step"]: r.get("slots") for r in records if r.get("regenerated")}
    rows = []
    for record in records:
        for metric, n_key in TRAINING_METRICS.items():
            value = record.get(metric)
            if not _finite(value):
                continue
            n = record.get(n_key) if n_key else slots_at.get(record.get("closed_set_step"))
            stderr = binomial_stderr(value, n) if metric == "agent_win_rate" else math.nan
            rows.append(_row(run, record["step"], TRAINING_BENCHMARK, metric, value, n, stderr, prov))
    return rows


def tidy_results(run_dirs: list[Path], evals: list[Path] | None = None) -> pd.DataFrame:
    """The tidy table of the given run folders (columns :data:`TIDY_COLUMNS`, sorted by run/step/benchmark/metric).

    ``evals``: the evaluation results to include (each under one of the run folders); None = every result
    found in the folders. Rules pass their declared inputs, so a table never depends on what else exists.

    Raises :class:`ReportInputError` naming the folder where a folder is missing or holds neither eval
    files nor a non-empty ``metrics.jsonl``.
    """
    rows = []
    for run_dir in map(Path, run_dirs):
        if not run_dir.is_dir():
            raise ReportInputError(f"run folder {run_dir} does not exist")
        mine = eval_files(run_dir) if evals is None else [
            Path(p) for p in evals if run_dir.resolve() in Path(p).resolve().parents]
        metrics_path = run_dir / "metrics.jsonl"
        records = read_metrics(metrics_path) if metrics_path.is_file() else []
        if not mine and not records:
            raise ReportInputError(f"run folder {run_dir} has no evaluation results and no metrics.jsonl records")
        summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
        first_eval = read_json(mine[0]) if mine else {}
        run = summary.get("run") or first_eval.get("run") or run_dir.name
        eval_rows = [row for path in mine for row in _eval_rows(run, path)]
        if summary.get("provenance"):
            prov = _provenance(summary)
        else:
            run_keys = PROVENANCE_KEYS[:3]  # training rows have no evaluation seed
            seen = {tuple(row[key] for key in run_keys) for row in eval_rows}
            prov = dict(zip(run_keys, seen.pop())) if len(seen) == 1 else {}
        rows += eval_rows + _training_rows(run, records, prov)
    df = pd.DataFrame(rows, columns=TIDY_COLUMNS)
    duplicated = df.duplicated(SORT_KEYS, keep=False)
    if duplicated.any():
        first = df[duplicated].iloc[0]
        raise ReportInputError(f"two inputs give run {first['run']!r} step {first['step']} {first['benchmark']} "
                               f"{first['metric']}; is a run folder listed twice?")
    return _typed(df).sort_values(SORT_KEYS, kind="mergesort").reset_index(drop=True)


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for column in ("run", "benchmark", "metric", "config_hash", "git_commit"):
        df[column] = df[column].astype("object").where(df[column].notna(), None)
    df["step"] = df["step"].astype("int64")
    for column in ("value", "stderr"):
        df[column] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    for column in ("n", "seed", "eval_seed"):
        df[column] = pd.to_numeric(df[column], errors="coerce").astype("Int64")
    return df[TIDY_COLUMNS]


def read_tidy(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_csv_atomic` back, with the column types of :func:`tidy_results`."""
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"missing results table {path}")
    text = {c: "str" for c in ("run", "benchmark", "metric", "config_hash", "git_commit")}
    df = pd.read_csv(path, dtype=text, keep_default_na=False, na_values=[""])
    missing = [c for c in TIDY_COLUMNS if c not in df.columns]
    if missing:
        raise ReportInputError(f"{path} is not a tidy results table (missing column(s) {', '.join(missing)})")
    return _typed(df)


# ----- writing ---------------------------------------------------------------------------------------
@contextmanager
def atomic_target(path: str | Path):
    """Yield a temporary path in the folder of ``path``; on success it replaces ``path`` (folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the output the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_csv_atomic(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV (no index, ``\\n`` line ends) through a temporary file and ``os.replace``."""
    with atomic_target(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_target(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | Path, data) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


# ----- provenance ------------------------------------------------------------------------------------
def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_fingerprint(runs: Sequence[str], paths: Sequence[Path]) -> str:
    """A short hash of run names and of the names, sizes and modification times of ``paths``.

    The paper rules use it as a parameter: an artifact reruns when a result file of a run it reads changes,
    without declaring those files as inputs (which would pull the jobs that made them, under the current
    config, into the DAG)."""
    digest = hashlib.sha256()
    for run in sorted(set(runs)):
        digest.update(f"run {run}\n".encode())
    for path in paths:
        stat = Path(path).stat()
        digest.update(f"{Path(path).as_posix()} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def sidecar_path(out: str | Path) -> Path:
    """``<out>.provenance.json``: where the provenance of the artifact ``out`` goes."""
    out = Path(out)
    return out.with_name(out.name + ".provenance.json")


def _file_entry(path: Path) -> dict:
    return {"path": path.as_posix(), "sha256": sha256_file(path), "bytes": path.stat().st_size}


def provenance_record(script: str, inputs: list[Path], outputs: list[Path], tidy: pd.DataFrame | None = None,
                      **extra) -> dict:
    """The sidecar of an artifact: the inputs and outputs with their SHA-256, and the run provenance found."""
    from spade import __version__
    from spade.provenance import git_commit

    record = {"script": script, "spade_version": __version__, "generated_at_commit": git_commit(),
              "inputs": [_file_entry(Path(p)) for p in sorted(set(map(Path, inputs)))],
              "outputs": [_file_entry(Path(p)) for p in outputs], **extra}
    if tidy is not None:
        record["runs"] = {
            run: {key: sorted({str(v) for v in group[key].dropna()}) for key in PROVENANCE_KEYS}
            for run, group in tidy.groupby("run", sort=True)}
    return record


def require_files(*paths: str | Path) -> None:
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        raise ReportInputError(f"missing input file(s): {', '.join(missing)}")


# ----- Snakemake benchmarks --------------------------------------------------------------------------
def stage_times(benchmark_dir: str | Path) -> dict[str, float]:
    """rule -> wall seconds (column ``s``) of every Snakemake benchmark TSV under ``benchmark_dir``.

    The rule is the file's path below the folder without ``.tsv``. A file with several rows (Snakemake's
    ``repeat``) gives the mean of its rows.
    """
    folder = Path(benchmark_dir)
    if not folder.is_dir():
        raise ReportInputError(f"benchmark folder {folder} does not exist")
    times = {}
    for path in sorted(folder.rglob("*.tsv")):
        try:
            table = pd.read_csv(path, sep="\t")
            seconds = pd.to_numeric(table["s"], errors="raise")
        except (KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise ReportInputError(f"{path} is not a Snakemake benchmark file (column 's'): {exc}") from None
        if seconds.empty:
            raise ReportInputError(f"{path} has no benchmark rows")
        times[path.relative_to(folder).with_suffix("").as_posix()] = float(seconds.mean())
    return times


def stage_seconds(times: dict[str, float], stage: str, prefix: bool = False) -> float | None:
    """Seconds of ``stage`` (with ``prefix``: summed over ``stage``, ``stage_*``, ``stage/*``); None if absent."""
    hits = [s for rule, s in times.items()
            if rule == stage or (prefix and (rule.startswith(stage + "_") or rule.startswith(stage + "/")))]
    return sum(hits) if hits else None


# ----- series for figures and tables -----------------------------------------------------------------
def training_series(records: list[dict], key: str, regeneration_only: bool = False) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` over the metrics records where it is finite."""
    pairs = [(r["step"], float(r[key])) for r in records
             if _finite(r.get(key)) and (r.get("regenerated") or not regeneration_only)]
    return [s for s, _ in pairs], [v for _, v in pairs]


def heldout(df: pd.DataFrame, run: str, metric: str = "win_rate", benchmark: str = EVAL_BENCHMARK) -> pd.DataFrame:
    """The rows of ``run`` for ``benchmark``/``metric`` (columns step, value, n, stderr), by step."""
    mask = (df["run"] == run) & (df["benchmark"] == benchmark) & (df["metric"] == metric)
    return df.loc[mask, ["step", "value", "n", "stderr"]].sort_values("step").reset_index(drop=True)


# ----- figures -------------------------------------------------------------------------------------------
COLUMN_WIDTH_IN = 3.35  # one column of a two-column paper
PAPER_RC = {"font.size": 7.5, "axes.titlesize": 7.5, "axes.labelsize": 7.5, "legend.fontsize": 6.5,
            "xtick.labelsize": 6.5, "ytick.labelsize": 6.5, "axes.linewidth": 0.6, "lines.linewidth": 1.1,
            "lines.markersize": 3.5, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
            "grid.linewidth": 0.4, "grid.alpha": 0.35, "legend.frameon": False, "pdf.fonttype": 42,
            "savefig.bbox": "tight", "savefig.pad_inches": 0.02}


def save_figure(fig, out: str | Path, dpi: int = 300) -> list[Path]:
    """Save ``fig`` as ``out`` (PDF) and the PNG of the same stem, each atomically; returns both paths."""
    out = Path(out)
    paths = [out, out.with_suffix(".png")] if out.suffix.lower() != ".png" else [out]
    for path in paths:
        fmt = path.suffix.lstrip(".").lower()
        # no creation date in the PDF, so that an unchanged figure gives unchanged bytes
        metadata = {"CreationDate": None} if fmt == "pdf" else None
        with atomic_target(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata)
    return paths


# ----- the run table ---------------------------------------------------------------------------------
def stages(run: str) -> list:
    """(benchmark name, summed over ``name_*``) of each pipeline stage, as the rules name their benchmarks."""
    return [("prepare_model", True), ("build_corpus", True), (f"train_{run}", False), (f"evaluate_{run}", True),
            ("results_table", False)]


def _fmt(value, decimals: int, signed: bool = False) -> str:
    if value is None or not _finite(value):
        return NOT_RUN
    return f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"


def run_table_rows(run: str, tidy: pd.DataFrame, records: list[dict], times: dict[str, float],
                   decimals: int = 3, second_decimals: int = 1, heldout_measure: str = f"{EVAL_BENCHMARK}:win_rate") -> list[tuple[str, str, str]]:
    """The rows (quantity, value, detail) of the run table; every missing source reads ``not run``.
    ``heldout_measure``: 'benchmark:metric' of the held-out rows (the run's first ``eval.select_by`` entry)."""
    rows = [(f"Wall time: {stage}{'_*' if prefix else ''} [s]",
             _fmt(stage_seconds(times, stage, prefix), second_decimals), "Snakemake benchmark")
            for stage, prefix in stages(run)]
    rows += phase_rows(records, second_decimals)

    regen = [r for r in records if r.get("regenerated")]
    attempts = sum(r["design_attempts"] for r in regen if _finite(r.get("design_attempts")))
    valid = sum(r["designer_valid"] for r in regen if _finite(r.get("designer_valid")))
    interval = ""
    if attempts:
        from spade.analysis.rates import wilson_interval

        low, high = wilson_interval(int(valid), int(attempts))
        interval = f", 95% Wilson interval [{low:.{decimals}f}, {high:.{decimals}f}]"
    rows.append(("Designer valid-environment rate", _fmt(valid / attempts if attempts else None, decimals),
                 f"{valid} of {attempts} design attempts{interval}" if attempts else "no design attempts logged"))
    # why nothing is earned (spade.core.failures): rejections by reason code and by stage, episodes by cause
    for label, key in (("Designer rejections (reason codes)", "reject_reasons"),
                       ("Designer rejections by failing stage", "design_fail_stages"),
                       ("Hint-arm episodes by cause", "hint_causes"), ("No-hint episodes by cause", "agent_causes")):
        logged = [r for r in records if isinstance(r.get(key), dict)]
        counts = summed(r[key] for r in logged)
        rows.append((label, str(sum(counts.values())) if logged else NOT_RUN,
                     counts_text(counts) or "none" if logged else f"no step logged {key}"))
    _, shares = training_series(records, "backfilled_share", regeneration_only=True)
    rows.append(("Backfilled share (mean over regenerations)",
                 _fmt(sum(shares) / len(shares) if shares else None, decimals),
                 f"{len(shares)} regeneration steps" if shares else "no regeneration logged"))

    def _se(value):  # an undefined standard error is not a missing source
        return _fmt(value, decimals) if value is not None and _finite(value) else "n/a"

    benchmark, _, metric = heldout_measure.partition(":")
    label = "Held-out win rate" if heldout_measure == f"{EVAL_BENCHMARK}:win_rate" else f"Held-out {benchmark} {metric}"
    evals = heldout(tidy, run, metric, benchmark)
    base = evals[evals["step"] == 0]
    after = evals[evals["step"] > 0].tail(1)
    before_v = float(base["value"].iloc[0]) if len(base) else None
    after_v = float(after["value"].iloc[0]) if len(after) else None

    def detail(frame):
        if not len(frame):
            return "no eval file"
        row = frame.iloc[0]
        n = "?" if pd.isna(row["n"]) else int(row["n"])
        return f"step {int(row['step'])}, n = {n}, s.e. {_se(row['stderr'])}"

    diff = after_v - before_v if before_v is not None and after_v is not None else None
    diff_se = (math.sqrt(base["stderr"].iloc[0] ** 2 + after["stderr"].iloc[0] ** 2) if diff is not None else None)
    rows += [(f"{label}, base (step 0)", _fmt(before_v, decimals), detail(base)),
             (f"{label}, last checkpoint", _fmt(after_v, decimals), detail(after)),
             (f"{label}, change", _fmt(diff, decimals, signed=True),
              f"s.e. {_se(diff_se)}" if diff is not None else "needs both evaluations")]

    played = [r for r in records if _finite(r.get("agent_win_rate")) and r.get("episodes")]
    for name, pick in (("first", played[:1]), ("last", played[-1:])):
        record = pick[0] if pick else None
        rows.append((f"Training win rate (no hint), {name} step", _fmt(record and record["agent_win_rate"], decimals),
                     training_interval(record, "win_rate", decimals) if record else "no log"))
        rows.append((f"Training mean return (no hint), {name} step",
                     _fmt(record and record.get("agent_mean_return"), decimals),
                     training_interval(record, "return", decimals) if record else "no log"))
    rows.append(learning_signal_row(played, decimals))
    return rows


def phase_rows(records: list[dict], second_decimals: int = 1) -> list[tuple[str, str, str]]:
    """Where the training steps' time went (``phase_*`` metrics, spade.core.phases): per phase, its seconds summed over the
    logged steps, its share of their wall time and its generation tokens; nothing when no step logged phases."""
    from spade.core.phases import PHASES

    timed = [r for r in records if _finite(r.get("step_seconds"))]
    if not timed:
        return []
    total = sum(r["step_seconds"] for r in timed)
    rows = []
    for name in (*PHASES, "other"):
        seconds = sum(r.get(f"phase_{name}_seconds", 0.0) for r in timed)
        if not seconds:
            continue
        detail = f"{seconds / total:.0%} of {total:.{second_decimals}f} s over {len(timed)} steps"
        prefill = sum(r.get(f"phase_{name}_prefill_tokens", 0) for r in timed)
        decode = sum(r.get(f"phase_{name}_decode_tokens", 0) for r in timed)
        prompt = sum(r.get(f"phase_{name}_prompt_tokens", 0) for r in timed)
        if prefill or decode:
            detail += (f"; {prefill:,} of {prompt:,} prompt tokens prefilled, {decode:,} sampled, "
                       f"{(prefill + decode) / seconds:.0f} tokens/s")
        if name == "optimizer" and (tokens := sum(r.get("train_forward_tokens", 0) for r in timed)):
            detail += f"; {tokens:,} tokens forward and backward, {tokens / seconds:.0f} tokens/s"
        rows.append((f"Step time: {name} [s]", _fmt(seconds, second_decimals), detail))
    return rows


def learning_signal(records: list) -> tuple[float, float, float, int, int] | None:
    """Mean no-hint training return of the last quarter of the played steps minus the first quarter's, with its
    95% percentile bootstrap interval over whole steps (each step's mean of ``agent_returns``: the episodes of one
    step share its policy, so they are not independent draws; at least one step per quarter, no overlap):
    (difference, low, high, steps first, steps last); None with fewer than 2 steps or no per-episode log."""
    from spade.analysis.rates import bootstrap_mean_difference

    played = [r for r in records if r.get("agent_returns")]
    if len(played) < 2:
        return None
    k, means = max(1, len(played) // 4), [sum(r["agent_returns"]) / len(r["agent_returns"]) for r in played]
    return (*bootstrap_mean_difference(means[:k], means[-k:], seed=0), k, k)


def learning_signal_row(records: list, decimals: int = 3) -> tuple[str, str, str]:
    signal = learning_signal(records)
    name = "Training mean return (no hint), last quarter - first quarter of steps"
    if signal is None:
        return name, "not run", "needs 2 steps with per-episode returns (agent_returns)"
    diff, low, high, n_first, n_last = signal
    verdict = "excludes 0" if low > 0 or high < 0 else "includes 0"
    return (name, _fmt(diff, decimals, signed=True), f"95% bootstrap interval over steps [{low:.{decimals}f}, "
            f"{high:.{decimals}f}] ({verdict}); {n_first} and {n_last} steps")


def step_interval(record: dict, kind: str) -> tuple[float, float] | None:
    """The 95% interval of one step's no-hint ``win_rate`` (Wilson, wins = rate x episodes) or mean ``return``
    (normal approximation: mean +- 1.96 sd / sqrt(n), sd = ``agent_return_sd``); None without the data."""
    n = record.get("episodes")
    if not (_finite(n) and n > 0):
        return None
    if kind == "win_rate":
        from spade.analysis.rates import wilson_interval

        rate = record.get("agent_win_rate")
        return wilson_interval(round(rate * n), int(n)) if _finite(rate) else None
    sd, mean = record.get("agent_return_sd"), record.get("agent_mean_return")
    if not (_finite(sd) and _finite(mean)):
        return None
    half = 1.959964 * sd / math.sqrt(n)
    return mean - half, mean + half


def training_interval(record: dict, kind: str, decimals: int = 3) -> str:
    """"step s, n = N, 95% interval [a, b]" of one step (:func:`step_interval`)."""
    head = f"step {record['step']}, n = {int(record['episodes'])}"
    interval = step_interval(record, kind)
    if interval is None:
        return f"{head}, interval n/a (no return sd logged)"
    name = "95% Wilson interval" if kind == "win_rate" else "95% interval"
    return f"{head}, {name} [{interval[0]:.{decimals}f}, {interval[1]:.{decimals}f}]"


def render_markdown(rows: list[tuple[str, str, str]], caption: str) -> str:
    lines = [f"**{caption}**", "", "| Quantity | Value | Detail |", "|---|---:|---|"]
    lines += [f"| {q} | {v} | {d} |" for q, v, d in rows]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    specials = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(specials.get(ch, ch) for ch in text)


def render_latex(rows: list[tuple[str, str, str]], caption: str, label: str) -> str:
    body = "\n".join(f"{latex_escape(q)} & {latex_escape(v)} & {latex_escape(d)} \\\\" for q, v, d in rows)
    return (f"% generated; needs \\usepackage{{booktabs}}\n\\begin{{table}}[t]\n\\centering\\small\n"
            f"\\caption{{{latex_escape(caption)}}}\n\\label{{{label}}}\n\\begin{{tabular}}{{lrl}}\n\\toprule\n"
            f"Quantity & Value & Detail \\\\\n\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}\n\\end{{table}}\n")


def run_script(main, argv=None) -> int:
    """Run a paper script's ``main(argv)``; an input error ends it with status 2 and a one-line message."""
    import sys

    try:
        main(argv)
    except ReportInputError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        return 2
    return 0
