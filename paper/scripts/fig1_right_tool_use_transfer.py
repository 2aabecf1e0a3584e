"""Figure 1 (right): tool-use transfer, relative improvement (%) of tau2, BFCL v4 MT and ACEBench-Agent per step.

    python paper/scripts/fig1_right_tool_use_transfer.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig1_right_tool_use_transfer.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig1_right.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_tool_transfer


def main(argv=None) -> None:
    pf.figure_main("fig1_right", "paper/scripts/fig1_right_tool_use_transfer.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
