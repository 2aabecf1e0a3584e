"""Figure 18: Vendi score of 24 environments per 40-step window (mean +- sd over 12 draws), reported reference lines.

    python paper/scripts/fig18_windowed_diversity.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig18_windowed_diversity.pdf

One curve per series of the mapping (keys `window`, `size`, `draws`, `seed`, `field`), from the run's
environment-set archives embedded with --embedding (SBERT, as the paper, or TF-IDF + LSA). The dotted lines are
the paper's windowed Vendi score of SPADE (paper/reported/quoted_numbers.csv, key vendi_window_spade) and the
floor 1.0 (identical environments).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig18.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from spade.paper.figures import (GREY, PALETTE, FigureContext, check_runs, embed, env_texts, figure_main, no_data,
                                 subplots)
from spade.paper.report import COLUMN_WIDTH_IN, ReportInputError, run_script


REPORTED_DIR = Path(__file__).resolve().parents[1] / "reported"  # paper/reported/
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
        texts, steps, _ = env_texts(ctx, run, fld)
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


def main(argv=None) -> None:
    figure_main("fig18", "paper/scripts/fig18_windowed_diversity.py", draw_windowed_vendi, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
