"""The rehearsal's report: what each paper run file showed when it trained through the real OpenRLHF + vLLM (CPU
build) + DeepSpeed + Ray path on this CPU (``configs/rehearsal.yaml``, docs/OPENRLHF.md "The rehearsal").

A rehearsal run is a paper run file with the rehearsal's overlay (``openrlhf.cpu``): ``spade train --backend
openrlhf`` launches it twice in one folder, killed after step ``openrlhf.cpu_resume_at``'s generation and resumed
(``spade.rlhf.launch.rehearse``), and every process writes the probes' records (``spade.rlhf.cpu.probes``) under
``<run>/rehearsal/records/<launch>/``. ``run_report`` reads them with the CPU integration run's own check functions
(``spade.rlhf.cpu.checks``: one set for the CPU run, the rehearsal and the preflight) and records, per check, whether
it passed, failed (with the check's message) or does not apply to this run (and why). ``signal`` says whether the run
trained on something: the share of OpenRLHF's prompt groups with a nonzero advantage and the designer advantages. A
run whose groups are all zero proves the plumbing only.

``python -m spade.rlhf.rehearsal report --config C --run-dir D --out F`` (rule ``rehearsal_report``) and
``python -m spade.rlhf.rehearsal table --reports F... --out T`` (rule ``rehearsal_table``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spade.rlhf.cpu import checks
from spade.rlhf.launch import rehearsal_records

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"
# The engine-vs-actor tolerances of the rehearsal's tiny Qwen3 models. The CPU integration run's (0.02, its tiny
# Llama) is below their noise floor: with nothing synced, vLLM's CPU kernels and torch (both bf16) disagree on a
# sampled token's log-prob by up to 0.054 (tiny-qwen3-8b) and 0.53 (tiny-qwen3-30b-a3b: an expert chosen otherwise
# at a near-tie of the router), median 0.005-0.007 (`scripts/engine_noise_floor.py`; another draw: 0.077, 0.27);
# over a whole launch's fresh samples the mean stayed at or below 0.029 in every rehearsal run (a short sample
# reached 0.26). A weight that did not arrive, or log-probs of another distribution (vLLM's processed ones: 2.75 nats
# per token on the integration run), move every sample by far more.
LOGPROB_TOL = 0.5  # mean |engine - actor| over one fresh sample's action tokens (check_engine_logprobs)
MEAN_LOGPROB_TOL = 0.05  # the same, averaged over a launch's fresh samples
# Per greedy token, and the actor's margin under which the continuations may part (greedy check), by architecture:
# the MoE's floor reaches 0.53 at a router near-tie, so 1.0 there. Its power is in the launch's mean: with nothing
# synced 0.018 (MoE) and 0.014 (dense) per token; with a step-2 checkpoint as the actor and the base weights in the
# engine (the weights did not arrive) 0.80 and 0.75 (`scripts/engine_noise_floor.py MODEL CHECKPOINT`).
GREEDY_TOL = {"qwen3_moe": 1.0}
GREEDY_TOL_DEFAULT = 0.5
GREEDY_MEAN_TOL = 0.1  # the mean gap over every greedy token a launch compared


def _outcome(function, *args, **kwargs) -> dict:
    """Run one check: {"status": pass, "result": ...} or {"status": fail, "error": its message}."""
    try:
        return {"status": PASS, "result": function(*args, **kwargs)}
    except (checks.IntegrationError, OSError, KeyError, ValueError) as exc:
        return {"status": FAIL, "error": f"{type(exc).__name__}: {exc}"}


def _not_applicable(why: str) -> dict:
    return {"status": NOT_APPLICABLE, "why": why}


def run_report(config, run_dir: Path) -> dict:
    """Every check of the CPU integration run that applies to one rehearsal run, on its folder and records."""
    from spade.config import logprob_temperature

    run_dir = Path(run_dir)
    records = rehearsal_records(run_dir)
    orl, sp = config.openrlhf, config.selfplay
    steps = sp.total_steps
    launches = ["killed", "resumed"] if orl.cpu_resume_at else ["full"]
    trains_designer = sp.train_designer
    found = {}
    report = {"run": config.run_name, "model_card": config.model_card, "model": config.model.name,
              "architecture": config.model.tiny.architecture,
              "steps": steps, "launches": launches, "resume_at": orl.cpu_resume_at, "checks": found}
    found["real_vllm"] = {name: _outcome(checks.check_real_vllm, records / name) for name in launches}
    found["checkpoints"] = _outcome(checks.check_checkpoints, run_dir, sp.checkpoint_steps())
    found["rewards"] = _outcome(checks.check_rewards, run_dir, steps, config.train.global_batch)
    found["finite_diagnostics"] = _outcome(checks.check_finite, run_dir, steps)
    found["live_metrics"] = _outcome(checks.check_live_metrics, run_dir, config.run_name)
    signal = _signal(records, launches, trains_designer)
    moved = signal["carries_signal"]  # all-zero advantages move no weight: the checks that need a move do not apply
    expected_syncs = {"full": steps, "killed": None, "resumed": 1 + steps - orl.cpu_resume_at}
    found["weight_sync"] = {name: _outcome(checks.check_weight_sync, records / name, expected_syncs[name],
                                           require_change=moved) for name in launches}
    if orl.cpu_resume_at:
        synced = {name: found["weight_sync"][name].get("result") for name in launches}
        found["resumed_from_checkpoint"] = (
            _outcome(checks.check_resumed_sync, synced["killed"], synced["resumed"]) if all(synced.values())
            else {"status": FAIL, "error": "a launch's weight sync check failed: nothing to compare"})
    else:
        found["resumed_from_checkpoint"] = _not_applicable("openrlhf.cpu_resume_at is 0: one launch, no kill")
    killed_after = {"killed": orl.cpu_resume_at}
    found["trained_advantages"] = {name: _outcome(checks.check_trained_advantages, records / name,
                                                  killed_after.get(name)) for name in launches}
    greedy_tol = GREEDY_TOL.get(config.model.tiny.architecture, GREEDY_TOL_DEFAULT)
    found["greedy_after_sync"] = {name: _outcome(checks.check_greedy_after_sync, records / name, greedy_tol,
                                                 GREEDY_MEAN_TOL) for name in launches}
    if logprob_temperature(config) == config.agent.temperature:
        found["engine_logprobs"] = {name: _outcome(checks.check_engine_logprobs, records / name, LOGPROB_TOL,
                                                   MEAN_LOGPROB_TOL) for name in launches}
    else:
        found["engine_logprobs"] = _not_applicable(
            f"train.logprob_temperature {logprob_temperature(config)} differs from the agent's sampling temperature "
            f"{config.agent.temperature}: the actor's log-probs differ from the engine's by design")
    found["params_moved"] = (_outcome(checks.check_params_moved, records / launches[0]) if moved else
                             _not_applicable("no group had a nonzero advantage: plumbing only, nothing moves"))
    if trains_designer:
        found["designer_replay"] = _outcome(checks.check_designer_replay, run_dir, sp.regen_interval, steps)
    else:
        found["designer_replay"] = _not_applicable("selfplay.train_designer is false: no designer samples")
    report["signal"] = signal
    report["verdict"] = verdict(report)
    return report


def _signal(records: Path, launches: list, trains_designer: bool) -> dict:
    """What the run trained on: agent groups with a nonzero advantage (``check_nonzero_groups``'s count, without its
    threshold) and, where the designer trains, its nonzero advantages (``check_designer_advantages``)."""
    groups = [moved for name in launches for moved in checks.advantage_groups(records / name, agent_only=True).values()]
    signal = {"agent_groups": len(groups), "agent_groups_nonzero": sum(groups)}
    if trains_designer:
        designer = {name: _outcome(checks.check_designer_advantages, records / name) for name in launches}
        signal["designer"] = designer
        signal["designer_nonzero"] = sum(d["result"]["nonzero"] for d in designer.values() if d["status"] == PASS)
    carries = signal["agent_groups_nonzero"] > 0 or signal.get("designer_nonzero", 0) > 0
    signal["carries_signal"] = carries
    signal["summary"] = (f"{signal['agent_groups_nonzero']} of {signal['agent_groups']} agent groups nonzero"
                         + (f", {signal['designer_nonzero']} nonzero designer advantages" if trains_designer else "")
                         + ("" if carries else ": plumbing only"))
    return signal


def _leaves(found: dict):
    """(name, outcome) for every check, a per-launch check as name/launch."""
    for name, value in found.items():
        if "status" in value:
            yield name, value
        else:
            for launch, outcome in value.items():
                yield f"{name}/{launch}", outcome


def verdict(report: dict) -> dict:
    outcomes = list(_leaves(report["checks"]))
    failed = [name for name, outcome in outcomes if outcome["status"] == FAIL]
    applicable = [name for name, outcome in outcomes if outcome["status"] != NOT_APPLICABLE]
    return {"passed": len(applicable) - len(failed), "applicable": len(applicable), "failed": failed}


def table(reports: list) -> str:
    """The rehearsal table (Markdown): one row per run with its model, steps, launches, checks and signal, then the
    failed checks with their messages and the overall verdict."""
    lines = ["# REHEARSAL of the paper runs (tiny random models on a CPU: not paper numbers, not toy numbers)", "",
             "| run | model card | tiny model | steps | launches | checks passed | signal |",
             "|---|---|---|---|---|---|---|"]
    failures = []
    for report in reports:
        v = report["verdict"]
        lines.append(f"| {report['run']} | {report['model_card']} | {report['model']} | {report['steps']} | "
                     f"{' + '.join(report['launches'])} | {v['passed']} of {v['applicable']} | "
                     f"{report['signal']['summary']} |")
        for name, outcome in _leaves(report["checks"]):
            if outcome["status"] == FAIL:
                failures.append(f"- {report['run']}, {name}: {outcome['error']}")
    total = sum(r["verdict"]["applicable"] for r in reports)
    passed = sum(r["verdict"]["passed"] for r in reports)
    lines += [""] + (["## Failed checks", ""] + failures + [""] if failures else [])
    state = "PASSED" if not failures else "FAILED"
    lines.append(f"Verdict: {state}, {passed} of {total} checks hold over {len(reports)} runs.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from spade.config import load_config
    from spade.io import atomic_write_json, atomic_write_text
    from spade.paper.report import read_json

    parser = argparse.ArgumentParser(prog="python -m spade.rlhf.rehearsal", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("report", help="one run's rehearsal report (JSON)")
    one.add_argument("--config", required=True, help="the run's job config file")
    one.add_argument("--run-dir", required=True)
    one.add_argument("--out", required=True)
    many = sub.add_parser("table", help="the rehearsal table of every run's report (Markdown)")
    many.add_argument("--reports", nargs="+", required=True)
    many.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "report":
        config = load_config(args.config)
        if not config.openrlhf.cpu:
            print(f"error: {args.config}: openrlhf.cpu is false; a rehearsal report reads a rehearsal run "
                  "(configs/rehearsal.yaml)", file=sys.stderr)
            return 2
        report = run_report(config, Path(args.run_dir))
        atomic_write_json(args.out, report)
        print(f"{report['run']}: {report['verdict']['passed']} of {report['verdict']['applicable']} checks hold; "
              f"{report['signal']['summary']}")
        return 0
    text = table([read_json(Path(path)) for path in args.reports])
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
