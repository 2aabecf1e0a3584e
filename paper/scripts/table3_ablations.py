"""Table 3: ablations at 30B on the eight games benchmarks, ours beside the paper's.

    python paper/scripts/table3_ablations.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table3_ablations.csv --runs-root results/runs \
        --out results/paper/tables/table3_ablations.md [--results TIDY.csv ...]

Writes the Markdown table, the booktabs LaTeX table of the same stem (.tex) and a provenance sidecar
(<out>.provenance.json, one record per cell of ours). Which run and checkpoint stands for each paper row comes
from the run mapping; a cell without a result of ours reads "not run". The table's spec is here; the logic it
shares with Tables 1, 2 and 6 is in spade.paper.benchmark_tables.
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import GAMES_AVG, GAMES_COLUMNS, BenchmarkTable, benchmark_table_main
from spade.paper.report import run_script
from spade.paper.scale import PAPER_30B

TABLE3 = BenchmarkTable(
    "table3", "Table 3: ablations at 30B (percent)", "tab:ablations", ("setting",),
    (("setting", "Setting"), ("ed_design", "ED design"), ("ed_trained", "ED trained"),
     ("corpus_grounding", "Corpus"), ("env_memory", "Memory")), GAMES_COLUMNS + (GAMES_AVG,),
    backbone=PAPER_30B)


def main(argv=None) -> None:
    benchmark_table_main(TABLE3, "paper/scripts/table3_ablations.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
