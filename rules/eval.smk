# Evaluation: one job per (run, checkpoint step, benchmark); step 0 is the base model. Any result can be built
# on its own, e.g. `snakemake results/runs/toy/eval/gem_games/step_000004.json`. Item records go beside each
# result (step_NNNNNN.items.jsonl), so a killed evaluation resumes where it stopped. Each job reads its run's own
# config (the `run` wildcard; see RUNS in common.smk).


wildcard_constraints:
    step=r"\d{6}",
    benchmark=BENCHMARK_PATTERN,


rule evaluate:
    input:
        checkpoint_input,
    output:
        OUT.eval_file("{run}", "{step}", "{benchmark}"),
    log:
        OUT.log("evaluate_{run}_{benchmark}_{step}"),
    benchmark:
        OUT.benchmark("evaluate_{run}_{benchmark}_{step}")
    wildcard_constraints:
        run=RUN_PATTERN,
    priority: chain_priority
    conda:
        GPU_ENV
    container:
        GPU_CONTAINER
    threads: eval_threads
    params:
        model=checkpoint_folder,
        config=eval_config_hash,
        config_file=run_config_file,
        python=GPU_PYTHON,
    shell:
        "{params.python} -m spade.cli eval run --config {params.config_file} --model {params.model} "
        "--step {wildcards.step} --benchmark {wildcards.benchmark} --out {output} > {log} 2>&1"


rule designer_fidelity:
    """The designer of one checkpoint is given solved mechanism parameters and writes their environment, which is
    replayed against the reference solution (spade fidelity, src/spade/designer/fidelity.py; ours, after VHD-Play)."""
    input:
        checkpoint_input,
    output:
        OUT.fidelity_file("{run}", "{step}"),
    log:
        OUT.log("designer_fidelity_{run}_{step}"),
    benchmark:
        OUT.benchmark("designer_fidelity_{run}_{step}")
    wildcard_constraints:
        run=RUN_PATTERN,
    conda:
        GPU_ENV
    container:
        GPU_CONTAINER
    threads: workflow.cores
    params:
        model=checkpoint_folder,
        config=run_config_hash("seed", "model", "designer", "validation", "sandbox", "inference"),
        config_file=run_config_file,
        python=GPU_PYTHON,
    shell:
        "{params.python} -m spade.cli fidelity --config {params.config_file} --model {params.model} --out {output} "
        "> {log} 2>&1"


rule fidelity:
    """Designer fidelity of every main run's base model and last checkpoint."""
    input:
        fidelity_outputs(),


rule select_checkpoint:
    input:
        selection_files,
    output:
        reported(OUT.selected_checkpoint("{run}"), "selected_checkpoint", "Evaluation", "{run}"),
    log:
        OUT.log("select_checkpoint_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    conda:
        CPU_ENV
    params:
        config=run_config_hash("eval.select_by"),
        config_file=run_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli eval select --config {params.config_file} --results {input} --out {output} "
        "> {log} 2>&1"


rule eval_throughput:
    input:
        OUT.model_dir(SPADE.model.name),
    output:
        reported(OUT.eval_throughput_json, "eval_throughput", "Evaluation", "throughput"),
    log:
        OUT.log("eval_throughput"),
    benchmark:
        OUT.benchmark("eval_throughput")
    conda:
        CPU_ENV
    threads: workflow.cores
    params:
        config=config_hash(*EVAL_SHARED, "eval.throughput", f"eval.{SPADE.eval.throughput.benchmark}"),
        config_file=workflow_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli eval throughput --config {params.config_file} --model {input} --out {output} "
        "> {log} 2>&1"


rule suite_table:
    input:
        script=script("results_table.py"),
        evals=suite_files,
        summary=[OUT.run_summary(run) for run in MAIN_RUNS],
    output:
        reported(OUT.suite_table, "suite_table", "Evaluation", "all runs"),
    log:
        OUT.log("suite_table"),
    conda:
        CPU_ENV
    params:
        runs=RUN_DIRS,
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --runs {params.runs} --evals {input.evals} --out {output} > {log} 2>&1"


rule eval_toy:
    """Every configured run (the toy run by default): every `eval.final` benchmark on the base model and the
    final checkpoint, the selected checkpoint and the tidy suite table; for a single-run config also the evaluation
    throughput of its model."""
    input:
        suite_files,
        OUT.suite_table,
        [OUT.selected_checkpoint(run) for run in MAIN_RUNS],
        [] if MULTI_RUN else [OUT.eval_throughput_json],
