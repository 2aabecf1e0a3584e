"""The mechanism check's figure (issues 39, 48), in the style of the paper's Figures 6 and 11: per design round, the
designer reward, the learnable share, the designed difficulty and the agent's accuracy, trained designer against its
control, each seed; below, the held-out win rate at each NEED of the last checkpoints and of the base model.

    python paper/scripts/fig_mechanism_check.py --rounds results/tables/mechanism_check.rounds.json \
        --out results/figures/mechanism_check.pdf

Reads the per-round series that table_mechanism_check.py wrote (spade.analysis.mechanism). Writes the PDF, the PNG of
the same stem and a provenance sidecar.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spade.paper.report import provenance_record, require_files, run_script, save_figure, sidecar_path, write_json_atomic

PANELS = (("reward", "designer reward"), ("learnable", "learnable share"), ("need", "designed NEED"),
          ("accuracy", "agent digit accuracy"))


def main(argv=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=Path, required=True, help="the table's <stem>.rounds.json")
    parser.add_argument("--out", type=Path, required=True, help="PDF to write (the PNG goes next to it)")
    args = parser.parse_args(argv)
    require_files(args.rounds)
    data = json.loads(args.rounds.read_text(encoding="utf-8"))
    seeds = sorted(data["trained"])
    fig, axes = plt.subplots(len(PANELS) + 1, len(seeds), figsize=(3.2 * len(seeds), 2.0 * (len(PANELS) + 1)),
                             squeeze=False)
    for column, seed in enumerate(seeds):
        for row, (key, label) in enumerate(PANELS):
            ax = axes[row][column]
            for arm, colour in (("trained", "tab:blue"), ("control", "tab:gray")):
                rounds = data[arm][seed]
                points = [(s, v) for s, v in zip(rounds["step"], rounds[key]) if v is not None]
                ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", lw=1, color=colour,
                        label=f"{arm} ({rounds['run']})")
            if row == 0:
                ax.set_title(f"seed {seed}")
                ax.legend(fontsize=6)
            if column == 0:
                ax.set_ylabel(label)
            if row == len(PANELS) - 1:
                ax.set_xlabel("design step")
        ax = axes[len(PANELS)][column]
        base = data["heldout"]["base"]
        ax.plot([int(n) for n in base], list(base.values()), ls=":", marker=".", color="black", label="base model")
        for arm, colour in (("trained", "tab:blue"), ("control", "tab:gray")):
            rates = data["heldout"][arm][seed]
            ax.plot([int(n) for n in rates], list(rates.values()), marker="o", lw=1, color=colour, label=arm)
        ax.set_xlabel("NEED (held-out rows, last checkpoint)")
        ax.set_ylim(-0.02, 1.02)
        if column == 0:
            ax.set_ylabel("held-out win rate")
            ax.legend(fontsize=6)
    fig.suptitle(f"Mechanism check ({'passed' if data['passed'] else 'FAILED'}): trained designer vs control", fontsize=9)
    fig.tight_layout()
    paths = save_figure(fig, args.out)
    write_json_atomic(sidecar_path(args.out), provenance_record("paper/scripts/fig_mechanism_check.py", [args.rounds],
                                                                paths))
    print(f"wrote {', '.join(map(str, paths))}")


if __name__ == "__main__":
    sys.exit(run_script(main))
