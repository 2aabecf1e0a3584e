"""Figure 16: reward levels per environment over training, and early vs late per skill.

    python paper/scripts/fig16_reward_levels.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig16_reward_levels.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig16.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_reward_levels


def main(argv=None) -> None:
    pf.figure_main("fig16", "paper/scripts/fig16_reward_levels.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
