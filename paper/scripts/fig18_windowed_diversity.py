"""Figure 18: Vendi score of 24 environments per 40-step window (mean +- sd over 12 draws), reported reference lines.

    python paper/scripts/fig18_windowed_diversity.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig18_windowed_diversity.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig18.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_windowed_vendi


def main(argv=None) -> None:
    pf.figure_main("fig18", "paper/scripts/fig18_windowed_diversity.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
