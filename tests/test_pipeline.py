"""The default Snakemake pipeline end to end, in a scratch working directory, and Snakemake's report of what it made."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from spade import browser_check

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
mechanism_check:  # the default target's mechanism check, 4 steps per run here (its 60-step runs take ~1 min each)
  toy_mechanism_s0: &brief {selfplay: {total_steps: 4, checkpoint_every: 4}}
  toy_mechanism_control_s0: *brief
  toy_mechanism_s1: *brief
  toy_mechanism_control_s1: *brief
  toy_mechanism_s2: *brief
  toy_mechanism_control_s2: *brief
"""


@pytest.fixture(scope="module")
def tiny_pipeline(tiny_default):
    """The default target of the tiny config (conftest's ``tiny_default``: through the local SLURM in CI, where
    tests/test_local_slurm.py checks its jobs, else with the local executor), then `eval_toy` with the local executor
    in the same folder: (folder, the local snakemake command of the config, the two finished processes)."""
    base, default, _ = tiny_default
    command = SNAKEMAKE + [str(base / "tiny.yaml"), "--directory", str(base)]
    suite = subprocess.run(command + ["eval_toy"], capture_output=True, text=True, timeout=900)
    assert suite.returncode == 0, (suite.stdout + suite.stderr)[-4000:]
    return base, command, default, suite


@pytest.mark.slow
def test_toy_pipeline_end_to_end_on_the_tiny_model(tiny_pipeline):
    """The whole DAG (model, corpus, training, evaluation, table, figure) with the tiny model."""
    tmp_path, command, run, _ = tiny_pipeline
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

    # the evaluation suite of the final checkpoint, the checkpoint selection and the throughput report (eval_toy)
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


# The report of the tiny pipeline: what the module's pipeline made, plus one artifact of each other category. Every
# registered output that exists, with its category; nothing else may be in the report.
REPORT_TARGETS = ["env_cards", "results/paper/tables/table5_hyperparameters.md",
                  "results/paper/tables/table3_ablations.md", "results/paper/figures/fig1_middle_games_transfer.pdf",
                  "results/paper/numbers/games_gain.tex", "paper_comparison"]
# the mechanism check's runs (configs/default.yaml): trained by the default target and evaluated on their own held-out
# benchmark only; the target env_cards draws every configured run that has finished training, so their cards are in
# the report too (the learning check's runs, target `learning_check`, are not made)
MECHANISM_RUNS = tuple(f"toy_mechanism{arm}_s{seed}" for seed in range(3) for arm in ("", "_control"))
REPORTED = {
    **dict.fromkeys(["results/tables/results.csv", "results/library/report.md"]
                    + ["results/tables/tiny_run.md", "results/figures/tiny_training.pdf"]
                    + ["results/tables/mechanism_check.md",
                       "results/figures/mechanism_check.pdf"], "Run"),
    **dict.fromkeys(["results/tables/suite.csv", "results/bench/eval_throughput.json"]
                    + ["results/runs/tiny/selected_checkpoint.json"],
                    "Evaluation"),
    **dict.fromkeys([path for run in ("tiny", *MECHANISM_RUNS)
                     for path in (f"results/figures/{run}_env_cards.pdf", f"results/figures/{run}_env_cards.png",
                                  f"results/figures/{run}_env_cards.pdf.provenance.json",
                                  f"results/env_cards/{run}/cards.html", f"results/env_cards/{run}/environments.html")],
                    "Environment cards"),
    **dict.fromkeys([f"results/paper/tables/table5_hyperparameters.{ext}" for ext in ("md", "tex", "md.provenance.json")],
                    "Paper tables"),
    **dict.fromkeys([f"results/paper/tables/table3_ablations.{ext}" for ext in ("md", "tex", "md.provenance.json")],
                    "Ablations"),
    **dict.fromkeys([f"results/paper/figures/fig1_middle_games_transfer.{ext}"
                     for ext in ("pdf", "png", "pdf.provenance.json")], "Paper figures"),
    **dict.fromkeys(["results/paper/numbers/games_gain.tex", "results/paper/numbers/games_gain.tex.provenance.json"],
                    "Paper text"),
    **dict.fromkeys([f"results/paper/{kind}/env_sources.{ext}" for kind, exts in
                     (("tables", ("md", "tex", "md.provenance.json")), ("figures", ("pdf", "png", "pdf.provenance.json")))
                     for ext in exts], "Environment sources"),
}


def report_variable(html: str, name: str):
    """The JSON of a script variable of Snakemake's report (results, categories, workflow_desc)."""
    match = re.search(rf'<script id="[^"]+">\s*var {name} = (.*?);\s*</script>', html, re.S)
    assert match, name
    return json.loads(match.group(1))


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture(scope="module")
def tiny_report(tiny_pipeline):
    """The tiny pipeline's folder after one artifact of each other category was made and `snakemake --report` wrote
    results/report.html and results/report.zip (unpacked into unpacked/)."""
    base, command, _, _ = tiny_pipeline
    run = subprocess.run(command + REPORT_TARGETS, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    for name in ("report.html", "report.zip"):
        run = subprocess.run(command + ["--report", f"results/{name}"], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        assert "Report created." in run.stdout + run.stderr
    with zipfile.ZipFile(base / "results/report.zip") as archive:
        archive.extractall(base / "unpacked")
    return base


@pytest.mark.slow
def test_report_holds_every_table_and_figure_with_its_caption(tiny_report):
    html = (tiny_report / "results/report.html").read_text()
    results, categories = report_variable(html, "results"), report_variable(html, "categories")
    assert set(results) == set(REPORTED)
    for path, category in REPORTED.items():
        assert any(path in paths for paths in categories[category].values()), (path, category)
        assert len(text_of(results[path]["caption"])) > 150, path
        # each file is shown with the job that made it, not with a target that asks for it
        assert not results[path]["job_properties"]["rule"].endswith(("all", "report_contents", "env_cards", "paper",
                                                                      "paper_comparison", "eval_toy")), path
    # the run-level captions name the run's job config file and the config hash its results record, and say toy scale
    caption = text_of(results["results/tables/tiny_run.md"]["caption"])
    (config_file,) = re.findall(r"results/configs/tiny-[0-9a-f]{12}\.yaml", caption)
    assert yaml.safe_load((tiny_report / config_file).read_text())["run_name"] == "tiny"
    recorded = json.loads((tiny_report / "results/runs/tiny/summary.json").read_text())["provenance"]["config_hash"]
    assert f"config hash {recorded}" in caption and "Toy scale (tiny-random, 4 steps;" in caption
    # a paper artifact that found no run of ours says so; the environment cards name their run
    assert "No run of ours was found" in text_of(results["results/paper/tables/table3_ablations.md"]["caption"])
    assert "run toy_mechanism_s0" in text_of(results["results/env_cards/toy_mechanism_s0/cards.html"]["caption"])
    description = text_of(report_variable(html, "workflow_desc"))
    assert "Toy scale." in description and "learning_check" not in description
    # the zip form: the page, and each registered file beside it
    unpacked = tiny_report / "unpacked/report"
    assert set(report_variable((unpacked / "report.html").read_text(), "results")) == set(REPORTED)
    assert len(list((unpacked / "data/raw").glob("*/*"))) == len(REPORTED)


@pytest.mark.slow
@pytest.mark.skipif(browser_check.find_chromium() is None,
                    reason="Chromium is not installed: `apt-get install chromium` as root (or SPADE_BROWSER=1 "
                           "./setup.sh), or point SPADE_CHROMIUM at a Chromium binary")
def test_report_opens_in_headless_chromium(tiny_report):
    pages = [tiny_report / "results/report.html", tiny_report / "unpacked/report/report.html"]
    for check in browser_check.check_pages(pages, tiny_report / "shots"):
        assert check.ok, (check.page, check.problems, check.console)
        assert set(check.dom["results"]) == set(REPORTED)
        assert all(caption["shown"] for caption in check.dom["captions"].values())
        assert set(check.dom["categories"]) == set(REPORTED.values())
        # every picture, page and PDF opened in the report's viewer (in the zip form, from the unpacked files)
        assert len(check.dom["viewed"]) == sum(path.endswith((".png", ".pdf", ".html")) for path in REPORTED)


def test_bad_config_fails_before_any_job(tmp_path):
    run = subprocess.run(SNAKEMAKE + ["--directory", str(tmp_path), "--config", "seed=abc"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "config key 'seed' must be of type int, got 'abc'" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()
