# Self-play training of every configured run (the evaluation of its checkpoints is in eval.smk).
# Only summary.json is declared as output: metrics.jsonl and checkpoints/ survive a killed job, and the
# rerun resumes from the last checkpoint (rerun-incomplete is on in the workflow profile).
# A CPU run (the toy) trains with the local trainer; a GPU run (is_gpu_run in common.smk) with `--backend openrlhf`
# (OpenRLHF on Ray/vLLM/DeepSpeed, docs/OPENRLHF.md). Its nodes and GPUs come from the run's OpenRLHF placement
# (train_resources in common.smk); partition, account, CPUs per GPU, memory and time from the cluster profile
# (profiles/slurm/config.yaml, rule `train`).


rule train:
    input:
        model=model_input,
        corpus=corpus_input,
    output:
        OUT.run_summary("{run}"),
    log:
        OUT.log("train_{run}"),
    benchmark:
        OUT.benchmark("train_{run}")
    wildcard_constraints:
        run=RUN_PATTERN,
    priority: chain_priority
    conda:
        GPU_ENV
    threads: train_threads
    resources:
        **train_resources(),
    params:
        config=run_config_hash(
            "run_name",
            "seed",
            "model",
            "selfplay",
            "designer",
            "agent",
            "reward",
            "train",
            "corpus",
            "memory",
            "sandbox",
            "validation",
            "eval.heldout_library.environments",
            "baseline",
            "designer_feedback",
            "inference",
            "openrlhf",
        ),
        config_file=run_config_file,
        python=TRAIN_PYTHON,
        backend=train_backend,
        image=TRAIN_IMAGE,
        run_dir=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "{params.python} -m spade.cli train --backend {params.backend} {params.image}--config {params.config_file} "
        "--model {input.model} --corpus '{input.corpus}' --run-dir {params.run_dir} > {log} 2>&1"


if PENDING:  # runs our code cannot train yet (config key `pending`): in the DAG, failing at once with the reason

    localrules:
        pending_run,

    rule pending_run:
        output:
            OUT.run_summary("{run}"),
        log:
            OUT.log("pending_run_{run}"),
        wildcard_constraints:
            run=_regex(PENDING),
        params:
            message=pending_message,
        shell:
            "echo {params.message} | tee {log} >&2; exit 1"
