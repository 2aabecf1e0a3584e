"""Quoted numbers 'vendi_per_n' of the paper: the diversity of designer-written environments with and without
corpus grounding, as LaTeX macros beside the paper's values.

    python paper/scripts/num_vendi_per_n.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/vendi_per_n.tex

Table 8's SBERT Vendi/n with and without corpus grounding (:func:`spade.paper.env_tables.diversity`, the key ``vendi``
of the section sets the draws) and the number of environments. Reported: ``table8_diversity.csv``. Runs: key
``numbers.vendi_per_n`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import sys

from spade.paper.env_tables import default_embedders, diversity
from spade.paper.numbers import (
    GROUP_REPORTED,
    Group,
    Number,
    NumberContext,
    mark_missing,
    number_main,
    number_section,
    reported_cell,
    run_or_missing,
)
from spade.paper.report import run_script
from spade.paper.tables import NO_DATA


def vendi_per_n(ctx: NumberContext, embedders: dict | None = None) -> list[Number]:
    """SBERT Vendi/n (Table 8) with and without corpus grounding, and the environments counted. ``embedders`` =
    {"sbert": f, "tfidf_lsa": f} with f(texts) -> [n, d] (default: :func:`spade.paper.env_tables.default_embedders`)."""
    section = number_section(ctx.mapping, "vendi_per_n")
    stem = GROUP_REPORTED["vendi_per_n"]
    vendi = section["vendi"]
    labels = {"corpus": ("Corpus", "spade (full)"), "no_corpus": ("NoCorpus", "w/o corpus grounding")}
    out = []
    for role, (name, label) in labels.items():
        reported, source = reported_cell(ctx.reported_dir, stem, {"run": label}, "vendi_per_n")
        value = Number(f"NumVendiPerN{name}", f"SBERT Vendi/n, {label}", None, 2, reported, source)
        reported, source = reported_cell(ctx.reported_dir, stem, {"run": label}, "sample")
        sample = Number(f"NumVendiEnvs{name}", f"valid designer-written environments, {label}", None, 0, reported,
                        source)
        out += [value, sample]
        run = section[role]
        folder = run_or_missing(ctx, run, [value, sample])
        if folder is None:
            continue
        if embedders is None:
            embedders = default_embedders(vendi["seed"])
        ours, files = diversity(folder, section["field"], vendi, 0.2, embedders)
        ctx.inputs += files
        detail = {"run": run, "field": section["field"], "vendi": vendi, "draw_sd": ours["draws"]}
        value.detail = sample.detail = detail
        sample.value = float(ours["sample"])
        if ours["vendi_per_n"] is None:
            mark_missing(value, NO_DATA, f"run {run} has {ours['sample']} valid designer-written environments; "
                                         f"Vendi/n needs {vendi['size']}")
        else:
            value.value = ours["vendi_per_n"]
    return out


GROUP = Group("vendi_per_n", "Diversity: SBERT Vendi/n with and without corpus grounding", vendi_per_n, (
    ("Vendi/n: Vendi score (cosine kernel, SBERT all-MiniLM-L6-v2 embeddings of the code) / draw size, mean "
     "over balanced draws of valid designer-written environments (Table 8). Envs: environments counted."),))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_vendi_per_n.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
