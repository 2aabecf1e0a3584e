"""The local SLURM cluster of scripts/local_slurm.sh for the tests that submit through it (tests/test_local_slurm.py,
tests/test_rehearsal_run.py): started once per session in a state folder of the session's own, with the local profile
(spade.cluster.profile), and stopped at the end. Skipped where the Debian packages are missing (SPADE_SLURM=1
./setup.sh installs them; .ci/run asks for them, so there the skip fails: tests/skip_policy.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "local_slurm.sh"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmdbd", "mariadbd", "sbatch", "sacct")
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]


@dataclass
class Cluster:
    state: Path
    profile: Path

    def script(self, *args, timeout=120) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "SPADE_SLURM_DIR": str(self.state)})

    def restart(self, *args) -> None:
        for command in (["stop"], ["start", *args]):
            done = self.script(*command)
            assert done.returncode == 0, done.stdout + done.stderr

    def snakemake_argv(self, workdir: Path, *args, status: str = "") -> list:
        """`snakemake --profile <local profile> [--slurm-status-command STATUS] --directory WORKDIR ARGS`."""
        options = ["--slurm-status-command", status] if status else []
        return SNAKEMAKE + ["--profile", str(self.profile), *options, "--directory", str(workdir), *args]

    def snakemake(self, workdir: Path, *args, timeout: int = 1500, status: str = "") -> subprocess.CompletedProcess:
        """``snakemake_argv`` run from the repository root, killed (SIGKILL) after ``timeout`` s: the plugin's waits
        do not heed SIGTERM."""
        return subprocess.run(["timeout", "-s", "KILL", str(timeout), *self.snakemake_argv(workdir, *args,
                                                                                          status=status)],
                              capture_output=True, text=True, cwd=ROOT)


def missing() -> list:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [name for name in DAEMONS if shutil.which(name, path=path) is None]


def start_cluster():
    absent = missing()
    if absent:
        pytest.skip(f"the local slurm cluster needs {absent} (SPADE_SLURM=1 ./setup.sh installs the Debian packages)")
    if subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30).returncode == 0:
        pytest.fail("a slurm controller answers on this machine already: stop it (scripts/local_slurm.sh stop) before "
                    "the tests, which start their own")
    # not under pytest's temporary folders (mode 700): munged and MariaDB run as their own users and must reach it
    state = Path(tempfile.mkdtemp(prefix="spade-slurm-test-", dir="/tmp"))
    state.chmod(0o755)
    cluster = Cluster(state=state, profile=state / "profile")
    done = cluster.script("start")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (cluster.profile / "config.yaml").is_file(), done.stdout
    return cluster
