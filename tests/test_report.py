"""Tidy results table, benchmark times and the paper scripts, on a hand-made run folder."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spade.paper.report import TIDY_COLUMNS, ReportInputError, read_tidy, stage_times, tidy_results, write_csv_atomic

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "paper" / "scripts"
PROV = {"git_commit": "abc123", "config_hash": "0123456789abcdef", "seed": 7, "spade_version": "0.1.0"}
EVAL_PROV = {**PROV, "eval_seed": 99}

BASE = {"episodes": 16, "mean_turns": 2.0, "mean_generated_tokens": 30.0, "env_failures": 0, "filled_slots": 4,
        "samples": 16, "designer_samples": 0, "win_rate_by_skill": {"logic": 0.5}, "env_win_rates": {"e1": 0.5},
        "train_loss": 0.1, "train_clip_frac": 0.0, "train_kl_mean": 0.0, "train_tokens": 100,
        "train_optimizer_steps": 1, "train_grad_norm": 1.0}
METRICS = [
    {**BASE, "step": 0, "agent_win_rate": 0.25, "agent_mean_return": 0.3, "agent_return_sd": 0.2, "regenerated": True,
     "slots": 4,
     "design_attempts": 6, "designer_valid": 3, "valid_env_rate": 0.5, "backfilled_share": 0.25,
     "empty_share": 0.0, "reject_reasons": {"syntax": 2, "timeout": 1}, "mean_regret": 0.1},
    {**BASE, "step": 1, "agent_win_rate": 0.375, "agent_mean_return": None},
    {**BASE, "step": 2, "agent_win_rate": 0.4375, "agent_mean_return": 0.5, "regenerated": True, "slots": 4,
     "design_attempts": 4, "designer_valid": 1, "valid_env_rate": 0.25, "backfilled_share": 0.75,
     "empty_share": 0.0, "reject_reasons": {"syntax": 3}, "mean_regret": None, "closed_set_step": 0,
     "closed_mean_win_rate": 0.4, "closed_mean_regret": None, "closed_mean_designer_reward": 0.2,
     "closed_learnable_share": 0.5, "closed_distinct_rewards": 2.0, "closed_partial_rewards": None},
    {**BASE, "step": 3, "agent_win_rate": 0.5, "agent_mean_return": 0.6},
]
# training rows: agent_win_rate 4, agent_mean_return 3, valid_env_rate 2, backfilled_share 2, mean_regret 1,
# closed_learnable_share 1; eval rows per file: win_rate, mean_return, 2 environments
TRAINING_ROWS, EVAL_ROWS_PER_FILE = 13, 4


def eval_record(step: int, rates: tuple[float, float], returns: tuple[float, float]) -> dict:
    """An evaluation result as spade.evals writes it (stderr values as the benchmark computed them)."""
    rows = [("win_rate", sum(rates) / 2, 16, 0.1), ("mean_return", sum(returns) / 2, 16, 0.05)]
    rows += [(f"win_rate/{name}", rate, 8, None) for name, rate in zip(("alpha", "beta"), rates)]
    return {"run": "toy", "step": step, "benchmark": "heldout_library", "provenance": EVAL_PROV,
            "rows": [{"run": "toy", "step": step, "benchmark": "heldout_library", "metric": metric, "value": value,
                      "n": n, "stderr": stderr} for metric, value, n, stderr in rows]}


def make_run(root: Path, with_eval: bool = True, name: str = "toy") -> Path:
    run = root / "runs" / name
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in METRICS))
    if with_eval:
        (run / "eval" / "heldout_library").mkdir(parents=True)
        (run / "eval" / "heldout_library" / "step_000000.json").write_text(
            json.dumps(eval_record(0, (0.25, 0.25), (0.2, 0.4))))
        (run / "eval" / "heldout_library" / "step_000004.json").write_text(
            json.dumps(eval_record(4, (0.5, 0.625), (0.5, 0.7))))
    (run / "summary.json").write_text(json.dumps({"run": name, "steps": 4, "checkpoints": ["step_000004"],
                                                  "provenance": PROV}))
    return run


def make_benchmarks(root: Path) -> Path:
    folder = root / "benchmarks"
    folder.mkdir()
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for rule, seconds in {"train_toy": 12.34, "evaluate_toy_000000": 1.2, "evaluate_toy_000004": 2.3,
                          "evaluate_other_000004": 9.0, "build_corpus_games": 0.5, "results_table": 0.25}.items():
        (folder / f"{rule}.tsv").write_text(header + f"{seconds}\t0:00:12\t3.2\t4.6\t0.1\t0.5\t0.0\t0.0\t0.0\t0.0\n")
    return folder


def run_script(name: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


# ----- library ---------------------------------------------------------------------------------------
def test_tidy_columns_rows_and_values(tmp_path):
    df = tidy_results([make_run(tmp_path)])
    assert list(df.columns) == TIDY_COLUMNS
    assert len(df) == TRAINING_ROWS + 2 * EVAL_ROWS_PER_FILE
    assert not df.duplicated(["run", "step", "benchmark", "metric"]).any()
    assert df.equals(df.sort_values(["run", "step", "benchmark", "metric"]).reset_index(drop=True))

    def row(step, benchmark, metric):
        hit = df[(df.step == step) & (df.benchmark == benchmark) & (df.metric == metric)]
        assert len(hit) == 1, (step, benchmark, metric)
        return hit.iloc[0]

    base = row(0, "heldout_library", "win_rate")
    assert base.value == 0.25 and base.n == 16 and base.stderr == 0.1
    assert (base.config_hash, base.git_commit, base.seed, base.run) == ("0123456789abcdef", "abc123", 7, "toy")
    assert base.eval_seed == 99 and pd.isna(row(0, "training", "valid_env_rate").eval_seed)
    env = row(4, "heldout_library", "win_rate/beta")
    assert env.value == 0.625 and env.n == 8 and math.isnan(env.stderr)  # null stderr stays undefined
    assert row(0, "heldout_library", "mean_return").stderr == pytest.approx(0.05)
    assert row(0, "training", "valid_env_rate").n == 6
    assert row(2, "training", "closed_learnable_share").n == 4  # slots of the set closed (designed at step 0)
    assert math.isnan(row(2, "training", "backfilled_share").stderr)
    assert row(1, "training", "agent_win_rate").stderr == pytest.approx(math.sqrt(0.375 * 0.625 / 16))
    training = df[df.benchmark == "training"]
    assert set(training[training.metric == "agent_mean_return"].step) == {0, 2, 3}  # the null is left out
    assert set(training[training.metric == "mean_regret"].step) == {0}
    assert (training.config_hash == "0123456789abcdef").all()


def test_tidy_errors_name_the_folder(tmp_path):
    empty = tmp_path / "runs" / "empty"
    empty.mkdir(parents=True)
    with pytest.raises(ReportInputError, match="empty"):
        tidy_results([empty])
    with pytest.raises(ReportInputError, match="nowhere"):
        tidy_results([tmp_path / "nowhere"])
    run = make_run(tmp_path)
    with pytest.raises(ReportInputError, match="twice"):
        tidy_results([run, run])


def test_csv_round_trip_keeps_types(tmp_path):
    df = tidy_results([make_run(tmp_path)])
    out = write_csv_atomic(df, tmp_path / "deep" / "results.csv")
    assert [p.name for p in out.parent.iterdir()] == ["results.csv"]  # no temporary file left
    back = read_tidy(out)
    pd.testing.assert_frame_equal(back, df)


def test_stage_times(tmp_path):
    times = stage_times(make_benchmarks(tmp_path))
    assert times["train_toy"] == 12.34 and times["evaluate_toy_000004"] == 2.3
    assert "prepare_model" not in times
    (tmp_path / "benchmarks" / "broken.tsv").write_text("x\ty\n1\t2\n")
    with pytest.raises(ReportInputError, match="broken.tsv"):
        stage_times(tmp_path / "benchmarks")


# ----- scripts ---------------------------------------------------------------------------------------
def test_scripts_end_to_end(tmp_path):
    run = make_run(tmp_path)
    benchmarks = make_benchmarks(tmp_path)
    csv = tmp_path / "tables" / "results.csv"
    done = run_script("results_table.py", "--runs", run, "--out", csv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(read_tidy(csv)) == TRAINING_ROWS + 2 * EVAL_ROWS_PER_FILE
    sidecar = json.loads((tmp_path / "tables" / "results.csv.provenance.json").read_text())
    assert {Path(i["path"]).name for i in sidecar["inputs"]} == {"metrics.jsonl", "summary.json",
                                                                "step_000000.json", "step_000004.json"}
    assert all(len(i["sha256"]) == 64 for i in sidecar["inputs"])
    assert sidecar["runs"]["toy"] == {"config_hash": ["0123456789abcdef"], "git_commit": ["abc123"], "seed": ["7"],
                                      "eval_seed": ["99"]}

    fig = tmp_path / "figures" / "toy_training.pdf"
    done = run_script("fig_toy_training.py", "--metrics", run / "metrics.jsonl", "--results", csv, "--run", "toy",
                      "--out", fig, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "missing" not in done.stdout
    assert fig.read_bytes()[:4] == b"%PDF" and fig.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((fig.parent / "toy_training.pdf.provenance.json").read_text())["missing"] == []

    md = tmp_path / "tables" / "toy_run.md"
    done = run_script("table_toy_run.py", "--results", csv, "--metrics", run / "metrics.jsonl", "--benchmarks",
                      benchmarks, "--run", "toy", "--out", md, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text, tex = md.read_text(), md.with_suffix(".tex").read_text()
    cells = {line.split(" | ")[0].strip("| "): line.split(" | ")[1] for line in text.splitlines()[4:]}
    assert cells["Wall time: prepare_model_* [s]"] == "not run"
    assert cells["Wall time: train_toy [s]"] == "12.3"
    assert cells["Wall time: evaluate_toy_* [s]"] == "3.5"  # the other run's evaluation is not counted
    assert cells["Designer valid-environment rate"] == "0.400"  # (3 + 1) / (6 + 4)
    details = {line.split(" | ")[0].strip("| "): line.split(" | ")[2].rstrip(" |") for line in text.splitlines()[4:]}
    assert details["Designer valid-environment rate"] == "4 of 10 design attempts, 95% Wilson interval [0.168, 0.687]"
    assert cells["Designer rejections (reason codes)"] == "6"
    assert details["Designer rejections (reason codes)"] == "syntax 5, timeout 1"
    assert cells["Backfilled share (mean over regenerations)"] == "0.500"
    assert cells["Held-out win rate, base (step 0)"] == "0.250"
    assert cells["Held-out win rate, last checkpoint"] == "0.562"  # (0.5 + 0.625) / 2 = 0.5625
    assert cells["Held-out win rate, change"] == "+0.312"
    assert cells["Training win rate (no hint), first step"] == "0.250"
    assert details["Training win rate (no hint), first step"] == "step 0, n = 16, 95% Wilson interval [0.102, 0.495]"
    assert cells["Training win rate (no hint), last step"] == "0.500"
    assert details["Training win rate (no hint), last step"] == "step 3, n = 16, 95% Wilson interval [0.280, 0.720]"
    # mean 0.3 +- 1.96 x 0.2 / sqrt(16) = 0.3 +- 0.098
    assert details["Training mean return (no hint), first step"] == "step 0, n = 16, 95% interval [0.202, 0.398]"
    assert cells["Training mean return (no hint), last step"] == "0.600"
    assert "interval n/a" in details["Training mean return (no hint), last step"]  # no sd logged that step
    assert "\\toprule" in tex and "\\bottomrule" in tex and "not run" in tex and "prepare\\_model" in tex
    assert "not run: Wall time: prepare_model_*" in done.stdout
    assert (tmp_path / "tables" / "toy_run.md.provenance.json").is_file()


def test_figure_without_eval_files(tmp_path):
    run = make_run(tmp_path, with_eval=False)
    csv = tmp_path / "results.csv"
    assert run_script("results_table.py", "--runs", run, "--out", csv, cwd=tmp_path).returncode == 0
    fig = tmp_path / "fig.pdf"
    done = run_script("fig_toy_training.py", "--metrics", run / "metrics.jsonl", "--results", csv, "--run", "toy",
                      "--out", fig, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "missing: held-out evaluations of run 'toy'" in done.stdout
    assert fig.is_file() and fig.with_suffix(".png").is_file()

    md = tmp_path / "run.md"
    done = run_script("table_toy_run.py", "--results", csv, "--metrics", run / "metrics.jsonl", "--benchmarks",
                      make_benchmarks(tmp_path), "--run", "toy", "--out", md, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| Held-out win rate, base (step 0) | not run |" in md.read_text()


def test_scripts_fail_clearly_on_missing_input(tmp_path):
    done = run_script("fig_toy_training.py", "--metrics", tmp_path / "absent.jsonl", "--results",
                      tmp_path / "absent.csv", "--run", "toy", "--out", tmp_path / "f.pdf", cwd=tmp_path)
    assert done.returncode != 0 and "absent.jsonl" in done.stderr and "Traceback" not in done.stderr
    done = run_script("results_table.py", "--runs", tmp_path / "no_run", "--out", tmp_path / "r.csv", cwd=tmp_path)
    assert done.returncode != 0 and "no_run" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.csv").exists() and not (tmp_path / "f.pdf").exists()


def test_training_figure_shades_each_steps_interval():
    """Panel (a) of the training figure draws the per-step 95% intervals of the run table as bands."""
    import importlib.util

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spade.paper.report import step_interval

    spec = importlib.util.spec_from_file_location("fig_toy_training", SCRIPTS / "fig_toy_training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fig, ax = plt.subplots()
    module.band(ax, METRICS, "win_rate", "C0")
    (collection,) = ax.collections
    ys = collection.get_paths()[0].vertices[:, 1]
    low0, high0 = step_interval(METRICS[0], "win_rate")  # Wilson(4, 16): [0.102, 0.495]
    assert (round(low0, 3), round(high0, 3)) == (0.102, 0.495)
    assert min(ys) == pytest.approx(low0) and max(ys) == pytest.approx(step_interval(METRICS[3], "win_rate")[1])
    module.band(ax, METRICS, "return", "C1")  # only step 0 logs a return sd: a band of one step
    assert len(ax.collections) == 2
    plt.close(fig)


def test_phase_rows_sum_each_phase_over_the_steps():
    """Two steps of 10 s and 30 s: design 4 + 6 = 10 s (25% of 40 s) with 300 of 1,000 prompt tokens prefilled and
    100 sampled (400 tokens / 10 s = 40 tokens/s); the optimizer's row adds its forward/backward tokens; phases no
    step logged and lines without step_seconds are left out."""
    from spade.paper.report import phase_rows

    records = [
        {"step": 0, "step_seconds": 10.0, "phase_design_seconds": 4.0, "phase_design_prompt_tokens": 600,
         "phase_design_prefill_tokens": 200, "phase_design_decode_tokens": 60, "phase_optimizer_seconds": 2.0,
         "train_forward_tokens": 500, "phase_other_seconds": 4.0},
        {"step": 1, "step_seconds": 30.0, "phase_design_seconds": 6.0, "phase_design_prompt_tokens": 400,
         "phase_design_prefill_tokens": 100, "phase_design_decode_tokens": 40, "phase_optimizer_seconds": 3.0,
         "train_forward_tokens": 1500, "phase_other_seconds": 21.0},
        {"step": 2, "agent_win_rate": 0.5},  # a line of an older run: no timings
    ]
    rows = {name: (value, detail) for name, value, detail in phase_rows(records)}
    assert list(rows) == ["Step time: design [s]", "Step time: optimizer [s]", "Step time: other [s]"]
    assert rows["Step time: design [s]"] == (
        "10.0", "25% of 40.0 s over 2 steps; 300 of 1,000 prompt tokens prefilled, 100 sampled, 40 tokens/s")
    assert rows["Step time: optimizer [s]"] == (
        "5.0", "12% of 40.0 s over 2 steps; 2,000 tokens forward and backward, 400 tokens/s")
    assert rows["Step time: other [s]"][0] == "25.0"
    assert phase_rows([{"step": 0, "agent_win_rate": 0.0}]) == []
