"""Quoted numbers 'games_gain' of the paper: SPADE's games-transfer gain over base and its margins over the
fixed-environment baselines, as LaTeX macros beside the paper's values.

    python paper/scripts/num_games_gain.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/games_gain.tex

Per backbone: the 8-benchmark average (percent) of base, SPADE, Fixed-env GRPO and Fixed-env RLVE, exactly as the
"Avg." column of Table 1 (:data:`spade.paper.benchmark_tables.TABLE1`, its column metrics and step rules
``selected``/``last``/``base``/<step>), SPADE's gain over base and its margin over each baseline (points).
Reported: ``table1_games.csv`` (margins: the difference of the two reported averages). Runs: key
``numbers.games_gain`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE1
from spade.paper.numbers import (
    GROUP_REPORTED,
    Group,
    Number,
    NumberContext,
    benchmark_average,
    derived,
    difference,
    group_runs,
    load_eval_results,
    number_main,
    number_section,
    reported_cell,
)
from spade.paper.report import run_script


def games_gain(ctx: NumberContext) -> list[Number]:
    """Per backbone: Table 1 averages of base, SPADE, Fixed-env GRPO, Fixed-env RLVE; SPADE - base; SPADE -
    each baseline (points)."""
    section = number_section(ctx.mapping, "games_gain")
    stem = GROUP_REPORTED["games_gain"]
    results = load_eval_results(ctx, group_runs(ctx.mapping, "games_gain"))
    names = {"base": ("Base", "base"), "spade": ("Spade", "spade_games"),
             "fixed_env_grpo": ("Grpo", "fixed_env_grpo"), "fixed_env_rlve": ("Rlve", "fixed_env_rlve")}
    out = []
    for size, entry in section["backbones"].items():
        word, backbone = entry["word"], entry["reported"]
        avg = {}
        for role, (name, method) in names.items():
            reported, source = reported_cell(ctx.reported_dir, stem, {"backbone": backbone, "method": method}, "avg")
            number = Number(f"NumGamesAvg{name}{word}", f"8-benchmark average (percent), {method}, {size}", None, 1,
                            reported, source)
            avg[role] = benchmark_average(ctx, TABLE1, entry["roles"][role], results, number, backbone)
            out.append(avg[role])
        reported, source = reported_cell(ctx.reported_dir, stem, {"backbone": backbone, "method": "spade_games"},
                                         "delta_vs_base")
        gain = Number(f"NumGamesGainSpade{word}", f"SPADE average minus base average (points), {size}", None, 1,
                      reported, source, signed=True)
        out.append(derived(gain, difference(avg["spade"].value, avg["base"].value), [avg["spade"], avg["base"]]))
        for role, name in (("fixed_env_grpo", "Grpo"), ("fixed_env_rlve", "Rlve")):
            margin = Number(f"NumGamesMargin{name}{word}", f"SPADE average minus {role} average (points), {size}",
                            None, 1, difference(avg["spade"].reported, avg[role].reported),
                            f"{stem}: avg of spade_games minus avg of {role} ({backbone})", signed=True)
            out.append(derived(margin, difference(avg["spade"].value, avg[role].value), [avg["spade"], avg[role]]))
    return out


GROUP = Group(
    "games_gain", "Games transfer: SPADE's gain over base and margins over the fixed-environment baselines",
    games_gain, (
        ("Avg: the unweighted mean of the 8 Table 1 columns (AIME25, AIME26, GPQA-D, LCB-v6, RG-Math, RG-Algo, "
         "RG-Cog, RG-Logic) in percent, at the checkpoint the role's step rule picks (as Table 1; base = step 0)."),
        ("Gain: SPADE Avg minus base Avg; Margin: SPADE Avg minus the baseline's Avg (points, from unrounded "
         "values). Reported margins are differences of the paper's rounded averages.")))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_games_gain.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
