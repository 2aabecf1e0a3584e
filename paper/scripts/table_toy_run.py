"""Summary table of one run: stage wall times, designer validity, backfill, held-out and training win rates.

    python paper/scripts/table_toy_run.py --results results/tables/results.csv \
        --metrics results/runs/toy/metrics.jsonl --benchmarks results/benchmarks --run toy \
        --out results/tables/toy_run.md

Writes the Markdown table, a booktabs LaTeX table next to it (same stem, .tex) and a provenance sidecar.
A cell whose source is missing reads "not run".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spade.paper.report import (provenance_record, read_metrics, read_tidy, render_latex, render_markdown, require_files,
                          run_script, run_table_rows, sidecar_path, stage_times, write_json_atomic, write_text_atomic)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="tidy results CSV (results_table.py)")
    parser.add_argument("--metrics", type=Path, required=True, help="metrics.jsonl of the run")
    parser.add_argument("--benchmarks", type=Path, required=True, help="folder of Snakemake benchmark TSVs")
    parser.add_argument("--run", required=True, help="run name as in the results table")
    parser.add_argument("--heldout", default="heldout_library:win_rate",
                        help="benchmark:metric of the held-out rows (the run's first eval.select_by entry)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex goes next to it)")
    args = parser.parse_args(argv)
    require_files(args.results, args.metrics)
    times = stage_times(args.benchmarks)
    tidy = read_tidy(args.results)
    rows = run_table_rows(args.run, tidy, read_metrics(args.metrics), times, heldout_measure=args.heldout)
    caption = f"Run {args.run}: wall time per stage, designer statistics and win rates"
    tex = args.out.with_suffix(".tex")
    write_text_atomic(args.out, render_markdown(rows, caption))
    write_text_atomic(tex, render_latex(rows, caption, f"tab:run-{args.run}"))
    inputs = [args.results, args.metrics] + sorted(args.benchmarks.rglob("*.tsv"))
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/table_toy_run.py", inputs, [args.out, tex], tidy[tidy["run"] == args.run], run=args.run))
    missing = [q for q, v, _ in rows if v == "not run"]
    print(f"wrote {args.out} and {tex}" + (f"; not run: {'; '.join(missing)}" if missing else ""))


if __name__ == "__main__":
    sys.exit(run_script(main))
