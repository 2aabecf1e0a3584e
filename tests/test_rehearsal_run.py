"""The rehearsal's CI subset, trained for real: four paper run files, one per family (games on the dense model, games on
the MoE model, tool use, a fixed-pool baseline), through `snakemake rehearsal_table --configfile
configs/rehearsal.yaml` in a fresh folder: each run trains through OpenRLHF + vLLM's CPU build + DeepSpeed + Ray (the rule
`train`, killed after step 2's generation and resumed), and its rehearsal report must pass every check that applies.
About 10 minutes on 2 cores (the full rehearsal, every run file trained, evaluated and rendered: docs/OPENRLHF.md).

The check functions are the CPU integration run's, each shown failing on a real mutation of the code path in
tests/test_integration_openrlhf.py. Here each rehearsal-specific reading is shown failing on a tampered copy of a
real run's records (the test names which)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("deepspeed", reason="the rehearsal trains through deepspeed 0.19.6 (./setup.sh installs it)")
pytest.importorskip("tensorboard", reason="the rehearsal reads OpenRLHF's TensorBoard logs")

from spade.configtools import load_yaml  # noqa: E402
from spade.rlhf import rehearsal  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TWO_NODES = "spade_games_30b"  # under the local SLURM: trained on two nodes (openrlhf.num_nodes 2), as on a cluster
SUBSET = {  # run -> (family, whether its designer trains)
    "spade_games_4b": ("qwen3", True),
    "spade_games_30b": ("qwen3_moe", True),
    "spade_tool_use_8b": ("qwen3", True),
    "fixed_env_grpo_4b": ("qwen3", False),
}


@pytest.fixture(scope="module")
def subset(tmp_path_factory, request):
    """The subset's rehearsal_table, submitted through the cluster profile to the local SLURM (tests/slurm_cluster.py)
    where its packages are installed (CI: SPADE_SLURM=1), else with Snakemake's local executor."""
    directory = tmp_path_factory.mktemp("rehearsal_subset")
    data = load_yaml(ROOT / "configs/rehearsal.yaml")
    data["runs"] = [f"configs/paper/{run}.yaml" for run in SUBSET]
    data["rehearsal"]["runs"] = {run: v for run, v in data["rehearsal"]["runs"].items() if run in SUBSET}
    try:
        slurm = request.getfixturevalue("slurm")
    except pytest.skip.Exception:
        slurm = None
    if slurm is not None:  # two nodes, as the paper's 30B placement asks: its run trains on both
        data["rehearsal"]["runs"].setdefault(TWO_NODES, {})["openrlhf"] = {"num_nodes": 2}
    config = directory / "rehearsal_subset.yaml"
    config.write_text(yaml.safe_dump(data))
    target = ["--configfile", str(config), "--", "rehearsal_table"]
    if slurm is not None:
        slurm.restart("--nodes", "2")  # scripts/local_slurm.sh: two slurmd on this machine, n1 and n2
        try:
            done = slurm.snakemake(directory, *target, timeout=2400)
        finally:
            slurm.restart()
    else:
        done = subprocess.run(["timeout", "-s", "KILL", "2400", sys.executable, "-m", "snakemake", "-c2",
                               "--directory", str(directory), *target], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = directory / "results" / "rehearsal"
    reports = {run: json.loads((out / "rehearsal" / f"{run}.json").read_text()) for run in SUBSET}
    return {"directory": directory, "out": out, "reports": reports, "config": config, "slurm": slurm,
            "table": (out / "tables" / "rehearsal.md").read_text()}


def test_every_run_of_the_subset_passes_every_check_that_applies(subset):
    assert subset["table"].rstrip().splitlines()[-1].startswith("Verdict: PASSED")
    for run, (architecture, trains_designer) in SUBSET.items():
        report = subset["reports"][run]
        assert report["verdict"]["failed"] == [], (run, report["verdict"])
        assert report["launches"] == ["killed", "resumed"] and report["steps"] == 4
        assert report["architecture"] == architecture
        checks = report["checks"]
        assert checks["resumed_from_checkpoint"]["status"] == "pass"
        assert all(checks["real_vllm"][launch]["status"] == "pass" for launch in report["launches"])
        assert (checks["designer_replay"]["status"] == "pass") == trains_designer
        assert report["signal"]["carries_signal"], (run, report["signal"])
        summary = json.loads((subset["out"] / "runs" / run / "summary.json").read_text())
        assert summary["rehearsal"]["model"].startswith("tiny-qwen3-")
        assert set(summary["rehearsal"]["launches"]) == {"killed", "resumed"}
        assert summary["rehearsal"]["launches"]["killed"]["killed"]
        assert summary["checkpoints"] == ["step_000002", "step_000004"]


def test_the_moe_run_synced_its_experts_and_the_tool_use_run_screened_its_designs(subset):
    moe = json.loads((subset["out"] / "models" / "tiny-qwen3-30b-a3b" / "config.json").read_text())
    assert moe["model_type"] == "qwen3_moe" and moe["num_local_experts"] > moe["num_experts_per_tok"] > 1
    rows = subset["reports"]["spade_games_30b"]["checks"]["weight_sync"]["resumed"]["result"]
    assert rows and all(row["params"] > 0 for row in rows)
    config = yaml.safe_load(next((subset["out"] / "configs").glob("spade_tool_use_8b-*.yaml")).read_text())
    assert config["agent"]["enable_thinking"] is True  # the 8B run file's actor thinking switch, kept
    lines = [json.loads(line) for line in (subset["out"] / "runs" / "spade_tool_use_8b" / "metrics.jsonl")
             .read_text().splitlines()]
    assert sum(lines[0]["screen_verdicts"].values()) > 0  # the policy screened the designs (the LLM screen)


def test_through_slurm_each_train_job_got_its_runs_placement_and_started_ray_with_srun(subset):
    """(Local SLURM only.) Every job got what the cluster profile and, for `train`, its run's OpenRLHF placement
    declare (openrlhf.num_nodes nodes with openrlhf.gpus_per_node GPUs each; spade.cluster.allocations), and each
    train job's launch script started one Ray node per node of its allocation as a job step (srun): the 30B run's
    on both nodes, as the paper's two-node placement does on a cluster."""
    if subset["slurm"] is None:
        pytest.skip("the subset ran without the local slurm cluster (SPADE_SLURM=1 ./setup.sh installs it)")
    from spade.cluster import allocations
    from spade.config import load_config
    from spade.rlhf.config import resolve_openrlhf

    def placement(job):
        if job.rule != "train":
            return 1, 0
        orl = resolve_openrlhf(load_config(next((subset["out"] / "configs").glob(f"{job.wildcards}-*.yaml"))))
        return orl.num_nodes, orl.gpus_per_node

    profile = yaml.safe_load((subset["slurm"].profile / "config.yaml").read_text())
    rows = allocations.check(subset["directory"], profile, placement)
    trains = [row for row in rows if row["rule"] == "train"]
    assert sorted(row["wildcards"] for row in trains) == sorted(SUBSET)
    # one (fake) GPU per node asked, as the rehearsal's placement says (the profile's --exclusive then gives all 8)
    assert all(allocations.tres(row["allocated"]["ReqTRES"])["gres/gpu"] == row["allocated"]["NNodes"]
               for row in trains), trains
    for row in trains:
        steps = [line.split("|") for line in subprocess.run(
            ["sacct", "-n", "-P", "-j", row["job_id"], "-o", "JobID,JobName,NodeList"], capture_output=True, text=True,
            timeout=60, check=True).stdout.split()]
        ray_nodes = {node for step, name, node in steps if "." in step and name in ("ray", "bash")}
        two = row["wildcards"] == TWO_NODES
        assert int(row["allocated"]["NNodes"]) == (2 if two else 1), row
        assert len(ray_nodes) == (2 if two else 1), (row, steps)  # a head (ray), and a worker (bash -c) per node


def report_of(subset, run: str, tmp_path: Path, tamper) -> dict:
    """The rehearsal report of a copy of ``run``'s folder whose records ``tamper`` changed."""
    copy = tmp_path / run
    shutil.copytree(subset["out"] / "runs" / run, copy, symlinks=True)
    tamper(copy / "rehearsal" / "records")
    config = next((subset["out"] / "configs").glob(f"{run}-*.yaml"))
    out = tmp_path / f"{run}.json"
    assert rehearsal.main(["report", "--config", str(config), "--run-dir", str(copy), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def rewrite(path: Path, change) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(change(row)) + "\n" for row in rows))


def test_a_sync_the_engine_did_not_receive_fails_the_report(subset, tmp_path):
    def tamper(records):  # the engine worker received other weights in the resumed launch's second sync
        rewrite(records / "resumed" / "engine_sync.jsonl",
                lambda row: {**row, "checksum": "0" * 64} if row["sync"] == 2 else row)

    report = report_of(subset, "spade_games_30b", tmp_path, tamper)
    # the resume check compares the two launches' syncs, which it no longer trusts
    assert report["verdict"]["failed"] == ["weight_sync/resumed", "resumed_from_checkpoint"]
    assert "received [(2, '0000" in report["checks"]["weight_sync"]["resumed"]["error"]


def test_a_resume_from_other_weights_fails_the_report(subset, tmp_path):
    def tamper(records):  # the killed launch's last sync, on both sides, carried other weights than the resumed
        last = max(json.loads(line)["sync"] for line in (records / "killed" / "actor_sync.jsonl").read_text()
                   .splitlines())  # launch's first: as if it resumed from another checkpoint
        for kind in ("actor_sync", "engine_sync"):
            rewrite(records / "killed" / f"{kind}.jsonl",
                    lambda row: {**row, "checksum": "f" * 64} if row["sync"] == last else row)

    report = report_of(subset, "spade_games_4b", tmp_path, tamper)
    assert report["verdict"]["failed"] == ["resumed_from_checkpoint"]
    assert "the resumed launch first synced weights" in report["checks"]["resumed_from_checkpoint"]["error"]


def test_greedy_log_probs_a_little_off_on_every_token_fail_the_report(subset, tmp_path):
    def tamper(records):  # every greedy token of the MoE engine 0.3 apart from the actor's: under the per-token
        rewrite(records / "resumed" / "engine_greedy.jsonl",  # tolerance (1.0), not under the launch's mean (0.1)
                lambda row: {**row, "logprobs": [value - 0.3 for value in row["logprobs"]]})

    report = report_of(subset, "spade_games_30b", tmp_path, tamper)
    assert report["verdict"]["failed"] == ["greedy_after_sync/resumed"]
    assert f"> {rehearsal.GREEDY_MEAN_TOL}" in report["checks"]["greedy_after_sync"]["resumed"]["error"]


def test_engine_log_probs_off_by_the_processed_amount_fail_the_report(subset, tmp_path):
    def tamper(records):  # vLLM's processed log-probs: 2.75 nats per token measured on the integration run
        rewrite(records / "killed" / "experiences.jsonl",
                lambda row: {**row, "logprob_gap": row["logprob_gap"] + 2.75} if row.get("logprob_gap") is not None
                else row)

    report = report_of(subset, "spade_tool_use_8b", tmp_path, tamper)
    assert report["verdict"]["failed"] == ["engine_logprobs/killed"]
    assert f"> {rehearsal.LOGPROB_TOL}" in report["checks"]["engine_logprobs"]["killed"]["error"]
