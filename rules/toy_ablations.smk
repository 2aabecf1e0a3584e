# `snakemake toy_ablations`: every ablation and baseline mode at toy scale (config key `toy_ablations` of
# configs/default.yaml, one extra run per entry; rules/common.smk), then the artifacts that compare them: Tables 3
# and 6, the ablation figures (6, 10, 11, 13, 14, 18) and the environment-source comparison. The mappings of
# paper/toy/ name the toy ablation runs; `snakemake paper` reads them when they exist (rows "not run" before) and
# never trains them (PAPER_BUILT_RUNS in rules/common.smk); the default target never does either.

TOY_ABLATION_TABLES = ["table3", "table6"]
TOY_ABLATION_FIGURES = ["fig6", "fig10", "fig11", "fig13", "fig14", "fig18"]


def toy_ablation_outputs():
    """The runs' suites (curves, eval.final at the last checkpoint), the two tables, the figures and the comparison."""
    files = [path for run in RUNS if run not in TOY_TOOL_USE for path in run_suite_files(run)]
    files += [path for table in TOY_ABLATION_TABLES for path in paper_table_files(table).values()]
    files += [f"{PAPER_FIGURES_DIR}/{PAPER_FIGURE_STEMS[figure]}.{ext}" for figure in TOY_ABLATION_FIGURES
              for ext in ("pdf", "png", "pdf.provenance.json")]
    return files + rules.paper_comparison.input


def _evaluates_like_the_main_run(run):
    """Whether a toy ablation agrees with the main run on every config key an evaluation reads (eval_config_hash, for
    every benchmark): then its step 0, the shared base model, gives the main run's item records exactly."""
    return all(_settings_hash(asdict(RUNS[run]), [*EVAL_SHARED, f"eval.{name}"])
               == _settings_hash(asdict(SPADE), [*EVAL_SHARED, f"eval.{name}"]) for name in BENCHMARKS)


BASE_SHARING = [run for run in TOY_ABLATIONS if _evaluates_like_the_main_run(run)]

if BASE_SHARING:

    ruleorder: base_eval_from_main_run > evaluate

    rule base_eval_from_main_run:
        """A toy ablation's step 0 is the main run's base-model result, relabelled (spade eval relabel): the same model,
        items, seeds and settings, so a second evaluation would repeat the same records."""
        input:
            OUT.eval_file(SPADE.run_name, 0, "{benchmark}"),
        params:
            config=eval_config_hash,
        output:
            OUT.eval_file("{run}", 0, "{benchmark}"),
        log:
            OUT.log("base_eval_from_main_run_{run}_{benchmark}"),
        wildcard_constraints:
            run=_regex(BASE_SHARING),
        shell:
            "{PYTHON} -m spade.cli eval relabel --result {input} --run {wildcards.run} --out {output} > {log} 2>&1"


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
