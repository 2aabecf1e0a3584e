# `snakemake --profile slurm preflight`: one short SPADE training through the real GPU path (OpenRLHF, vLLM,
# DeepSpeed) on one node of the cluster, before `all` (spade.rlhf.preflight, docs/OPENRLHF.md "Preflight"). Never
# part of `all`. Its config is fixed (PREFLIGHT_CONFIGS in rules/common.smk, read there only for the node's GPU
# count). Like a GPU run's `train` job it stays on the host under apptainer and its Ray processes enter the image.


rule preflight:
    """A 2-step SPADE run of Qwen3-0.6B on one 8-GPU node with the paper presets (colocated engines, CUDA IPC weight
    sync, ZeRO-3, packing); report.json holds the checks (engine workers received the actor's weights after every
    sync, rewards sent = rewards logged, half the groups with a nonzero advantage, advantages trained = advantages
    returned, finite KL diagnostics) and versions.json the node's GPU, driver, CUDA, NCCL, InfiniBand and packages.
    """
    input:
        [repo_path(path) for path in PREFLIGHT_CONFIGS],  # from the repository root, so that --directory works
        repo_path("configs/models/qwen3-0.6b.yaml"),
        repo_path("configs/openrlhf/qwen3-0.6b.yaml"),
    output:
        report=f"{OUT.preflight_dir}/report.json",
        versions=f"{OUT.preflight_dir}/versions.json",
    log:
        OUT.log("preflight"),
    benchmark:
        OUT.benchmark("preflight")
    conda:
        GPU_ENV
    threads: 1  # a launcher, as a GPU run's train job: its srun steps take the node's CPUs for Ray
    resources:
        nodes=1,
        gres=f"gpu:{PREFLIGHT_PLACEMENT.gpus_per_node}",
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.report),
        python=TRAIN_PYTHON,
        image=TRAIN_IMAGE,
    shell:
        "{params.python} -m spade.rlhf.preflight --out {params.out_dir} {params.image}> {log} 2>&1"
