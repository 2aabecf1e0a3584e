"""Table 5: hyperparameters as our recipe files set them, beside the paper's.

    python paper/scripts/table5_hyperparameters.py --games configs/recipes/games.yaml \
        --tool-use configs/recipes/tool_use.yaml --reported paper/reported/table5_hyperparameters.csv \
        --out results/paper/tables/table5_hyperparameters.md

The values are read from the recipes (validated as run configurations), so changing a recipe value changes
the table. Writes Markdown, LaTeX (.tex) and a provenance sidecar. The logic is in spade.paper.tables.
"""

from __future__ import annotations

import sys

from spade.paper.tables import table5_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    table5_main("paper/scripts/table5_hyperparameters.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
