"""Figure 17: per-skill RA win rate over training (EMA) and its gain (last 25% - first 25%).

    python paper/scripts/fig17_skill_win_rates.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig17_skill_win_rates.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig17.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_skill_win_rates


def main(argv=None) -> None:
    pf.figure_main("fig17", "paper/scripts/fig17_skill_win_rates.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
