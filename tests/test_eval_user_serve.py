"""`eval.<benchmark>.user_serve: base_model` (spade.evals.user_serve): for one evaluation, a server of ours over the
run's base model plays the user of ACEBench's multi_turn (or tau2), reached through the benchmark's own user keys, and
is stopped when the evaluation ends; the settings that cannot work are refused naming the key."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from spade.config import CONFIG_DIR, load_config
from spade.configtools import ConfigError
from spade.evals.evaluate import evaluate_checkpoint

ACEBENCH = Path(__file__).parent / "fixtures" / "evals" / "acebench" / "ACEBench"


def _config(tmp_path, **acebench):
    section = {"checkout": str(ACEBENCH), "categories": ["multi_turn"], "max_items": 1, "max_dialog_turns": 4,
               "user_serve": "base_model", "user_max_tokens": 8, "max_new_tokens": 8, **acebench}
    return load_config(CONFIG_DIR / "default.yaml", overrides={"results_dir": str(tmp_path / "results"),
                                                               "eval": {"max_new_tokens": 8, "acebench": section}})


def test_acebench_plays_against_a_server_of_the_base_model_that_stops_after(tiny_model_dir, tmp_path):
    config = _config(tmp_path)
    base = tmp_path / "results" / "models" / config.model.name
    base.parent.mkdir(parents=True)
    base.symlink_to(Path(tiny_model_dir).resolve(), target_is_directory=True)
    out = tmp_path / "results" / "runs" / "toy" / "eval" / "acebench" / "step_000000.json"
    result = evaluate_checkpoint(config, tiny_model_dir, 0, "acebench", out, progress=False)
    assert {row["metric"] for row in result["rows"]} >= {"avg", "multi_turn"}
    log = out.with_suffix(".user_server.log").read_text()
    assert f"serve-designer --model {base}" in log  # the base model, not the evaluated folder's path
    assert log.count("POST /v1/chat/completions") >= 1  # the dialogue asked the served user
    ready = json.loads(out.with_suffix(".user_server.ready.json").read_text())
    with pytest.raises(OSError):  # stopped with the evaluation
        socket.create_connection((ready["host"], ready["port"]), timeout=2).close()
    # the result records the setting: its config hash covers eval.acebench (with user_serve), its records the dialogue
    assert result["provenance"]["config_hash"]


def test_an_unprepared_base_model_is_refused_naming_the_key(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"'eval.acebench.user_serve' is 'base_model', but the run's base model "
                                          r".*results/models/smollm2-135m.* is not prepared"):
        evaluate_checkpoint(_config(tmp_path), tiny_model_dir, 0, "acebench", tmp_path / "r.json", progress=False)


def test_bad_user_serve_settings_are_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match=r"eval.acebench.user_serve.*'local'"):
        _config(tmp_path, user_serve="local")
    with pytest.raises(ConfigError, match=r"eval.tau2.user_serve.*'gpt-4.1'"):
        load_config(CONFIG_DIR / "default.yaml", overrides={"eval": {"tau2": {"user_serve": "gpt-4.1"}}})


def test_tau2_telecom_user_gets_its_tools_from_the_served_base_model(tiny_model_dir, tmp_path):
    """tau2's telecom user calls tools (its phone's): the served base model is asked with them (`tools` in the
    request, accepted: every request answered 200), and the episode is scored by tau2's evaluator."""
    section = {"user_serve": "base_model", "domains": ["telecom"], "max_tasks": 1, "trials": 1, "max_steps": 6,
               "user_max_tokens": 8, "max_new_tokens": 8}
    config = load_config(CONFIG_DIR / "default.yaml", overrides={
        "results_dir": str(tmp_path / "results"), "eval": {"max_new_tokens": 8, "tau2": section}})
    base = tmp_path / "results" / "models" / config.model.name
    base.parent.mkdir(parents=True)
    base.symlink_to(Path(tiny_model_dir).resolve(), target_is_directory=True)
    out = tmp_path / "results" / "runs" / "toy" / "eval" / "tau2" / "step_000000.json"
    result = evaluate_checkpoint(config, tiny_model_dir, 0, "tau2", out, progress=False)
    assert "pass^1/telecom" in {row["metric"] for row in result["rows"]}
    log = out.with_suffix(".user_server.log").read_text()
    posts = [line for line in log.splitlines() if "POST /v1/chat/completions" in line]
    assert posts and all('" 200 ' in line for line in posts), posts
