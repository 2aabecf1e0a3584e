"""The ``spade`` command line: validate, play, bench and check-library, as a user runs them."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import GOOD_STEP, env_source

from spade.cli import main

FIXED = env_source(GOOD_STEP).replace("self.target = self.rng.randint(0, 9)", "self.target = 7")


def run_cli(*args, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spade.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_validate_json(tmp_path, capsys):
    good = tmp_path / "good.py"
    good.write_text("```python\n" + FIXED + "```\n")
    assert main(["env", "validate", str(good), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True and report["reason"] == "ok" and report["isolation"] == "bwrap"
    assert isinstance(report["message"], str)


def test_validate_rejects_and_stores(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(env_source('        return "x", 5.0, False, False, {}'))
    store = tmp_path / "rejected"
    assert main(["env", "validate", str(bad), "--json", "--store-rejected", str(store)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["reason"] == "reward_out_of_range"
    assert len(list(store.glob("*/report.json"))) == 1


def test_bad_input_gets_a_clear_error(tmp_path, capsys):
    assert main(["env", "validate", str(tmp_path / "missing.py")]) == 2
    assert "missing.py' does not exist" in capsys.readouterr().err
    config = tmp_path / "config.yaml"
    config.write_text("sandbox:\n  isolation: chroot\n")
    assert main(["env", "validate", str(tmp_path), "--config", str(config)]) == 2
    assert "'sandbox.isolation' has value 'chroot'" in capsys.readouterr().err


def test_play_in_the_terminal(tmp_path):
    game = tmp_path / "game.py"
    game.write_text(FIXED)
    result = run_cli("env", "play", str(game), "--seed", "1", stdin="3\n7\n")
    assert result.returncode == 0, result.stderr
    assert "Wrong." in result.stdout and "final reward 1" in result.stdout
    assert "episode over after 2 turns" in result.stdout


def test_play_refuses_a_file_without_an_environment(tmp_path):
    notes = tmp_path / "notes.py"
    notes.write_text("def helper():\n    return 1\n")
    result = run_cli("env", "play", str(notes))
    assert result.returncode == 2 and "no_env_class" in result.stderr and "Traceback" not in result.stderr


def test_check_library_json(tmp_path):
    out = tmp_path / "check.json"
    result = run_cli("env", "check-library", "--json", "--out", str(out), "--markdown", str(tmp_path / "r.md"))
    assert result.returncode == 0, result.stderr
    payload = json.loads(out.read_text())
    assert payload == json.loads(result.stdout)
    assert payload["passed"] and payload["isolation"] == "bwrap" and len(payload["environments"]) >= 15
    assert set(payload["provenance"]) == {"git_commit", "config_hash", "seed", "spade_version"}
    assert len(payload["provenance"]["config_hash"]) == 16
    assert "| environment |" in (tmp_path / "r.md").read_text()


@pytest.mark.slow
def test_bench_json():
    result = run_cli("env", "bench", "--json", "--steps", "300", "--fresh-calls", "5")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    for key in ("sandbox_step_ms", "inprocess_step_ms", "fresh_process_step_ms", "validations_per_s", "isolation"):
        assert key in figures
    # the figures are a benchmark (timings on a busy 2-core machine can swap places): only their sanity is a test
    for key in ("sandbox_step_ms", "inprocess_step_ms", "fresh_process_step_ms", "validations_per_s",
                "validations_per_s_spare", "validations_per_s_no_spare", "spare_speedup", "episode_ms",
                "episode_precompiled_ms", "precompiled_speedup"):
        assert math.isfinite(figures[key]) and figures[key] > 0, (key, figures[key])
    assert figures["validations_per_s"] == figures["validations_per_s_spare"]  # the default keeps a spare
