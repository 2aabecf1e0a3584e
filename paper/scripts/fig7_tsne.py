"""Figure 7: t-SNE of environment embeddings (330 sampled per run), SPADE vs w/o corpus, with our Vendi/n.

    python paper/scripts/fig7_tsne.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig7_tsne.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig7.
"""

from __future__ import annotations

import sys

from spade.paper import figures as pf
from spade.paper.report import run_script

draw = pf.draw_tsne


def main(argv=None) -> None:
    pf.figure_main("fig7", "paper/scripts/fig7_tsne.py", draw, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
