"""What the scripts of the paper's environment tables (7 and 8) share, and the measures other artifacts reuse.

Tables 7 and 8 read run folders, not evaluation results: the environment archives ``envs/set_<step>.json``
(:func:`env_sets_with_paths`) and ``metrics.jsonl``. They count only environments the designer wrote
(``source == "designer"``; slots backfilled from the built-in library are not designer output) that validated.

* Table 7's signals (:data:`TABLE7_SIGNALS`) and its measures per training phase (:func:`env_quality`: learnable
  share, program length and hidden state variables through :mod:`spade.analysis`; agent win rate and turns per
  episode from ``metrics.jsonl``, weighted by episodes);
* Table 8's diversity measures (:func:`diversity`: Vendi/n with SBERT all-MiniLM-L6-v2 and with TF-IDF + LSA
  embeddings, :func:`mean_pairwise_distance` with SBERT; :func:`default_embedders`);
* the row detail of a run off the paper's scale (:func:`scale_detail`) and the command line of both scripts
  (:func:`run_folder_table_main`).

The quoted numbers (``paper/scripts/num_<group>.py``) reuse the measures and the environment-source table
(``paper/scripts/table_env_sources.py``) the archive reader and the embedders.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

from spade.paper.scale import scale_word
from spade.paper.report import ReportInputError, read_metrics
from spade.paper.table_runs import load_table_runs, mapped_runs, run_provenance
from spade.paper.tables import mean, report_written, write_table


# ----- run folders ------------------------------------------------------------------------------------------
def scale_detail(run: str, off: list) -> str:
    """The row detail of a run's values: its name and, off the paper's scale (spade.paper.scale.off_scale), its
    scale."""
    return f"run {run}" + (f"; {scale_word(off)}: {off[0].label()}, not comparable" if off else "")


_SET_FILE = re.compile(r"^set_(\d+)\.json$")  # as spade.analysis.read_env_sets


def env_sets_with_paths(run_dir: Path) -> list[tuple[Path, dict]]:
    """The environment sets of a run folder in step order, each with its file and its step (key ``_step``)."""
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
# reported signal (a row of table7_env_quality.csv) -> (measure of env_quality, or "rubric": not computed; decimals)
TABLE7_SIGNALS = {
    "learnable-band fraction (win rate in [0.2; 0.8])": ("learnable_share", 2),
    "RA win rate": ("agent_win_rate", 2),
    "well-posed (LLM rubric)": ("rubric", 2),
    "verifiable terminal answer (LLM rubric)": ("rubric", 2),
    "interaction depth (turns per episode)": ("turns", 1),
    "program length (LOC)": ("program_length", 0),
    "hidden state variables": ("hidden_state_variables", 1),
}


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
            measures[measure][phase] = {"value": mean(values) if values else None, "n": len(values),
                                        "inputs": files}
    return measures, inputs, skipped


# ----- Table 8: diversity -----------------------------------------------------------------------------------
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
    """The embedders of Table 8: ``{"sbert": f, "tfidf_lsa": f}`` with f(texts) -> [n, d] (:mod:`spade.analysis`)."""
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


# ----- the command line of Tables 7 and 8 -------------------------------------------------------------------
def run_folder_table_main(table_name: str, title: str, build: Callable, script: str, argv=None) -> None:
    """The command line of the scripts of Tables 7 and 8 (they read run folders, not the tidy table): ``build``
    (mapping, reported CSV, runs root) gives the table, the provenance of its cells and the files it read."""
    parser = argparse.ArgumentParser(description=f"{title}, ours beside the paper's")
    parser.add_argument("--mapping", type=Path, required=True, help="run mapping (paper/table_runs.yaml)")
    parser.add_argument("--reported", type=Path, required=True, help="reported CSV (paper/reported/...)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder of the run folders (results/runs)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    mapping = load_table_runs(args.mapping)
    table, cells, inputs = build(mapping, args.reported, args.runs_root)
    runs = mapped_runs(mapping, table_name)
    summaries = [args.runs_root / run / "summary.json" for run in runs]
    inputs = [args.mapping, args.reported, *inputs, *[p for p in summaries if p.is_file()]]
    provenance = {run: run_provenance(args.runs_root / run) for run in runs if (args.runs_root / run).is_dir()}
    outputs = write_table(table, args.out, script, inputs, cells, None, mapping=str(args.mapping),
                          paper_table=table_name, runs=provenance)
    report_written(outputs, table)

