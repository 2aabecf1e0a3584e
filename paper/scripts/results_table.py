"""Tidy results table of one or more runs (results/tables/results.csv) and its provenance sidecar.

    python paper/scripts/results_table.py --runs results/runs/toy [more runs] --out results/tables/results.csv

The columns and the meaning of n / stderr are documented in ``spade.report``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spade.report import (provenance_record, run_inputs, run_script, sidecar_path, tidy_results, write_csv_atomic,
                          write_json_atomic)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders (results/runs/<run>)")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write")
    args = parser.parse_args(argv)
    table = tidy_results(args.runs)
    write_csv_atomic(table, args.out)
    inputs = [path for run in args.runs for path in run_inputs(run)]
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/results_table.py", inputs, [args.out], table, rows=len(table)))
    print(f"wrote {args.out} ({len(table)} rows from {len(args.runs)} run(s))")


if __name__ == "__main__":
    sys.exit(run_script(main))
