"""Figure 16: reward levels per environment over training, and early vs late per skill.

    python paper/scripts/fig16_reward_levels.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig16_reward_levels.pdf

From the first series' environment-set archives (envs/set_*.json): (a) the distinct and the strictly partial
reward levels of each played valid environment, and their mean per step; (b) the mean distinct levels per
skill and for all, early vs late (mapping keys `early` and `late`, inclusive steps).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig16.
"""

from __future__ import annotations

import sys

from matplotlib.ticker import MaxNLocator

from spade.paper.figures import GREY, PALETTE, FigureContext, check_runs, env_sets, figure_main, no_data, subplots
from spade.paper.report import ReportInputError, run_script


def draw_reward_levels(ctx: FigureContext):
    """Figure 16: (a) distinct and strictly partial reward levels per environment over training; (b) early vs
    late mean levels per skill (our archive labels skills, not the paper's corpus domains) and for all."""

    from spade.analysis import phase_mean, reward_level_rows

    early, late = ctx.section.get("early", [0, 130]), ctx.section.get("late", [261, 396])
    fig, axes = subplots(1, 2, 2.4)
    a, b = axes[0]
    series = check_runs(ctx)[:1]
    rows, title = [], "(a) reward levels per environment"
    for _, label, run in series:
        try:
            rows = reward_level_rows(env_sets(ctx, run))
        except ValueError as exc:
            raise ReportInputError(f"run {run}: {exc}") from None
        if not rows:
            ctx.miss(f"{label}: run {run} has no played valid environments in envs/set_*.json")
        else:
            ctx.shown[label] = run
            # both panels are of this one run; the legend names the levels, so the title names the run
            title += "\n" + ctx.series_label(label, run, width=60)
    a.set_title(title, loc="left")
    b.set_title(f"(b) early {early[0]}-{early[1]} vs late {late[0]}-{late[1]}", loc="left")
    if not rows:
        no_data(a, "environment archives")
        no_data(b, "environment archives")
        return fig
    steps = sorted({r["step"] for r in rows})
    for key, color, label in (("levels", PALETTE[0], "all levels"), ("partial_levels", PALETTE[1], "strictly partial")):
        a.scatter([r["step"] for r in rows], [r[key] for r in rows], s=3, alpha=0.25, color=color, linewidths=0)
        means = [sum(r[key] for r in rows if r["step"] == s) / sum(1 for r in rows if r["step"] == s) for s in steps]
        a.plot(steps, means, color=color, label=f"{label} (mean)")
    a.set_xlabel("training step")
    a.xaxis.set_major_locator(MaxNLocator(integer=True))  # archives are per step: no ticks between steps
    a.set_ylabel("distinct reward values")
    a.legend(loc="best")
    groups = sorted({str(r["skill"]) for r in rows}) + ["all"]
    for y, group in enumerate(groups):
        members = [r for r in rows if group == "all" or str(r["skill"]) == group]
        xs, vs = [r["step"] for r in members], [r["levels"] for r in members]
        e, lt = phase_mean(xs, vs, *early), phase_mean(xs, vs, *late)
        if e is None or lt is None:
            ctx.miss(f"{group}: no environment in the {'early' if e is None else 'late'} phase")
        if e is not None and lt is not None:
            b.plot([e, lt], [y, y], color=GREY, linewidth=0.8)
        if e is not None:
            b.scatter([e], [y], color=PALETTE[0], s=12, label="early", zorder=3)
        if lt is not None:
            b.scatter([lt], [y], color=PALETTE[1], s=12, label="late", zorder=3)
    b.set_yticks(range(len(groups)), groups)
    b.set_xlabel("mean distinct reward levels")
    handles, labels = b.get_legend_handles_labels()
    if labels:
        b.legend(dict(zip(labels, handles)).values(), dict(zip(labels, handles)).keys(), loc="best")
    return fig


def main(argv=None) -> None:
    figure_main("fig16", "paper/scripts/fig16_reward_levels.py", draw_reward_levels, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
