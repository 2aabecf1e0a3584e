"""Figure 5: the 8 reasoning benchmarks over training (30B): SPADE, Fixed-env RLVE, Fixed-env GRPO, dashed base.

    python paper/scripts/fig5_transfer_curves.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig5_transfer_curves.pdf

The 2 x 4 benchmark panels of Table 1 (AIME25, AIME26, GPQA-D, LCB-v6 and the 4 Reasoning Gym hard
categories), one curve per series of the mapping; the dashed line is the base run's step-0 evaluation
(key `base`, default: the first series' run). The drawing is spade.paper.figures.draw_eval_panels, which
figures 10 and 14 draw too.

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig5.
"""

from __future__ import annotations

import sys

from spade.paper.figures import draw_eval_panels, figure_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    figure_main("fig5", "paper/scripts/fig5_transfer_curves.py", draw_eval_panels, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
