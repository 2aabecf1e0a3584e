"""Tidy results table of one or more runs (results/tables/results.csv) and its provenance sidecar.

    python paper/scripts/results_table.py --runs results/runs/toy [more runs] [--evals RESULT.json ...] \
        --out results/tables/results.csv

Without ``--evals`` every evaluation result found under the run folders is included.

The columns and the meaning of n / stderr are documented in ``spade.paper.report``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spade.paper.report import (eval_files, provenance_record, run_inputs, run_script, sidecar_path, tidy_results,
                          write_csv_atomic, write_json_atomic)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders (results/runs/<run>)")
    parser.add_argument("--evals", type=Path, nargs="*", help="evaluation result files (default: all in the runs)")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write")
    args = parser.parse_args(argv)
    table = tidy_results(args.runs, args.evals)
    write_csv_atomic(table, args.out)
    evals = args.evals if args.evals is not None else [path for run in args.runs for path in eval_files(run)]
    inputs = [path for run in args.runs for path in run_inputs(run)] + list(evals)
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/results_table.py", inputs, [args.out], table, rows=len(table)))
    print(f"wrote {args.out} ({len(table)} rows from {len(args.runs)} run(s))")


if __name__ == "__main__":
    sys.exit(run_script(main))
