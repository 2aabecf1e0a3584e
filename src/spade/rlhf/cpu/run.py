"""The CPU integration run of the OpenRLHF path: ``python -m spade.rlhf.cpu.run --out DIR`` (``snakemake
integration_openrlhf``). See ``spade.rlhf.cpu`` for what runs for real and what stands in for CUDA.

Three trainings of the same config (``configs/integration/openrlhf_cpu.yaml`` over ``configs/default.yaml``), each
through ``spade train --backend openrlhf`` in a fresh process with the CPU environment:

1. ``full``: 4 SPADE steps start to end;
2. ``resumed``: the same run killed (SIGKILL to its whole process group, Ray included) as soon as step 2's generation
   has ended (its line is in ``metrics.jsonl``; OpenRLHF has saved ``global_step2`` but not yet trained step 2),
   then started again in the same folder: OpenRLHF resumes its weights from ``global_step2`` and the coordinator
   its SPADE state from ``spade_state/step_2``.

The designer writes every set, two designs of one skill: ``designer.response_prefix`` hands it a whole, valid
environment module ending in an opened comment, so the random model writes only that comment's tail, and a tail
with a sampled line break makes the design invalid (a designer sample with the penalty reward). A skill's designs then
get different rewards, and its designer samples nonzero advantages. The empty slots are backfilled from the
learning-check environment named in ``selfplay.backfill_checks``, whose graded reward the random model sometimes earns,
as it does the valid designs' (the same task): the advantages are not all 0.
Every launch's processes write records (``spade.rlhf.cpu.probes``) to ``records/<full|killed|resumed>/``.

The checks (``spade.rlhf.cpu.checks``) then assert, and ``report.json`` records: the checkpoints of both; for every
step, the reward mean, std and count we sent equal what OpenRLHF logged (TensorBoard ``train/rollout/*``) and the
count is one global batch; designer samples generated at the regeneration step s train at step s + k (OpenRLHF's own
``spade_designer`` log and our ``closed_set_step``); OpenRLHF's ``vllm_kl``, ``logprobs_diff``, ``ppo_kl`` and policy
loss are finite on every step; the resumed run's metrics equal the full run's, step by step; our SPADE metrics in
``<run>/tensorboard/`` equal ``metrics.jsonl`` step by step (each step once after the resume) and OpenRLHF's own
TensorBoard logger wrote under the run's name; at least half of OpenRLHF's prompt groups have a nonzero advantage;
after every weight sync of every launch the engine's weights are bit-identical to the DeepSpeed actor's (checksums on
both sides), the killed launch's syncs are bit-identical to the full run's (two launches of one config train the
same weights), and the resumed launch's first sync carries the weights the killed launch synced last; the advantages
OpenRLHF trained on equal, sample by sample, the rewards our executor returned, and its designer samples' advantages
the ones our coordinator put in its designer packs (at least one nonzero); the responses our executor rewarded
positively are more likely under the final weights than under the base model; the resumed run's final HF
checkpoint is within ``RESUME_WEIGHTS_RTOL`` of the full run's (relative to how far training moved the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from spade.rlhf.cpu import environment, probes
from spade.rlhf.cpu.session import SessionError, run_session
from spade.rlhf.guards import cpu_applicable_guards, failures
from spade.rlhf.cpu.checks import (IntegrationError, check_checkpoints, check_designer_replay, check_engine_logprobs,
                                   check_designer_advantages, check_finite, check_greedy_after_sync,
                                   check_launches_agree, check_live_metrics,
                                   check_nonzero_groups, check_params_moved, check_policy_moved, check_real_vllm,
                                   check_resume, check_resumed_sync, check_rewards, check_same_weights,
                                   check_trained_advantages, check_weight_sync)

ROOT = Path(__file__).resolve().parents[4]
CONFIGS = (ROOT / "configs" / "default.yaml", ROOT / "configs" / "integration" / "openrlhf_cpu.yaml")
KILL_AT_STEP = 2  # killed once this step's generation has ended (its metrics line is written)
RESUME_WEIGHTS_RTOL = 0.1  # resumed-vs-full distance / full-vs-base distance of the final weights (check_same_weights):
# measured 0.016; a run two steps short (as one resumed from the base weights) is at 0.42, the base model at 1


def train_command(configs, model: Path, run_dir: Path) -> list:
    """``spade train --backend openrlhf`` of ``configs`` (in order) with this interpreter."""
    cmd = [sys.executable, "-m", "spade.cli", "train", "--backend", "openrlhf"]
    for path in configs:
        cmd += ["--config", str(path)]
    return cmd + ["--model", str(model), "--run-dir", str(run_dir)]


def train(configs, model: Path, run_dir: Path, log_path: Path, kill_after_step: int | None = None,
          timeout_s: float = 900, records: Path | None = None, mutate: tuple = ()) -> dict:
    """One ``spade train --backend openrlhf`` in its own session (``session.run_session``); with ``kill_after_step``
    the session is killed (SIGKILL) once that step's metrics line appears. ``records``: the folder its processes write
    their records to (``spade.rlhf.cpu.probes``); ``mutate``: the probes' mutations to switch on."""
    env = environment()
    env.pop(probes.MUTATE_ENV, None)
    if records is not None:
        env[probes.RECORDS_ENV] = str(records)
    if mutate:
        env[probes.MUTATE_ENV] = ",".join(mutate)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n===== {' '.join(train_command(configs, model, run_dir))}\n")
        log.flush()
        try:
            return run_session(train_command(configs, model, run_dir), env, run_dir, log, kill_after_step,
                               timeout_s, cwd=ROOT)
        except SessionError as exc:
            raise IntegrationError(f"{exc}; log: {log_path}") from None


def run(out: Path, configs=CONFIGS) -> dict:
    from spade.config import load_config
    from spade.io import atomic_write_json
    from spade.inference.models import prepare_model

    config = load_config(*configs)
    guards = cpu_applicable_guards(environment(), config)  # what applies on a CPU of the preflight's guards
    if failures(guards):
        raise IntegrationError(f"an environment guard failed (spade.rlhf.guards):\n{failures(guards)}")
    out = Path(out).resolve()
    # a leftover run folder would be resumed, not rerun
    for stale in ("full", "resumed", "run", "logs", "records", "report.json"):
        path = out / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    model = prepare_model(config.model, out / "model")
    logs = out / "logs"
    records = out / "records"
    # both runs train in out/run, then move: the tickets' prompt names the run folder, so another folder would give
    # other prompt tokens and other weights, and the resumed run could not be compared with the full one bit for bit
    work = out / "run"
    timings = {"full": train(configs, model, work, logs / "full.log", records=records / "full")}
    if timings["full"]["returncode"] != 0:
        raise IntegrationError(f"the full run failed (exit {timings['full']['returncode']}); log: {logs / 'full.log'}")
    work.rename(out / "full")
    timings["killed"] = train(configs, model, work, logs / "resumed.log", kill_after_step=KILL_AT_STEP,
                              records=records / "killed")
    if not timings["killed"]["killed"]:
        raise IntegrationError(f"the run to be killed ended before step {KILL_AT_STEP}'s generation (exit "
                               f"{timings['killed']['returncode']}); log: {logs / 'resumed.log'}")
    latest = (work / "openrlhf" / "ckpt" / "_actor" / "latest").read_text().strip()
    timings["resumed"] = train(configs, model, work, logs / "resumed.log", records=records / "resumed")
    if timings["resumed"]["returncode"] != 0:
        raise IntegrationError(f"the resumed run failed; log: {logs / 'resumed.log'}")
    work.rename(out / "resumed")
    sp = config.selfplay
    steps = sp.total_steps
    final = {name: out / name / "openrlhf" / "ckpt" / f"global_step{steps}_hf" for name in ("full", "resumed")}
    launches = ("full", "killed", "resumed")
    report = {
        "config": [str(p) for p in configs], "model": str(model), "timings": timings,
        "vllm": {name: check_real_vllm(records / name) for name in launches},
        "guards": [guard.as_dict() for guard in guards],
        "killed_with_latest_checkpoint": latest,
        "checkpoints": {name: check_checkpoints(out / name, sp.checkpoint_steps()) for name in ("full", "resumed")},
        "rewards": {name: check_rewards(out / name, steps, config.train.global_batch) for name in ("full", "resumed")},
        "finite_diagnostics": check_finite(out / "full", steps),
        "designer_replay": check_designer_replay(out / "full", sp.regen_interval, steps),
        "resume_equal_steps": check_resume(out / "full", out / "resumed"),
        "live_metrics": {name: check_live_metrics(out / name, config.run_name) for name in ("full", "resumed")},
        "nonzero_advantage_groups": check_nonzero_groups(records / "full"),
        "weight_sync": {"full": check_weight_sync(records / "full", steps),
                        "killed": check_weight_sync(records / "killed", None),
                        "resumed": check_weight_sync(records / "resumed", 1 + steps - KILL_AT_STEP)},
        "trained_advantages": {name: check_trained_advantages(records / name) for name in ("full", "resumed")},
        "designer_advantages": {name: check_designer_advantages(records / name) for name in ("full", "resumed")},
        "greedy_after_sync": {name: check_greedy_after_sync(records / name) for name in launches},
        "engine_logprobs": {name: check_engine_logprobs(records / name) for name in launches},
        "params_moved": check_params_moved(records / "full"),
        "policy_moved": check_policy_moved(records / "full", model, final["full"], out / "full"),
        "same_final_weights": check_same_weights(final["full"], final["resumed"], model, RESUME_WEIGHTS_RTOL),
    }
    report["launches_agree"] = check_launches_agree(report["weight_sync"]["full"], report["weight_sync"]["killed"])
    report["resumed_sync"] = check_resumed_sync(report["weight_sync"]["killed"], report["weight_sync"]["resumed"])
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
    print(json.dumps({"vllm": report["vllm"]["full"], "timings": report["timings"],
                      "designer_replay": report["designer_replay"],
                      "designer_advantages": {name: {key: value for key, value in seen.items() if key != "rows"}
                                              for name, seen in report["designer_advantages"].items()},
                      "resume_equal_steps": report["resume_equal_steps"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
