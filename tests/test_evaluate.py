"""Checkpoint selection, the eval config checks, and one real evaluation through the CLI on the tiny model."""

from __future__ import annotations

import json

import pytest

from spade.config import load_config
from spade.configtools import ConfigError
from spade.evals.evaluate import parse_selector, read_values, select_checkpoint


def test_select_checkpoint_by_hand():
    values = {2: {("a", "x"): 0.2, ("b", "y"): 0.6}, 4: {("a", "x"): 0.5, ("b", "y"): 0.5},
              6: {("a", "x"): 0.9}, 8: {("a", "x"): 0.4, ("b", "y"): 0.6}}
    # means: step 2 -> 0.4, step 4 -> 0.5, step 6 lacks b:y, step 8 -> 0.5 (tie: the earlier step wins)
    assert select_checkpoint(values, ["a:x", "b:y"]) == (4, 0.5)
    assert select_checkpoint(values, ["a:x"]) == (6, 0.9)
    with pytest.raises(ConfigError, match="no checkpoint"):
        select_checkpoint(values, ["c:z"])


def test_selector_format():
    assert parse_selector("reasoning_gym_hard:math") == ("reasoning_gym_hard", "math")
    assert parse_selector("heldout_library:win_rate/foo") == ("heldout_library", "win_rate/foo")
    with pytest.raises(ConfigError, match="eval.select_by"):
        parse_selector("reasoning_gym_hard")


def test_read_values(tmp_path):
    for step, value in ((2, 0.25), (4, 0.75)):
        (tmp_path / f"{step}.json").write_text(json.dumps({"step": step, "rows": [
            {"run": "r", "step": step, "benchmark": "b", "metric": "m", "value": value, "n": 4, "stderr": None}]}))
    assert read_values(sorted(tmp_path.glob("*.json"))) == {2: {("b", "m"): 0.25}, 4: {("b", "m"): 0.75}}


def test_every_registered_benchmark_has_its_config_section():
    from spade.evals.registry import registry
    from spade.evals.evaluate import make_benchmark

    config = load_config()
    for name, cls in registry().items():
        if not name.endswith("_test"):  # benchmarks registered by other tests
            assert isinstance(make_benchmark(config, name), cls)


def test_eval_config_rejects_unknown_benchmarks():
    with pytest.raises(ConfigError, match="eval.final.*nonexistent"):
        load_config(overrides={"eval": {"final": ["nonexistent"]}})
    with pytest.raises(ConfigError, match="eval.select_by"):
        load_config(overrides={"eval": {"during_training": ["heldout_library"], "select_by": ["other:x"]}})


@pytest.mark.slow
def test_cli_evaluates_a_checkpoint_and_resumes(tiny_model_dir, tmp_path):
    from spade.cli import main

    config = json.dumps({"eval": {"max_new_tokens": 4, "seed": 5,
                                  "heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2,
                                                      "max_turns": 1}}})
    out = tmp_path / "eval" / "heldout_library" / "step_000000.json"
    args = ["eval", "run", "--config-json", config, "--model", str(tiny_model_dir), "--step", "0",
            "--benchmark", "heldout_library", "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["win_rate"]["n"] == 2 and 0.0 <= rows["win_rate"]["value"] <= 1.0
    assert result["provenance"]["config_hash"] and result["provenance"]["eval_seed"] == 5
    records = (out.parent / "step_000000.items.jsonl").read_text().splitlines()
    assert len(records) == 2
    assert main(args) == 0  # a rerun finds every item done and plays none
    again = json.loads(out.read_text())
    assert again["throughput"]["items_played"] == 0 and again["rows"] == result["rows"]


@pytest.mark.parametrize("benchmark, key", [("aime", "eval.aime.paths.2025"), ("gpqa_diamond", "eval.gpqa_diamond.path"),
                                            ("livecodebench", "eval.livecodebench.path"),
                                            ("tau2", "eval.tau2.checkout"), ("acebench", "eval.acebench.checkout")])
def test_user_data_benchmark_fails_before_loading_a_model(benchmark, key, tmp_path, capsys):
    from spade.cli import main

    section = {"aime": {"paths": {}}, "tau2": {"checkout": str(tmp_path / "absent")},
               "acebench": {"checkout": str(tmp_path / "absent")}}.get(benchmark, {"path": str(tmp_path / "absent")})
    config = json.dumps({"eval": {benchmark: section}})
    rc = main(["eval", "run", "--config-json", config, "--model", str(tmp_path / "no-model"), "--step", "0",
               "--benchmark", benchmark, "--out", str(tmp_path / "r.json")])
    message = capsys.readouterr().err
    assert rc != 0 and key in message and "no-model" not in message
    assert not (tmp_path / "r.json").exists()


def test_relabel_copies_a_result_and_its_records_to_another_run(tmp_path):
    from spade.evals.base import items_path
    from spade.evals.evaluate import relabel_result

    source = tmp_path / "toy" / "step_000000.json"
    source.parent.mkdir()
    rows = [{"run": "toy", "step": 0, "benchmark": "heldout_library", "metric": "win_rate", "value": 0.25, "n": 4}]
    source.write_text(json.dumps({"run": "toy", "step": 0, "benchmark": "heldout_library", "rows": rows,
                                  "items_file": "step_000000.items.jsonl", "provenance": {"seed": 0}}))
    items_path(source).write_text('{"id": "a", "score": 1.0}\n')
    out = tmp_path / "ablation" / "step_000000.json"
    relabel_result(source, "toy_no_memory", out)
    copy = json.loads(out.read_text())
    assert copy["run"] == "toy_no_memory" and [r["run"] for r in copy["rows"]] == ["toy_no_memory"]
    assert copy["rows"][0]["value"] == 0.25 and copy["provenance"]["seed"] == 0
    assert copy["provenance"]["copied_from"]["run"] == "toy" and len(copy["provenance"]["copied_from"]["sha256"]) == 64
    assert items_path(out).read_text() == items_path(source).read_text()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not an evaluation result"):
        relabel_result(bad, "x", tmp_path / "x.json")
