"""Table 7: quality of the generated environments early, mid and late in training, ours beside the paper's.

    python paper/scripts/table7_env_quality.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table7_env_quality.csv --runs-root results/runs \
        --out results/paper/tables/table7_env_quality.md

Reads the mapped run's environment archives (envs/set_<step>.json) and metrics.jsonl through spade.analysis:
learnable share, agent win rate, turns per episode, program length and hidden state variables per phase (the
phases are set in the run mapping). The two LLM-rubric rows read "not computed". Writes Markdown, LaTeX (.tex)
and a provenance sidecar. The logic is in spade.paper.tables.
"""

from __future__ import annotations

import sys

from spade.paper.tables import run_folder_table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    run_folder_table_main("table7", "paper/scripts/table7_env_quality.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
