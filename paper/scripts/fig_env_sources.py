"""Figure of the environment-source comparison: one panel per column of the table, one bar per source.

    python paper/scripts/fig_env_sources.py --table results/paper/tables/env_sources.md.provenance.json \
        --out results/paper/figures/env_sources.pdf

Draws from the table's provenance sidecar, so the figure shows exactly the table's numbers (whiskers: the Wilson
interval of the valid rate, the draw standard deviation of Vendi/n); a source without a value shows its mark.
Writes the PDF, a PNG beside it and a provenance sidecar. The logic is in spade.paper.comparison.
"""

from __future__ import annotations

import sys

from spade.paper.comparison import figure_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    figure_main("paper/scripts/fig_env_sources.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
