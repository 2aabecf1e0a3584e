"""The default Snakemake pipeline end to end, in a scratch working directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--cores", "2",
             "--configfile", str(ROOT / "configs/default.yaml")]


@pytest.mark.slow
def test_default_pipeline_writes_the_library_report(tmp_path):
    run = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    payload = json.loads((tmp_path / "results/library/check.json").read_text())
    assert payload["passed"] and payload["isolation"] == "bwrap"
    assert "environments pass" in (tmp_path / "results/library/report.md").read_text()
    assert (tmp_path / "results/logs/library_check.log").is_file()
    assert (tmp_path / "results/benchmarks/library_check.tsv").is_file()
    again = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path), "-n"], capture_output=True, text=True, timeout=120)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_bad_config_fails_before_any_job(tmp_path):
    run = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path), "--config", "seed=abc"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "config key 'seed' must be of type int, got 'abc'" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()
