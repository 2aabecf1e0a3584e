"""Figure 13: curriculum breadth, 8-benchmark suite average over training (6 vs 2 skills, dashed base).

    python paper/scripts/fig13_curriculum_breadth.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig13_curriculum_breadth.pdf

One curve per curriculum (series of the mapping): at each step where all 8 benchmarks of Table 1 exist, their
average in percent; the dashed line is the base run's step-0 average. The drawing is
spade.paper.figures.draw_suite_average, which figure 11 draws too (over 6 benchmarks).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig13.
"""

from __future__ import annotations

import sys

from spade.paper.figures import EIGHT_BENCHMARKS, draw_suite_average, figure_main
from spade.paper.report import run_script


def draw_curriculum_breadth(ctx):
    """Figure 13: the average of the 8 benchmarks per step, one curve per curriculum, dashed base."""
    return draw_suite_average(ctx, EIGHT_BENCHMARKS, "8-benchmark average (%)")


def main(argv=None) -> None:
    figure_main("fig13", "paper/scripts/fig13_curriculum_breadth.py", draw_curriculum_breadth, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
