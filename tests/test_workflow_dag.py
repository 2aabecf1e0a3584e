"""The workflow's plans (Snakemake dry runs, nothing executes): the toy default, the paper on a SLURM cluster
(`snakemake --profile slurm all -n`), multi-run configs and the runs that cannot be trained yet."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PAPER_RUNS = ["spade_games_4b", "spade_games_8b", "spade_games_30b", "spade_tool_use_4b", "spade_tool_use_8b",
              "spade_tool_use_30b", "ablation_no_memory_30b", "ablation_no_corpus_30b",
              "ablation_no_ed_training_30b", "ablation_ema_lp_30b", "ablation_two_skills_30b",
              "ablation_fixed_ed_30b", "fixed_env_grpo_4b", "fixed_env_grpo_8b", "fixed_env_grpo_30b",
              "comparison_feedback_30b", "comparison_calibration_30b", "comparison_fixed_pool_30b",
              "comparison_mechanisms_30b", "fixed_env_rlve_4b", "fixed_env_rlve_8b", "fixed_env_rlve_30b"]


def snakemake(args, cwd=ROOT, timeout=120):
    return subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def jobs(output: str) -> list[dict]:
    """The job blocks of a dry run: rule name, the `key: value` lines and the shell command."""
    found = []
    for block in re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", output):
        match = re.search(r"^(?:local)?rule (\w+):\n(.*?)(?:^Shell command: (.*?)$|\Z)", block, re.S | re.M)
        if not match:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", match.group(2), re.M))
        found.append({"rule": match.group(1), **fields, "shell": match.group(3) or ""})
    return found


def job_config(job: dict, directory: Path) -> dict:
    """The config a planned job reads: the YAML file its command names (`--config <file>`), which the dry run wrote
    under <directory>/results/configs/, named after the run and the hash of its content."""
    match = re.search(r" --config (results/configs/[\w.-]+-[0-9a-f]{12}\.yaml) ", job["shell"])
    assert match, job["shell"]
    return yaml.safe_load((directory / match.group(1)).read_text(encoding="utf-8"))


def config_text(job: dict, directory: Path) -> str:
    """The job's config as one line of JSON (sorted keys), for substring checks."""
    return json.dumps(job_config(job, directory), sort_keys=True)


def job_stats(output: str) -> dict:
    table = output.split("Job stats:")[1].split("Reasons:")[0]
    return {name: int(count) for name, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.M) if name != "total"}


def resources(job: dict) -> dict:
    return dict(item.split("=", 1) for item in job["resources"].split(", "))


def test_default_plan_is_the_toy_pipeline(tmp_path):
    """`snakemake -n` (the default config) in an empty folder plans the toy exactly: 4 steps, checkpoints every 2 -> steps 0, 2, 4 on
    the one during-training benchmark; the local trainer with the toy config and no GPU resources. And the mechanism
    check (issues 39, 48): six runs of the tiny model, one thread each, evaluated on their held-out benchmark at their
    last checkpoint, and the base model once. The learning check is not in it (issue 48; target `learning_check`)."""
    run = snakemake(["-n", "--cores", "4", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    assert job_stats(run.stdout) == {"build_corpus": 1, "library_check": 1, "prepare_model": 2, "evaluate": 10,
                                     "train": 7, "results_table": 1, "run_table": 1, "training_figure": 1,
                                     "mechanism_check_table": 1, "mechanism_check_figure": 1, "all": 1}
    planned = jobs(run.stdout)
    trains = {job["wildcards"]: job for job in planned if job["rule"] == "train"}
    train, mechanism = trains["run=toy"], trains["run=toy_mechanism_control_s1"]
    # each job reads its run's config from a file: the command stays one short readable line
    assert "train --backend local --config results/configs/toy-" in train["shell"]
    assert "--config results/configs/toy_mechanism_control_s1-" in mechanism["shell"]
    for job in planned:
        assert "{" not in job["shell"] and len(job["shell"]) < 1000, job["shell"]
    for key in ("toy_ablations", "learning_check", "mechanism_check"):  # workflow keys: a run's own config never
        # carries them
        assert key not in job_config(train, tmp_path) and key not in job_config(mechanism, tmp_path)
    assert job_config(train, tmp_path)["run_name"] == "toy" and "--run-dir results/runs/toy " in train["shell"]
    assert job_config(mechanism, tmp_path)["seed"] == 1
    assert not job_config(mechanism, tmp_path)["selfplay"]["train_designer"]
    assert "gres" not in resources(train) and "gpu" not in resources(train)
    # the dry run names a job's threads when they are more than 1, and its priority when not 0: the mechanism runs
    # train on one thread each; the toy, the longest chain, goes first and leaves them a core (4 cores: 3 threads; 2
    # cores: 1, so the toy trains beside them, issue 48)
    assert train["threads"] == "3" and train["priority"] == "1"
    assert "threads" not in mechanism and "priority" not in mechanism
    evaluations = {job["wildcards"]: job for job in planned if job["rule"] == "evaluate"}
    assert sorted(evaluations) == sorted(
        [f"run=toy, benchmark=heldout_library, step={step}" for step in ("000000", "000002", "000004")]
        + ["run=toy_mechanism_s0, benchmark=mechanism_check_heldout, step=000000"]
        + [f"run=toy_mechanism{arm}_s{seed}, benchmark=mechanism_check_heldout, step=000070" for seed in range(3)
           for arm in ("", "_control")])
    assert "threads" not in evaluations["run=toy_mechanism_s2, benchmark=mechanism_check_heldout, step=000070"]
    toy_evaluation = evaluations["run=toy, benchmark=heldout_library, step=000002"]
    assert toy_evaluation["threads"] == "3" and toy_evaluation["priority"] == "1"
    models = {job["wildcards"]: job for job in planned if job["rule"] == "prepare_model"}
    assert sorted(models) == ["card=smollm2-135m", "card=tiny-random-spade"]
    for card, job in models.items():  # each folder is built from the config of a run of its own card
        assert job_config(job, tmp_path)["model_card"] == card.removeprefix("card="), card
    assert "pending_run" not in run.stdout


def test_learning_check_target_plans_its_three_runs(tmp_path):
    """`snakemake learning_check -n` (issues 16, 30): the tiny model after its format warm-up, three seeds, 200 steps
    each, evaluated at steps 0 and 200 on its own held-out benchmark, and their table; nothing of the toy."""
    run = snakemake(["-n", "learning_check", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    assert job_stats(run.stdout) == {"prepare_model": 1, "evaluate": 6, "train": 3, "learning_check_table": 1,
                                     "learning_check": 1}
    planned = jobs(run.stdout)
    check = next(job for job in planned if job["rule"] == "train" and job["wildcards"] == "run=toy_learning_check_s1")
    assert "--config results/configs/toy_learning_check_s1-" in check["shell"]
    assert job_config(check, tmp_path)["model_card"] == "tiny-random-copy"
    assert job_config(check, tmp_path)["agent"]["prompt_style"] == "bare"
    assert job_config(check, tmp_path)["baseline"]["pool_source"] == "checks"
    assert job_config(check, tmp_path)["seed"] == 1 and job_config(check, tmp_path)["baseline"]["pool_envs"] == ["symbol_copy"]
    steps = sorted(job["wildcards"] for job in planned if job["rule"] == "evaluate")
    assert steps == [f"run=toy_learning_check_s{seed}, benchmark=learning_check, step={step:06d}" for seed in range(3)
                     for step in (0, 200)]


def test_deployed_environments_are_used_only_by_the_rules_that_declare_one(tmp_path):
    """Under --software-deployment-method apptainer (an `apptainer` stand-in on PATH: Snakemake asks for its version
    when it builds the DAG) evaluate runs the image's python; train stays on the host in the venv (its launch script
    calls srun, and passes --image so that every Ray process enters the image); every CPU rule keeps the venv
    snakemake runs in (they declare a conda environment but no container, so a bare `python` would be whatever the
    node has)."""
    fake = tmp_path / "bin" / "apptainer"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'apptainer version 1.3.4'\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(SNAKEMAKE + ["-n", "-p", "--sdm", "apptainer", "--configfile", str(ROOT / "configs/default.yaml"),
                                      "--directory", str(tmp_path / "work")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    shells = {job["rule"]: job["shell"] for job in jobs(run.stdout) if job["shell"]}
    venv = shlex.quote(sys.executable)
    assert shells["evaluate"].startswith("python -m spade.cli "), shells["evaluate"]
    image = shlex.quote(str(ROOT / "containers" / "spade-gpu.sif"))
    assert shells["train"].startswith(f"{venv} -m spade.cli train --backend local --image {image} --apptainer-args=--nv ")
    for rule in ("library_check", "build_corpus", "prepare_model", "results_table", "run_table", "training_figure"):
        assert shells[rule].startswith(venv + " "), rule


def test_apptainer_without_apptainer_plans_but_does_not_run(tmp_path):
    """The cluster profile turns apptainer on: here (no apptainer) a dry run still plans, saying the GPU jobs go
    without their container; a real run stops before any job, naming the flag and what to do."""
    env = {**os.environ, "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                                 if not (Path(p) / "apptainer").exists())}
    args = ["--sdm", "apptainer", "--configfile", str(ROOT / "configs/default.yaml"), "--directory"]
    plan = subprocess.run(SNAKEMAKE + ["-n", *args, str(tmp_path / "plan")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert plan.returncode == 0 and "apptainer is not installed here" in plan.stderr, plan.stderr[-3000:]
    real = subprocess.run(SNAKEMAKE + ["--cores", "1", *args, str(tmp_path / "real")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=env)
    assert real.returncode != 0 and "needs the apptainer command on PATH" in real.stdout + real.stderr
    assert not (tmp_path / "real" / "results").exists()  # not even a job config file


def test_toy_ablations_plan_every_mode_and_the_ablation_artifacts(tmp_path):
    """`snakemake toy_ablations -n`: one training per entry of config key toy_ablations besides the toy, each with its
    own settings; an ablation evaluates its curves and eval.final at the last checkpoint only (the base is the toy's)."""
    ablations = yaml.safe_load((ROOT / "configs/default.yaml").read_text())["toy_ablations"]
    run = snakemake(["-n", "toy_ablations", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    stats = job_stats(run.stdout)
    assert stats["train"] == 1 + len(ablations)  # and the toy (the main run: the results table)
    for name in ("paper_table3", "paper_table6", "paper_fig6", "paper_fig10", "paper_fig11", "paper_fig13",
                 "paper_fig14", "paper_fig18", "paper_env_sources_table", "paper_env_sources_figure", "toy_ablations"):
        assert stats[name] == 1, name
    planned = jobs(run.stdout)
    trains = {job["wildcards"].removeprefix("run="): job for job in planned if job["rule"] == "train"}
    assert sorted(trains) == sorted(["toy", *ablations])
    assert '"memory": {"enabled": false, "n_positive": 1}' in config_text(trains["toy_no_memory"], tmp_path)
    assert '"reward": "ema_lp"' in config_text(trains["toy_ema_lp"], tmp_path)
    assert '"ema_lp"' not in config_text(trains["toy"], tmp_path)
    evals = {job["wildcards"] for job in planned if job["rule"] == "evaluate"}
    assert "run=toy_no_memory, benchmark=reasoning_gym_hard, step=000004" in evals
    assert "run=toy_no_memory, benchmark=reasoning_gym_hard, step=000000" not in evals
    assert "run=toy_no_memory, benchmark=heldout_library, step=000000" not in evals  # the base is the toy's:
    copies = {job["wildcards"]: job for job in planned if job["rule"] == "base_eval_from_main_run"}
    assert sorted(copies) == sorted(f"run={name}, benchmark=heldout_library" for name in ablations)
    assert ("eval relabel --result results/runs/toy/eval/heldout_library/step_000000.json --run toy_no_memory "
            "--out results/runs/toy_no_memory/eval/heldout_library/step_000000.json") in \
        copies["run=toy_no_memory, benchmark=heldout_library"]["shell"]
    assert not any("bfcl" in wildcards and "run=toy," not in wildcards for wildcards in evals)


def test_paper_on_the_toy_trains_only_the_toy(tmp_path):
    """`snakemake paper` on the toy config builds the toy run alone (its curves and final suite); the toy ablation
    rows read whatever `snakemake toy_ablations` left, else "not run". That target still trains them all."""
    run = snakemake(["-n", "paper", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    trains = [job["wildcards"] for job in jobs(run.stdout) if job["rule"] == "train"]
    assert trains == ["run=toy"], trains
    assert not [job for job in jobs(run.stdout) if job["rule"] == "evaluate" and "run=toy," not in job["wildcards"]]
    ablations = yaml.safe_load((ROOT / "configs/default.yaml").read_text())["toy_ablations"]
    full = snakemake(["-n", "toy_ablations", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                      str(tmp_path)])
    assert job_stats(full.stdout)["train"] == 1 + len(ablations)  # the main run (toy) and the ablations


def test_toy_tool_use_plans_the_tool_use_run_and_table_2(tmp_path):
    """`snakemake toy_tool_use -n`: one training of the tool-use toy (configs/toy_tool_use.yaml over the toy's settings:
    the tool-use recipe, 2 steps), its own tool-use corpus, BFCL at the base model and both checkpoints, then Table 2,
    Figure 1 (right) and the tool_use_gain numbers; neither the default target nor `snakemake paper` trains it."""
    run = snakemake(["-n", "toy_tool_use", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    stats = job_stats(run.stdout)
    for name in ("paper_table2", "paper_fig1_right", "paper_number_tool_use_gain", "toy_tool_use"):
        assert stats[name] == 1, name
    planned = jobs(run.stdout)
    (train,) = [job for job in planned if job["rule"] == "train"]
    assert train["wildcards"] == "run=toy_tool_use" and "--run-dir results/runs/toy_tool_use " in train["shell"]
    settings = config_text(train, tmp_path)
    assert '"recipe": "tool_use"' in settings and '"total_steps": 2' in settings
    assert '"model_card": "smollm2-135m"' in settings and '"toy_tool_use":' not in settings
    assert "--corpus 'results/corpus/tool_use.jsonl'" in train["shell"]
    (corpus,) = [job for job in planned if job["rule"] == "build_corpus"]
    assert corpus["wildcards"] == "kind=tool_use" and '"recipe": "tool_use"' in config_text(corpus, tmp_path)
    evals = sorted(job["wildcards"] for job in planned if job["rule"] == "evaluate")
    assert evals == [f"run=toy_tool_use, benchmark=bfcl_multi_turn, step={step:06d}" for step in (0, 1, 2)]
    (table2,) = [job for job in planned if job["rule"] == "paper_table2"]
    assert "results/runs/toy_tool_use/eval/bfcl_multi_turn/step_000002.json" in table2["input"]
    paper = snakemake(["-n", "paper", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path)])
    assert "toy_tool_use" not in " ".join(job["wildcards"] for job in jobs(paper.stdout) if "wildcards" in job)


def test_overlay_file_errors_name_the_key_and_the_file(tmp_path):
    """An entry of toy_tool_use (or toy_ablations) may name a YAML file of settings: a missing file or a bad key in it
    stops the plan, naming the config key and the file."""
    run = snakemake(["-n", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path),
                     "--config", "toy_tool_use={'toy_tool_use': 'configs/no_such_file.yaml'}"])
    assert run.returncode != 0 and "toy_tool_use.toy_tool_use" in run.stdout + run.stderr
    assert "configs/no_such_file.yaml" in run.stdout + run.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {max_turnz: 3}\n")
    run = snakemake(["-n", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path / "w"),
                     "--config", f"toy_tool_use={{'toy_tool_use': '{bad}'}}"])
    assert run.returncode != 0 and "toy_tool_use.toy_tool_use" in run.stdout + run.stderr
    assert "max_turnz" in run.stdout + run.stderr


def test_figure_18_reads_its_reported_line_as_an_input(tmp_path):
    """Editing paper/reported/quoted_numbers.csv (the SPADE Vendi line) reruns figure 18."""
    run = snakemake(["-n", "paper_fig18", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path)])
    (fig18,) = [job for job in jobs(run.stdout) if job["rule"] == "paper_fig18"]
    assert str(ROOT / "paper" / "reported" / "quoted_numbers.csv") in fig18["input"]


def test_fidelity_plans_the_base_model_and_the_last_checkpoint(tmp_path):
    run = snakemake(["-n", "fidelity", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    checks = {job["wildcards"]: job for job in jobs(run.stdout) if job["rule"] == "designer_fidelity"}
    assert sorted(checks) == ["run=toy, step=000000", "run=toy, step=000004"]
    assert "--model results/models/smollm2-135m --out results/runs/toy/fidelity/step_000000.json" in \
        checks["run=toy, step=000000"]["shell"]
    assert "--model results/runs/toy/checkpoints/step_000004 " in checks["run=toy, step=000004"]["shell"]


def test_bad_comparison_mapping_names_the_config_key_and_the_file(tmp_path):
    mapping = tmp_path / "comparison.yaml"
    mapping.write_text("sources: []\n")
    run = snakemake(["-n", "paper_comparison", "--configfile", str(ROOT / "configs/default.yaml"), "--directory",
                     str(tmp_path), "--config", f"paper={{comparison_runs: {mapping}}}"])
    message = run.stdout + run.stderr
    assert run.returncode != 0 and "config key 'paper.comparison_runs'" in message and str(mapping) in message


def test_toy_ablations_bad_entry_names_the_key(tmp_path):
    run = snakemake(["-n", "--configfile", str(ROOT / "configs/default.yaml"), "--directory", str(tmp_path),
                     "--config", "toy_ablations={'toy_x': {'memory': {'enabld': False}}}"])
    assert run.returncode != 0
    assert "toy_ablations.toy_x" in run.stdout + run.stderr and "enabld" in run.stdout + run.stderr


def test_the_one_gpu_recipe_plans_one_run_of_the_4b_backbone_on_cuda(tmp_path):
    """`snakemake --configfile configs/one_gpu.yaml`: one local run of the paper's 4B backbone on the GPU, its
    held-out curve (steps 0, 20, 40, 60) and tables, and none of the toy's extra runs."""
    run = snakemake(["-n", "--configfile", str(ROOT / "configs/one_gpu.yaml"), "--directory", str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    assert job_stats(run.stdout) == {"build_corpus": 1, "library_check": 1, "prepare_model": 1, "evaluate": 4,
                                     "train": 1, "results_table": 1, "run_table": 1, "training_figure": 1, "all": 1}
    (train,) = [job for job in jobs(run.stdout) if job["rule"] == "train"]
    config = job_config(train, tmp_path)
    assert "--backend local " in train["shell"] and config["run_name"] == "one_gpu"
    assert config["model_card"] == "qwen3-4b-instruct-2507" and config["train"]["device"] == "cuda"
    from spade.config import load_config

    resolved = load_config(ROOT / "configs/one_gpu.yaml")  # recipe < model card < the file, as the job resolves it
    assert resolved.train.learning_rate == 1.0e-6 and resolved.selfplay.total_steps == 60  # the paper's rate
    assert not resolved.openrlhf.enabled and resolved.model.hf_id == "Qwen/Qwen3-4B-Instruct-2507"


@pytest.fixture(scope="module")
def slurm_plan():
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="snakemake-executor-plugin-slurm not installed")
    run = snakemake(["--profile", "slurm", "all", "-n"], timeout=180)  # exactly as a user types it, from the root
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_slurm_profile_plans_every_paper_run_on_gpus(slurm_plan):
    planned = jobs(slurm_plan)
    stats = job_stats(slurm_plan)
    assert stats["train"] == len(PAPER_RUNS) and stats["select_checkpoint"] == len(PAPER_RUNS)
    assert stats["prepare_model"] == 3  # the three backbones, each prepared once for all its runs
    trains = {job["wildcards"].removeprefix("run="): job for job in planned if job["rule"] == "train"}
    assert sorted(trains) == sorted(PAPER_RUNS)
    image = shlex.quote(str(ROOT / "containers" / "spade-gpu.sif"))
    for run, job in trains.items():
        # the profile deploys the GPU stack with apptainer: Ray and the driver enter the image (docs/CONTAINERS.md)
        assert f"-m spade.cli train --backend openrlhf --image {image} --apptainer-args=--nv " \
            f"--config results/configs/{run}-" in job["shell"], run
        assert job_config(job, ROOT)["run_name"] == run and f"--run-dir results/runs/{run} " in job["shell"]
        res = resources(job)
        # configs/openrlhf/<card>.yaml: one 8-GPU node for 4B and 8B, two for 30B-A3B
        assert (res["nodes"], res["gres"]) == (("2" if run.endswith("_30b") else "1"), "gpu:8"), run
        assert res["slurm_partition"] == "EDIT-gpu-partition" and res["cpus_per_gpu"] == "8"
        assert res["runtime"] == "2880" and res["slurm_extra"] == "--exclusive"
        assert job.get("threads", "1") == "1", run  # the launcher (a dry run omits threads: 1); workflow.cores of the
        # submit host failed as --cpus-per-task on a GPU node with fewer cores
    # the 30B games run: 5 benchmarks during training x (base + a checkpoint every 16 of 400 steps) = 5 x 26, and
    # heldout_mechanisms (eval.final) on the base and the last checkpoint
    games_30b = [job for job in planned if job["rule"] == "evaluate" and "run=spade_games_30b," in job["wildcards"]]
    assert len(games_30b) == 130 + 2
    assert {resources(job)["gpu"] for job in games_30b} == {"1"}
    assert {resources(job)["slurm_partition"] for job in games_30b} == {"EDIT-gpu-partition"}
    base = [job for job in games_30b if job["wildcards"].endswith("step=000000")]
    assert len(base) == 6 and all(job["input"] == "results/models/qwen3-30b-a3b-instruct-2507" for job in base)
    evaluated = {re.search(r"run=(\w+),", job["wildcards"]).group(1) for job in planned if job["rule"] == "evaluate"}
    assert evaluated == set(PAPER_RUNS)
    (select,) = [job for job in planned if job["rule"] == "select_checkpoint" and job["wildcards"] == "run=spade_games_4b"]
    assert resources(select)["slurm_partition"] == "EDIT-cpu-partition" and "gpu" not in resources(select)
    for table in ("paper_table1", "paper_table2", "paper_table3", "paper_table6"):
        assert stats[table] == 1


def test_slurm_profile_plans_the_preflight_as_one_gpu_node_outside_all(slurm_plan):
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="snakemake-executor-plugin-slurm not installed")
    assert "preflight" not in job_stats(slurm_plan)  # `all` does not wait for it
    run = snakemake(["--profile", "slurm", "preflight", "-n"], timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    (job,) = jobs(run.stdout)
    res = resources(job)
    # configs/openrlhf/qwen3-0.6b.yaml: the paper presets on one 8-GPU node
    assert job["rule"] == "preflight" and (res["nodes"], res["gres"]) == ("1", "gpu:8")
    assert res["slurm_partition"] == "EDIT-gpu-partition" and res["slurm_extra"] == "--exclusive"
    assert job.get("threads", "1") == "1"
    image = shlex.quote(str(ROOT / "containers" / "spade-gpu.sif"))
    assert f"-m spade.rlhf.preflight --out results/preflight --image {image} --apptainer-args=--nv " in job["shell"]


def test_slurm_profile_plans_the_rlve_runs_which_stop_without_a_checkout(slurm_plan, tmp_path):
    """The Fixed-env RLVE runs are planned like every run; their training stops at once, naming the key, until the
    run file points at an RLVE checkout."""
    planned = {job["wildcards"]: job for job in jobs(slurm_plan) if job["rule"] == "train"}
    assert job_config(planned["run=fixed_env_rlve_8b"], ROOT)["baseline"]["mode"] == "rlve"
    assert "pending_run" not in slurm_plan
    done = subprocess.run([sys.executable, "-m", "spade.cli", "train", "--config", "configs/paper/fixed_env_rlve_4b.yaml",
                           "--model", str(tmp_path / "model"), "--run-dir", str(tmp_path / "run")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "'baseline.rlve_path' is empty" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_pending_run_fails_at_once_saying_what_is_missing(tmp_path):
    config = write_multi(tmp_path, [("alpha", 1, 0.001)], extra="pending: {gamma: needs a checkout of X}\n")
    plan = snakemake(["all", "-n", "--configfile", str(config), "--directory", str(tmp_path)])
    assert plan.returncode == 0, plan.stderr[-3000:]
    (pending,) = [job for job in jobs(plan.stdout) if job["rule"] == "pending_run"]
    assert pending["wildcards"] == "run=gamma" and pending["shell"].endswith("exit 1")
    target = "results/runs/gamma/summary.json"
    run = snakemake(["--configfile", str(config), "--directory", str(tmp_path), "--cores", "1", target])
    assert run.returncode != 0
    assert "run gamma cannot be trained yet: needs a checkout of X" in run.stderr
    assert "config key pending.gamma" in run.stderr
    assert not (tmp_path / target).exists()


def test_paper_config_covers_every_run_the_artifacts_map():
    """Every run a paper table (1, 2, 3, 6), figure or quoted number reads is configured (none is pending), and every run
    file under configs/paper/ is configured."""
    from spade.paper import figures as paper_figures, numbers as paper_numbers
    from spade.paper.table_runs import load_table_runs, mapped_runs

    paper = yaml.safe_load((ROOT / "configs/paper.yaml").read_text())
    configured = {yaml.safe_load((ROOT / path).read_text())["run_name"] for path in paper["runs"]}
    assert sorted(configured) == sorted(PAPER_RUNS) and "pending" not in paper
    assert sorted(paper["runs"]) == sorted(f"configs/paper/{p.name}" for p in (ROOT / "configs/paper").glob("*.yaml"))
    tables = load_table_runs(ROOT / paper["paper"]["table_runs"])
    figures = paper_figures.load_figure_runs(ROOT / paper["paper"]["figure_runs"])
    numbers = paper_numbers.load_number_runs(ROOT / paper["paper"]["number_runs"])
    mapped = {run for table in ("table1", "table2", "table3", "table6") for run in mapped_runs(tables, table)}
    mapped |= {run for figure in figures["figures"] for run in paper_figures.figure_runs(figures, figure)}
    mapped |= {run for group in paper_numbers.GROUPS for run in paper_numbers.group_runs(numbers, group)}
    assert "fixed_env_rlve_4b" in mapped and "ablation_two_skills_30b" in mapped
    assert mapped <= configured, mapped - configured


TINY_RUN = """run_name: {name}
model_card: tiny-random
seed: {seed}
train: {{learning_rate: {lr}}}
selfplay: {{total_steps: 2, checkpoint_every: 1, active_skills: 1, envs_per_skill: 1, group_size: 2,
            regen_interval: 1, backfill: true}}
eval: {{during_training: [heldout_library], final: [heldout_library], select_by: ["heldout_library:win_rate"]}}
"""


def write_multi(tmp_path, runs, extra=""):
    """A multi-run config of tiny CPU runs, given as (name, seed, learning rate)."""
    entries = []
    for name, seed, lr in runs:
        path = tmp_path / f"{name}.yaml"
        path.write_text(TINY_RUN.format(name=name, seed=seed, lr=lr))
        entries.append(str(path))
    config = tmp_path / "multi.yaml"
    config.write_text(yaml.safe_dump({"runs": entries}) + extra)
    return config


def test_multi_run_config_gives_each_job_its_own_run_config(tmp_path):
    config = write_multi(tmp_path, [("alpha", 3, 0.001), ("beta", 3, 0.002)])
    run = snakemake(["all", "-n", "--configfile", str(config), "--directory", str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    planned = jobs(run.stdout)
    trains = {job["wildcards"]: job for job in planned if job["rule"] == "train"}
    assert sorted(trains) == ["run=alpha", "run=beta"]
    for name, lr in (("alpha", 0.001), ("beta", 0.002)):
        shell, settings = trains[f"run={name}"]["shell"], job_config(trains[f"run={name}"], tmp_path)
        assert settings["run_name"] == name and settings["train"] == {"learning_rate": lr}
        assert f"train --backend local --config results/configs/{name}-" in shell
        assert "--corpus 'results/corpus/games.jsonl'" in shell  # both read the one games corpus
    # steps 0, 1, 2 of each run on the one benchmark; one shared model folder; no pending runs
    stats = job_stats(run.stdout)
    assert stats["evaluate"] == 6 and stats["prepare_model"] == 1 and stats["select_checkpoint"] == 2
    assert "pending_run" not in stats
    (table,) = [job for job in planned if job["rule"] == "results_table"]
    assert "--runs results/runs/alpha results/runs/beta --evals" in table["shell"]


def test_multi_run_config_errors_name_the_bad_value(tmp_path):
    duplicate = write_multi(tmp_path, [("alpha", 1, 0.001)])
    data = yaml.safe_load(duplicate.read_text())
    duplicate.write_text(yaml.safe_dump({"runs": data["runs"] * 2}))
    run = snakemake(["-n", "--configfile", str(duplicate), "--directory", str(tmp_path)])
    assert run.returncode != 0 and "two files with run_name 'alpha'" in run.stdout + run.stderr

    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump({"runs": ["configs/paper/no_such_run.yaml"]}))
    run = snakemake(["-n", "--configfile", str(missing), "--directory", str(tmp_path)])
    message = run.stdout + run.stderr
    assert run.returncode != 0 and "no_such_run.yaml" in message and "config key 'runs'" in message

    clash = write_multi(tmp_path, [("alpha", 1, 0.001)], extra="pending: {alpha: needs something}\n")
    run = snakemake(["-n", "--configfile", str(clash), "--directory", str(tmp_path)])
    assert run.returncode != 0 and "run 'alpha' is both configured" in run.stdout + run.stderr

    # two seeds build two different offline corpora: they cannot share results/corpus/games.jsonl
    seeds = write_multi(tmp_path, [("alpha", 1, 0.001), ("beta", 2, 0.001)])
    run = snakemake(["-n", "--configfile", str(seeds), "--directory", str(tmp_path)])
    message = run.stdout + run.stderr
    assert run.returncode != 0 and "corpus.path" in message
    assert "runs 'alpha' and 'beta' share the corpus 'games' but differ in config keys corpus, selfplay.flavour, seed" \
        in message
