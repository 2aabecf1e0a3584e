"""The executor plugin's status queries on a cluster without SLURM accounting.

snakemake-executor-plugin-slurm 2.8.0 asks ``sacct`` for the state of its jobs whenever the command exists. On a
cluster whose accounting is off (``AccountingStorageType=accounting_storage/none``) that query fails, the job
silently leaves the plugin's list of active jobs, and Snakemake then waits forever ("No active jobs; skipping status
query"; seen for 732 s on the local cluster, deaf to SIGTERM). ``status_query_problem`` finds that case before the
first job is submitted (the Snakefile's ``onstart``), so the workflow stops at once with the fix: the plugin's
``squeue`` status queries, which work without accounting.
"""

from __future__ import annotations

import subprocess

NO_ACCOUNTING = "accounting_storage/none"
FIX = ("add `slurm-status-command: squeue` to the profile (or --slurm-status-command squeue on the command line): "
       "squeue answers without accounting (a failed job's reason then reads 'unavailable'); docs/CLUSTER.md")


class StatusQueryError(RuntimeError):
    """The plugin's job status queries cannot work on this cluster; the message says why and what to set."""


def accounting_storage(run=subprocess.run) -> str | None:
    """``AccountingStorageType`` of ``scontrol show config``, or None when scontrol does not answer."""
    try:
        done = run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip()
    return None


def status_query_problem(status_command: str, run=subprocess.run) -> str | None:
    """None when ``status_command`` (the plugin's setting: 'sacct' or 'squeue') can track jobs here, else why not."""
    if status_command != "sacct":
        return None
    storage = accounting_storage(run)
    if storage == NO_ACCOUNTING:
        return (f"this SLURM cluster keeps no accounting (AccountingStorageType={storage}), and the executor plugin's "
                f"status command is 'sacct': its queries would fail and Snakemake would wait forever; {FIX}")
    try:
        done = run(["sacct", "-n", "-X", "-o", "JobID", "-S", "now"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"`sacct` did not answer within 30 s, and the executor plugin's status command is 'sacct'; {FIX}"
    except OSError as exc:
        return f"`sacct` cannot run ({exc}), and the executor plugin's status command is 'sacct'; {FIX}"
    if done.returncode != 0:
        return (f"`sacct` fails here (exit {done.returncode}: {done.stderr.strip()[:300]}), and the executor plugin's "
                f"status command is 'sacct': Snakemake would wait forever for its jobs; {FIX}")
    return None


def check_status_queries(workflow) -> None:
    """The Snakefile's ``onstart``: raise ``StatusQueryError`` when the SLURM executor's status queries cannot work."""
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or plugin.name != "slurm":
        return
    problem = status_query_problem(getattr(workflow.executor_settings, "status_command", "sacct"))
    if problem:
        raise StatusQueryError(problem)
