"""Figure 17: per-skill RA win rate over training (EMA) and its gain (last 25% - first 25%).

    python paper/scripts/fig17_skill_win_rates.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig17_skill_win_rates.pdf

From the first series' metrics.jsonl (win_rate_by_skill): (a) each skill's win rate as an EMA (key
`ema_alpha`); (b) each skill's gain, the mean of the last 25% of its steps minus that of the first 25%.

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig17.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from spade.paper.figures import GREY, PALETTE, FigureContext, check_runs, figure_main, metrics, no_data, subplots
from spade.paper.report import run_script


def skill_win_rates(records: Sequence[dict]) -> dict[str, tuple[list[int], list[float]]]:
    """Figure 17: skill -> (steps, RA win rate) from ``win_rate_by_skill`` of the metrics records."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for record in sorted(records, key=lambda r: r.get("step", 0)):
        for skill, value in (record.get("win_rate_by_skill") or {}).items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                steps, values = out.setdefault(skill, ([], []))
                steps.append(int(record["step"]))
                values.append(float(value))
    return out


def draw_skill_win_rates(ctx: FigureContext):
    """Figure 17: (a) per-skill RA win rate over training (EMA); (b) gain, last 25% minus first 25% of steps."""
    from spade.analysis import early_late_gain, ema

    alpha = float(ctx.section.get("ema_alpha", 0.1))
    fig, axes = subplots(1, 2, 2.3)
    a, b = axes[0]
    by_skill, title = {}, f"(a) RA win rate per skill (EMA alpha={alpha})"
    for _, label, run in check_runs(ctx)[:1]:
        by_skill = skill_win_rates(metrics(ctx, run))
        if not by_skill:
            ctx.miss(f"{label}: run {run} has no win_rate_by_skill in metrics.jsonl")
        else:
            ctx.shown[label] = run
            # both panels are of this one run; the legend names the skills, so the title names the run
            title += "\n" + ctx.series_label(label, run, width=60)
    a.set_title(title, loc="left")
    b.set_title("(b) gain: last 25% - first 25%", loc="left")
    if not by_skill:
        no_data(a, "win_rate_by_skill")
        no_data(b, "win_rate_by_skill")
        return fig
    gains = {}
    for j, (skill, (steps, values)) in enumerate(sorted(by_skill.items())):
        a.plot(steps, ema(values, alpha), color=PALETTE[j % len(PALETTE)], label=skill)
        if len(values) >= 2:
            gains[skill] = early_late_gain(values)
        else:
            ctx.miss(f"{skill}: fewer than 2 steps, no gain")
    a.set_xlabel("training step")
    a.set_ylabel("win rate")
    a.legend(loc="best")
    names = list(gains)
    b.barh(range(len(names)), [gains[n] for n in names],
           color=[PALETTE[sorted(by_skill).index(n) % len(PALETTE)] for n in names])
    b.set_yticks(range(len(names)), names)
    b.axvline(0.0, color=GREY, linewidth=0.6)
    b.set_xlabel("win-rate gain")
    return fig


def main(argv=None) -> None:
    figure_main("fig17", "paper/scripts/fig17_skill_win_rates.py", draw_skill_win_rates, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
