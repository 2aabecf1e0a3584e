"""Figure 11: designer-reward ablation, 6-benchmark average (GPQA-D, LCB-v6, 4 RG) over training.

    python paper/scripts/fig11_designer_reward.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig11_designer_reward.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig11.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script


def draw(ctx):
    return pf.draw_suite_average(ctx, pf.SIX_BENCHMARKS, "6-benchmark average (%)")


def main(argv=None) -> None:
    pf.figure_main("fig11", "paper/scripts/fig11_designer_reward.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
