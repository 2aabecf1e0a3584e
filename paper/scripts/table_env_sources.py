"""The environment-source comparison (ours, not in the paper): one row per source of environments.

    python paper/scripts/table_env_sources.py --mapping paper/comparison_runs.yaml --runs-root results/runs \
        --out results/paper/tables/env_sources.md

Reads each mapped run's metrics.jsonl, environment archives (envs/set_*.json) and evaluation results: the
valid-environment rate with its Wilson interval, designer tokens per valid environment, the learnable share,
Vendi/n and the held-out gains over the base run's step 0. Writes Markdown, LaTeX (.tex) and a provenance sidecar
(every cell, mark and reason; the figure draws from it). The logic is in spade.paper.comparison.
"""

from __future__ import annotations

import sys

from spade.paper.comparison import table_main
from spade.paper.report import run_script


def main(argv=None) -> None:
    table_main("paper/scripts/table_env_sources.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
