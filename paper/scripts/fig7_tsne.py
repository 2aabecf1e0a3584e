"""Figure 7: t-SNE of environment embeddings (330 sampled per run), SPADE vs w/o corpus, with our Vendi/n.

    python paper/scripts/fig7_tsne.py --mapping paper/figure_runs.yaml --runs-root results/runs \
        --out results/paper/figures/fig7_tsne.pdf

The environments of every series' run (`sample` per run, seeded) are embedded together (--embedding: SBERT,
as the paper, or TF-IDF + LSA) and mapped by one joint t-SNE; each run's legend entry gives its Vendi score per
environment (Vendi/n, up to 100 environments, 20 draws).

Writes the PDF, the PNG of the same stem and a provenance sidecar (inputs with SHA-256, run config hash,
commit and seed, and "missing": what could not be drawn). Runs: paper/figure_runs.yaml, key fig7.
"""

from __future__ import annotations

import sys

from spade.paper.figures import PALETTE, FigureContext, check_runs, embed, env_texts, figure_main, no_data, subplots
from spade.paper.report import COLUMN_WIDTH_IN, run_script


def draw_tsne(ctx: FigureContext):
    """Figure 7: joint t-SNE of the environment embeddings of the runs, ``sample`` per run; Vendi/n in legend."""
    import numpy as np

    from spade.analysis import tsne_2d, vendi_per_n

    section = ctx.section
    sample, seed, fld = int(section.get("sample", 330)), int(section.get("seed", 0)), section.get("field", "code")
    rng = np.random.default_rng(seed)
    texts, owner = [], []
    for i, label, run in check_runs(ctx):
        run_texts = env_texts(ctx, run, fld)[0]
        if len(run_texts) < 2:
            ctx.miss(f"{label}: run {run} has {len(run_texts)} valid environment(s); t-SNE needs 2 or more")
            continue
        if len(run_texts) < sample:
            ctx.miss(f"{label}: run {run} has only {len(run_texts)} valid environments (figure samples {sample})")
        idx = np.sort(rng.choice(len(run_texts), size=min(sample, len(run_texts)), replace=False))
        texts += [run_texts[j] for j in idx]
        owner += [(i, label, run)] * len(idx)
    fig, axes = subplots(1, 1, 2.6, COLUMN_WIDTH_IN)
    ax = axes[0, 0]
    if len(texts) < 4:
        no_data(ax, "valid environments of the mapped runs")
        return fig
    x = embed(texts, ctx.embedding, seed)
    if len(np.unique(x, axis=0)) < 2:  # tsne_2d refuses them: nothing to lay out
        ctx.miss(f"the {len(texts)} sampled environments have identical {ctx.embedding} embeddings")
        no_data(ax, "distinct environments of the mapped runs")
        return fig
    points = tsne_2d(x, seed=seed)
    for i, label, run in dict.fromkeys(owner):
        members = np.array([k for k, o in enumerate(owner) if o[0] == i])
        size = min(100, len(members))
        vendi = vendi_per_n(x[members], size=size, draws=20, seed=seed).mean
        ax.scatter(points[members, 0], points[members, 1], s=3, alpha=0.6, color=PALETTE[i % len(PALETTE)],
                   label=ctx.series_label(f"{label} (Vendi/n {vendi:.2f}, n={size})", run), linewidths=0)
        ctx.shown[label] = run
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    ax.set_title(f"{ctx.embedding} embeddings of {fld}", loc="left")
    ax.legend(loc="best", markerscale=2)
    return fig


def main(argv=None) -> None:
    figure_main("fig7", "paper/scripts/fig7_tsne.py", draw_tsne, argv, __doc__)


if __name__ == "__main__":
    sys.exit(run_script(main))
