"""The cluster profile under a real SLURM (issue 47): the local cluster of scripts/local_slurm.sh (one node, 8 fake
GPUs, accounting through slurmdbd and MariaDB), the profile profiles/slurm/config.yaml with only the overlay
profiles/local_slurm.yaml, and Snakemake's executor plugin submitting every job through sbatch. The rehearsal subset
(tests/test_rehearsal_run.py) goes through the same cluster. Every invocation runs under `timeout -s KILL`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from spade.cluster import allocations

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")


def profile_of(slurm) -> dict:
    return yaml.safe_load((slurm.profile / "config.yaml").read_text())


@pytest.fixture(scope="module")
def toy(slurm, tiny_default):
    """The default target of the tiny toy config (tests/test_pipeline.py), every job through sbatch: conftest's
    ``tiny_default``, which test_pipeline.py's checks read too."""
    workdir, done, cluster = tiny_default
    assert cluster is slurm
    return {"workdir": workdir, "done": done}


def test_every_job_of_the_default_target_got_what_the_profile_declares(slurm, toy):
    rows = allocations.check(toy["workdir"], profile_of(slurm))
    rules = {row["rule"] for row in rows}
    assert {"prepare_model", "library_check", "build_corpus", "train", "evaluate"} <= rules, rules
    assert all(row["state"] == "COMPLETED" for row in rows)
    # a toy run is a CPU run, but the profile's `train` resources are the GPU nodes' (finding: docs/CLUSTER.md)
    train = next(row for row in rows if row["rule"] == "train")
    assert train["allocated"]["Partition"] == "spade-gpu" and "gres/gpu=8" in train["allocated"]["AllocTRES"]
    # tampered declaration: the evaluate jobs were promised twice the memory they got
    wrong = profile_of(slurm)
    wrong["set-resources"]["evaluate"]["mem_mb"] *= 2
    with pytest.raises(allocations.AllocationError, match=r"rule evaluate, .*memory 125G allocated, declared 256000"):
        allocations.check(toy["workdir"], wrong)


def test_every_jobs_slurm_log_is_where_the_docs_say(toy):
    """docs/CLUSTER.md: .snakemake/slurm_logs/rule_<rule>/<wildcards>/<job id>.log in the working directory, kept
    after the job succeeds (the profile's slurm-keep-successful-logs)."""
    submitted = SUBMITTED.findall(toy["done"].stdout + toy["done"].stderr)
    assert len(submitted) >= 10
    logs = toy["workdir"] / ".snakemake" / "slurm_logs"
    for job_id, log in submitted:
        path = Path(log)
        assert path.parent.relative_to(logs).parts[0].startswith("rule_") and path.name == f"{job_id}.log", log
        assert path.is_file(), f"job {job_id}'s log {log} was not kept"
    assert {job.job_id for job in allocations.slurm_jobs(toy["workdir"])} == {job_id for job_id, _ in submitted}


def test_a_cancelled_train_job_is_resubmitted_and_resumes_from_its_checkpoint(slurm, toy, tmp_path):
    """scancel a toy run's train job once its step-2 checkpoint exists; the next invocation (rerun-incomplete)
    submits it again, and the local trainer resumes from the checkpoint instead of step 0."""
    workdir = toy["workdir"]
    cut = tmp_path / "cut.yaml"
    cut.write_text("run_name: tiny_cut\nselfplay: {total_steps: 16, checkpoint_every: 2}\n")
    args = ["--configfile", str(ROOT / "configs/default.yaml"), str(workdir / "tiny.yaml"), str(cut), "--",
            "results/runs/tiny_cut/summary.json"]
    first = subprocess.Popen(["timeout", "-s", "KILL", "900", *slurm.snakemake_argv(workdir, *args)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    checkpoint = workdir / "results" / "runs" / "tiny_cut" / "checkpoints" / "step_000002"
    deadline = time.monotonic() + 600
    while not (checkpoint / "trainer_state.json").is_file() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    jobs = [job for job in allocations.slurm_jobs(workdir) if job.rule == "train" and job.wildcards == "tiny_cut"]
    assert jobs and checkpoint.is_dir(), first.communicate()[0][-3000:]
    subprocess.run(["scancel", jobs[-1].job_id], check=True, timeout=60)
    output = first.communicate(timeout=600)[0]
    assert first.returncode not in (0, -9, 137), output[-3000:]
    # (with the plugin's sacct status queries this wait never ends: sacct says "CANCELLED by 0"; the profile's squeue)
    assert f"SLURM-job '{jobs[-1].job_id}' failed, SLURM status is: 'CANCELLED'" in output, output[-3000:]
    assert not (workdir / "results" / "runs" / "tiny_cut" / "summary.json").exists()
    again = slurm.snakemake(workdir, *args, timeout=900)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    log = (workdir / "results" / "logs" / "train_tiny_cut.log").read_text()
    assert re.search(r"resuming \S+tiny_cut from step_0000(0[2-9]|1[0-4]) \(step ([2-9]|1[0-4])\)", log), log[-3000:]
    steps = [json.loads(line)["step"] for line in
             (workdir / "results" / "runs" / "tiny_cut" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(16))
    resubmitted = [job for job in allocations.slurm_jobs(workdir)
                   if job.rule == "train" and job.wildcards == "tiny_cut"]
    assert len(resubmitted) == len(jobs) + 1


def test_a_failing_job_ends_the_workflow_naming_rule_log_and_slurm_state(slurm, toy, tmp_path):
    """A run whose training cannot start (train.device cuda on a node without a GPU): Snakemake ends at once with
    the rule, the job's log and SLURM's state, and exits nonzero; nothing waits."""
    workdir = toy["workdir"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("run_name: tiny_broken\ntrain: {device: cuda}\n")
    started = time.monotonic()
    done = slurm.snakemake(workdir, "--configfile", str(ROOT / "configs/default.yaml"), str(workdir / "tiny.yaml"),
                           str(broken), "--", "results/runs/tiny_broken/summary.json", timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert time.monotonic() - started < 600
    assert "Error in rule train:" in output and "results/logs/train_tiny_broken.log" in output, output[-3000:]
    assert re.search(r"SLURM-job '\d+' failed, SLURM status is: 'FAILED'", output), output[-3000:]
    job = next(job for job in allocations.slurm_jobs(workdir) if job.wildcards == "tiny_broken")
    assert str(job.log) in output


def test_the_preflight_stops_with_its_own_message_where_it_needs_a_real_gpu(slurm, tmp_path):
    """`snakemake --profile <local> preflight`: the job gets its node and 8 (fake) GPUs as on a cluster, then the
    preflight finds that torch sees none and stops with that message, not a traceback."""
    done = slurm.snakemake(tmp_path, "preflight", timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Error in rule preflight:" in output, output[-3000:]
    log = (tmp_path / "results" / "logs" / "preflight.log").read_text()
    assert "preflight: FAILED: this node has 0 CUDA device(s)" in log and "Traceback" not in log, log[-3000:]
    assert "CUDA_VISIBLE_DEVICES='0,1,2,3,4,5,6,7'" in log  # SLURM gave the job the node's 8 GPUs
    [row] = allocations.check(tmp_path, profile_of(slurm), placement=lambda job: (1, 8))
    assert row["rule"] == "preflight" and row["state"] == "FAILED"


def test_without_accounting_the_profile_runs_and_a_sacct_status_command_stops_at_once(slurm, tmp_path):
    """With sacct disabled the profile's squeue status queries still track the jobs; a status command switched back
    to sacct (whose queries would fail, and Snakemake wait forever) is stopped by the workflow's onstart check before
    the first sbatch, naming the fix."""
    target = ["--configfile", str(ROOT / "configs/default.yaml"), "--", "results/library/check.json"]
    slurm.restart("--no-accounting")
    try:
        done = slurm.snakemake(tmp_path / "a", *target, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert (tmp_path / "a" / "results" / "library" / "check.json").is_file()
        started = time.monotonic()
        done = slurm.snakemake(tmp_path / "b", *target, timeout=300, status="sacct")
        output = done.stdout + done.stderr
        assert done.returncode == 1, output[-3000:]  # -9 would be the kill of a hang
        assert time.monotonic() - started < 120
        assert "keeps no accounting (AccountingStorageType=accounting_storage/none)" in output, output[-3000:]
        assert "slurm-status-command: squeue" in output and "has been submitted" not in output
    finally:
        slurm.restart()


def test_a_killed_launch_inside_a_job_leaves_no_job_step_behind(slurm, tmp_path):
    """The rehearsal kills a launch mid-run and starts the next one in the same job. Its Ray nodes are job steps
    (srun), whose processes outlive a killed srun client; run_session cancels the steps the killed session started
    (without it the next launch found the killed one's Ray head on its port: seen in the rehearsal under this
    cluster)."""
    tmp_path.chmod(0o755)
    job = tmp_path / "job.sh"
    job.write_text(f"""#!/bin/bash
cd {tmp_path}
{sys.executable} - <<'PY'
import json, os, subprocess
from spade.rlhf.cpu.session import run_session
script = ("srun --overlap -n1 -J probe sleep 300 & sleep 3; "
          "echo '{{}}' >> metrics.jsonl; echo '{{}}' >> metrics.jsonl; wait")
result = run_session(["bash", "-c", script], dict(os.environ), ".", kill_after_step=1, timeout_s=120)
steps = subprocess.run(["squeue", "-h", "-s", "-j", os.environ["SLURM_JOB_ID"], "-o", "%i %j"], capture_output=True,
                       text=True).stdout.split("\\n")
json.dump({{"result": result, "steps": [line for line in steps if line]}}, open("out.json", "w"))
PY
""")
    done = subprocess.run(["timeout", "-s", "KILL", "300", "sbatch", "--wait", "-p", "spade-cpu", "-A", "spade-local",
                           "-o", str(tmp_path / "slurm.out"), str(job)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "slurm.out").read_text()
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["result"]["killed"] and len(out["result"]["steps_cancelled"]) == 1, out
    assert [step.split()[1] for step in out["steps"]] == ["batch"], out  # the probe step is gone
