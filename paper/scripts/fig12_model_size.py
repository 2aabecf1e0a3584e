"""Figure 12: (left) gain over base vs model size at the selected checkpoints; (right) hint regret over training.

    python paper/scripts/fig12_model_size.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig12_model_size.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig12.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_model_size


def main(argv=None) -> None:
    pf.figure_main("fig12", "paper/scripts/fig12_model_size.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
