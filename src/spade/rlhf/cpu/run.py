"""The CPU integration run of the OpenRLHF path: ``python -m spade.rlhf.cpu.run --out DIR`` (``snakemake
integration_openrlhf``). See ``spade.rlhf.cpu`` for what runs for real and what stands in for CUDA.

Three trainings of the same config (``configs/integration/openrlhf_cpu.yaml`` over ``configs/default.yaml``), each
through ``spade train --backend openrlhf`` in a fresh process with the CPU environment:

1. ``full``: 4 SPADE steps start to end;
2. ``resumed``: the same run killed (SIGKILL to its whole process group, Ray included) as soon as step 2's generation
   has ended (its line is in ``metrics.jsonl``; OpenRLHF has saved ``global_step2`` but not yet trained step 2),
   then started again in the same folder: OpenRLHF resumes its weights from ``global_step2`` and the coordinator
   its SPADE state from ``spade_state/step_2``.

``check`` then asserts, and ``report.json`` records: the checkpoints of both; for every step, the reward mean, std
and count we sent equal what OpenRLHF logged (TensorBoard ``train/rollout/*``) and the count is one global batch;
designer samples generated at the regeneration step s train at step s + k (OpenRLHF's own ``spade_designer`` log
and our ``closed_set_step``); OpenRLHF's ``vllm_kl``, ``logprobs_diff``, ``ppo_kl`` and policy loss are finite on every
step; the resumed run's metrics equal the full run's, step by step; our SPADE metrics in ``<run>/tensorboard/`` equal
``metrics.jsonl`` step by step (each step once after the resume) and OpenRLHF's own TensorBoard logger wrote under
the run's name.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from spade.rlhf.cpu import environment

ROOT = Path(__file__).resolve().parents[4]
CONFIGS = (ROOT / "configs" / "default.yaml", ROOT / "configs" / "integration" / "openrlhf_cpu.yaml")
KILL_AT_STEP = 2  # killed once this step's generation has ended (its metrics line is written)
# metrics that may differ between two correct runs: wall-clock times and the tokens/s derived from them (none of
# the coordinator's keys today; the suffixes keep a timing key added later out of the comparison)
VOLATILE_SUFFIXES = ("_seconds", "_tokens_per_s")


class IntegrationError(RuntimeError):
    """A check of the integration run failed; the message names the step, the key and both values."""


def _train_command(configs, model: Path, run_dir: Path) -> list:
    cmd = [sys.executable, "-m", "spade.cli", "train", "--backend", "openrlhf"]
    for path in configs:
        cmd += ["--config", str(path)]
    return cmd + ["--model", str(model), "--run-dir", str(run_dir)]


def metrics_lines(run_dir: Path) -> list:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train(configs, model: Path, run_dir: Path, log_path: Path, kill_after_step: int | None = None,
          timeout_s: float = 900) -> dict:
    """One ``spade train --backend openrlhf`` in its own session; with ``kill_after_step`` the session is killed
    (SIGKILL) once that step's metrics line appears. Returns {"returncode", "seconds", "killed"}."""
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n===== {' '.join(_train_command(configs, model, run_dir))}\n")
        log.flush()
        proc = subprocess.Popen(_train_command(configs, model, run_dir), env=environment(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        killed = False
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout_s:
                    raise IntegrationError(f"training in {run_dir} ran past {timeout_s:.0f} s; log: {log_path}")
                if kill_after_step is not None and len(metrics_lines(run_dir)) > kill_after_step:
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed = True
                    break
                time.sleep(0.1)
            proc.wait()
        finally:
            if proc.poll() is None or killed:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # Ray's daemons and workers are in the same session
                except ProcessLookupError:
                    pass
    return {"returncode": proc.returncode, "seconds": round(time.monotonic() - started, 1), "killed": killed}


def openrlhf_scalars(run_dir: Path) -> dict:
    """{tag: {global_step: value}} from OpenRLHF's TensorBoard events under the run; a step logged twice (a
    resumed run logs its resumed steps again) keeps the later write."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = Path(run_dir) / "openrlhf" / "tensorboard"
    latest: dict = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            for event in acc.Scalars(tag):
                seen = latest.setdefault(tag, {}).get(event.step)
                if seen is None or event.wall_time >= seen[0]:
                    latest[tag][event.step] = (event.wall_time, event.value)
    return {tag: {step: value for step, (_, value) in steps.items()} for tag, steps in latest.items()}


def check_live_metrics(run_dir: Path, run_name: str) -> dict:
    """Our SPADE metrics, which the coordinator writes to ``<run>/tensorboard/`` through ``spade.train.live_metrics``, equal
    ``metrics.jsonl`` at every step, each step once (a resumed run's rewritten steps replace the killed run's), and
    OpenRLHF's own TensorBoard logger wrote under the run's name."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from spade.train.live_metrics import scalars, tensorboard_dir

    acc = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={"scalars": 0})
    acc.Reload()
    expected: dict = {}
    for line in metrics_lines(run_dir):
        for tag, value in scalars(line).items():
            expected.setdefault(tag, {})[line["step"] + 1] = value
    logged = set(acc.Tags()["scalars"])
    if logged != set(expected):
        raise IntegrationError(f"{run_dir}: TensorBoard tags {sorted(logged ^ set(expected))} are in only one of "
                               "<run>/tensorboard/ and metrics.jsonl")
    for tag, steps in expected.items():
        events = acc.Scalars(tag)
        if [event.step for event in events] != sorted(steps):
            raise IntegrationError(f"{run_dir}: TensorBoard has {tag} at steps {[e.step for e in events]}, "
                                   f"metrics.jsonl at {sorted(steps)}")
        for event in events:  # TensorBoard keeps a float32
            if not (event.value == float(np.float32(steps[event.step])) or (math.isnan(event.value)
                                                                            and math.isnan(steps[event.step]))):
                raise IntegrationError(f"{run_dir}: step {event.step}: TensorBoard has {tag} = {event.value!r}, "
                                       f"metrics.jsonl {steps[event.step]!r}")
    own = Path(run_dir) / "openrlhf" / "tensorboard" / run_name
    if not any(own.glob("events.out.tfevents.*")):
        raise IntegrationError(f"OpenRLHF's TensorBoard logger wrote nothing in {own} (--logger.wandb.run_name)")
    return {"tags": len(expected), "steps": sorted({step for steps in expected.values() for step in steps}),
            "agent/return": [event.value for event in acc.Scalars("agent/return")]}


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def check_rewards(run_dir: Path, steps: int, global_batch: int) -> list:
    """Per step: the rewards we sent (mean, std, count) against OpenRLHF's ``train/rollout/*`` of global step s+1."""
    logged, rows = openrlhf_scalars(run_dir), []
    ours = metrics_lines(run_dir)
    if len(ours) != steps:
        raise IntegrationError(f"{run_dir}/metrics.jsonl has {len(ours)} steps, expected {steps}")
    for line in ours:
        step, row = line["step"], {"step": line["step"]}
        for key, tag in (("openrlhf_reward_mean", "train/rollout/reward_mean"),
                         ("openrlhf_reward_std", "train/rollout/reward_std"),
                         ("openrlhf_num_samples", "train/rollout/num_samples")):
            theirs = logged.get(tag, {}).get(step + 1)
            if theirs is None or not _close(float(line[key]), theirs):
                raise IntegrationError(f"step {step}: we sent {key} = {line[key]!r}, OpenRLHF logged {tag} = {theirs!r}")
            row[key] = line[key]
        if line["openrlhf_num_samples"] != global_batch:
            raise IntegrationError(f"step {step}: {line['openrlhf_num_samples']} responses, not one global batch of "
                                   f"{global_batch}")
        rows.append(row)
    return rows


FINITE_TAGS = ("train/vllm_kl", "train/logprobs_diff", "train/ppo_kl", "train/policy_loss")


def check_finite(run_dir: Path, steps: int) -> dict:
    """OpenRLHF's rollout/actor diagnostics are numbers on every step (issue 15 item 9: a response without action
    tokens made its masked means 0/0, ``openrlhf/models/utils.py:202``)."""
    logged, out = openrlhf_scalars(run_dir), {}
    for tag in FINITE_TAGS:
        values = [logged.get(tag, {}).get(step + 1) for step in range(steps)]
        if any(v is None or not math.isfinite(v) for v in values):
            raise IntegrationError(f"{run_dir}: OpenRLHF logged {tag} = {values} over the steps")
        out[tag] = values
    return out


def check_designer_replay(run_dir: Path, k: int, steps: int) -> list:
    """Designer samples of the set designed at step s reach OpenRLHF's batch at step s + k: our metrics name the
    closed set and count its samples, OpenRLHF's own ``spade_designer`` log (share of designer responses) agrees."""
    logged = openrlhf_scalars(run_dir).get("train/spade_designer", {})
    rows = []
    for line in metrics_lines(run_dir):
        step, count = line["step"], line.get("designer_samples", 0)
        share = logged.get(step + 1)
        if share is None or not _close(share, count / line["openrlhf_num_samples"]):
            raise IntegrationError(f"step {step}: {count} designer samples in our metrics, OpenRLHF logged a "
                                   f"designer share of {share!r}")
        if count:
            closed = line.get("closed_set_step")
            final_flush = step == steps - 1 and closed is not None and 0 <= step - closed < k  # SelfPlay.flush
            if closed is None or (step - closed != k and not final_flush):
                raise IntegrationError(f"step {step} trained designer samples of the set of step {closed!r}, "
                                       f"expected step {step - k}")
            rows.append({"step": step, "designer_samples": count, "designed_at": closed, "openrlhf_share": share})
    if not any(row["step"] - row["designed_at"] == k for row in rows):
        raise IntegrationError(f"no designer sample trained k = {k} steps after its generation: {rows}")
    return rows


def comparable(line: dict) -> dict:
    return {key: value for key, value in line.items() if not key.endswith(VOLATILE_SUFFIXES)}


def check_resume(full: Path, resumed: Path) -> int:
    a, b = metrics_lines(full), metrics_lines(resumed)
    if len(a) != len(b):
        raise IntegrationError(f"the resumed run has {len(b)} metrics lines, the full run {len(a)}")
    for left, right in zip(a, b):
        left, right = comparable(left), comparable(right)
        for key in sorted(set(left) | set(right)):
            if left.get(key) != right.get(key):
                raise IntegrationError(f"step {left.get('step')}: {key} is {left.get(key)!r} in the full run and "
                                       f"{right.get(key)!r} after the kill and resume")
    return len(a)


def check_checkpoints(run_dir: Path, steps: list) -> list:
    ckpt = Path(run_dir) / "openrlhf" / "ckpt"
    missing = [s for s in steps if not (ckpt / f"global_step{s}_hf" / "config.json").is_file()]
    if missing or not (ckpt / "_actor" / "latest").is_file():
        raise IntegrationError(f"{ckpt}: missing Hugging Face checkpoints of steps {missing} or DeepSpeed's latest tag")
    return [f"global_step{s}_hf" for s in steps]


def run(out: Path, configs=CONFIGS) -> dict:
    from spade.config import load_config
    from spade.io import atomic_write_json
    from spade.inference.models import prepare_model

    config = load_config(*configs)
    out = Path(out).resolve()
    for stale in ("full", "resumed", "logs", "report.json"):  # a leftover run folder would be resumed, not rerun
        path = out / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    model = prepare_model(config.model, out / "model")
    logs = out / "logs"
    timings = {"full": train(configs, model, out / "full", logs / "full.log")}
    if timings["full"]["returncode"] != 0:
        raise IntegrationError(f"the full run failed (exit {timings['full']['returncode']}); log: {logs / 'full.log'}")
    timings["killed"] = train(configs, model, out / "resumed", logs / "resumed.log", kill_after_step=KILL_AT_STEP)
    if not timings["killed"]["killed"]:
        raise IntegrationError(f"the run to be killed ended before step {KILL_AT_STEP}'s generation (exit "
                               f"{timings['killed']['returncode']}); log: {logs / 'resumed.log'}")
    latest = (out / "resumed" / "openrlhf" / "ckpt" / "_actor" / "latest").read_text().strip()
    timings["resumed"] = train(configs, model, out / "resumed", logs / "resumed.log")
    if timings["resumed"]["returncode"] != 0:
        raise IntegrationError(f"the resumed run failed; log: {logs / 'resumed.log'}")
    sp = config.selfplay
    steps = sp.total_steps
    report = {
        "config": [str(p) for p in configs], "model": str(model), "timings": timings,
        "killed_with_latest_checkpoint": latest,
        "checkpoints": {name: check_checkpoints(out / name, sp.checkpoint_steps()) for name in ("full", "resumed")},
        "rewards": {name: check_rewards(out / name, steps, config.train.global_batch) for name in ("full", "resumed")},
        "finite_diagnostics": check_finite(out / "full", steps),
        "designer_replay": check_designer_replay(out / "full", sp.regen_interval, steps),
        "resume_equal_steps": check_resume(out / "full", out / "resumed"),
        "live_metrics": {name: check_live_metrics(out / name, config.run_name) for name in ("full", "resumed")},
    }
    atomic_write_json(out / "report.json", report)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spade.rlhf.cpu.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder (model, runs, logs, report.json)")
    parser.add_argument("--config", action="append", help="config files, in order (default: "
                        "configs/default.yaml configs/integration/openrlhf_cpu.yaml)")
    args = parser.parse_args(argv)
    try:
        report = run(Path(args.out), tuple(Path(p) for p in args.config) if args.config else CONFIGS)
    except IntegrationError as exc:
        print(f"integration_openrlhf: FAILED: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"timings": report["timings"], "designer_replay": report["designer_replay"],
                      "resume_equal_steps": report["resume_equal_steps"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
