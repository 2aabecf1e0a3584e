"""Quoted numbers 'learnable_share' of the paper: our values beside the paper's, as LaTeX macros.

    python paper/scripts/num_learnable_share.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/learnable_share.tex

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; definitions in its comment block) and
the provenance sidecar <out>.provenance.json. The logic and the exact definitions are in spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.paper.numbers import number_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    number_main("learnable_share", "paper/scripts/num_learnable_share.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
