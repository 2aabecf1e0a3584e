"""The learning check's held-out win rate, base model against the last checkpoint, for each of its seed runs.

    python paper/scripts/table_learning_check.py --runs toy_learning_check_s0 toy_learning_check_s1 ... \
        --base results/runs/toy_learning_check_s0/eval/learning_check/step_000000.json ... \
        --last results/runs/toy_learning_check_s0/eval/learning_check/step_000080.json ... \
        --out results/tables/learning_check.md

``--base`` and ``--last`` list one `learning_check` result per run, in the order of ``--runs``; the item records
beside each result (``<stem>.items.jsonl``) are paired by item id: the same held-out instances (spade.envs.checks,
split 'heldout') are played at step 0 and at the last checkpoint. Each run's interval is a 95% percentile bootstrap
over those instances, resampling pairs (spade.analysis.rates.paired_bootstrap_difference): it says how sure the
change is for that run's policy. The last row resamples whole runs (seeds) instead: how the change varies between
seeds.
Writes the Markdown table, a booktabs LaTeX table next to it and a provenance sidecar.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spade.evals.base import items_path
from spade.paper.report import (ReportInputError, provenance_record, render_latex, render_markdown, require_files,
                                run_script, sidecar_path, write_json_atomic, write_text_atomic)


def read_scores(result: Path) -> tuple[int, dict]:
    """(step, item id -> score) of one `learning_check` result and its item records."""
    data = json.loads(result.read_text(encoding="utf-8"))
    records = items_path(result)
    require_files(records)
    scores = {}
    for line in records.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            scores[item["id"]] = float(item["score"])
    return int(data["step"]), scores


def learning_check_rows(runs: list[tuple[str, int, dict, int, dict]], decimals: int = 3) -> list[tuple[str, str, str]]:
    """Rows (quantity, value, detail): per run (name, base step, base scores, last step, last scores) its held-out win
    rate at both steps, their change and its paired bootstrap interval; then the smallest change over the runs."""
    from spade.analysis.rates import paired_bootstrap_difference

    rows, changes = [], []
    for name, base_step, base, last_step, last in runs:
        if set(base) != set(last):
            raise ReportInputError(f"run {name!r}: step {base_step} and step {last_step} played different held-out "
                                   f"items ({len(set(base) ^ set(last))} not in both); evaluate both with one config")
        ids = sorted(base)
        diff, low, high = paired_bootstrap_difference([(base[i], last[i]) for i in ids])
        changes.append(diff)
        verdict = "excludes 0" if low > 0 or high < 0 else "includes 0"
        rows.append((f"{name}: held-out win rate, step {base_step} -> step {last_step}",
                     f"{sum(base.values()) / len(ids):.{decimals}f} -> {sum(last.values()) / len(ids):.{decimals}f}",
                     f"change {diff:+.{decimals}f}, 95% paired bootstrap interval over its {len(ids)} held-out "
                     f"instances [{low:+.{decimals}f}, {high:+.{decimals}f}] ({verdict})"))
    if changes:
        mean, low, high = paired_bootstrap_difference([(0.0, change) for change in changes])
        rows.append(("Mean change over the runs (seeds)", f"{mean:+.{decimals}f}",
                     f"95% bootstrap interval resampling the {len(changes)} runs [{low:+.{decimals}f}, "
                     f"{high:+.{decimals}f}] (with 3 runs, about their range); smallest change "
                     f"{min(changes):+.{decimals}f}"))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run names, one per seed")
    parser.add_argument("--base", nargs="+", type=Path, required=True, help="learning_check result at step 0, per run")
    parser.add_argument("--last", nargs="+", type=Path, required=True,
                        help="learning_check result at the last checkpoint, per run")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex goes next to it)")
    args = parser.parse_args(argv)
    if not len(args.runs) == len(args.base) == len(args.last):
        raise ReportInputError(f"--runs, --base and --last need one entry per run, got {len(args.runs)}, "
                               f"{len(args.base)} and {len(args.last)}")
    require_files(*args.base, *args.last)
    runs = [(name, *read_scores(base), *read_scores(last)) for name, base, last in zip(args.runs, args.base, args.last)]
    rows = learning_check_rows(runs)
    caption = "Learning check: held-out win rate of the base model and the last checkpoint, per seed"
    tex = args.out.with_suffix(".tex")
    write_text_atomic(args.out, render_markdown(rows, caption))
    write_text_atomic(tex, render_latex(rows, caption, "tab:learning-check"))
    inputs = [*args.base, *args.last] + [items_path(p) for p in [*args.base, *args.last]]
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/table_learning_check.py", inputs, [args.out, tex], runs=list(args.runs)))
    print(f"wrote {args.out} and {tex}")
    for quantity, value, detail in rows:
        print(f"  {quantity}: {value} ({detail})")


if __name__ == "__main__":
    sys.exit(run_script(main))
