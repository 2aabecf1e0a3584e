"""Figure 13: curriculum breadth, 8-benchmark suite average over training (6 vs 2 skills, dashed base).

    python paper/scripts/fig13_curriculum_breadth.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig13_curriculum_breadth.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig13.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script


def draw(ctx):
    return pf.draw_suite_average(ctx, pf.EIGHT_BENCHMARKS, "8-benchmark average (%)")


def main(argv=None) -> None:
    pf.figure_main("fig13", "paper/scripts/fig13_curriculum_breadth.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
