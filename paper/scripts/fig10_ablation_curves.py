"""Figure 10: the 8 benchmarks over training, one curve per Table 3 ablation variant, dashed base.

    python paper/scripts/fig10_ablation_curves.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig10_ablation_curves.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig10.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_eval_panels


def main(argv=None) -> None:
    pf.figure_main("fig10", "paper/scripts/fig10_ablation_curves.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
