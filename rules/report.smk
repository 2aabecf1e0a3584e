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
