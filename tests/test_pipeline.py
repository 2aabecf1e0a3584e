"""The default Snakemake pipeline end to end, in a scratch working directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--cores", "2",
             "--configfile", str(ROOT / "configs/default.yaml")]


@pytest.mark.slow
def test_library_check_writes_its_report(tmp_path):
    targets = ["results/library/check.json", "results/library/report.md"]
    run = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path)] + targets, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    payload = json.loads((tmp_path / "results/library/check.json").read_text())
    assert payload["passed"] and payload["isolation"] == "bwrap"
    assert "environments pass" in (tmp_path / "results/library/report.md").read_text()
    assert (tmp_path / "results/logs/library_check.log").is_file()
    assert (tmp_path / "results/benchmarks/library_check.tsv").is_file()
    again = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path), "-n"] + targets, capture_output=True,
                           text=True, timeout=120)
    assert "Nothing to be done" in again.stdout + again.stderr


TINY = """
run_name: tiny
model_card: tiny-random
selfplay: {active_skills: 1, envs_per_skill: 2, group_size: 2, regen_interval: 2, total_steps: 4,
           checkpoint_every: 2, design_attempts: 1, backfill: true}
designer: {max_new_tokens: 8, hint_max_new_tokens: 4}
agent: {max_new_tokens: 6, max_turns: 2, max_context_tokens: 8192}
corpus: {offline_max_docs: 20, games_max_words: 40}
memory: {n_positive: 1}
train: {learning_rate: 1.0e-3, global_batch: 8, micro_batch: 4}
eval:
  max_new_tokens: 8
  final: [heldout_library, reasoning_gym_hard, gem_games, bfcl_multi_turn]
  throughput: {items: 2, batch_size: 2}
  heldout_library: {environments: [crt_residue_puzzle], episodes: 2, max_turns: 2}
  reasoning_gym_hard: {tasks: [leg_counting, spell_backward], episodes_per_task: 1}
  gem_games: {games: ["game:GuessTheNumber-v0-hard"], episodes: 1, max_turns: 2}
  bfcl_multi_turn: {categories: [base], max_entries_per_category: 1}
"""


@pytest.mark.slow
def test_toy_pipeline_end_to_end_on_the_tiny_model(tmp_path):
    """The whole DAG (model, corpus, training, evaluation, table, figure) with the tiny model."""
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(TINY)
    command = SNAKEMAKE + [str(tiny), "--directory", str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    results = tmp_path / "results"
    assert "results/tables/results.csv" in run.stdout + run.stderr  # the closing message names the outputs
    table = (results / "tables/results.csv").read_text()
    assert "heldout_library" in table and "training" in table
    assert "not run" not in (results / "tables/tiny_run.md").read_text().split("Wall time")[0]
    for name in ("figures/tiny_training.pdf", "figures/tiny_training.png", "runs/tiny/summary.json",
                 "runs/tiny/eval/heldout_library/step_000000.json",
                 "runs/tiny/eval/heldout_library/step_000004.json", "runs/tiny/envs/set_00000.json"):
        assert (results / name).is_file(), name
    lines = (results / "runs/tiny/metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1, 2, 3]
    # the jobs read the run's config from one file, written when the job was planned (the commands stay short)
    (config_file,) = (results / "configs").glob("tiny-*.yaml")
    assert yaml.safe_load(config_file.read_text())["run_name"] == "tiny"
    assert f"train --backend local --config results/configs/{config_file.name} " in run.stdout + run.stderr

    # the evaluation suite of the final checkpoint, the checkpoint selection and the throughput report
    run = subprocess.run(command + ["eval_toy"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    suite = (results / "tables/suite.csv").read_text()
    assert "eval_seed" in suite.splitlines()[0]
    for benchmark, metric in (("heldout_library", "win_rate"), ("reasoning_gym_hard", "overall"),
                              ("gem_games", "win_rate"), ("bfcl_multi_turn", "accuracy")):
        assert f"tiny,4,{benchmark},{metric}," in suite and f"tiny,0,{benchmark},{metric}," in suite
    selected = json.loads((results / "runs/tiny/selected_checkpoint.json").read_text())
    assert selected["step"] in (2, 4) and selected["select_by"] == ["heldout_library:win_rate"]
    speed = json.loads((results / "bench/eval_throughput.json").read_text())
    assert speed["naive"]["items"] == speed["batched"]["items"] == 2 and speed["speedup_items_per_s"] > 0
    assert speed["benchmark"] == "reasoning_gym_hard" and speed["identical_responses"] >= 0.5  # padding may flip a near-tie

    # one evaluation result on its own, and a changed evaluation key reruns evaluations but not training
    target = "results/runs/tiny/eval/heldout_library/step_000002.json"
    (results / target.removeprefix("results/")).unlink()
    run = subprocess.run(command + [target], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and (results / target.removeprefix("results/")).is_file()
    changed = tmp_path / "changed.yaml"
    changed.write_text(TINY.replace("episodes: 2", "episodes: 3"))
    plan = subprocess.run(SNAKEMAKE + [str(changed), "--directory", str(tmp_path), "-n"], capture_output=True,
                          text=True, timeout=120)
    stats = plan.stdout.split("Job stats:")[1].split("total")[0].splitlines()[3:]
    jobs = {line.split()[0] for line in stats if line.strip()}
    assert "evaluate" in jobs and not jobs & {"train", "prepare_model", "build_corpus", "library_check"}, jobs
    # the changed config is a file of its own; the one the finished jobs read is unchanged
    assert len(list((results / "configs").glob("tiny-*.yaml"))) == 2 and config_file.is_file()


def test_bad_config_fails_before_any_job(tmp_path):
    run = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path), "--config", "seed=abc"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "config key 'seed' must be of type int, got 'abc'" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()
