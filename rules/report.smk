# The runs' own results: the tidy results table of every configured run, a table and a figure drawn from each run's
# logs.


rule results_table:
    input:
        script=script("results_table.py"),
        evals=eval_files,
        summary=[OUT.run_summary(run) for run in MAIN_RUNS],
    output:
        reported(OUT.results_table, "results_table", "Run", "all runs"),
    log:
        OUT.log("results_table"),
    benchmark:
        OUT.benchmark("results_table")
    conda:
        CPU_ENV
    params:
        runs=RUN_DIRS,
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --runs {params.runs} --evals {input.evals} --out {output} > {log} 2>&1"


rule run_table:
    input:
        script=script("table_toy_run.py"),
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    output:
        reported(OUT.run_table("{run}"), "run_table", "Run", "{run}"),
    log:
        OUT.log("run_table_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    conda:
        CPU_ENV
    params:
        heldout=heldout_measure,
        metrics=OUT.run_metrics("{run}"),  # written beside summary.json by `train`, not one of its declared outputs
        benchmarks_dir=BENCHMARKS_DIR,
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --results {input.results} --metrics {params.metrics} "
        "--benchmarks {params.benchmarks_dir} --run {wildcards.run} --heldout {params.heldout} --out {output} "
        "> {log} 2>&1"


rule learning_check_table:
    """The learning check's held-out win rate, base model against the last checkpoint, for each seed run (config key
    `learning_check`), with a paired bootstrap interval over each run's held-out instances."""
    input:
        script=script("table_learning_check.py"),
        base=learning_check_results("base"),
        last=learning_check_results("last"),
    output:
        reported(LEARNING_CHECK_TABLE, "learning_check_table", "Run", "learning check"),
    log:
        OUT.log("learning_check_table"),
    conda:
        CPU_ENV
    params:
        runs=LEARNING_CHECKS,
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --runs {params.runs} --base {input.base} --last {input.last} --out {output} "
        "> {log} 2>&1"


rule learning_check:
    """The learning check (config key `learning_check`): its runs trained, evaluated at step 0 and at their last
    checkpoint, and results/tables/learning_check.md. Not in the default target since issue 48 (the mechanism
    check's held-out evaluation shows learning there)."""
    input:
        LEARNING_CHECK_TABLE if LEARNING_CHECKS else [],


rule training_figure:
    input:
        script=script("fig_toy_training.py"),
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    output:
        reported(OUT.training_figure("{run}"), "training_figure", "Run", "{run}"),
    log:
        OUT.log("training_figure_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    conda:
        CPU_ENV
    params:
        heldout=heldout_measure,
        metrics=OUT.run_metrics("{run}"),
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --metrics {params.metrics} --results {input.results} --run {wildcards.run} "
        "--heldout {params.heldout} --out {output} > {log} 2>&1"


rule mechanism_check_table:
    """The mechanism check (issues 39, 48): the recipe's rewards and the delayed designer update in every mechanism run,
    then the trained designer against its control on each seed (config key `mechanism_check`), in training and on
    held-out rows at the last checkpoint."""
    input:
        script=script("table_mechanism_check.py"),
        trained=[OUT.run_summary(trained) for trained, _ in mechanism_pairs()],
        control=[OUT.run_summary(control) for _, control in mechanism_pairs()],
        heldout=mechanism_heldout_results(),  # read from the run folders by the script
    output:
        table=reported(MECHANISM_CHECK_TABLE, "mechanism_check_table", "Run", "mechanism check"),
        rounds=MECHANISM_CHECK_TABLE.replace(".md", ".rounds.json"),
    log:
        OUT.log("mechanism_check_table"),
    conda:
        CPU_ENV
    params:
        trained=[OUT.run_dir(trained) for trained, _ in mechanism_pairs()],
        control=[OUT.run_dir(control) for _, control in mechanism_pairs()],
        configs=lambda wildcards: [
            job_config_param(RUN_CONFIG[run]) for pair in zip(*mechanism_pairs()) for run in pair
        ],
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --trained {params.trained} --control {params.control} "
        "--configs {params.configs} --out {output.table} > {log} 2>&1"


rule mechanism_check_figure:
    """Designer reward, learnable share, designed difficulty and the agent's accuracy per design round, trained designer
    against its control, each seed (the mechanism check, issue 39)."""
    input:
        script=script("fig_mechanism_check.py"),
        rounds=rules.mechanism_check_table.output.rounds,
    output:
        reported(MECHANISM_CHECK_FIGURE, "mechanism_check_figure", "Run", "mechanism check"),
    log:
        OUT.log("mechanism_check_figure"),
    conda:
        CPU_ENV
    params:
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --rounds {input.rounds} --out {output} > {log} 2>&1"
