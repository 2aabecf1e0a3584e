"""Figure 12: (left) gain over base vs model size at the selected checkpoints; (right) hint regret over training.

    python paper/scripts/fig12_model_size.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig12_model_size.pdf

Per model size (mapping key `sizes`: {spade: run, grpo: run}): (a) the gain in points of each run's selected
checkpoint (selected_checkpoint.json) over step 0 of the SPADE run, per benchmark and the mean of the 8;
(b) the SPADE run's mean hint regret (metrics.jsonl), raw and as an EMA (key `ema_alpha`). Each size is
compared with its paper backbone (spade.paper.figures.SIZE_BACKBONES) for the toy-scale banner.

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig12.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from spade.paper.figures import (EIGHT_BENCHMARKS, GREY, PALETTE, PANEL_METRIC, PERCENT, SIZE_BACKBONES,
                                 FigureContext, curve, figure_main, load_eval, metrics, no_data, subplots)
from spade.paper.report import ReportInputError, run_script


def metric_series(records: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    """Figure 12 (right): (steps, values) of the finite ``key`` of the metrics records."""
    pairs = sorted((int(r["step"]), float(r[key])) for r in records
                   if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
                   and math.isfinite(r[key]) and "step" in r)
    return [s for s, _ in pairs], [v for _, v in pairs]


def selected_gain(ctx: FigureContext, tidy, run: str, base_run: str) -> tuple[float | None, dict]:
    """Figure 12 (left): gain in points of ``run``'s selected checkpoint over step 0 of ``base_run``: the mean
    over the 8 benchmarks, and per benchmark (those evaluated at both)."""
    from spade.paper.table_runs import ResultIndex, resolve_step

    choice = resolve_step(run, "selected", ResultIndex(tidy), ctx.runs_root)
    if choice.step is None:
        ctx.miss(choice.reason)
        return None, {}
    gains = {}
    for key in EIGHT_BENCHMARKS:
        benchmark, metric = PANEL_METRIC[key]
        s_steps, s_vals = curve(tidy, run, benchmark, metric)
        b_steps, b_vals = curve(tidy, base_run, benchmark, metric)
        if choice.step in s_steps and 0 in b_steps:
            gains[key] = (s_vals[s_steps.index(choice.step)] - b_vals[b_steps.index(0)]) * PERCENT
        else:
            ctx.miss(f"run {run} step {choice.step} or base: {key}")
    mean = sum(gains.values()) / len(gains) if len(gains) == len(EIGHT_BENCHMARKS) else None
    return mean, gains


def size_backbone(ctx: FigureContext, size: str) -> str:
    """Figure 12: the paper backbone that the curves of ``size`` stand for."""
    if size not in SIZE_BACKBONES:
        raise ReportInputError(f"{ctx.mapping['path']}: figures.{ctx.figure}.sizes.{size}: the paper has no backbone "
                               f"of that size (known: {', '.join(SIZE_BACKBONES)})")
    return SIZE_BACKBONES[size]


def draw_model_size(ctx: FigureContext):
    """Figure 12: (left) gain over base vs model size at the selected checkpoints; (right) hint regret."""
    from spade.analysis import ema

    sizes = ctx.section.get("sizes") or {}
    alpha = float(ctx.section.get("ema_alpha", 0.1))
    runs = [r for entry in sizes.values() for r in entry.values() if r]
    for run in runs:
        if ctx.run_dir(run) is None:
            ctx.miss(f"run {run} not run (no folder under {ctx.runs_root})")
    tidy, files = load_eval(ctx.runs_root, [r for r in runs if ctx.run_dir(r)])
    ctx.inputs += files + [ctx.runs_root / r / "selected_checkpoint.json" for r in runs
                           if (ctx.runs_root / r / "selected_checkpoint.json").is_file()]
    fig, axes = subplots(1, 2, 2.3)
    left, right = axes[0]
    left.axhline(0.0, color=GREY, linewidth=0.6)
    drawn_left = drawn_right = False
    for x, (size, entry) in enumerate(sizes.items()):
        spade_run, grpo_run = entry.get("spade"), entry.get("grpo")
        for j, (label, run) in enumerate((("SPADE", spade_run), ("Fixed-env GRPO", grpo_run))):
            if not run or ctx.run_dir(run) is None or not spade_run:
                continue
            mean, gains = selected_gain(ctx, tidy, run, spade_run)
            offset = -0.12 if j == 0 else 0.12
            # one legend entry per size: each point is a different run, compared with that size's backbone
            text = ctx.series_label(f"{label} {size}", run, size_backbone(ctx, size), width=36) if gains else None
            if gains:
                left.scatter([x + offset] * len(gains), list(gains.values()), s=6, color=PALETTE[j], alpha=0.4,
                             linewidths=0)
            if mean is not None:
                left.scatter([x + offset], [mean], s=22, color=PALETTE[j], marker="D", label=text)
                ctx.shown[f"{label} {size}"] = run
                drawn_left = True
        if spade_run and ctx.run_dir(spade_run):
            steps, regret = metric_series(metrics(ctx, spade_run), "mean_regret")
            if steps:
                color = PALETTE[x % len(PALETTE)]
                right.plot(steps, regret, color=color, alpha=0.3, linewidth=0.6)
                right.plot(steps, ema(regret, alpha), color=color,
                           label=ctx.series_label(size, spade_run, size_backbone(ctx, size), width=36))
                ctx.shown[f"regret {size}"] = spade_run
                drawn_right = True
            else:
                ctx.miss(f"run {spade_run}: no mean_regret in metrics.jsonl")
    left.set_xticks(range(len(sizes)), list(sizes))
    left.set_ylabel("gain over base (points)")
    left.set_title("(a) gain vs model size (selected checkpoint)", loc="left")
    right.set_title(f"(b) hint regret (raw, EMA alpha={alpha})", loc="left")
    right.set_xlabel("training step")
    right.set_ylabel("regret")
    for ax, drawn, what in ((left, drawn_left, "selected checkpoints with all 8 benchmarks"),
                            (right, drawn_right, "mean_regret in metrics.jsonl")):
        if drawn:
            handles, labels = ax.get_legend_handles_labels()
            unique = dict(zip(labels, handles))
            ax.legend(unique.values(), unique.keys(), loc="best")
        else:
            no_data(ax, what)
    return fig


def main(argv=None) -> None:
    figure_main("fig12", "paper/scripts/fig12_model_size.py", draw_model_size, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
