"""Shared code of the paper figure scripts (paper/scripts/fig<N>_<name>.py; figure list: FIGURES.md).

Every figure is drawn only from our own run folders, ``<runs_root>/<run>/`` (evaluation results
``eval/<benchmark>/step_NNNNNN.json``, ``metrics.jsonl``, ``envs/set_*.json``, ``selected_checkpoint.json``),
for the runs that ``paper/figure_runs.yaml`` maps to the figure. A run or a value that is not there is drawn as
nothing; the figure says so in a note and the sidecar JSON lists it under ``missing``. The data preparation
(:func:`curve`, :func:`suite_average_curve`, :func:`relative_curve`, ...) is separate from the drawing so that
it can be tested on hand-made folders.

Every legend entry (or the panel title, where the legend names something else) names the run that drew it and
its scale (model card, steps, from ``summary.json``). A run that is not the paper's backbone of its curve at the
paper's step budget (:func:`spade.paper.scale.comparable`) puts the toy-scale banner on top of the figure and into the
sidecar's ``banner`` (empty when every drawn run is at the paper's scale).
"""

from __future__ import annotations

import argparse
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from spade.paper.report import (
    COLUMN_WIDTH_IN,
    PAPER_RC,
    ReportInputError,
    files_fingerprint,
    provenance_record,
    read_metrics,
    read_yaml,
    sidecar_path,
    write_json_atomic,
)
from spade.paper.scale import banner, comparable, run_scale

PERCENT = 100.0
GREY = "#555555"
BANNER_RED = "#b00000"  # as the toy-scale banner of spade.paper.comparison
REPORTED_DIR = Path(__file__).resolve().parents[3] / "paper" / "reported"
PALETTE = ("#1f77b4", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#e6ab02")

# the 8 benchmark panels of figures 5, 10 and 14: (paper key, title, benchmark, metric) — as Table 1
GAMES_PANELS = (
    ("aime25", "AIME25", "aime", "avg@32/2025"),
    ("aime26", "AIME26", "aime", "avg@32/2026"),
    ("gpqa_diamond", "GPQA-D", "gpqa_diamond", "accuracy"),
    ("lcb_v6", "LCB-v6", "livecodebench", "pass@1"),
    ("rg_math", "RG-Math", "reasoning_gym_hard", "math"),
    ("rg_algorithmic", "RG-Algo", "reasoning_gym_hard", "algorithmic"),
    ("rg_cognition", "RG-Cog", "reasoning_gym_hard", "cognition"),
    ("rg_logic", "RG-Logic", "reasoning_gym_hard", "logic"),
)
SIX_BENCHMARKS = ("gpqa_diamond", "lcb_v6", "rg_math", "rg_algorithmic", "rg_cognition", "rg_logic")  # figure 11
EIGHT_BENCHMARKS = tuple(p[0] for p in GAMES_PANELS)
PANEL_METRIC = {p[0]: (p[2], p[3]) for p in GAMES_PANELS}
# figure 1 (right): benchmark families, each the mean of its parts (as Table 2)
TOOL_FAMILIES = (
    ("tau2", [("tau2", "pass^1/retail"), ("tau2", "pass^1/airline"), ("tau2", "pass^1/telecom")]),
    ("BFCL v4 MT", [("bfcl_multi_turn", "accuracy/base"), ("bfcl_multi_turn", "accuracy/miss_func"),
                    ("bfcl_multi_turn", "accuracy/miss_param"), ("bfcl_multi_turn", "accuracy/long_context")]),
    ("ACEBench-Agent", [("acebench", "multi_step"), ("acebench", "multi_turn")]),
)

# which files of a run folder each kind of figure reads (for the Snakemake fingerprint and the sidecar)
RUN_FILE_PATTERNS = {
    "eval": ("summary.json", "eval/*/step_*.json"),
    "selected": ("summary.json", "selected_checkpoint.json", "eval/*/step_*.json"),
    "metrics": ("summary.json", "metrics.jsonl"),
    "envs": ("summary.json", "envs/set_*.json"),
}
# figure 12: the paper backbone of each model size (the backbone column of Table 1, reported/table1_games.csv)
SIZE_BACKBONES = {"4B": "Qwen3-4B-Instruct-2507", "8B": "Qwen3-8B", "30B": "Qwen3-30B-A3B-Instruct-2507"}
FIGURE_KINDS = {"fig1_middle": "eval", "fig1_right": "eval", "fig5": "eval", "fig6": "envs", "fig7": "envs",
                "fig10": "eval", "fig11": "eval", "fig12": ("selected", "metrics"), "fig13": "eval", "fig14": "eval",
                "fig16": "envs", "fig17": "metrics", "fig18": "envs"}


# ----- the mapping --------------------------------------------------------------------------------------
def load_figure_runs(path: str | Path) -> dict:
    """``paper/figure_runs.yaml`` as {figure: section}; ReportInputError naming the file on a bad entry."""
    path = Path(path)
    data = read_yaml(path, "figure run mapping")
    figures = data.get("figures") if isinstance(data, dict) else None
    if not isinstance(figures, dict):
        raise ReportInputError(f"{path}: key 'figures' must be a mapping")
    for name, section in figures.items():
        if not isinstance(section, dict):
            raise ReportInputError(f"{path}: figures.{name} must be a mapping")
        for i, entry in enumerate(section.get("series") or []):
            if not isinstance(entry, dict) or not isinstance(entry.get("label"), str) or not (
                    entry.get("run") is None or isinstance(entry.get("run"), str)):
                raise ReportInputError(f"{path}: figures.{name}.series[{i}] must be {{label: str, run: str|null}}")
        for size, entry in (section.get("sizes") or {}).items():
            if not isinstance(entry, dict) or set(entry) - {"spade", "grpo"}:
                raise ReportInputError(f"{path}: figures.{name}.sizes.{size} must be {{spade: run, grpo: run}}")
    return {"path": str(path), "figures": figures}


def figure_section(mapping: dict, figure: str) -> dict:
    section = mapping["figures"].get(figure)
    if section is None:
        raise ReportInputError(f"{mapping['path']}: key 'figures.{figure}' is missing")
    return section


def series_of(section: dict) -> list[tuple[str, str | None]]:
    return [(e["label"], e.get("run")) for e in section.get("series") or []]


def figure_runs(mapping: dict, figure: str) -> list[str]:
    """Every run name the mapping gives for ``figure`` (sorted)."""
    section = mapping["figures"].get(figure) or {}
    runs = {run for _, run in series_of(section) if run}
    runs |= {run for entry in (section.get("sizes") or {}).values() for run in entry.values() if run}
    return sorted(runs)


def _kinds(figure: str) -> tuple:
    kind = FIGURE_KINDS.get(figure, "eval")
    return kind if isinstance(kind, tuple) else (kind,)


def run_files(runs_root: str | Path, runs: Sequence[str], figure: str) -> list[Path]:
    """The existing files of the named run folders that the figure reads, sorted."""
    found = set()
    for run in runs:
        folder = Path(runs_root) / run
        if folder.is_dir():
            for kind in _kinds(figure):
                for pattern in RUN_FILE_PATTERNS[kind]:
                    found.update(p for p in folder.glob(pattern) if p.is_file())
    return sorted(found)


def run_fingerprint(runs_root: str | Path, runs: Sequence[str], figure: str) -> str:
    """The Snakemake parameter of a figure's rule: :func:`spade.paper.report.files_fingerprint` of :func:`run_files`."""
    return files_fingerprint(runs, run_files(runs_root, runs, figure))


# ----- data preparation: evaluation curves ------------------------------------------------------------------
def load_eval(runs_root: str | Path, runs: Sequence[str]) -> tuple[pd.DataFrame, list[Path]]:
    """Evaluation results of the runs (tidy rows) and the files read; missing folders are skipped."""
    from spade.paper.table_runs import load_results

    return load_results(runs_root=runs_root, runs=[r for r in runs if r])


def curve(tidy: pd.DataFrame, run: str, benchmark: str, metric: str) -> tuple[list[int], list[float]]:
    """Steps (ascending, step 0 = base model) and values of one metric of one run."""
    if not len(tidy):
        return [], []
    rows = tidy[(tidy["run"] == run) & (tidy["benchmark"] == benchmark) & (tidy["metric"] == metric)]
    rows = rows.dropna(subset=["value"]).sort_values("step")
    return [int(s) for s in rows["step"]], [float(v) for v in rows["value"]]


def _values_by_step(tidy, run, parts) -> dict[int, list]:
    """step -> [value of each part or None]."""
    table: dict[int, list] = {}
    for i, (benchmark, metric) in enumerate(parts):
        for step, value in zip(*curve(tidy, run, benchmark, metric)):
            table.setdefault(step, [None] * len(parts))[i] = value
    return table


def mean_curve(tidy: pd.DataFrame, run: str, parts: Sequence[tuple[str, str]]) -> tuple[list[int], list[float], list[int]]:
    """Mean of ``parts`` [(benchmark, metric)] per step, only at steps where every part has a value.
    Returns (steps, means, incomplete steps)."""
    steps, means, incomplete = [], [], []
    for step, values in sorted(_values_by_step(tidy, run, parts).items()):
        if any(v is None for v in values):
            incomplete.append(step)
            continue
        steps.append(step)
        means.append(sum(values) / len(values))
    return steps, means, incomplete


def suite_average_curve(tidy: pd.DataFrame, run: str, keys: Sequence[str] = EIGHT_BENCHMARKS):
    """Figures 11 and 13: the average of the paper benchmarks ``keys`` (percent) per step where all exist."""
    steps, means, incomplete = mean_curve(tidy, run, [PANEL_METRIC[k] for k in keys])
    return steps, [m * PERCENT for m in means], incomplete


def relative_curve(tidy: pd.DataFrame, run: str, parts: Sequence[tuple[str, str]], base_run: str | None = None):
    """Figure 1: per trained step, the mean over ``parts`` of (score - base) / base in percent, the base being
    step 0 of ``base_run`` (default ``run``). Needs every part at the step and a nonzero base for each.
    Returns (steps, values, problems) with the reasons a step or the base is left out."""
    base = _values_by_step(tidy, base_run or run, parts).get(0)
    problems = []
    if base is None or any(v is None for v in base):
        return [], [], [f"base evaluation (step 0) of run {base_run or run} for every one of {len(parts)} parts"]
    if any(v == 0 for v in base):
        return [], [], [f"a nonzero base score for every part (run {base_run or run}); relative change undefined"]
    steps, values = [], []
    for step, scores in sorted(_values_by_step(tidy, run, parts).items()):
        if step == 0:
            continue
        if any(v is None for v in scores):
            problems.append(f"run {run} step {step}: not every part evaluated")
            continue
        steps.append(step)
        values.append(sum((s - b) / b for s, b in zip(scores, base)) / len(parts) * PERCENT)
    return [0] + steps, [0.0] + values, problems


def family_relative_curve(tidy: pd.DataFrame, run: str, parts: Sequence[tuple[str, str]]):
    """Figure 1 (right): relative improvement (%) of the family mean over step 0 of the same run."""
    steps, means, incomplete = mean_curve(tidy, run, parts)
    if 0 not in steps:
        return [], [], [f"base evaluation (step 0) of run {run}"]
    base = means[steps.index(0)]
    if base == 0:
        return [], [], [f"run {run}: base score 0, relative improvement undefined"]
    problems = [f"run {run} step {s}: not every part evaluated" for s in incomplete]
    return steps, [(m - base) / base * PERCENT for m in means], problems


# ----- drawing helpers --------------------------------------------------------------------------------------
@dataclass
class FigureContext:
    """What a figure script collects while drawing: the input files and what is missing."""

    figure: str
    mapping: dict
    runs_root: Path
    inputs: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    shown: dict = field(default_factory=dict)  # label -> run actually drawn
    embedding: str = "sbert"  # figures 7 and 18: sbert (paper) or tfidf (TF-IDF + LSA)
    off: list = field(default_factory=list)  # spade.paper.scale.RunScale of each drawn run not at its curve's paper scale
    off_backbones: list = field(default_factory=list)  # the paper backbones those curves stand for

    @property
    def section(self) -> dict:
        return figure_section(self.mapping, self.figure)

    def run_dir(self, run: str | None) -> Path | None:
        if not run:
            return None
        folder = self.runs_root / run
        return folder if folder.is_dir() else None

    def miss(self, what: str) -> None:
        if what not in self.missing:
            self.missing.append(what)

    def series_label(self, label: str, run: str, backbone: str | None = None, width: int = 42) -> str:
        """The legend (or title) text of values drawn from ``run``: the label, the run and its scale (model card,
        steps). A curve the paper gives to ``backbone`` (default: the paper's 30B) but drawn from a run that did
        not train it for the paper's steps puts the toy-scale banner on the figure (:meth:`banner_text`)."""
        from spade.paper.scale import PAPER_30B

        backbone = backbone or PAPER_30B
        scale = run_scale(self.runs_root, run)
        if not comparable(scale, backbone):
            self.off.append(scale)
            self.off_backbones.append(backbone)
        return textwrap.fill(f"{label} — run {run} ({scale.label()})", width)

    def banner_text(self) -> str:
        """spade.paper.scale.banner of the drawn runs not at the paper's scale; empty when every one is."""
        return banner(self.off, self.off_backbones)


def no_data(ax, what: str) -> None:
    ax.text(0.5, 0.5, "no data\n" + textwrap.fill(f"({what})", 34), transform=ax.transAxes, ha="center",
            va="center", color=GREY, fontsize=6)


def missing_note(fig, missing: Sequence[str], limit: int = 4) -> None:
    """A short "missing: ..." line under the figure (the sidecar lists everything)."""
    if not missing:
        return
    shown = list(missing[:limit]) + ([f"... {len(missing) - limit} more (see sidecar)"] if len(missing) > limit else [])
    text = textwrap.fill("missing: " + "; ".join(shown), 140)
    fig.text(0.0, -0.01, text, ha="left", va="top", fontsize=5.5, color="#b2182b")


def show_banner(fig, ctx: FigureContext) -> None:
    """The toy-scale banner on top of the figure, wrapped to its width (about 21 characters of 6 pt per inch)."""
    text = ctx.banner_text()
    if not text:
        return
    text = textwrap.fill(text, int(fig.get_figwidth() * 21))
    if fig.legends:  # constrained layout would put a suptitle over the "outside upper" figure legend: its title
        fig.legends[0].set_title(text, prop={"size": 6, "weight": "bold"})
        fig.legends[0].get_title().set_color(BANNER_RED)
    else:
        fig.suptitle(text, fontsize=6, fontweight="bold", color=BANNER_RED)


def base_line(ax, value: float, label: str = "base") -> None:
    ax.axhline(value, color=GREY, linestyle="--", linewidth=0.8, label=label)


def check_runs(ctx: FigureContext) -> list[tuple[int, str, str]]:
    """(index, label, run) of the series whose run folder exists; the others are listed missing."""
    present = []
    for i, (label, run) in enumerate(series_of(ctx.section)):
        if not run:
            ctx.miss(f"{label}: no run mapped (in {ctx.mapping['path']})")
        elif ctx.run_dir(run) is None:
            ctx.miss(f"{label}: run {run} not run (no folder under {ctx.runs_root})")
        else:
            present.append((i, label, run))
    return present


def eval_panels(ctx: FigureContext, fig_axes, tidy, series, panels=GAMES_PANELS) -> None:
    """Figures 5, 10, 14: one panel per benchmark, one curve per series, the dashed base from step 0."""
    base_run = ctx.section.get("base") or (series_of(ctx.section)[0][1] if series_of(ctx.section) else None)
    for ax, (key, title, benchmark, metric) in zip(fig_axes, panels):
        ax.set_title(title, loc="left")
        drawn = False
        base_steps, base_values = curve(tidy, base_run, benchmark, metric) if base_run else ([], [])
        if 0 in base_steps:
            base_line(ax, base_values[base_steps.index(0)] * PERCENT)
        else:
            ctx.miss(f"{title}: base evaluation (step 0) of run {base_run}")
        for i, label, run in series:
            steps, values = curve(tidy, run, benchmark, metric)
            if not steps:
                ctx.miss(f"{title}: no evaluation of run {run} ({label})")
                continue
            ax.plot(steps, [v * PERCENT for v in values], color=PALETTE[i % len(PALETTE)], marker=".",
                    label=ctx.series_label(label, run))
            ctx.shown[label] = run
            drawn = True
        if not drawn:
            no_data(ax, f"{benchmark} {metric}")


def figure_main(figure: str, script: str, draw: Callable[[FigureContext], object], argv=None, doc: str = "") -> None:
    """The command line of every figure script: --mapping, --runs-root, --out (PDF; the PNG goes next to it).

    ``draw(ctx)`` returns the matplotlib figure; it records inputs and missing items in ``ctx``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spade.paper.report import save_figure

    parser = argparse.ArgumentParser(description=(doc or figure).splitlines()[0])
    parser.add_argument("--mapping", type=Path, default=Path("paper/figure_runs.yaml"),
                        help="figure run mapping (paper/figure_runs.yaml)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder holding one folder per run")
    parser.add_argument("--out", type=Path, required=True, help="PDF to write (the PNG goes next to it)")
    parser.add_argument("--embedding", choices=("sbert", "tfidf"), default="sbert",
                        help="environment embedding of figures 7 and 18 (default: SBERT all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    mapping = load_figure_runs(args.mapping)
    ctx = FigureContext(figure, mapping, args.runs_root, inputs=[args.mapping], embedding=args.embedding)
    with plt.rc_context(PAPER_RC):
        fig = draw(ctx)
        show_banner(fig, ctx)
        missing_note(fig, ctx.missing)
        outputs = save_figure(fig, args.out)
        plt.close(fig)
    runs = figure_runs(mapping, figure)
    ctx.inputs += run_files(args.runs_root, runs, figure)
    from spade.paper.table_runs import run_provenance

    write_json_atomic(sidecar_path(args.out), provenance_record(
        script, ctx.inputs, outputs, figure=figure, series=ctx.shown, embedding=args.embedding,
        runs={run: run_provenance(args.runs_root / run) for run in runs if (args.runs_root / run).is_dir()},
        scales={run: run_scale(args.runs_root, run).label() for run in runs if (args.runs_root / run).is_dir()},
        missing=ctx.missing, banner=ctx.banner_text()))
    for what in ctx.missing:
        print(f"missing: {what}")
    print(f"wrote {', '.join(map(str, outputs))}")


def subplots(nrows: int, ncols: int, height: float, width: float = 2 * COLUMN_WIDTH_IN, **kw):
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", squeeze=False, **kw)


def finish_legend(fig, axes) -> None:
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="outside upper center", ncol=min(len(labels), 6))


# ----- eval figures --------------------------------------------------------------------------------------
def draw_eval_panels(ctx: FigureContext):
    """Figures 5, 10, 14: 2 x 4 benchmark panels."""
    series = check_runs(ctx)
    tidy, files = load_eval(ctx.runs_root, [run for _, _, run in series])
    ctx.inputs += files
    fig, axes = subplots(2, 4, 3.4)
    axes = axes.ravel()
    eval_panels(ctx, axes, tidy, series)
    for ax in axes[4:]:
        ax.set_xlabel("training step")
    for ax in (axes[0], axes[4]):
        ax.set_ylabel("score (%)")
    finish_legend(fig, axes)
    return fig


def draw_suite_average(ctx: FigureContext, keys: Sequence[str], ylabel: str):
    """Figures 11 and 13: the suite average of ``keys`` per step, one curve per series, dashed base."""
    series = check_runs(ctx)
    tidy, files = load_eval(ctx.runs_root, [run for _, _, run in series])
    ctx.inputs += files
    fig, axes = subplots(1, 1, 2.3, COLUMN_WIDTH_IN)
    ax = axes[0, 0]
    base_run = ctx.section.get("base") or (series_of(ctx.section)[0][1] if series_of(ctx.section) else None)
    b_steps, b_values, _ = suite_average_curve(tidy, base_run, keys) if base_run else ([], [], [])
    if 0 in b_steps:
        base_line(ax, b_values[b_steps.index(0)])
    else:
        ctx.miss(f"base suite average (step 0 of run {base_run}, all of {', '.join(keys)})")
    drawn = False
    for i, label, run in series:
        steps, values, incomplete = suite_average_curve(tidy, run, keys)
        for step in incomplete:
            ctx.miss(f"{label}: run {run} step {step} lacks some of {', '.join(keys)}")
        if steps:
            ax.plot(steps, values, color=PALETTE[i % len(PALETTE)], marker=".", label=ctx.series_label(label, run))
            ctx.shown[label] = run
            drawn = True
        elif not incomplete:
            ctx.miss(f"{label}: no evaluation of run {run}")
    if not drawn:
        no_data(ax, f"average of {', '.join(keys)}")
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")
    return fig


# ----- run-folder figures ----------------------------------------------------------------------------------
def env_sets(ctx: FigureContext, run: str) -> list[dict]:
    from spade.analysis import read_env_sets

    try:
        return read_env_sets(ctx.runs_root / run)
    except ValueError as exc:
        raise ReportInputError(str(exc)) from None


def metrics(ctx: FigureContext, run: str) -> list[dict]:
    path = ctx.runs_root / run / "metrics.jsonl"
    if not path.is_file():
        return []
    return read_metrics(path)


def learnable_share_series(sets: Sequence[dict], window: int = 16) -> tuple[list[int], list[float]]:
    """Figure 6: (window starts, learnable share in percent) of archived sets."""
    from spade.analysis import learnable_share_from_sets

    rows = learnable_share_from_sets(sets, window=window)
    return [r["window_start"] for r in rows], [r["share"] * PERCENT for r in rows]


def skill_win_rates(records: Sequence[dict]) -> dict[str, tuple[list[int], list[float]]]:
    """Figure 17: skill -> (steps, RA win rate) from ``win_rate_by_skill`` of the metrics records."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for record in sorted(records, key=lambda r: r.get("step", 0)):
        for skill, value in (record.get("win_rate_by_skill") or {}).items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                steps, values = out.setdefault(skill, ([], []))
                steps.append(int(record["step"]))
                values.append(float(value))
    return out


def metric_series(records: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    pairs = sorted((int(r["step"]), float(r[key])) for r in records
                   if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
                   and math.isfinite(r[key]) and "step" in r)
    return [s for s, _ in pairs], [v for _, v in pairs]


def embed(texts: Sequence[str], method: str, seed: int = 0):
    from spade.analysis import sbert_embeddings, tfidf_lsa_embeddings

    if method == "sbert":
        return sbert_embeddings(texts)
    if method == "tfidf":
        return tfidf_lsa_embeddings(texts, seed=seed)
    raise ReportInputError(f"unknown embedding {method!r} (sbert or tfidf)")


# ----- figures 6, 7, 18 -----------------------------------------------------------------------------------
def draw_learnable_share(ctx: FigureContext):
    """Figure 6: share of the rollout budget with RA win rate in [0.2, 0.8], per 16-step window."""
    window = int(ctx.section.get("window", 16))
    fig, axes = subplots(1, 1, 2.3, COLUMN_WIDTH_IN)
    ax = axes[0, 0]
    drawn = False
    for i, label, run in check_runs(ctx):
        steps, shares = learnable_share_series(env_sets(ctx, run), window)
        if not steps:
            ctx.miss(f"{label}: run {run} has no environment-set archives (envs/set_*.json)")
            continue
        ax.plot(steps, shares, color=PALETTE[i % len(PALETTE)], marker=".", label=ctx.series_label(label, run))
        ctx.shown[label] = run
        drawn = True
    if not drawn:
        no_data(ax, "environment-set archives of the mapped runs")
    ax.set_xlabel(f"training step ({window}-step window start)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # windows start at whole steps
    ax.set_ylabel("learnable share (% of slots)")
    ax.legend(loc="best")
    return fig


def _run_texts(ctx: FigureContext, run: str, fld: str):
    from spade.analysis import environment_texts

    try:
        return environment_texts(env_sets(ctx, run), fld)
    except ValueError as exc:
        raise ReportInputError(f"run {run}: {exc}") from None


def draw_tsne(ctx: FigureContext):
    """Figure 7: joint t-SNE of the environment embeddings of the runs, ``sample`` per run; Vendi/n in legend."""
    import numpy as np

    from spade.analysis import tsne_2d, vendi_per_n

    section = ctx.section
    sample, seed, fld = int(section.get("sample", 330)), int(section.get("seed", 0)), section.get("field", "code")
    rng = np.random.default_rng(seed)
    texts, owner = [], []
    for i, label, run in check_runs(ctx):
        run_texts = _run_texts(ctx, run, fld)[0]
        if len(run_texts) < 2:
            ctx.miss(f"{label}: run {run} has {len(run_texts)} valid environment(s); t-SNE needs 2 or more")
            continue
        if len(run_texts) < sample:
            ctx.miss(f"{label}: run {run} has only {len(run_texts)} valid environments (figure samples {sample})")
        idx = np.sort(rng.choice(len(run_texts), size=min(sample, len(run_texts)), replace=False))
        texts += [run_texts[j] for j in idx]
        owner += [(i, label, run)] * len(idx)
    fig, axes = subplots(1, 1, 2.6, COLUMN_WIDTH_IN)
    ax = axes[0, 0]
    if len(texts) < 4:
        no_data(ax, "valid environments of the mapped runs")
        return fig
    x = embed(texts, ctx.embedding, seed)
    points = tsne_2d(x, seed=seed)
    for i, label, run in dict.fromkeys(owner):
        members = np.array([k for k, o in enumerate(owner) if o[0] == i])
        size = min(100, len(members))
        vendi = vendi_per_n(x[members], size=size, draws=20, seed=seed).mean
        ax.scatter(points[members, 0], points[members, 1], s=3, alpha=0.6, color=PALETTE[i % len(PALETTE)],
                   label=ctx.series_label(f"{label} (Vendi/n {vendi:.2f}, n={size})", run), linewidths=0)
        ctx.shown[label] = run
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    ax.set_title(f"{ctx.embedding} embeddings of {fld}", loc="left")
    ax.legend(loc="best", markerscale=2)
    return fig


VENDI_FLOOR = 1.0  # the Vendi score of identical environments, its least value: a bound, not a reported number
VENDI_REPORTED = ("quoted_numbers.csv", "vendi_window_spade")  # the reported file and key of the SPADE line


def reported_vendi_lines(path: str | Path | None = None) -> tuple[list[tuple[float, str]], Path]:
    """Figure 18's reference lines as [(value, label)] and the file read: the paper's windowed Vendi score of
    SPADE (``paper/reported/quoted_numbers.csv``, key vendi_window_spade: 21.3, from the figure 18 row of
    FIGURES.md) and the floor 1.0. Table 8's vendi_per_n is not that value: it is Vendi/n of the whole sample
    (0.68 of 3310 envs), while figure 18 draws the Vendi score of 24 environments (21.3 = 0.89 per environment)."""
    name, key = VENDI_REPORTED
    path = Path(path) if path is not None else REPORTED_DIR / name
    if not path.is_file():
        raise ReportInputError(f"missing reported file {path} (figure 18's reported Vendi reference line)")
    rows = [row for row in pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records") if row["key"] == key]
    try:
        value = float(rows[0]["value"]) if rows else None
    except ValueError:
        value = None
    if value is None:
        raise ReportInputError(f"{path}: no numeric value for key {key!r} (column value; the paper's Vendi score of 24 "
                               "SPADE environments per window, figure 18)")
    floor = (VENDI_FLOOR, f"{VENDI_FLOOR:.1f} (lower bound: identical envs)")
    return [(value, f"{value:g} (reported, SPADE)"), floor], path


def windowed_vendi_series(x, steps, window: int, size: int, draws: int, seed: int):
    """Figure 18: (window starts, means, sds, windows too small to draw) from :func:`windowed_vendi`."""
    from spade.analysis import windowed_vendi

    rows = windowed_vendi(x, steps, window=window, size=size, draws=draws, seed=seed)
    kept = [r for r in rows if r["mean"] is not None]
    return ([r["window_start"] for r in kept], [r["mean"] for r in kept], [r["sd"] for r in kept],
            [r["window_start"] for r in rows if r["mean"] is None])


def draw_windowed_vendi(ctx: FigureContext):
    """Figure 18: Vendi score of 24 environments per 40-step window (mean +- sd over 12 draws)."""
    import numpy as np

    section = ctx.section
    window, size = int(section.get("window", 40)), int(section.get("size", 24))
    draws, seed, fld = int(section.get("draws", 12)), int(section.get("seed", 0)), section.get("field", "code")
    fig, axes = subplots(1, 1, 2.4, COLUMN_WIDTH_IN)
    ax = axes[0, 0]
    lines, reported = reported_vendi_lines()
    ctx.inputs.append(reported)
    for value, label in lines:
        ax.axhline(value, color=GREY, linestyle=":", linewidth=0.8)
        ax.annotate(label, (0.99, value), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    fontsize=5.5, color=GREY)
    drawn = False
    for i, label, run in check_runs(ctx):
        texts, steps, _ = _run_texts(ctx, run, fld)
        if len(texts) < size:
            ctx.miss(f"{label}: run {run} has {len(texts)} valid environments, fewer than one draw of {size}")
            continue
        starts, means, sds, small = windowed_vendi_series(embed(texts, ctx.embedding, seed), steps, window, size,
                                                          draws, seed)
        for start in small:
            ctx.miss(f"{label}: window {start}-{start + window - 1} has fewer than {size} environments")
        if starts:
            color = PALETTE[i % len(PALETTE)]
            ax.plot(starts, means, color=color, marker=".", label=ctx.series_label(label, run))
            ax.fill_between(starts, np.subtract(means, sds), np.add(means, sds), color=color, alpha=0.2,
                            linewidth=0)
            ctx.shown[label] = run
            drawn = True
    if not drawn:
        no_data(ax, "windows with enough valid environments")
    ax.set_xlabel(f"training step ({window}-step window start)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # windows start at whole steps
    ax.set_ylabel(f"Vendi score of {size} envs ({ctx.embedding})")
    ax.legend(loc="center left")
    return fig


# ----- figures 1, 12, 16, 17 ------------------------------------------------------------------------------
def relative_axes(ctx: FigureContext):
    """Figure 1 panels: the present series, their evaluations, and one axis with the base line at 0 %."""
    series = check_runs(ctx)
    tidy, files = load_eval(ctx.runs_root, [run for _, _, run in series])
    ctx.inputs += files
    fig, axes = subplots(1, 1, 2.3, COLUMN_WIDTH_IN)
    base_line(axes[0, 0], 0.0)
    return series, tidy, fig, axes[0, 0]


def draw_games_transfer(ctx: FigureContext):
    """Figure 1 (middle): mean over the 8 benchmarks of (score - base) / base (%) per step, base line at 0."""
    series, tidy, fig, ax = relative_axes(ctx)
    parts = [PANEL_METRIC[k] for k in EIGHT_BENCHMARKS]
    drawn = False
    for i, label, run in series:
        steps, values, problems = relative_curve(tidy, run, parts)
        for p in problems:
            ctx.miss(f"{label}: {p}")
        if len(steps) > 1:
            ax.plot(steps, values, color=PALETTE[i % len(PALETTE)], marker=".", label=ctx.series_label(label, run))
            ctx.shown[label] = run
            drawn = True
    if not drawn:
        no_data(ax, "all 8 benchmarks at step 0 and a trained step")
    ax.set_xlabel("training step")
    ax.set_ylabel("mean relative change vs base (%)")
    ax.legend(loc="best")
    return fig


def draw_tool_transfer(ctx: FigureContext):
    """Figure 1 (right): relative improvement (%) of tau2, BFCL v4 multi-turn and ACEBench-Agent per step."""
    series, tidy, fig, ax = relative_axes(ctx)
    drawn = False
    for _, label, run in series[:1]:
        title = None  # every curve is of this one run: the title names it and its scale
        for j, (family, parts) in enumerate(TOOL_FAMILIES):
            steps, values, problems = family_relative_curve(tidy, run, parts)
            for p in problems:
                ctx.miss(f"{family}: {p}")
            if steps:
                ax.plot(steps, values, color=PALETTE[j], marker=".", label=family)
                ctx.shown[f"{label} / {family}"] = run
                title = title or ctx.series_label(label, run, width=60)
                drawn = True
        if title:
            ax.set_title(title, loc="left")
    if not drawn:
        no_data(ax, "tool-use evaluations at step 0 and later")
    ax.set_xlabel("training step")
    ax.set_ylabel("relative improvement (%)")
    ax.legend(loc="best")
    return fig


def selected_gain(ctx: FigureContext, tidy, run: str, base_run: str) -> tuple[float | None, dict]:
    """Figure 12 (left): gain in points of ``run``'s selected checkpoint over step 0 of ``base_run``: the mean
    over the 8 benchmarks, and per benchmark (those evaluated at both)."""
    from spade.paper.table_runs import ResultIndex, resolve_step

    choice = resolve_step(run, "selected", ResultIndex(tidy), ctx.runs_root)
    if choice.step is None:
        ctx.miss(choice.reason)
        return None, {}
    gains = {}
    for key in EIGHT_BENCHMARKS:
        benchmark, metric = PANEL_METRIC[key]
        s_steps, s_vals = curve(tidy, run, benchmark, metric)
        b_steps, b_vals = curve(tidy, base_run, benchmark, metric)
        if choice.step in s_steps and 0 in b_steps:
            gains[key] = (s_vals[s_steps.index(choice.step)] - b_vals[b_steps.index(0)]) * PERCENT
        else:
            ctx.miss(f"run {run} step {choice.step} or base: {key}")
    mean = sum(gains.values()) / len(gains) if len(gains) == len(EIGHT_BENCHMARKS) else None
    return mean, gains


def size_backbone(ctx: FigureContext, size: str) -> str:
    """Figure 12: the paper backbone that the curves of ``size`` stand for."""
    if size not in SIZE_BACKBONES:
        raise ReportInputError(f"{ctx.mapping['path']}: figures.{ctx.figure}.sizes.{size}: the paper has no backbone "
                               f"of that size (known: {', '.join(SIZE_BACKBONES)})")
    return SIZE_BACKBONES[size]


def draw_model_size(ctx: FigureContext):
    """Figure 12: (left) gain over base vs model size at the selected checkpoints; (right) hint regret."""
    from spade.analysis import ema

    sizes = ctx.section.get("sizes") or {}
    alpha = float(ctx.section.get("ema_alpha", 0.1))
    runs = [r for entry in sizes.values() for r in entry.values() if r]
    for run in runs:
        if ctx.run_dir(run) is None:
            ctx.miss(f"run {run} not run (no folder under {ctx.runs_root})")
    tidy, files = load_eval(ctx.runs_root, [r for r in runs if ctx.run_dir(r)])
    ctx.inputs += files + [ctx.runs_root / r / "selected_checkpoint.json" for r in runs
                           if (ctx.runs_root / r / "selected_checkpoint.json").is_file()]
    fig, axes = subplots(1, 2, 2.3)
    left, right = axes[0]
    left.axhline(0.0, color=GREY, linewidth=0.6)
    drawn_left = drawn_right = False
    for x, (size, entry) in enumerate(sizes.items()):
        spade_run, grpo_run = entry.get("spade"), entry.get("grpo")
        for j, (label, run) in enumerate((("SPADE", spade_run), ("Fixed-env GRPO", grpo_run))):
            if not run or ctx.run_dir(run) is None or not spade_run:
                continue
            mean, gains = selected_gain(ctx, tidy, run, spade_run)
            offset = -0.12 if j == 0 else 0.12
            # one legend entry per size: each point is a different run, compared with that size's backbone
            text = ctx.series_label(f"{label} {size}", run, size_backbone(ctx, size), width=36) if gains else None
            if gains:
                left.scatter([x + offset] * len(gains), list(gains.values()), s=6, color=PALETTE[j], alpha=0.4,
                             linewidths=0)
            if mean is not None:
                left.scatter([x + offset], [mean], s=22, color=PALETTE[j], marker="D", label=text)
                ctx.shown[f"{label} {size}"] = run
                drawn_left = True
        if spade_run and ctx.run_dir(spade_run):
            steps, regret = metric_series(metrics(ctx, spade_run), "mean_regret")
            if steps:
                color = PALETTE[x % len(PALETTE)]
                right.plot(steps, regret, color=color, alpha=0.3, linewidth=0.6)
                right.plot(steps, ema(regret, alpha), color=color,
                           label=ctx.series_label(size, spade_run, size_backbone(ctx, size), width=36))
                ctx.shown[f"regret {size}"] = spade_run
                drawn_right = True
            else:
                ctx.miss(f"run {spade_run}: no mean_regret in metrics.jsonl")
    left.set_xticks(range(len(sizes)), list(sizes))
    left.set_ylabel("gain over base (points)")
    left.set_title("(a) gain vs model size (selected checkpoint)", loc="left")
    right.set_title(f"(b) hint regret (raw, EMA alpha={alpha})", loc="left")
    right.set_xlabel("training step")
    right.set_ylabel("regret")
    for ax, drawn, what in ((left, drawn_left, "selected checkpoints with all 8 benchmarks"),
                            (right, drawn_right, "mean_regret in metrics.jsonl")):
        if drawn:
            handles, labels = ax.get_legend_handles_labels()
            unique = dict(zip(labels, handles))
            ax.legend(unique.values(), unique.keys(), loc="best")
        else:
            no_data(ax, what)
    return fig


def draw_reward_levels(ctx: FigureContext):
    """Figure 16: (a) distinct and strictly partial reward levels per environment over training; (b) early vs
    late mean levels per skill (our archive labels skills, not the paper's corpus domains) and for all."""

    from spade.analysis import phase_mean, reward_level_rows

    early, late = ctx.section.get("early", [0, 130]), ctx.section.get("late", [261, 396])
    fig, axes = subplots(1, 2, 2.4)
    a, b = axes[0]
    series = check_runs(ctx)[:1]
    rows, title = [], "(a) reward levels per environment"
    for _, label, run in series:
        try:
            rows = reward_level_rows(env_sets(ctx, run))
        except ValueError as exc:
            raise ReportInputError(f"run {run}: {exc}") from None
        if not rows:
            ctx.miss(f"{label}: run {run} has no played valid environments in envs/set_*.json")
        else:
            ctx.shown[label] = run
            # both panels are of this one run; the legend names the levels, so the title names the run
            title += "\n" + ctx.series_label(label, run, width=60)
    a.set_title(title, loc="left")
    b.set_title(f"(b) early {early[0]}-{early[1]} vs late {late[0]}-{late[1]}", loc="left")
    if not rows:
        no_data(a, "environment archives")
        no_data(b, "environment archives")
        return fig
    steps = sorted({r["step"] for r in rows})
    for key, color, label in (("levels", PALETTE[0], "all levels"), ("partial_levels", PALETTE[1], "strictly partial")):
        a.scatter([r["step"] for r in rows], [r[key] for r in rows], s=3, alpha=0.25, color=color, linewidths=0)
        means = [sum(r[key] for r in rows if r["step"] == s) / sum(1 for r in rows if r["step"] == s) for s in steps]
        a.plot(steps, means, color=color, label=f"{label} (mean)")
    a.set_xlabel("training step")
    a.xaxis.set_major_locator(MaxNLocator(integer=True))  # archives are per step: no ticks between steps
    a.set_ylabel("distinct reward values")
    a.legend(loc="best")
    groups = sorted({str(r["skill"]) for r in rows}) + ["all"]
    for y, group in enumerate(groups):
        members = [r for r in rows if group == "all" or str(r["skill"]) == group]
        xs, vs = [r["step"] for r in members], [r["levels"] for r in members]
        e, lt = phase_mean(xs, vs, *early), phase_mean(xs, vs, *late)
        if e is None or lt is None:
            ctx.miss(f"{group}: no environment in the {'early' if e is None else 'late'} phase")
        if e is not None and lt is not None:
            b.plot([e, lt], [y, y], color=GREY, linewidth=0.8)
        if e is not None:
            b.scatter([e], [y], color=PALETTE[0], s=12, label="early", zorder=3)
        if lt is not None:
            b.scatter([lt], [y], color=PALETTE[1], s=12, label="late", zorder=3)
    b.set_yticks(range(len(groups)), groups)
    b.set_xlabel("mean distinct reward levels")
    handles, labels = b.get_legend_handles_labels()
    if labels:
        b.legend(dict(zip(labels, handles)).values(), dict(zip(labels, handles)).keys(), loc="best")
    return fig


def draw_skill_win_rates(ctx: FigureContext):
    """Figure 17: (a) per-skill RA win rate over training (EMA); (b) gain, last 25% minus first 25% of steps."""
    from spade.analysis import early_late_gain, ema

    alpha = float(ctx.section.get("ema_alpha", 0.1))
    fig, axes = subplots(1, 2, 2.3)
    a, b = axes[0]
    by_skill, title = {}, f"(a) RA win rate per skill (EMA alpha={alpha})"
    for _, label, run in check_runs(ctx)[:1]:
        by_skill = skill_win_rates(metrics(ctx, run))
        if not by_skill:
            ctx.miss(f"{label}: run {run} has no win_rate_by_skill in metrics.jsonl")
        else:
            ctx.shown[label] = run
            # both panels are of this one run; the legend names the skills, so the title names the run
            title += "\n" + ctx.series_label(label, run, width=60)
    a.set_title(title, loc="left")
    b.set_title("(b) gain: last 25% - first 25%", loc="left")
    if not by_skill:
        no_data(a, "win_rate_by_skill")
        no_data(b, "win_rate_by_skill")
        return fig
    gains = {}
    for j, (skill, (steps, values)) in enumerate(sorted(by_skill.items())):
        a.plot(steps, ema(values, alpha), color=PALETTE[j % len(PALETTE)], label=skill)
        if len(values) >= 2:
            gains[skill] = early_late_gain(values)
        else:
            ctx.miss(f"{skill}: fewer than 2 steps, no gain")
    a.set_xlabel("training step")
    a.set_ylabel("win rate")
    a.legend(loc="best")
    names = list(gains)
    b.barh(range(len(names)), [gains[n] for n in names],
           color=[PALETTE[sorted(by_skill).index(n) % len(PALETTE)] for n in names])
    b.set_yticks(range(len(names)), names)
    b.axvline(0.0, color=GREY, linewidth=0.6)
    b.set_xlabel("win-rate gain")
    return fig
