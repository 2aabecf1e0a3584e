"""Training curves of one run: (a) agent no-hint win rate and return with 95% intervals, (b) designer validity and backfill,
(c) the held-out measure (--heldout) per checkpoint against the base model; the title names the run and its scale.

    python paper/scripts/fig_toy_training.py --metrics results/runs/toy/metrics.jsonl \
        --results results/tables/results.csv --run toy --out results/figures/toy_training.pdf

Writes the PDF, the PNG of the same stem and a provenance sidecar. A panel without data renders with a
"no data" note, and the script says what is missing.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from spade.paper.scale import run_scale  # noqa: E402
from spade.paper.report import (COLUMN_WIDTH_IN, PAPER_RC, heldout, provenance_record, read_metrics, read_tidy,  # noqa: E402
                          require_files, run_script, save_figure, sidecar_path, step_interval, training_series,
                          write_json_atomic)

BLUE, ORANGE, GREEN, GREY = "#1f77b4", "#d95f02", "#1b9e77", "#555555"


def no_data(ax, what: str, missing: list[str]) -> None:
    missing.append(what)
    ax.text(0.5, 0.5, "no data\n" + textwrap.fill(f"({what})", 38), transform=ax.transAxes, ha="center",
            va="center", color=GREY, fontsize=6.5)


def band(ax, records, kind: str, color: str) -> None:
    """The per-step 95% interval (spade.paper.report.step_interval) as a shaded band; steps without one are gaps."""
    rows = [(r["step"], step_interval(r, kind)) for r in records]
    rows = [(step, interval) for step, interval in rows if interval is not None]
    if rows:
        ax.fill_between([s for s, _ in rows], [i[0] for _, i in rows], [i[1] for _, i in rows], color=color,
                        alpha=0.15, linewidth=0, label=f"95% interval ({'Wilson' if kind == 'win_rate' else 'normal'})")


def panel_training(ax, records, missing) -> None:
    steps, wins = training_series(records, "agent_win_rate")
    r_steps, returns = training_series(records, "agent_mean_return")
    ax.set_title("(a) agent in self-play", loc="left")
    ax.set_ylabel("win rate", color=BLUE)
    if not steps and not r_steps:
        return no_data(ax, "agent_win_rate / agent_mean_return in the metrics log", missing)
    ax.plot(steps, wins, color=BLUE, marker=".", label="win rate (no hint)")
    band(ax, records, "win_rate", BLUE)
    right = ax.twinx()
    right.spines["right"].set_visible(True)
    right.grid(False)
    right.plot(r_steps, returns, color=ORANGE, marker=".", linestyle="--", label="mean return (no hint)")
    band(right, records, "return", ORANGE)
    right.set_ylabel("mean return", color=ORANGE)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="best")


def panel_designer(ax, records, missing) -> None:
    steps, valid = training_series(records, "valid_env_rate", regeneration_only=True)
    b_steps, backfilled = training_series(records, "backfilled_share", regeneration_only=True)
    ax.set_title("(b) designer at regeneration steps", loc="left")
    ax.set_ylabel("share")
    ax.set_ylim(-0.05, 1.05)
    if not steps and not b_steps:
        return no_data(ax, "regeneration records in the metrics log", missing)
    ax.plot(steps, valid, color=GREEN, marker="o", linewidth=0.6, label="valid-environment rate")
    ax.plot(b_steps, backfilled, color=GREY, marker="s", linewidth=0.6, label="backfilled share")
    ax.legend(loc="best")


def panel_heldout(ax, evals, run, missing, measure="heldout_library:win_rate") -> None:
    benchmark, _, metric = measure.partition(":")
    ax.set_title(f"(c) held-out: {benchmark}", loc="left")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_xlabel("training step")
    if not len(evals):
        return no_data(ax, f"held-out evaluations of run {run!r} in the results table", missing)
    base, trained = evals[evals["step"] == 0], evals[evals["step"] > 0]
    if len(base):
        ax.axhline(base["value"].iloc[0], color=GREY, linestyle="--", linewidth=0.9, label="base")
        ax.annotate("base", (0.01, base["value"].iloc[0]), xycoords=("axes fraction", "data"),
                    xytext=(0, 2), textcoords="offset points", color=GREY, fontsize=6.5)
    else:
        missing.append(f"held-out evaluation of the base model (step 0) for run {run!r}")
    if len(trained):
        ax.errorbar(trained["step"], trained["value"], yerr=trained["stderr"].fillna(0.0), color=BLUE, marker="o",
                    capsize=2, linewidth=1.0, label="checkpoint (± s.e.)")
        ax.legend(loc="best")
    else:
        no_data(ax, f"held-out evaluations of trained checkpoints of run {run!r}", missing)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=Path, required=True, help="metrics.jsonl of the run")
    parser.add_argument("--results", type=Path, required=True, help="tidy results CSV (results_table.py)")
    parser.add_argument("--run", required=True, help="run name as in the results table")
    parser.add_argument("--heldout", default="heldout_library:win_rate",
                        help="benchmark:metric of panel (c) (the run's first eval.select_by entry)")
    parser.add_argument("--out", type=Path, required=True, help="PDF to write (the PNG goes next to it)")
    args = parser.parse_args(argv)
    require_files(args.metrics, args.results)
    records, tidy = read_metrics(args.metrics), read_tidy(args.results)
    benchmark, _, metric = args.heldout.partition(":")
    evals, missing = heldout(tidy, args.run, metric, benchmark), []
    scale = run_scale(args.metrics.parent.parent, args.run)
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(3, 1, figsize=(COLUMN_WIDTH_IN, 4.6), sharex=True, layout="constrained")
        panel_training(axes[0], records, missing)
        panel_designer(axes[1], records, missing)
        panel_heldout(axes[2], evals, args.run, missing, args.heldout)
        fig.suptitle(f"run {args.run}: {scale.label()}", fontsize=7.5)
        axes[2].xaxis.set_major_locator(MaxNLocator(integer=True))
        outputs = save_figure(fig, args.out)
        plt.close(fig)
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/fig_toy_training.py", [args.metrics, args.results], outputs, tidy[tidy["run"] == args.run],
        run=args.run, missing=missing))
    for what in missing:
        print(f"missing: {what}")
    print(f"wrote {', '.join(map(str, outputs))}")


if __name__ == "__main__":
    sys.exit(run_script(main))
