# Self-play training of every configured run (the evaluation of its checkpoints is in eval.smk).
# Only summary.json is declared as output: metrics.jsonl and checkpoints/ survive a killed job, and the
# rerun resumes from the last checkpoint (rerun-incomplete is on in the workflow profile).
# A CPU run (the toy) trains with the local trainer; a GPU run (is_gpu_run in common.smk) with `--backend openrlhf`
# (OpenRLHF on Ray/vLLM/DeepSpeed, docs/OPENRLHF.md). Its nodes and GPUs come from the run's OpenRLHF placement
# (train_resources in common.smk); partition, account, CPUs per GPU, memory and time from the cluster profile
# (profiles/slurm/config.yaml, rule `train`).


def train_backend(wildcards):
    return "openrlhf" if is_gpu_run(wildcards.run) else "local"


# Under --software-deployment-method apptainer a GPU run's Ray processes and driver enter the image (the local
# trainer ignores the flag). A global, not a param: switching the deployment method does not retrain anything.
TRAIN_IMAGE = (f"--image {shlex.quote(repo_path(GPU_IMAGE))} --apptainer-args={shlex.quote(APPTAINER_ARGS)} "
               if IN_APPTAINER else "")


# The command: a config with one run keeps the exact text it always had (plus `--backend openrlhf` for a GPU run);
# with several runs (multi-run, toy ablations) each job names its backend.
if PER_RUN_JSON:
    TRAIN_COMMAND = "{TRAIN_PYTHON} -m spade.cli train --backend {params.backend} {TRAIN_IMAGE}--config-json " + CONFIG_ARG
    TRAIN_PARAMS = {"backend": train_backend, **run_json_params()}
else:
    TRAIN_COMMAND = "{TRAIN_PYTHON} -m spade.cli train " + ("--backend openrlhf " if is_gpu_run(SPADE.run_name) else "")
    TRAIN_COMMAND += "{TRAIN_IMAGE}--config-json " + CONFIG_ARG
    TRAIN_PARAMS = {}


rule train:
    input:
        model=model_input,
        corpus=corpus_input,
    params:
        config=run_config_hash("run_name", "seed", "model", "selfplay", "designer", "agent", "reward", "train",
                               "corpus", "memory", "sandbox", "validation", "eval.heldout_library.environments",
                               "baseline", "designer_feedback", "inference", "openrlhf"),
        **TRAIN_PARAMS,
    output:
        OUT.run_summary("{run}"),
    log:
        OUT.log("train_{run}"),
    benchmark:
        OUT.benchmark("train_{run}")
    wildcard_constraints:
        run=RUN_PATTERN,
    threads: workflow.cores
    resources:
        **train_resources(),
    conda:
        GPU_ENV
    shell:
        TRAIN_COMMAND + " --model {input.model} "
        "--corpus '{input.corpus}' --run-dir " + OUT.run_dir("{wildcards.run}") + " > {log} 2>&1"


if PENDING:  # runs our code cannot train yet (config key `pending`): in the DAG, failing at once with the reason

    localrules:
        pending_run,

    rule pending_run:
        params:
            message=lambda wildcards: shlex.quote(
                f"run {wildcards.run} cannot be trained yet: {PENDING[wildcards.run]} (config key "
                f"pending.{wildcards.run}; until then its paper rows, curves and numbers read \"not run\")"),
        output:
            OUT.run_summary("{run}"),
        wildcard_constraints:
            run=_regex(PENDING),
        shell:
            "echo {params.message} >&2; exit 1"
