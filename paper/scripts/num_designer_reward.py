"""Quoted numbers 'designer_reward' of the paper: the hint-regret designer reward against EMA learning potential,
as LaTeX macros beside the paper's values.

    python paper/scripts/num_designer_reward.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/designer_reward.tex

Table 6's 8-benchmark average (:data:`spade.paper.benchmark_tables.TABLE6`) with the hint-regret designer reward
(SPADE) and with EMA learning potential, and the difference (points). Reported: ``table6_ablations_full.csv``. Runs:
key ``numbers.designer_reward`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE6
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


def designer_reward(ctx: NumberContext) -> list[Number]:
    """Table 6 averages with the hint-regret designer reward and with EMA learning potential; their difference."""
    section = number_section(ctx.mapping, "designer_reward")
    stem = GROUP_REPORTED["designer_reward"]
    results = load_eval_results(ctx, group_runs(ctx.mapping, "designer_reward"))
    settings = {"hint_regret": ("Regret", "spade"), "learning_potential": ("LearningPotential",
                                                                           "ED reward = learning potential")}
    avg = {}
    for role, (name, setting) in settings.items():
        reported, source = reported_cell(ctx.reported_dir, stem, {"setting": setting}, "avg")
        number = Number(f"NumDesignerAvg{name}", f"8-benchmark average (percent), designer reward {role}", None, 1,
                        reported, source)
        avg[role] = benchmark_average(ctx, TABLE6, section[role], results, number)
    margin = Number("NumDesignerRegretMargin", "hint-regret average minus EMA-learning-potential average (points)",
                    None, 1, difference(avg["hint_regret"].reported, avg["learning_potential"].reported),
                    f"{stem}: avg of spade minus avg of ED reward = learning potential", signed=True)
    parts = [avg["hint_regret"], avg["learning_potential"]]
    return parts + [derived(margin, difference(parts[0].value, parts[1].value), parts)]


GROUP = Group("designer_reward", "Designer reward: hint regret vs EMA learning potential at 30B", designer_reward, (
    ("Avg: 8-benchmark average of Table 6 (percent) at the role's checkpoint; Margin: regret minus learning "
     "potential (points)."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_designer_reward.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
