# The runs' own results: the tidy results table of every configured run, a table and a figure drawn from each run's
# logs.


rule results_table:
    input:
        script=script("results_table.py"),
        evals=eval_files,
        summary=[OUT.run_summary(run) for run in MAIN_RUNS],
    output:
        OUT.results_table,
    log:
        OUT.log("results_table"),
    benchmark:
        OUT.benchmark("results_table")
    shell:
        "{PYTHON} {input.script} --runs " + RUN_DIRS + " --evals {input.evals} --out {output} "
        "> {log} 2>&1"


rule run_table:
    input:
        script=script("table_toy_run.py"),
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    params:
        heldout=heldout_measure,
    output:
        OUT.run_table("{run}"),
    log:
        OUT.log("run_table_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    shell:
        "{PYTHON} {input.script} --results {input.results} --metrics "
        + OUT.run_metrics("{wildcards.run}")
        + " --benchmarks " + OUT.root + "/benchmarks --run {wildcards.run} --heldout {params.heldout} --out {output} "
        "> {log} 2>&1"


rule training_figure:
    input:
        script=script("fig_toy_training.py"),
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    params:
        heldout=heldout_measure,
    output:
        OUT.training_figure("{run}"),
    log:
        OUT.log("training_figure_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    shell:
        "{PYTHON} {input.script} --metrics " + OUT.run_metrics("{wildcards.run}")
        + " --results {input.results} --run {wildcards.run} --heldout {params.heldout} --out {output} > {log} 2>&1"
