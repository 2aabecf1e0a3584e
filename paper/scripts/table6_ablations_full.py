"""Table 6: every ablation at 30B with its checkpoint and the GEM games, ours beside the paper's.

    python paper/scripts/table6_ablations_full.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table6_ablations_full.csv --runs-root results/runs \
        --out results/paper/tables/table6_ablations_full.md [--results TIDY.csv ...]

Writes the Markdown table, the booktabs LaTeX table of the same stem (.tex) and a provenance sidecar
(<out>.provenance.json, one record per cell of ours). Which run and checkpoint stands for each paper row comes
from the run mapping; a cell without a result of ours reads "not run". The table's spec (TABLE6) and the
logic it shares with Tables 1, 2 and 3 are in spade.paper.benchmark_tables (the quoted numbers average as
this table does, with the same spec).
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE6, benchmark_table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    benchmark_table_main(TABLE6, "paper/scripts/table6_ablations_full.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
