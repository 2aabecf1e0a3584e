"""Table 7: quality of the generated environments early, mid and late in training, ours beside the paper's.

    python paper/scripts/table7_env_quality.py --mapping paper/table_runs.yaml \
        --reported paper/reported/table7_env_quality.csv --runs-root results/runs \
        --out results/paper/tables/table7_env_quality.md

Reads the mapped run's environment archives (envs/set_<step>.json) and metrics.jsonl through spade.analysis:
learnable share, agent win rate, turns per episode, program length and hidden state variables per phase (the
phases are set in the run mapping; the measures, :func:`spade.paper.env_tables.env_quality`, are shared with the
quoted numbers). The two LLM-rubric rows need an LLM judge, which this repository does not have: they read "not
computed". Writes Markdown, LaTeX (.tex) and a provenance sidecar.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spade.paper.env_tables import TABLE7_SIGNALS, env_quality, run_folder_table_main, scale_detail
from spade.paper.report import NOT_RUN, ReportInputError, run_script
from spade.paper.scale import PAPER_30B, banner, off_scale
from spade.paper.table_runs import run_provenance, table_section
from spade.paper.tables import (
    BLANK,
    DIFF,
    NO_DATA,
    NOT_COMPUTED,
    OURS,
    REPORTED,
    Line,
    Table,
    read_reported,
    reported_number,
    shown_path,
    signed,
)

# what a phase lacks when a measure has no value there
EMPTY_PHASE = {"learnable_share": "no environment set regenerated", "agent_win_rate": "no metrics.jsonl record",
               "turns": "no metrics.jsonl record", "program_length": "no valid designer-written environment",
               "hidden_state_variables": "no valid designer-written environment"}


def build_table7(mapping: dict, reported_path: str | Path, runs_root: str | Path | None) -> tuple[Table, list, list]:
    """Table 7: per signal, our line, the reported line and the difference, one column per phase. Returns the
    table, the provenance of our cells and the files read."""
    section = table_section(mapping, "table7")
    phases = section["phases"]
    rows = read_reported(reported_path, ["signal", *phases])
    run = section["runs"][0] if section["runs"] else None
    run_dir = Path(runs_root) / run if run and runs_root is not None else None
    measures, inputs, skipped, missing = None, [], [], []
    if run is None:
        missing.append("no run mapped to Table 7")
    elif run_dir is None or not run_dir.is_dir():
        missing.append(f"run {run}: no run folder" + (f" {run_dir}" if run_dir else " (no runs root given)"))
    else:
        measures, inputs, skipped = env_quality(run_dir, phases)
        prov = run_provenance(run_dir)
    off = off_scale(runs_root, [run], PAPER_30B) if measures is not None else []
    groups, cells = [], []
    for line_no, row in enumerate(rows, start=2):
        signal = row["signal"]
        if signal not in TABLE7_SIGNALS:
            raise ReportInputError(f"{reported_path}, line {line_no}: signal {signal!r} is not one we compute "
                                   f"(known: {'; '.join(TABLE7_SIGNALS)})")
        measure, decimals = TABLE7_SIGNALS[signal]
        ours_text, reported_text, diff_text = [], [], []
        for phase in phases:
            reported = reported_number(reported_path, line_no, phase, row[phase])
            reported_text.append(row[phase] or BLANK)
            if measure == "rubric":
                ours_text.append(NOT_COMPUTED)
                diff_text.append(BLANK)
                continue
            if measures is None:
                ours_text.append(NOT_RUN)
                diff_text.append(NOT_RUN)
                continue
            entry = measures[measure][phase]
            if entry["value"] is None:
                ours_text.append(NO_DATA)
                diff_text.append(NO_DATA)
                first, last = phases[phase]
                missing.append(f"{signal}, {phase}: run {run} has {EMPTY_PHASE[measure]} in steps {first}-{last}")
                continue
            ours_text.append(f"{entry['value']:.{decimals}f}")
            diff_text.append(BLANK if reported is None or off else signed(entry["value"] - reported, decimals))
            cells.append({"row": signal, "column": phase, "measure": measure, "run": run, "steps": phases[phase],
                          "shown": ours_text[-1], "reported": reported, **entry, **prov})
        groups.append([Line([signal], OURS, ours_text, scale_detail(run, off) if measures is not None else ""),
                       Line([""], REPORTED, reported_text), Line([""], DIFF, diff_text)])
    missing += [f"code not analysed: {item}" for item in skipped]
    headers = [f"{phase.split('_')[0]} (steps {a}-{b})" for phase, (a, b) in phases.items()]
    notes = [
        ("ours: learnable share = learnable slots / all slots of the environment sets regenerated in the phase (win "
        "rate in [0.2, 0.8], empty slots count 0); RA win rate and turns per episode: per-step metrics.jsonl values "
        "weighted by episodes; program length (non-blank, non-comment, non-docstring lines) and hidden state "
        "variables: mean over valid designer-written environments (static analysis, spade.analysis)."),
        "not computed: the LLM-rubric signals need an LLM judge, which this repository does not have.",
        f"reported: the paper's Table 7 ({shown_path(reported_path)}); Δ: ours − reported.",
        "not run: no run mapped or no run folder; no data: the run has nothing in that phase.",
    ]
    table = Table("Table 7: quality of generated environments early, mid and late in training", "tab:env-quality",
                  ["Signal"], headers, groups, notes, missing, banner=banner(off, [PAPER_30B]))
    return table, cells, inputs


def main(argv=None) -> None:
    run_folder_table_main("table7", "Table 7: environment quality per training phase", build_table7,
                          "paper/scripts/table7_env_quality.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
