"""Figure 1 (right): tool-use transfer, relative improvement (%) of tau2, BFCL v4 MT and ACEBench-Agent per step.

    python paper/scripts/fig1_right_tool_use_transfer.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig1_right_tool_use_transfer.pdf

One curve per benchmark family of the first series' run (each family the mean of its parts, as Table 2),
relative to the family's own step-0 score; the dashed line is the base (0 %).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig1_right.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd

from spade.paper.figures import PALETTE, PERCENT, FigureContext, figure_main, mean_curve, no_data, relative_axes
from spade.paper.report import run_script


# the benchmark families, each the mean of its parts (benchmark, metric), as Table 2
TOOL_FAMILIES = (
    ("tau2", [("tau2", "pass^1/retail"), ("tau2", "pass^1/airline"), ("tau2", "pass^1/telecom")]),
    ("BFCL v4 MT", [("bfcl_multi_turn", "accuracy/base"), ("bfcl_multi_turn", "accuracy/miss_func"),
                    ("bfcl_multi_turn", "accuracy/miss_param"), ("bfcl_multi_turn", "accuracy/long_context")]),
    ("ACEBench-Agent", [("acebench", "multi_step"), ("acebench", "multi_turn")]),
)


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


def main(argv=None) -> None:
    figure_main("fig1_right", "paper/scripts/fig1_right_tool_use_transfer.py", draw_tool_transfer, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
