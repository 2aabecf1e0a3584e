# The rehearsal (configs/rehearsal.yaml, docs/OPENRLHF.md "The rehearsal"): every paper run file trained through
# OpenRLHF + vLLM's CPU build on this machine by the rule `train` (openrlhf.cpu), evaluated and rendered by the rules
# `all` uses; these two rules add what the rehearsal checked. `snakemake rehearsal --configfile
# configs/rehearsal.yaml` builds all of it; `all` under the same config too.

if REHEARSAL:

    rule rehearsal_report:
        """One run's checks (spade.rlhf.cpu.checks, as the CPU integration run's) on its folder and the records its
        launches wrote, and what it trained on."""
        input:
            OUT.run_summary("{run}"),
        output:
            OUT.rehearsal_report("{run}"),
        log:
            OUT.log("rehearsal_report_{run}"),
        wildcard_constraints:
            run=RUN_PATTERN,
        params:
            config=run_config_hash("openrlhf", "selfplay", "train", "agent"),
            config_file=run_config_file,
            run_dir=lambda wildcards, input: os.path.dirname(input[0]),
            python=GPU_PYTHON,
        shell:
            "{params.python} -m spade.rlhf.rehearsal report --config {params.config_file} --run-dir {params.run_dir} "
            "--out {output} > {log} 2>&1"

    rule rehearsal_table:
        """Every rehearsal run with its steps, launches, checks and signal, and the verdict."""
        input:
            [OUT.rehearsal_report(run) for run in MAIN_RUNS],
        output:
            OUT.rehearsal_table,
        log:
            OUT.log("rehearsal_table"),
        params:
            python=CPU_PYTHON,
        shell:
            "{params.python} -m spade.rlhf.rehearsal table --reports {input} --out {output} > {log} 2>&1"

    rule rehearsal:
        """The whole rehearsal: what `all` builds and the rehearsal table."""
        input:
            OUT.rehearsal_table,
            library_outputs(),
            run_outputs(),
            paper_run_outputs(),
            rules.paper.input,
