"""Quoted numbers 'reward_levels' of the paper: how many distinct reward levels an environment pays early and late
in training, as LaTeX macros beside the paper's values.

    python paper/scripts/num_reward_levels.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/reward_levels.tex

Mean distinct reward levels per environment, and mean strictly partial (0 < r < 1) levels, early vs late
(:func:`spade.analysis.reward_level_rows` and :func:`spade.analysis.phase_mean`, the rows of figure 16: every valid,
played environment). Reported: ``quoted_numbers.csv``. Runs: key ``numbers.reward_levels`` of the run mapping (its
phases must name early and late).

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.analysis import phase_mean, read_env_sets, reward_level_rows
from spade.paper.env_tables import env_sets_with_paths
from spade.paper.numbers import (
    Group,
    Number,
    NumberContext,
    macro_word,
    mark_missing,
    number_main,
    number_section,
    quoted_value,
    run_or_missing,
)
from spade.paper.report import ReportInputError, run_script
from spade.paper.tables import NO_DATA


def reward_levels(ctx: NumberContext) -> list[Number]:
    """Early vs late: mean distinct reward levels per environment and mean strictly partial levels (figure 16)."""
    section = number_section(ctx.mapping, "reward_levels")
    numbers = {}
    for key, name, what in (("levels", "RewardLevels", "distinct reward levels per environment"),
                            ("partial_levels", "PartialLevels", "strictly partial (0 < r < 1) reward levels")):
        for phase in ("early", "late"):
            first, last = section["phases"][phase]
            reported, source = quoted_value(ctx.reported_dir, f"{key}_{phase}")
            numbers[key, phase] = Number(f"Num{name}{macro_word(phase)}", f"mean {what}, {phase} (steps {first}-"
                                         f"{last})", None, 1, reported, source)
    folder = run_or_missing(ctx, section["run"], list(numbers.values()))
    if folder is None:
        return list(numbers.values())
    ctx.inputs += [p for p, _ in env_sets_with_paths(folder)]
    try:
        rows = reward_level_rows(read_env_sets(folder))
    except ValueError as exc:
        raise ReportInputError(f"environment archives of {folder}: {exc}") from None
    steps = [r["step"] for r in rows]
    for (key, phase), number in numbers.items():
        first, last = section["phases"][phase]
        value = phase_mean(steps, [r[key] for r in rows], first, last)
        count = sum(first <= s <= last for s in steps)
        number.detail = {"run": section["run"], "steps": [first, last], "environments": count}
        if value is None:
            mark_missing(number, NO_DATA, f"run {section['run']} has no valid, played environment in steps "
                                          f"{first}-{last}")
        else:
            number.value = value
    return list(numbers.values())


GROUP = Group("reward_levels", "Reward levels per environment early and late in training", reward_levels, (
    ("Levels: distinct final rewards an environment paid (6 decimals); partial: those strictly between 0 and "
     "1; mean over the valid, played environments of the sets regenerated in the phase (figure 16's rows)."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_reward_levels.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
