# `snakemake toy_ablations`: every ablation and baseline mode at toy scale (config key `toy_ablations` of
# configs/default.yaml, one extra run per entry; rules/common.smk), then the artifacts that compare them: Tables 3
# and 6, the ablation figures (6, 10, 11, 13, 14, 18) and the environment-source comparison. The mappings of
# paper/toy/ name the toy ablation runs, so `snakemake paper` builds them too; the default target never does.

TOY_ABLATION_TABLES = ["table3", "table6"]
TOY_ABLATION_FIGURES = ["fig6", "fig10", "fig11", "fig13", "fig14", "fig18"]


def toy_ablation_outputs():
    """The runs' suites (curves, eval.final at the last checkpoint), the two tables, the figures and the comparison."""
    files = [path for run in RUNS for path in run_suite_files(run)]
    files += [path for table in TOY_ABLATION_TABLES for path in paper_table_files(table).values()]
    files += [f"{PAPER_FIGURES_DIR}/{PAPER_FIGURE_STEMS[figure]}.{ext}" for figure in TOY_ABLATION_FIGURES
              for ext in ("pdf", "png", "pdf.provenance.json")]
    return files + rules.paper_comparison.input


if TOY_ABLATIONS:

    rule toy_ablations:
        """The toy ablation runs (config key toy_ablations), Tables 3 and 6, the ablation figures, the comparison."""
        input:
            toy_ablation_outputs(),

else:

    localrules:
        toy_ablations,

    rule toy_ablations:
        """Fails at once: this config has no toy ablations."""
        shell:
            "echo 'the target toy_ablations needs the config key toy_ablations (run name -> settings over the run, "
            "as in configs/default.yaml); this config has none' >&2; exit 1"
