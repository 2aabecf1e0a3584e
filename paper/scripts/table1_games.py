"""Table 1: games transfer (AIME 2025/2026, GPQA-Diamond, LiveCodeBench v6, Reasoning Gym hard),
ours beside the paper's.

    python paper/scripts/table1_games.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table1_games.csv --runs-root results/runs \
        --out results/paper/tables/table1_games.md [--results TIDY.csv ...]

Writes the Markdown table, the booktabs LaTeX table of the same stem (.tex) and a provenance sidecar
(<out>.provenance.json, one record per cell of ours). Which run and checkpoint stands for each paper row comes
from the run mapping; a cell without a result of ours reads "not run". The table's spec (TABLE1) and the
logic it shares with Tables 2, 3 and 6 are in spade.paper.benchmark_tables (the quoted numbers average as
this table does, with the same spec).
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE1, benchmark_table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    benchmark_table_main(TABLE1, "paper/scripts/table1_games.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
