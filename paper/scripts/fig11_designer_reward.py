"""Figure 11: designer-reward ablation, 6-benchmark average (GPQA-D, LCB-v6, 4 RG) over training.

    python paper/scripts/fig11_designer_reward.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig11_designer_reward.pdf

One curve per designer reward (series of the mapping): at each step where all 6 exist, their average in
percent; the dashed line is the base run's step-0 average. The drawing is
spade.paper.figures.draw_suite_average, which figure 13 draws too (over the 8 benchmarks).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig11.
"""

from __future__ import annotations

import sys

from spade.paper.figures import draw_suite_average, figure_main
from spade.paper.report import run_script


# the benchmarks averaged: Table 1's without the two AIME years (paper keys of spade.paper.figures.GAMES_PANELS)
SIX_BENCHMARKS = ("gpqa_diamond", "lcb_v6", "rg_math", "rg_algorithmic", "rg_cognition", "rg_logic")


def draw_designer_reward(ctx):
    """Figure 11: the average of :data:`SIX_BENCHMARKS` per step, one curve per designer reward, dashed base."""
    return draw_suite_average(ctx, SIX_BENCHMARKS, "6-benchmark average (%)")


def main(argv=None) -> None:
    figure_main("fig11", "paper/scripts/fig11_designer_reward.py", draw_designer_reward, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
