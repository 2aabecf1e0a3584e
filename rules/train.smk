# Self-play training with the local trainer (the evaluation of its checkpoints is in eval.smk).
# Only summary.json is declared as output: metrics.jsonl and checkpoints/ survive a killed job, and the
# rerun resumes from the last checkpoint (rerun-incomplete is on in the workflow profile).


rule train:
    input:
        model=OUT.model_dir(SPADE.model.name),
        corpus=corpus_input,
    params:
        config=config_hash("run_name", "seed", "model", "selfplay", "designer", "agent", "reward", "train", "corpus",
                           "memory", "sandbox", "validation", "eval.heldout_library.environments"),
    output:
        OUT.run_summary("{run}"),
    log:
        OUT.log("train_{run}"),
    benchmark:
        OUT.benchmark("train_{run}")
    threads: workflow.cores
    shell:
        "{PYTHON} -m spade.cli train --config-json {CONFIG_JSON} --model {input.model} "
        "--corpus '{input.corpus}' --run-dir " + OUT.run_dir("{wildcards.run}") + " > {log} 2>&1"
