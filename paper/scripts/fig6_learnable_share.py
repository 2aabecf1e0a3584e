"""Figure 6: learnable share (RA win rate in [0.2, 0.8], % of slots, 16-step windows) over training.

    python paper/scripts/fig6_learnable_share.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig6_learnable_share.pdf

One curve per series of the mapping, from the run's environment-set archives (envs/set_*.json); the window is
the mapping's key `window`.

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig6.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from matplotlib.ticker import MaxNLocator

from spade.paper.figures import (PALETTE, PERCENT, FigureContext, check_runs, env_sets, figure_main, no_data,
                                 subplots)
from spade.paper.report import COLUMN_WIDTH_IN, run_script


def learnable_share_series(sets: Sequence[dict], window: int = 16) -> tuple[list[int], list[float]]:
    """Figure 6: (window starts, learnable share in percent) of archived sets."""
    from spade.analysis import learnable_share_from_sets

    rows = learnable_share_from_sets(sets, window=window)
    return [r["window_start"] for r in rows], [r["share"] * PERCENT for r in rows]


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


def main(argv=None) -> None:
    figure_main("fig6", "paper/scripts/fig6_learnable_share.py", draw_learnable_share, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
