"""What the paper figure scripts share (paper/scripts/fig<N>_<name>.py; figure list: paper/reported/FIGURES.md).

Each figure's own drawing (and the helpers and constants only it uses) is in its script; this module holds only what
several scripts, the figure rules (rules/paper_common.smk) or other packages use:

* the run mapping (:func:`load_figure_runs`, :func:`figure_runs`) and the files of a run folder each figure reads
  (:data:`FIGURE_KINDS`, :func:`run_files`, :func:`run_fingerprint`: the Snakemake fingerprint parameter);
* evaluation loading and curves (:func:`load_eval`, :func:`curve`, :func:`mean_curve`, :func:`suite_average_curve`)
  and the run-folder readers (:func:`env_sets`, :func:`metrics`, :func:`env_texts`, :func:`embed`);
* :class:`FigureContext`, :func:`figure_main` (the command line, the rendering and the provenance sidecar of every
  script), the styling, the toy-scale banner, the "missing" note, the legends and the "no data" mark;
* the drawings of more than one figure: :func:`draw_eval_panels` (figures 5, 10, 14), :func:`draw_suite_average`
  (figures 11, 13) and :func:`relative_axes` (figure 1, middle and right).

Every figure is drawn only from our own run folders, ``<runs_root>/<run>/`` (evaluation results
``eval/<benchmark>/step_NNNNNN.json``, ``metrics.jsonl``, ``envs/set_*.json``, ``selected_checkpoint.json``),
for the runs that ``paper/figure_runs.yaml`` maps to the figure. A run or a value that is not there is drawn as
nothing; the figure says so in a note and the sidecar JSON lists it under ``missing``. The data preparation
(:func:`curve`, :func:`suite_average_curve`, ...) is separate from the drawing so that it can be tested on hand-made
folders.

Every legend entry (or the panel title, where the legend names something else) names the run that drew it and
its scale (model card, steps, from ``summary.json``). A run that is not the paper's backbone of its curve at the
paper's step budget (:func:`spade.paper.scale.comparable`) puts the toy-scale banner on top of the figure and into the
sidecar's ``banner`` (empty when every drawn run is at the paper's scale).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

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
EIGHT_BENCHMARKS = tuple(p[0] for p in GAMES_PANELS)
PANEL_METRIC = {p[0]: (p[2], p[3]) for p in GAMES_PANELS}
# which files of a run folder each kind of figure reads (for the Snakemake fingerprint and the sidecar)
RUN_FILE_PATTERNS = {
    "eval": ("summary.json", "eval/*/step_*.json"),
    "selected": ("summary.json", "selected_checkpoint.json", "eval/*/step_*.json"),
    "metrics": ("summary.json", "metrics.jsonl"),
    "envs": ("summary.json", "envs/set_*.json"),
}
# figure 12: the paper backbone of each model size (the backbone column of Table 1, reported/table1_games.csv);
# also read by spade.paper.env_cards and spade.paper.workflow_report
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


def values_by_step(tidy, run, parts) -> dict[int, list]:
    """step -> [value of each part (benchmark, metric) of ``run``, or None where it has none]."""
    table: dict[int, list] = {}
    for i, (benchmark, metric) in enumerate(parts):
        for step, value in zip(*curve(tidy, run, benchmark, metric)):
            table.setdefault(step, [None] * len(parts))[i] = value
    return table


def mean_curve(tidy: pd.DataFrame, run: str, parts: Sequence[tuple[str, str]]) -> tuple[list[int], list[float], list[int]]:
    """Mean of ``parts`` [(benchmark, metric)] per step, only at steps where every part has a value.
    Returns (steps, means, incomplete steps)."""
    steps, means, incomplete = [], [], []
    for step, values in sorted(values_by_step(tidy, run, parts).items()):
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


# ----- evaluation figures drawn by several scripts -------------------------------------------------------------
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


# ----- run-folder readers ---------------------------------------------------------------------------------------
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


def env_texts(ctx: FigureContext, run: str, fld: str):
    """Figures 7 and 18: spade.analysis.environment_texts (texts, steps, skills) of the run's valid environments."""
    from spade.analysis import environment_texts

    try:
        return environment_texts(env_sets(ctx, run), fld)
    except ValueError as exc:
        raise ReportInputError(f"run {run}: {exc}") from None


def embed(texts: Sequence[str], method: str, seed: int = 0):
    from spade.analysis import sbert_embeddings, tfidf_lsa_embeddings

    if method == "sbert":
        return sbert_embeddings(texts)
    if method == "tfidf":
        return tfidf_lsa_embeddings(texts, seed=seed)
    raise ReportInputError(f"unknown embedding {method!r} (sbert or tfidf)")


# ----- figure 1 (middle and right) ---------------------------------------------------------------------------
def relative_axes(ctx: FigureContext):
    """Figure 1 panels: the present series, their evaluations, and one axis with the base line at 0 %."""
    series = check_runs(ctx)
    tidy, files = load_eval(ctx.runs_root, [run for _, _, run in series])
    ctx.inputs += files
    fig, axes = subplots(1, 1, 2.3, COLUMN_WIDTH_IN)
    base_line(axes[0, 0], 0.0)
    return series, tidy, fig, axes[0, 0]
