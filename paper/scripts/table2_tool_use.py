"""Table 2: multi-turn tool use (BFCL v4 multi-turn, tau2-bench, ACEBench-Agent), ours beside the paper's.

    python paper/scripts/table2_tool_use.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table2_tool_use.csv --runs-root results/runs \
        --out results/paper/tables/table2_tool_use.md [--results TIDY.csv ...]

Writes the Markdown table, the booktabs LaTeX table of the same stem (.tex) and a provenance sidecar
(<out>.provenance.json, one record per cell of ours). Which run and checkpoint stands for each paper row comes
from the run mapping; a cell without a result of ours reads "not run". The table's spec (TABLE2) and the
logic it shares with Tables 1, 3 and 6 are in spade.paper.benchmark_tables (the quoted numbers average as
this table does, with the same spec).
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE2, benchmark_table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    benchmark_table_main(TABLE2, "paper/scripts/table2_tool_use.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
