"""What SLURM gave each job of a workflow against what the cluster profile and the run's OpenRLHF placement declare.

The executor plugin writes each job's log to ``.snakemake/slurm_logs/rule_<rule>/<wildcards>/<job id>.log`` (the
profile keeps the logs of successful jobs too: ``slurm-keep-successful-logs``), so the log folder names every job's
rule and wildcards; ``sacct`` (accounting) then gives its partition, account, node count, allocated TRES (CPUs,
memory, gres/gpu) and time limit. ``declared`` is what the profile and the placement promise for one job, ``check``
compares the two for every job and names each difference.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SACCT_FIELDS = ("JobID", "JobName", "Partition", "Account", "NNodes", "ReqTRES", "AllocTRES", "Timelimit", "State")
LOG_DIR = Path(".snakemake") / "slurm_logs"


class AllocationError(AssertionError):
    """A job's allocation differs from what the profile and its run's placement declare."""


@dataclass(frozen=True)
class SlurmJob:
    rule: str
    wildcards: str  # the plugin's folder name: the wildcard values joined by "_" ('' for none)
    job_id: str
    log: Path


def slurm_jobs(workdir: str | Path) -> list[SlurmJob]:
    """Every job the plugin submitted from ``workdir``, from its log files (sorted by job id)."""
    jobs = []
    for log in (Path(workdir) / LOG_DIR).glob("rule_*/**/*.log"):
        parts = log.relative_to(Path(workdir) / LOG_DIR).parts
        if not log.stem.isdigit():
            continue
        wildcards = "/".join(parts[1:-1])
        jobs.append(SlurmJob(rule=parts[0].removeprefix("rule_"), wildcards=wildcards, job_id=log.stem, log=log))
    return sorted(jobs, key=lambda job: int(job.job_id))


def sacct(job_ids: list[str]) -> dict[str, dict]:
    """``sacct``'s allocation record of each job (the job itself, not its steps): {job id: {field: value}}."""
    if not job_ids:
        return {}
    done = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", ",".join(SACCT_FIELDS)],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AllocationError(f"sacct failed (exit {done.returncode}): {done.stderr.strip()}")
    rows = {}
    for line in done.stdout.splitlines():
        values = line.split("|")
        if len(values) == len(SACCT_FIELDS):
            rows[values[0]] = dict(zip(SACCT_FIELDS, values))
    return rows


def tres(text: str) -> dict[str, str]:
    """'billing=8,cpu=8,gres/gpu=1,mem=125G,node=1' -> {'cpu': '8', 'gres/gpu': '1', ...}."""
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def megabytes(text: str) -> float:
    """SLURM's memory text ('480000M', '125G', '1.50T') in MB."""
    match = re.fullmatch(r"([\d.]+)([KMGT]?)", text)
    if not match:
        raise AllocationError(f"cannot read the memory {text!r}")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2)]
    return float(match.group(1)) * scale


def minutes(text: str) -> int:
    """SLURM's time limit ('2-00:00:00', '04:00:00', '30:00') in minutes."""
    days, _, clock = text.rpartition("-")
    fields = [int(part) for part in clock.split(":")]
    while len(fields) < 3:
        fields.insert(0, 0)
    hours, mins, secs = fields
    return (int(days) if days else 0) * 1440 + hours * 60 + mins + (1 if secs else 0)


def resources(profile: dict, rule: str) -> dict:
    """The profile's resources of ``rule``: its ``set-resources`` entry over ``default-resources``."""
    return {**(profile.get("default-resources") or {}), **((profile.get("set-resources") or {}).get(rule) or {})}


def declared(profile: dict, rule: str, nodes: int = 1, gpus_per_node: int = 0) -> dict:
    """What ``rule``'s job must get: partition, account, nodes, GPUs in all, time limit in minutes, memory per node
    in MB, and the least CPUs (``cpus_per_gpu`` x GPUs; a job of ``--exclusive`` gets its nodes' every CPU).
    ``nodes`` and ``gpus_per_node``: the job's own (a train job's from its run's placement); a rule with the
    profile's ``gpu`` resource gets that many GPUs on one node."""
    found = resources(profile, rule)
    gpus = nodes * gpus_per_node if gpus_per_node else int(found.get("gpu") or 0)
    return {"partition": found["slurm_partition"], "account": found["slurm_account"], "nodes": nodes, "gpus": gpus,
            "minutes": int(found["runtime"]), "mem_mb": int(found["mem_mb"]),
            "min_cpus": int(found.get("cpus_per_gpu") or 1) * max(gpus, 1),
            "exclusive": "--exclusive" in str(found.get("slurm_extra", ""))}


def problems(job: SlurmJob, want: dict, got: dict) -> list[str]:
    """Each difference between ``want`` (``declared``) and ``got`` (a ``sacct`` row), as a sentence. The GPUs asked
    (ReqTRES) must be the declared ones; a job of ``--exclusive`` is then given its nodes' every CPU and GPU
    (AllocTRES at least the declared), any other job exactly what it declared (CPUs: ``cpus_per_gpu`` x GPUs)."""
    asked, alloc = tres(got["ReqTRES"]), tres(got["AllocTRES"])
    seen = {"partition": got["Partition"], "account": got["Account"], "nodes": int(got["NNodes"]),
            "gpus": int(asked.get("gres/gpu", 0)), "minutes": minutes(got["Timelimit"])}
    found = [f"{key} {seen[key]!r}, declared {want[key]!r}" for key in seen if seen[key] != want[key]]
    gpus, cpus = int(alloc.get("gres/gpu", 0)), int(alloc.get("cpu", 0))
    if gpus < want["gpus"] or (gpus != want["gpus"] and not want["exclusive"]):
        found.append(f"{gpus} GPUs allocated, declared {want['gpus']}")
    if cpus < want["min_cpus"] or (want["gpus"] and cpus != want["min_cpus"] and not want["exclusive"]):
        found.append(f"{cpus} CPUs allocated, declared {'at least ' if want['exclusive'] else ''}{want['min_cpus']}")
    mem = megabytes(alloc.get("mem", "0"))
    if mem != want["mem_mb"] * want["nodes"]:
        found.append(f"memory {alloc.get('mem')} allocated, declared {want['mem_mb']} MB per node x {want['nodes']}")
    return [f"job {job.job_id} (rule {job.rule}, {job.wildcards or 'no wildcards'}): {text}" for text in found]


def check(workdir: str | Path, profile: dict, placement=lambda job: (1, 0)) -> list[dict]:
    """Compare every job of ``workdir`` with what it was promised; raise ``AllocationError`` naming every difference.
    ``placement(job)``: (nodes, GPUs per node) of a job whose nodes and GPUs come from its run (``train``), else
    (1, 0). Returns one row per job: rule, wildcards, job id, state, the declared and the allocated values."""
    jobs = slurm_jobs(workdir)
    if not jobs:
        raise AllocationError(f"no SLURM job log under {Path(workdir) / LOG_DIR}: nothing was submitted")
    rows, found = [], []
    accounted = sacct([job.job_id for job in jobs])
    for job in jobs:
        got = accounted.get(job.job_id)
        if got is None:
            found.append(f"job {job.job_id} (rule {job.rule}): sacct has no record of it")
            continue
        want = declared(profile, job.rule, *placement(job))
        found += problems(job, want, got)
        rows.append({"rule": job.rule, "wildcards": job.wildcards, "job_id": job.job_id, "state": got["State"],
                     "declared": want, "allocated": {key: got[key] for key in SACCT_FIELDS[2:]}})
    if found:
        raise AllocationError("allocations differ from the profile:\n" + "\n".join(found))
    return rows
