# The run's own results: the tidy results table, a table and a figure drawn from its logs.


rule results_table:
    input:
        evals=eval_files,
        summary=OUT.run_summary(SPADE.run_name),
    output:
        OUT.results_table,
    log:
        OUT.log("results_table"),
    benchmark:
        OUT.benchmark("results_table")
    shell:
        "{PYTHON} {SCRIPTS}/results_table.py --runs " + OUT.run_dir(SPADE.run_name) + " --out {output} > {log} 2>&1"


rule run_table:
    input:
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    output:
        OUT.run_table("{run}"),
    log:
        OUT.log("run_table_{run}"),
    shell:
        "{PYTHON} {SCRIPTS}/table_toy_run.py --results {input.results} --metrics "
        + OUT.run_metrics("{wildcards.run}")
        + " --benchmarks " + OUT.root + "/benchmarks --run {wildcards.run} --out {output} > {log} 2>&1"


rule training_figure:
    input:
        results=OUT.results_table,
        summary=OUT.run_summary("{run}"),
    output:
        OUT.training_figure("{run}"),
    log:
        OUT.log("training_figure_{run}"),
    shell:
        "{PYTHON} {SCRIPTS}/fig_toy_training.py --metrics " + OUT.run_metrics("{wildcards.run}")
        + " --results {input.results} --run {wildcards.run} --out {output} > {log} 2>&1"
