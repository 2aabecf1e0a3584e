"""Quoted numbers 'learnable_share' of the paper: the learnable share of the environment sets per training phase,
as LaTeX macros beside the paper's values.

    python paper/scripts/num_learnable_share.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/learnable_share.tex

Table 7's learnable share per phase: learnable slots (RA win rate in [0.2, 0.8]) / all slots of the environment sets
regenerated in the phase, empty slots counting 0 (:func:`spade.paper.env_tables.env_quality`; the 16-step windows of
figure 6 pooled over the phase). Reported: ``table7_env_quality.csv``, the column of each phase. Runs: key
``numbers.learnable_share`` of the run mapping (its phases, or the mapping's top-level ``phases``).

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spade.paper.env_tables import TABLE7_SIGNALS, env_quality
from spade.paper.numbers import (
    GROUP_REPORTED,
    Group,
    Number,
    NumberContext,
    macro_word,
    mark_missing,
    number_main,
    number_section,
    reported_cell,
    run_or_missing,
)
from spade.paper.report import run_script
from spade.paper.tables import NO_DATA, read_reported


def reported_column_of_phase(reported_dir: Path, stem: str, phase: str) -> str | None:
    """The reported column of a phase: the column of ``stem`` whose name starts with ``<phase>_``."""
    columns = read_reported(Path(reported_dir) / stem, [])
    names = list(columns[0]) if columns else []
    found = [c for c in names if c.startswith(f"{phase}_")]
    return found[0] if len(found) == 1 else None


def learnable_share(ctx: NumberContext) -> list[Number]:
    """Per phase: learnable slots / all slots of the sets regenerated in the phase (Table 7's first row)."""
    section = number_section(ctx.mapping, "learnable_share")
    stem = GROUP_REPORTED["learnable_share"]
    signal = next(s for s, (m, _) in TABLE7_SIGNALS.items() if m == "learnable_share")
    numbers = []
    for phase in section["phases"]:
        column = reported_column_of_phase(ctx.reported_dir, stem, phase)
        reported, source = (reported_cell(ctx.reported_dir, stem, {"signal": signal}, column) if column
                            else (None, f"{stem} has no column for phase {phase}"))
        first, last = section["phases"][phase]
        numbers.append(Number(f"NumLearnableShare{macro_word(phase)}", f"learnable share, {phase} (steps {first}-"
                              f"{last})", None, 2, reported, source))
    folder = run_or_missing(ctx, section["run"], numbers)
    if folder is None:
        return numbers
    measures, files, _ = env_quality(folder, section["phases"])
    ctx.inputs += files
    for number, phase in zip(numbers, section["phases"]):
        entry = measures["learnable_share"][phase]
        number.detail = {"run": section["run"], "steps": section["phases"][phase], "learnable": entry["learnable"],
                         "slots": entry["n"], "inputs": entry["inputs"]}
        if entry["value"] is None:
            first, last = section["phases"][phase]
            mark_missing(number, NO_DATA, f"run {section['run']} regenerated no environment set in steps "
                                          f"{first}-{last}")
        else:
            number.value = entry["value"]
    return numbers


GROUP = Group("learnable_share", "Learnable share of the environment sets per training phase", learnable_share, (
    ("Learnable share: slots whose RA win rate lies in [0.2, 0.8] / all slots of the environment sets "
     "regenerated in the phase (empty slots count 0); Table 7's first row, the 16-step windows of figure 6 "
     "pooled."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_learnable_share.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
