"""The local cluster's overlay of the cluster profile, the reading of SLURM's accounting and the status-command check,
without a cluster (the real SLURM runs are in tests/test_local_slurm.py)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from spade.cluster import allocations, profile, status


def test_the_overlay_changes_only_what_it_names():
    """Names, the software deployment and the status polling change; every resource, limit and flag of the cluster
    profile stays (the train jobs' nodes and GPUs come from each run's placement either way)."""
    base = yaml.safe_load(profile.BASE.read_text())
    local = profile.local_profile(base, yaml.safe_load(profile.OVERLAY.read_text()))
    changed = sorted(key for key in set(base) | set(local) if base.get(key) != local.get(key))
    assert changed == ["apptainer-args", "default-resources", "latency-wait", "seconds-between-status-checks",
                       "set-resources", "slurm-init-seconds-before-status-checks", "software-deployment-method"]
    assert "software-deployment-method" not in local and "apptainer-args" not in local
    for rule, found in [("default", local["default-resources"])] + list(local["set-resources"].items()):
        was = base["default-resources"] if rule == "default" else base["set-resources"][rule]
        assert {k: v for k, v in found.items() if k not in ("slurm_partition", "slurm_account")} == \
               {k: v for k, v in was.items() if k not in ("slurm_partition", "slurm_account")}, rule
    assert local["set-resources"]["train"]["slurm_partition"] == "spade-gpu"
    assert local["default-resources"]["slurm_partition"] == "spade-cpu"
    assert {found.get("slurm_account", "spade-local") for found in local["set-resources"].values()} == {"spade-local"}


def test_an_overlay_that_does_not_fit_the_profile_is_refused(tmp_path):
    base = yaml.safe_load(profile.BASE.read_text())
    overlay = yaml.safe_load(profile.OVERLAY.read_text())
    missing = {**overlay, "edit": {k: v for k, v in overlay["edit"].items() if k != "EDIT-account"}}
    with pytest.raises(profile.ProfileError, match=r"\['EDIT-account'\] has no value under 'edit'"):
        profile.local_profile(base, missing)
    stale = {**overlay, "edit": {**overlay["edit"], "EDIT-qos": "normal"}}
    with pytest.raises(profile.ProfileError, match=r"edit \['EDIT-qos'\] does not occur in the cluster profile"):
        profile.local_profile(base, stale)
    with pytest.raises(profile.ProfileError, match=r"keys \['jobs'\] are not overlay keys"):
        profile.local_profile(base, {**overlay, "jobs": 3})
    written = profile.write_local_profile(tmp_path / "p")
    assert yaml.safe_load(written.read_text())["set-resources"]["evaluate"]["slurm_partition"] == "spade-gpu"


def test_sacct_values_are_read_in_slurms_units():
    assert allocations.tres("billing=64,cpu=64,gres/gpu=8,mem=480000M,node=1") == {
        "billing": "64", "cpu": "64", "gres/gpu": "8", "mem": "480000M", "node": "1"}
    assert allocations.megabytes("125G") == 128000 and allocations.megabytes("480000M") == 480000
    assert allocations.megabytes("1.5T") == 1.5 * 1024 * 1024
    assert allocations.minutes("2-00:00:00") == 2880 and allocations.minutes("04:00:00") == 240
    assert allocations.minutes("30:00") == 30 and allocations.minutes("00:00:30") == 1


def test_declared_and_allocated_are_compared_field_by_field():
    local = profile.local_profile(yaml.safe_load(profile.BASE.read_text()),
                                  yaml.safe_load(profile.OVERLAY.read_text()))
    job = allocations.SlurmJob("train", "spade_games_30b", "12", None)
    want = allocations.declared(local, "train", nodes=2, gpus_per_node=8)
    assert want == {"partition": "spade-gpu", "account": "spade-local", "nodes": 2, "gpus": 16, "minutes": 2880,
                    "mem_mb": 480000, "min_cpus": 128, "exclusive": True}
    got = {"Partition": "spade-gpu", "Account": "spade-local", "NNodes": "2", "Timelimit": "2-00:00:00",
           "ReqTRES": "billing=2,cpu=2,gres/gpu=16,mem=960000M,node=2",
           "AllocTRES": "billing=128,cpu=128,gres/gpu=16,mem=960000M,node=2"}
    assert allocations.problems(job, want, got) == []
    one_node = {**got, "NNodes": "1", "ReqTRES": "cpu=1,gres/gpu=8,mem=480000M,node=1",
                "AllocTRES": "cpu=64,gres/gpu=8,mem=480000M,node=1"}
    assert allocations.problems(job, want, one_node) == [
        "job 12 (rule train, spade_games_30b): nodes 1, declared 2",
        "job 12 (rule train, spade_games_30b): gpus 8, declared 16",
        "job 12 (rule train, spade_games_30b): 8 GPUs allocated, declared 16",
        "job 12 (rule train, spade_games_30b): 64 CPUs allocated, declared at least 128",
        "job 12 (rule train, spade_games_30b): memory 480000M allocated, declared 480000 MB per node x 2"]
    evaluate = allocations.declared(local, "evaluate")
    assert (evaluate["gpus"], evaluate["min_cpus"], evaluate["minutes"]) == (1, 16, 240)
    one_gpu = {"Partition": "spade-gpu", "Account": "spade-local", "NNodes": "1", "Timelimit": "04:00:00",
               "ReqTRES": "billing=1,cpu=1,gres/gpu=1,mem=125G,node=1",
               "AllocTRES": "billing=16,cpu=16,gres/gpu=1,mem=125G,node=1"}
    assert allocations.problems(job, evaluate, one_gpu) == []  # sacct's own rows of an evaluate job
    more = {**one_gpu, "AllocTRES": "billing=16,cpu=32,gres/gpu=2,mem=125G,node=1"}  # not exclusive: exactly
    assert [text.split(": ", 1)[1] for text in allocations.problems(job, evaluate, more)] == [
        "2 GPUs allocated, declared 1", "32 CPUs allocated, declared 16"]
    cpu_job = allocations.declared(local, "select_checkpoint")
    assert (cpu_job["partition"], cpu_job["gpus"], cpu_job["mem_mb"], cpu_job["minutes"]) == ("spade-cpu", 0, 4000, 30)


def fake_run(config: str, sacct_rc: int = 0, sacct_err: str = ""):
    def run(argv, **kwargs):
        if argv[0] == "scontrol":
            return subprocess.CompletedProcess(argv, 0, stdout=config, stderr="")
        return subprocess.CompletedProcess(argv, sacct_rc, stdout="", stderr=sacct_err)
    return run


def test_a_sacct_status_command_without_accounting_is_stopped_with_the_fix():
    none = fake_run("ClusterName = x\nAccountingStorageType   = accounting_storage/none\n", 1,
                    "Slurm accounting storage is disabled")
    problem = status.status_query_problem("sacct", run=none)
    assert "AccountingStorageType=accounting_storage/none" in problem and "slurm-status-command: squeue" in problem
    assert status.status_query_problem("squeue", run=none) is None
    dbd = fake_run("AccountingStorageType = accounting_storage/slurmdbd\n")
    assert status.status_query_problem("sacct", run=dbd) is None
    broken = fake_run("AccountingStorageType = accounting_storage/slurmdbd\n", 1, "slurmdbd: connection refused")
    assert "exit 1: slurmdbd: connection refused" in status.status_query_problem("sacct", run=broken)
