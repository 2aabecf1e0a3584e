# `snakemake toy_ablations`: every ablation and baseline mode at toy scale (config key `toy_ablations` of
# configs/default.yaml, one extra run per entry; rules/common.smk), then the artifacts that compare them: Tables 3
# and 6, the ablation figures (6, 10, 11, 13, 14, 18) and the environment-source comparison. The mappings of
# paper/toy/ name the toy ablation runs; `snakemake paper` reads them when they exist (rows "not run" before) and
# never trains them (PAPER_BUILT_RUNS in rules/common.smk); the default target never does either. The lists of
# artifacts and BASE_SHARING are in rules/paper_common.smk.

if BASE_SHARING:

    ruleorder: base_eval_from_main_run > evaluate

    rule base_eval_from_main_run:
        """A toy ablation's step 0 is the main run's base-model result, relabelled (spade eval relabel): the same model,
        items, seeds and settings, so a second evaluation would repeat the same records."""
        input:
            OUT.eval_file(SPADE.run_name, 0, "{benchmark}"),
        output:
            OUT.eval_file("{run}", 0, "{benchmark}"),
        log:
            OUT.log("base_eval_from_main_run_{run}_{benchmark}"),
        wildcard_constraints:
            run=_regex(BASE_SHARING),
        conda:
            CPU_ENV
        params:
            config=eval_config_hash,
            python=CPU_PYTHON,
        shell:
            "{params.python} -m spade.cli eval relabel --result {input} --run {wildcards.run} --out {output} "
            "> {log} 2>&1"


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
        log:
            OUT.log("toy_ablations"),
        params:
            message=shlex.quote(
                "the target toy_ablations needs the config key toy_ablations (run name -> settings over the run, "
                "as in configs/default.yaml); this config has none"
            ),
        shell:
            "echo {params.message} | tee {log} >&2; exit 1"
