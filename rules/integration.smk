# `snakemake integration_openrlhf`: OpenRLHF 0.11.2's own train_ppo_ray loop on this CPU, through the launcher a
# cluster job uses (spade.rlhf.cpu, docs/OPENRLHF.md "The CPU integration run"). Never part of `all`: it checks the
# GPU path, it produces no number of the paper. Its config is fixed (configs/integration/openrlhf_cpu.yaml over
# configs/default.yaml), so the output depends only on those files and the code. It runs in the project venv
# whatever the deployment method: the CPU builds of DeepSpeed and OpenRLHF that setup.sh installs are in no
# environment file (docs/WORKFLOW.md, lint exceptions).


rule integration_openrlhf:
    """A full 4-step run on a task the tiny model earns rewards on (backfill from selfplay.backfill_checks), and the
    same run killed after step 2's generation and resumed; report.json holds the checks (spade.rlhf.cpu.checks):
    checkpoints, rewards sent = rewards OpenRLHF logged, designer replay k steps later, resumed metrics = full ones,
    half the groups with a nonzero advantage, engine weights = actor weights after every sync, advantages OpenRLHF
    trained on = those our executor returned, designer advantages OpenRLHF trained on = those our coordinator packed
    (some nonzero: two designs per set, valid or not by the designer's tail), the policy moved toward positively
    rewarded responses, and the resumed run's final weights = the full run's.
    """
    input:
        "configs/default.yaml",
        "configs/integration/openrlhf_cpu.yaml",
    output:
        report=f"{OUT.integration_openrlhf_dir}/report.json",
    log:
        OUT.log("integration_openrlhf"),
    benchmark:
        OUT.benchmark("integration_openrlhf")
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.report),
        python=Untracked(VENV_PYTHON),
    shell:
        "{params.python} -m spade.rlhf.cpu.run --out {params.out_dir} > {log} 2>&1"
