"""Quoted numbers 'formula_reveal' of the paper: how often a physics environment's first observation reveals the
governing formula, per training phase, as LaTeX macros beside the paper's values.

    python paper/scripts/num_formula_reveal.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/formula_reveal.tex

Per phase, the share (percent) of physics environments whose first observation reveals the governing formula
(:func:`spade.analysis.formula_reveal_rate` on :func:`spade.analysis.first_observation_text`; valid
designer-written environments of the sets regenerated in the phase; physics = the archive row's ``domain`` names
physics, else the keyword label :func:`spade.analysis.is_physics_text` of the environment's code), and the number
of physics environments. Reported: ``quoted_numbers.csv``. Runs: key ``numbers.formula_reveal`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.analysis import designer_written, first_observation_text, formula_reveal_rate, is_physics_text
from spade.paper.env_tables import env_sets_with_paths
from spade.paper.numbers import (
    PCT,
    PERCENT,
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
from spade.paper.report import run_script
from spade.paper.tables import NO_DATA


def is_physics_environment(env: dict, min_terms: int) -> bool:
    """The archive row's ``domain`` when it has one (physics iff it names physics), else the keyword label of
    the environment's code (:func:`spade.analysis.is_physics_text`)."""
    domain = env.get("domain")
    if isinstance(domain, str) and domain.strip():
        return "physics" in domain.lower()
    return is_physics_text(env.get("code") or "", min_terms)


def sets_in(sets: list, first: int, last: int) -> list:
    """The (path, set) pairs of ``sets`` regenerated in steps ``first``..``last``."""
    return [(p, s) for p, s in sets if first <= s["_step"] <= last]


def formula_reveal(ctx: NumberContext) -> list[Number]:
    """Per phase: revealing physics environments / physics environments (percent), and the physics count."""
    section = number_section(ctx.mapping, "formula_reveal")
    rates, counts = [], []
    for phase, (first, last) in section["phases"].items():
        reported, source = quoted_value(ctx.reported_dir, f"formula_reveal_{phase}")
        rates.append(Number(f"NumFormulaReveal{macro_word(phase)}", f"formula-reveal rate of physics environments "
                            f"(percent), {phase} (steps {first}-{last})", None, 0, reported, source, scale=PERCENT,
                            unit=PCT))
        counts.append(Number(f"NumFormulaPhysicsEnvs{macro_word(phase)}", f"physics environments, {phase}", None, 0,
                             None, "the paper gives no count"))
    folder = run_or_missing(ctx, section["run"], rates + counts)
    if folder is None:
        return rates + counts
    sets = env_sets_with_paths(folder)
    ctx.inputs += [p for p, _ in sets]
    for rate, count, (phase, (first, last)) in zip(rates, counts, section["phases"].items()):
        observations, physics, skipped = [], [], []
        for path, env_set in sets_in(sets, first, last):
            for env in env_set["environments"]:
                if not designer_written(env) or not isinstance(env.get("code"), str):
                    continue
                try:
                    text = first_observation_text(env["code"], env.get("class_name"))
                except (ValueError, SyntaxError) as exc:
                    skipped.append(f"{path.name} {env.get('env_id')}: {exc}")
                    continue
                observations.append(text)
                physics.append(is_physics_environment(env, section["physics_min_terms"]))
        estimate = formula_reveal_rate(observations, physics)
        rate.detail = count.detail = {"run": section["run"], "steps": [first, last], "environments": len(observations),
                                      "physics": sum(physics), "not_analysed": skipped}
        count.value = float(sum(physics))
        if estimate is None:
            mark_missing(rate, NO_DATA, f"run {section['run']} has no valid designer-written physics environment in "
                                        f"steps {first}-{last} ({len(observations)} designer-written environments "
                                        "analysed)")
        else:
            rate.value = estimate.rate
            rate.detail.update(revealing=estimate.successes, wilson=[estimate.low, estimate.high])
    return rates + counts


GROUP = Group("formula_reveal", "Formula reveal in the first observation of physics environments", formula_reveal, (
    ("Rate: physics environments whose first observation (static stand-in: string literals reached from "
     "reset) prints a formula / physics environments (percent), over valid designer-written environments of the "
     "sets regenerated in the phase; physics = the row's domain label, else at least physics_min_terms physics "
     "terms in the code (spade.analysis.is_physics_text)."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_formula_reveal.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
