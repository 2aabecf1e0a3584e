"""Figure of the environment-source comparison (ours, not in the paper): one panel per column of the table, one bar
per source.

    python paper/scripts/fig_env_sources.py --table results/paper/tables/env_sources.md.provenance.json \
        --out results/paper/figures/env_sources.pdf

Draws from the table's provenance sidecar (its ``comparison`` section, written by
paper/scripts/table_env_sources.py), so the figure shows exactly the table's numbers (whiskers: the Wilson interval
of the valid rate, the draw standard deviation of Vendi/n); a source without a value shows its mark where its bar
would be, and a toy-scale run brings the table's banner on top. Writes the PDF, a PNG beside it and a provenance
sidecar.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from pathlib import Path

from spade.paper.figures import GREY, PALETTE, missing_note
from spade.paper.report import (
    COLUMN_WIDTH_IN,
    PAPER_RC,
    ReportInputError,
    provenance_record,
    read_json,
    run_script,
    save_figure,
    sidecar_path,
    write_json_atomic,
)

SCRIPT = "paper/scripts/fig_env_sources.py"
# the x-axis label of the panel of each source measure (a held-out suite's panel: "gain (points)")
PANEL_AXIS = {"valid_env_rate": "valid-env rate", "tokens_per_valid_env": "tokens / valid env",
              "learnable_share": "learnable share", "vendi_per_n": "Vendi/n"}


def read_comparison(path: str | Path) -> dict:
    """The ``comparison`` section of the table's sidecar (``env_sources.md.provenance.json``)."""
    record = read_json(path)
    data = record.get("comparison") if isinstance(record, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("columns"), list) or not isinstance(
            data.get("sources"), list):
        raise ReportInputError(f"{path}: no 'comparison' section with 'columns' and 'sources' (is it the sidecar of "
                               "the environment-source table?)")
    return {**data, "missing": list(record.get("missing") or [])}


def whisker(key: str, cell: dict) -> tuple[float, float] | None:
    """(below, above) of a bar's whisker: the Wilson interval of the valid rate, ± the draw sd of Vendi/n."""
    if cell.get("value") is None:
        return None
    if key == "valid_env_rate":
        return cell["value"] - cell["low"], cell["high"] - cell["value"]
    if key == "vendi_per_n" and cell.get("sd") is not None:
        return cell["sd"], cell["sd"]
    return None


def draw_comparison(data: dict):
    """One horizontal-bar panel per column, one bar per source (whiskers: Wilson interval, Vendi draw sd); a
    source without a value gets its mark written where its bar would be."""
    import matplotlib.pyplot as plt

    cols, sources = data["columns"], data["sources"]
    ncols = min(3, len(cols))
    nrows = math.ceil(len(cols) / ncols)
    height = 0.35 + nrows * (0.35 + 0.22 * len(sources))
    fig, axes = plt.subplots(nrows, ncols, figsize=(2 * COLUMN_WIDTH_IN, height), layout="constrained",
                             squeeze=False, sharey=True)
    # each source names its run and scale (model card, steps); toy runs also get the banner on top
    labels = [textwrap.fill(s["label"], 24) + (f"\n{s['scale']}" if s.get("scale") else "") for s in sources]
    if data.get("banner"):
        fig.suptitle(textwrap.fill(data["banner"], 150), fontsize=6, fontweight="bold", color="#b00000")
    y = list(range(len(sources)))
    for index, ax in enumerate(axes.ravel()):
        if index >= len(cols):
            ax.set_visible(False)
            continue
        key, header = cols[index]["key"], cols[index]["header"]
        ax.set_title(textwrap.fill(header, 34), loc="left")
        ax.set_xlabel(PANEL_AXIS.get(key, "gain (points)"))
        values = [s["cells"][key].get("value") for s in sources]
        shown = [v for v in values if v is not None]
        span = max([abs(v) for v in shown] + [1e-9])
        if key not in PANEL_AXIS:
            ax.axvline(0.0, color=GREY, linewidth=0.6)
        for i, (source, value) in enumerate(zip(sources, values)):
            cell = source["cells"][key]
            if value is None:
                ax.text(0.02 * span, i, cell["shown"], va="center", ha="left", fontsize=5.5, color=GREY,
                        style="italic")
                continue
            err = whisker(key, cell)
            ax.barh(i, value, color=PALETTE[i % len(PALETTE)], height=0.6,
                    xerr=None if err is None else [[err[0]], [err[1]]], error_kw={"elinewidth": 0.7, "capsize": 1.5})
        if key in ("valid_env_rate", "learnable_share"):
            ax.set_xlim(0.0, 1.0)
        ax.set_yticks(y, labels)
    axes[0, 0].invert_yaxis()  # the y axis is shared: the first source on top in every panel
    return fig


def main(argv=None) -> None:
    """Command line: draws the table's sidecar (``--table``) into ``--out`` (PDF), its PNG and sidecar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description="Environment sources compared (figure)")
    parser.add_argument("--table", type=Path, required=True,
                        help="the table's provenance sidecar (results/paper/tables/env_sources.md.provenance.json)")
    parser.add_argument("--out", type=Path, required=True, help="PDF to write (the PNG goes next to it)")
    args = parser.parse_args(argv)
    data = read_comparison(args.table)
    with plt.rc_context(PAPER_RC):
        fig = draw_comparison(data)
        missing_note(fig, data["missing"])
        outputs = save_figure(fig, args.out)
        plt.close(fig)
    write_json_atomic(sidecar_path(args.out), provenance_record(
        SCRIPT, [args.table], outputs, figure="env_sources",
        series={s["label"]: s["run"] for s in data["sources"] if s["run"]}, missing=data["missing"]))
    for what in data["missing"]:
        print(f"missing: {what}")
    print(f"wrote {', '.join(map(str, outputs))}")


if __name__ == "__main__":
    sys.exit(run_script(main))
