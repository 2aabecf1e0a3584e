"""Figure 1 (middle): games transfer, mean relative change over the 8 benchmarks vs base (%), per training step.

    python paper/scripts/fig1_middle_games_transfer.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig1_middle_games_transfer.pdf

One curve per series of the mapping: at each trained step, the mean over the 8 benchmarks of Table 1 of
(score - base) / base, the base being the run's own step-0 evaluation; the dashed line is the base (0 %).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig1_middle.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd

from spade.paper.figures import (EIGHT_BENCHMARKS, PALETTE, PANEL_METRIC, PERCENT, FigureContext, figure_main,
                                 no_data, relative_axes, values_by_step)
from spade.paper.report import run_script


def relative_curve(tidy: pd.DataFrame, run: str, parts: Sequence[tuple[str, str]], base_run: str | None = None):
    """Figure 1: per trained step, the mean over ``parts`` of (score - base) / base in percent, the base being
    step 0 of ``base_run`` (default ``run``). Needs every part at the step and a nonzero base for each.
    Returns (steps, values, problems) with the reasons a step or the base is left out."""
    base = values_by_step(tidy, base_run or run, parts).get(0)
    problems = []
    if base is None or any(v is None for v in base):
        return [], [], [f"base evaluation (step 0) of run {base_run or run} for every one of {len(parts)} parts"]
    if any(v == 0 for v in base):
        return [], [], [f"a nonzero base score for every part (run {base_run or run}); relative change undefined"]
    steps, values = [], []
    for step, scores in sorted(values_by_step(tidy, run, parts).items()):
        if step == 0:
            continue
        if any(v is None for v in scores):
            problems.append(f"run {run} step {step}: not every part evaluated")
            continue
        steps.append(step)
        values.append(sum((s - b) / b for s, b in zip(scores, base)) / len(parts) * PERCENT)
    return [0] + steps, [0.0] + values, problems


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


def main(argv=None) -> None:
    figure_main("fig1_middle", "paper/scripts/fig1_middle_games_transfer.py", draw_games_transfer, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
