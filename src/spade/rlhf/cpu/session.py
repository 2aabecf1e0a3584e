"""One training launch in its own process session, optionally killed mid-run: the kill-and-resume of the CPU
integration run (``spade.rlhf.cpu.run``) and of the rehearsal (``openrlhf.cpu_resume_at``, ``spade.rlhf.launch``).

A launch starts Ray's daemons and workers, vLLM's engine processes and DeepSpeed's ranks; they all stay in the
session of the command, so one ``killpg`` ends them all, as a node failure or ``scancel`` would. Inside a SLURM job
the launch script starts each Ray node as a job step (``srun``), whose processes belong to slurmstepd, not to the
session, and outlive a killed ``srun``: a killed session's new steps are cancelled too (``end_new_steps``), or the
next launch of the same job finds the killed one's Ray head on its port (seen on the local SLURM)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

STEP_END_TIMEOUT_S = 60


class SessionError(RuntimeError):
    """A launch ran past its time limit, or this process was told to stop (SIGTERM, SIGHUP)."""


def metrics_lines(run_dir: Path) -> list:
    """The lines of ``<run_dir>/metrics.jsonl`` as written so far (one per finished SPADE step)."""
    import json

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def job_steps(env=None) -> set | None:
    """The running steps ('<job>.<n>') of the SLURM job this process runs in; None outside SLURM."""
    job = (os.environ if env is None else env).get("SLURM_JOB_ID")
    if not job:
        return None
    done = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SessionError(f"squeue could not list the steps of SLURM job {job}: {done.stderr.strip()}")
    return {line.strip() for line in done.stdout.splitlines() if re.fullmatch(r"\d+\.\d+", line.strip())}


def end_new_steps(before: set | None, env=None, timeout_s: float = STEP_END_TIMEOUT_S) -> list:
    """Cancel the steps of this SLURM job that were not running in ``before`` (a killed launch's Ray nodes) and wait
    until they are gone; returns their ids ([] outside SLURM)."""
    if before is None:
        return []
    left = sorted(job_steps(env) - before)
    if left:
        subprocess.run(["scancel", *left], capture_output=True, text=True, timeout=60)
        deadline = time.monotonic() + timeout_s
        while job_steps(env) & set(left):
            if time.monotonic() > deadline:
                raise SessionError(f"the job steps {left} of a killed launch still run {timeout_s:.0f} s after scancel")
            time.sleep(0.5)
    return left


def run_session(cmd: list, env: dict, run_dir: Path, log=None, kill_after_step: int | None = None,
                timeout_s: float = 900, cwd=None) -> dict:
    """Run ``cmd`` in its own session with ``env``, its output to the open file ``log`` (None: this process's). With
    ``kill_after_step`` the whole session gets SIGKILL once ``run_dir/metrics.jsonl`` has a line past that step, i.e.
    once the step's generation has ended. Returns {"returncode", "seconds", "cpu_seconds", "killed"}; CPU seconds: user
    + system of every process of the session, read about once a second (what a process spent after its last reading
    is missed). Raises ``SessionError`` past ``timeout_s``, after killing the session."""
    started, cpu, polled = time.monotonic(), {}, 0.0
    steps = job_steps(env)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT if log is not None else None,
                            start_new_session=True, cwd=cwd)
    killed = False

    def stopped(signum, frame):  # SIGTERM (Snakemake, scancel): end the session too, which is in no process group
        raise SessionError(f"stopped by signal {signum} while training in {run_dir}")  # of ours (the finally below)

    previous = {sig: signal.signal(sig, stopped) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while proc.poll() is None:
            if time.monotonic() - started > timeout_s:
                raise SessionError(f"training in {run_dir} ran past {timeout_s:.0f} s: {' '.join(map(str, cmd))}")
            if kill_after_step is not None and len(metrics_lines(run_dir)) > kill_after_step:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            if time.monotonic() - polled >= 1.0:
                _session_cpu(proc.pid, cpu)
                polled = time.monotonic()
            time.sleep(0.1)
        proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        ended = []
        if proc.poll() is None or killed:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # Ray's daemons and workers are in the same session
            except ProcessLookupError:
                pass
            ended = end_new_steps(steps, env)  # and, inside a SLURM job, in the job steps the session started
            if ended:
                print(f"session: cancelled the killed launch's SLURM job steps {ended}", flush=True)
    return {"returncode": proc.returncode, "seconds": round(time.monotonic() - started, 1),
            "cpu_seconds": round(sum(cpu.values()), 1), "killed": killed, "steps_cancelled": ended}


def _session_cpu(session: int, seen: dict) -> None:
    """Update ``seen`` {pid: CPU seconds} with every process of ``session`` (the training, Ray's daemons and
    workers), read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session:  # fields after the name: state ppid pgrp session ... utime(11) stime(12)
            seen[stat.parent.name] = (int(fields[11]) + int(fields[12])) / tick
