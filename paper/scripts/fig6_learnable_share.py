"""Figure 6: learnable share (RA win rate in [0.2, 0.8], % of slots, 16-step windows) over training.

    python paper/scripts/fig6_learnable_share.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig6_learnable_share.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig6.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_learnable_share


def main(argv=None) -> None:
    pf.figure_main("fig6", "paper/scripts/fig6_learnable_share.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
