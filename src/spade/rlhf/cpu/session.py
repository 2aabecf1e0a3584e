"""One training launch in its own process session, optionally killed mid-run: the kill-and-resume of the CPU
integration run (``spade.rlhf.cpu.run``) and of the rehearsal (``openrlhf.cpu_resume_at``, ``spade.rlhf.launch``).

A launch starts Ray's daemons and workers, vLLM's engine processes and DeepSpeed's ranks; they all stay in the
session of the command, so one ``killpg`` ends them all, as a node failure or ``scancel`` would."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class SessionError(RuntimeError):
    """A launch ran past its time limit, or this process was told to stop (SIGTERM, SIGHUP)."""


def metrics_lines(run_dir: Path) -> list:
    """The lines of ``<run_dir>/metrics.jsonl`` as written so far (one per finished SPADE step)."""
    import json

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_session(cmd: list, env: dict, run_dir: Path, log=None, kill_after_step: int | None = None,
                timeout_s: float = 900, cwd=None) -> dict:
    """Run ``cmd`` in its own session with ``env``, its output to the open file ``log`` (None: this process's). With
    ``kill_after_step`` the whole session gets SIGKILL once ``run_dir/metrics.jsonl`` has a line past that step, i.e.
    once the step's generation has ended. Returns {"returncode", "seconds", "cpu_seconds", "killed"}; CPU seconds: user
    + system of every process of the session, read about once a second (what a process spent after its last reading
    is missed). Raises ``SessionError`` past ``timeout_s``, after killing the session."""
    started, cpu, polled = time.monotonic(), {}, 0.0
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
        if proc.poll() is None or killed:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # Ray's daemons and workers are in the same session
            except ProcessLookupError:
                pass
    return {"returncode": proc.returncode, "seconds": round(time.monotonic() - started, 1),
            "cpu_seconds": round(sum(cpu.values()), 1), "killed": killed}


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
