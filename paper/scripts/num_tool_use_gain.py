"""Quoted numbers 'tool_use_gain' of the paper: SPADE's multi-turn tool-use gain over base, as LaTeX macros beside
the paper's values.

    python paper/scripts/num_tool_use_gain.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/tool_use_gain.tex

Per backbone: Table 2's average (mean of the BFCL, tau2 and ACEBench averages,
:data:`spade.paper.benchmark_tables.TABLE2`) of base and SPADE (tool use), and the gain (points). Reported:
``table2_tool_use.csv``. Runs: key ``numbers.tool_use_gain`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.paper.benchmark_tables import TABLE2
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


def tool_use_gain(ctx: NumberContext) -> list[Number]:
    """Per backbone: Table 2 averages of base and SPADE (tool use) and the gain (points)."""
    section = number_section(ctx.mapping, "tool_use_gain")
    stem = GROUP_REPORTED["tool_use_gain"]
    results = load_eval_results(ctx, group_runs(ctx.mapping, "tool_use_gain"))
    out = []
    for size, entry in section["backbones"].items():
        word, backbone = entry["word"], entry["reported"]
        models = {"base": f"{backbone} (base)", "spade": f"{backbone} + SPADE (tool use)"}
        avg = {}
        for role, name in (("base", "Base"), ("spade", "Spade")):
            reported, source = reported_cell(ctx.reported_dir, stem, {"section": "ours", "model": models[role]}, "avg")
            number = Number(f"NumToolAvg{name}{word}", f"Table 2 average (percent), {models[role]}", None, 1,
                            reported, source)
            avg[role] = benchmark_average(ctx, TABLE2, entry["roles"][role], results, number, backbone)
            out.append(avg[role])
        reported, source = reported_cell(ctx.reported_dir, stem, {"section": "ours", "model": models["spade"]},
                                         "delta_vs_base")
        gain = Number(f"NumToolGainSpade{word}", f"SPADE (tool use) average minus base average (points), {size}",
                      None, 1, reported, source, signed=True)
        out.append(derived(gain, difference(avg["spade"].value, avg["base"].value), [avg["spade"], avg["base"]]))
    return out


GROUP = Group("tool_use_gain", "Tool use: SPADE's Table 2 average gain over base", tool_use_gain, (
    ("Avg: mean of the BFCL v4 multi-turn, tau2 and ACEBench-Agent averages (Table 2), percent; Gain: SPADE minus "
     "base (points)."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_tool_use_gain.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
