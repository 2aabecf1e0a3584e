"""The rehearsal's plan and report logic (configs/rehearsal.yaml, spade.rlhf.rehearsal): Snakemake dry runs and
hand-made reports, nothing trains here (tests/test_rehearsal_run.py trains the CI subset)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_workflow_dag import PAPER_RUNS, ROOT, job_stats, jobs, snakemake

from spade.configtools import deep_merge, load_yaml
from spade.rlhf import rehearsal

FAMILIES = {"qwen3-4b-instruct-2507": ("tiny-qwen3-4b", "qwen3"), "qwen3-8b": ("tiny-qwen3-8b", "qwen3"),
            "qwen3-30b-a3b-instruct-2507": ("tiny-qwen3-30b-a3b", "qwen3_moe")}


def rehearsal_job_config(job: dict, directory: Path) -> dict:
    path = job["shell"].split(" --config ")[1].split()[0]
    return yaml.safe_load((directory / path).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    directory = tmp_path_factory.mktemp("rehearsal_plan")
    run = snakemake(["rehearsal", "-n", "--configfile", str(ROOT / "configs/rehearsal.yaml"), "--directory",
                     str(directory)])
    assert run.returncode == 0, run.stderr[-3000:]
    return {"directory": directory, "stdout": run.stdout, "jobs": jobs(run.stdout)}


def test_the_rehearsal_plans_every_paper_run_through_the_rules_of_all(plan):
    paper = load_yaml(ROOT / "configs/paper.yaml")["runs"]
    assert load_yaml(ROOT / "configs/rehearsal.yaml")["runs"] == paper  # the same run files, in the same order
    trains = {job["wildcards"].removeprefix("run="): job for job in plan["jobs"] if job["rule"] == "train"}
    assert sorted(trains) == sorted(PAPER_RUNS)
    stats = job_stats(plan["stdout"])
    assert stats["rehearsal_report"] == len(PAPER_RUNS) and stats["rehearsal_table"] == 1
    assert stats["paper_pdf"] == 1 and stats["select_checkpoint"] == len(PAPER_RUNS)
    for name, job in trains.items():
        assert " train --backend openrlhf " in job["shell"] and "--image" not in job["shell"]
        assert job.get("threads") == "2"  # every core: one rehearsal training at a time (its Ray cluster is local)
    # an evaluation keeps about one core busy: one thread, so two run at once between the trainings
    evaluations = [job for job in plan["jobs"] if job["rule"] == "evaluate"]
    assert evaluations and all("threads" not in job for job in evaluations)


def test_each_run_keeps_its_run_file_and_gets_the_overlay_and_its_familys_tiny_model(plan):
    layers = load_yaml(ROOT / "configs/rehearsal.yaml")["rehearsal"]
    overlay = load_yaml(ROOT / layers["overlay"])
    for job in (job for job in plan["jobs"] if job["rule"] == "train"):
        settings = rehearsal_job_config(job, plan["directory"])
        run_file = load_yaml(ROOT / f"configs/paper/{settings['run_name']}.yaml")
        tiny, architecture = FAMILIES[run_file["model_card"]]
        card = load_yaml(ROOT / f"configs/models/{tiny}.yaml")
        assert settings["model_card"] == run_file["model_card"] and settings["recipe"] == run_file["recipe"]
        assert settings["model"]["name"] == tiny and settings["model"]["tiny"]["architecture"] == architecture
        assert settings["model"]["source"] == "tiny-random" and settings["model"]["hf_id"] == ""
        assert card["tiny"] == settings["model"]["tiny"]
        assert settings["openrlhf"]["cpu"] is True and settings["openrlhf"]["cpu_resume_at"] == 2
        assert settings["results_dir"].endswith("results/rehearsal")
        # the run file's own settings give way only to the rehearsal's layers (overlay < recipe layer < run entry)
        recipe = layers["recipes"].get(run_file["recipe"])
        changed = deep_merge(deep_merge(overlay, load_yaml(ROOT / recipe) if recipe else {}),
                             layers["runs"].get(settings["run_name"], {}))
        for section in ("baseline", "eval", "selfplay", "designer", "agent", "reward", "memory", "corpus"):
            for key, value in (run_file.get(section) or {}).items():
                if key not in (changed.get(section) or {}):
                    assert settings[section][key] == value, (settings["run_name"], section, key)
        for role in ("agent", "designer"):  # the recipe's sampling is kept
            assert "top_k" not in settings.get(role, {}) or settings[role]["top_k"] == run_file[role]["top_k"]


def test_the_runs_that_need_a_users_setting_get_the_rehearsals_stand_ins(plan):
    trains = {job["wildcards"].removeprefix("run="): job for job in plan["jobs"] if job["rule"] == "train"}
    fixed_ed = rehearsal_job_config(trains["ablation_fixed_ed_30b"], plan["directory"])
    assert fixed_ed["baseline"]["external_serve"] == "base_model" and fixed_ed["designer"]["response_prefix"]
    for size in ("4b", "8b", "30b"):
        rlve = rehearsal_job_config(trains[f"fixed_env_rlve_{size}"], plan["directory"])
        stand_in = str(ROOT / "tests/fixtures/rlve")
        assert rlve["baseline"]["rlve_path"] == stand_in and rlve["sandbox"]["read_only_paths"] == [stand_in]
    tool_use = rehearsal_job_config(trains["spade_tool_use_8b"], plan["directory"])
    assert "class DigitLedger(ToolUseBaseEnv)" in tool_use["designer"]["response_prefix"]


def write_rehearsal(tmp_path, **changes) -> Path:
    data = deep_merge(load_yaml(ROOT / "configs/rehearsal.yaml"), changes)
    path = tmp_path / "rehearsal.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("changes, message", [
    ({"rehearsal": {"models": {"qwen3-8b": None}}}, "model_card 'qwen3-8b' has no tiny model in config key "
                                                      "'rehearsal.models'"),
    ({"rehearsal": {"runs": {"no_such_run": {"seed": 1}}}}, "'rehearsal.runs' names ['no_such_run'], which no run"),
    ({"rehearsal": {"recipes": {"tool_use": {"model": {"name": "x"}}}}}, "'rehearsal.recipes.tool_use' must name a "
                                                                          "YAML mapping without run_name"),
    ({"rehearsal": {"surprise": 1}}, "config key 'rehearsal' must be a mapping with 'overlay'"),
])
def test_bad_rehearsal_settings_name_the_key(tmp_path, changes, message):
    config = write_rehearsal(tmp_path, **changes)
    if changes.get("rehearsal", {}).get("models", {}).get("qwen3-8b", 1) is None:
        data = yaml.safe_load(config.read_text())
        del data["rehearsal"]["models"]["qwen3-8b"]
        config.write_text(yaml.safe_dump(data))
    run = snakemake(["-n", "--configfile", str(config), "--directory", str(tmp_path)])
    assert run.returncode != 0 and message in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]


def test_the_rehearsal_key_needs_a_multi_run_config(tmp_path):
    config = tmp_path / "one.yaml"
    config.write_text(yaml.safe_dump({"rehearsal": {"overlay": "configs/rehearsal/overlay.yaml"}}))
    run = snakemake(["-n", "--configfile", str(ROOT / "configs/default.yaml"), str(config), "--directory",
                     str(tmp_path)])
    assert run.returncode != 0 and "'rehearsal' needs a multi-run config" in run.stdout + run.stderr


def fake_report(run: str, failed: str | None = None) -> dict:
    checks = {"checkpoints": {"status": "pass", "result": []},
              "weight_sync": {"killed": {"status": "pass", "result": []}, "resumed": {"status": "pass", "result": []}},
              "designer_replay": {"status": "n/a", "why": "selfplay.train_designer is false"}}
    if failed:
        checks["weight_sync"]["resumed"] = {"status": "fail", "error": failed}
    report = {"run": run, "model_card": "qwen3-8b", "model": "tiny-qwen3-8b", "steps": 4,
              "launches": ["killed", "resumed"], "checks": checks,
              "signal": {"summary": "0 of 8 agent groups nonzero: plumbing only"}}
    report["verdict"] = rehearsal.verdict(report)
    return report


def test_the_verdict_counts_applicable_checks_and_the_table_names_every_failure():
    good, bad = fake_report("a"), fake_report("b", "sync 2: the actor sent weights 1234, the engine holds 5678")
    assert good["verdict"] == {"passed": 3, "applicable": 3, "failed": []}
    assert bad["verdict"] == {"passed": 2, "applicable": 3, "failed": ["weight_sync/resumed"]}
    text = rehearsal.table([good, bad])
    assert text.startswith("# REHEARSAL") and "| a | qwen3-8b | tiny-qwen3-8b | 4 | killed + resumed | 3 of 3 |" in text
    assert "- b, weight_sync/resumed: sync 2: the actor sent weights 1234" in text
    assert text.rstrip().endswith("Verdict: FAILED, 5 of 6 checks hold over 2 runs.")
    assert rehearsal.table([good]).rstrip().endswith("Verdict: PASSED, 3 of 3 checks hold over 1 runs.")


def test_a_killed_launchs_untrained_generation_is_left_out_of_the_trained_advantages(tmp_path):
    """The killed launch generated step 2 and died before training it: its executor returned those responses, which
    OpenRLHF never trained. check_trained_advantages(killed_after=2) leaves them out; without it they fail the check
    (the mutation: seen on spade_games_4b's first rehearsal, '19 executor responses were not trained')."""
    from spade.rlhf.cpu.checks import IntegrationError, check_trained_advantages

    trained = [{"label": "t:0", "key": "k0", "advantage_min": 0.5, "advantage_max": 0.5}]
    returned = [{"label": "t:0", "key": "k0", "reward": 0.5, "step": 1},
                {"label": "t:9", "key": "k9", "reward": -0.5, "step": 2}]
    for name, rows in (("experiences", trained), ("executor", returned)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert check_trained_advantages(tmp_path, killed_after=2)["samples"] == 1
    with pytest.raises(IntegrationError, match="1 executor responses were not trained"):
        check_trained_advantages(tmp_path)


def test_a_rehearsal_run_is_never_comparable_and_every_label_says_rehearsal(tmp_path):
    """A rehearsal run keeps its paper model card: without its `rehearsal` mark its step-0 values would pass for the
    paper's base-model rows (the mutation: drop the mark, and the 30B base row becomes comparable)."""
    from spade.paper.scale import PAPER_30B, banner, comparable, off_scale, run_scale

    (tmp_path / "spade_games_30b").mkdir()
    summary = {"model_card": "qwen3-30b-a3b-instruct-2507", "steps": 4,
               "rehearsal": {"model": "tiny-qwen3-30b-a3b", "launches": {}}}
    (tmp_path / "spade_games_30b" / "summary.json").write_text(json.dumps(summary))
    scale = run_scale(tmp_path, "spade_games_30b")
    assert not comparable(scale, PAPER_30B, model_only=True)
    assert scale.label() == ("tiny-qwen3-30b-a3b, a rehearsal's tiny model standing in for "
                             "qwen3-30b-a3b-instruct-2507, 4 steps")
    assert banner(off_scale(tmp_path, ["spade_games_30b"], PAPER_30B, model_only=True), [PAPER_30B]).startswith(
        "REHEARSAL, NOT COMPARABLE: values of ours come from run spade_games_30b: tiny-qwen3-30b-a3b, a rehearsal's")
    del summary["rehearsal"]
    (tmp_path / "spade_games_30b" / "summary.json").write_text(json.dumps(summary))
    assert comparable(run_scale(tmp_path, "spade_games_30b"), PAPER_30B, model_only=True)  # the unmarked run would


def test_a_rehearsal_training_starts_over_but_keeps_the_base_models_evaluations(tmp_path, monkeypatch):
    """A rerun after a killed or failed attempt trains from step 0 (its kill and resume are its own): launch removes
    the attempt's files, but not eval/, where the base model's results (step 0) were written before training."""
    import spade.designer.serve as serve
    from spade.config import load_config
    from spade.rlhf import launch

    class Stop(Exception):
        pass

    def stop(*args):
        raise Stop

    monkeypatch.setattr(serve, "local_designer", stop)
    run_dir = tmp_path / "run"
    for path in ("metrics.jsonl", "openrlhf/ckpt/latest", "rehearsal/records/killed/actor_sync.jsonl",
                 "eval/aime/step_000000.json"):
        (run_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / path).write_text("x")
    config = load_config(ROOT / "configs/default.yaml", ROOT / "configs/integration/openrlhf_cpu.yaml",
                         overrides={"openrlhf": {"cpu": True, "cpu_resume_at": 2}})
    with pytest.raises(Stop):
        launch.launch(config, tmp_path / "model", None, run_dir)
    assert sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")) == [
        "eval", "eval/aime", "eval/aime/step_000000.json"]


def write_records(folder: Path, **kinds) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for kind, rows in kinds.items():
        (folder / f"{kind}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_a_tie_at_the_first_greedy_token_skips_that_sync_but_not_every_sync(tmp_path):
    """Seen on spade_tool_use_4b: after one sync the actor's two best first tokens tied exactly (margin 0.0) and the
    engine took the other; nothing of that probe can be compared. One such sync is allowed, all of them fail, and a
    parting where the actor's margin is wide fails as before."""
    from spade.rlhf.cpu.checks import IntegrationError, check_greedy_after_sync

    actor = [{"sync": 1, "tokens": [5, 6], "logprobs": [-1.0, -2.0], "margins": [0.4, 0.4]},
             {"sync": 2, "tokens": [7, 8], "logprobs": [-1.0, -2.0], "margins": [0.0, 0.4]}]
    engine = [{"sync": 1, "engine": 0, "tokens": [5, 6], "logprobs": [-1.01, -2.01]},
              {"sync": 2, "engine": 0, "tokens": [9, 8], "logprobs": [-1.0, -2.0]}]
    rows = check_greedy_after_sync(write_records(tmp_path / "one_tie", actor_greedy=actor, engine_greedy=engine))
    assert [row["tokens_compared"] for row in rows] == [2, 0]
    with pytest.raises(IntegrationError, match="nothing was compared"):
        check_greedy_after_sync(write_records(tmp_path / "all_ties", actor_greedy=actor[1:], engine_greedy=engine[1:]))
    wide = [dict(actor[1], margins=[0.9, 0.4])]
    with pytest.raises(IntegrationError, match="margin of 0.9000 .* does not compute with the actor's weights"):
        check_greedy_after_sync(write_records(tmp_path / "wide", actor_greedy=wide, engine_greedy=engine[1:]))


def test_each_probe_of_a_sync_is_compared_on_its_own(tmp_path):
    """Seen on spade_tool_use_8b's resumed launch with one probe prompt: its first greedy token tied at every sync, so
    nothing was compared and the check failed though the weights had arrived. With several probes per sync
    (probes.PROBE_PROMPTS), a tie on one leaves the others compared; each engine row is matched to the actor's row of
    the same sync and probe (matching by sync alone, the mutation, compares probe 1 with probe 0's actor tokens and
    fails on the wide margin)."""
    from spade.rlhf.cpu.checks import IntegrationError, check_greedy_after_sync
    from spade.rlhf.cpu.probes import PROBE_PROMPTS

    assert len(PROBE_PROMPTS) >= 2 and len(set(PROBE_PROMPTS)) == len(PROBE_PROMPTS)
    actor = [{"sync": 1, "probe": 0, "tokens": [7, 8], "logprobs": [-1.0, -2.0], "margins": [0.0, 0.4]},
             {"sync": 1, "probe": 1, "tokens": [5, 6], "logprobs": [-1.0, -2.0], "margins": [0.5, 0.4]}]
    engine = [{"sync": 1, "engine": 0, "probe": 0, "tokens": [9, 8], "logprobs": [-1.0, -2.0]},
              {"sync": 1, "engine": 0, "probe": 1, "tokens": [5, 6], "logprobs": [-1.01, -2.01]}]
    rows = check_greedy_after_sync(write_records(tmp_path / "probes", actor_greedy=actor, engine_greedy=engine))
    assert [(row["probe"], row["tokens_compared"]) for row in rows] == [(0, 0), (1, 2)]
    with pytest.raises(IntegrationError, match=r"decoded probe 2 after sync 1, which the actor never recorded"):
        check_greedy_after_sync(write_records(tmp_path / "unknown", actor_greedy=actor,
                                              engine_greedy=[dict(engine[1], probe=2)]))
    swapped = [dict(actor[0], probe=1), dict(actor[1], probe=0)]
    with pytest.raises(IntegrationError, match="does not compute with the actor's weights"):
        check_greedy_after_sync(write_records(tmp_path / "swapped", actor_greedy=swapped, engine_greedy=engine))


def test_the_rehearsals_engine_log_prob_check_bounds_each_sample_and_their_mean(tmp_path):
    from spade.rlhf.cpu.checks import IntegrationError, check_engine_logprobs

    def samples(gaps):
        return [{"batch": 1, "label": f"t:{i}", "designer": False, "logprob_gap": gap} for i, gap in enumerate(gaps)]

    noisy = write_records(tmp_path / "noisy", experiences=samples([0.26] + [0.01] * 30))  # one short MoE sample
    assert check_engine_logprobs(noisy, rehearsal.LOGPROB_TOL, rehearsal.MEAN_LOGPROB_TOL)["max_gap"] == 0.26
    shifted = write_records(tmp_path / "shifted", experiences=samples([0.3] * 31))  # every sample moved
    with pytest.raises(IntegrationError, match="mean .* 0.3000 over 31 fresh samples > 0.05"):
        check_engine_logprobs(shifted, rehearsal.LOGPROB_TOL, rehearsal.MEAN_LOGPROB_TOL)


def test_identical_syncs_fail_unless_the_run_had_no_signal(tmp_path):
    """A rehearsal run whose advantages were all 0 (the RLVE stand-in's Parity alone) moves no bf16 weight: its
    syncs are identical, which is no fault of the sync; the checksums must still agree."""
    from spade.rlhf.cpu.checks import IntegrationError, check_weight_sync

    actor = [{"sync": s, "params": 2, "checksum": "same"} for s in (1, 2)]
    engine = [{"sync": s, "worker": 7, "params": 2, "checksum": "same"} for s in (1, 2)]
    records = write_records(tmp_path / "still", actor_sync=actor, engine_sync=engine)
    with pytest.raises(IntegrationError, match="did not change the policy"):
        check_weight_sync(records, 2)
    assert len(check_weight_sync(records, 2, require_change=False)) == 2
    wrong = write_records(tmp_path / "wrong", actor_sync=actor, engine_sync=[dict(engine[0], checksum="other"),
                                                                               engine[1]])
    with pytest.raises(IntegrationError, match="engine worker 7 received"):
        check_weight_sync(wrong, 2, require_change=False)


def test_a_stopped_launch_takes_its_whole_session_with_it(tmp_path):
    """SIGTERM to the training process (Snakemake stopping, scancel) ends the launch's own session too: Ray's daemons
    live there, in no process group of ours. The mutation, no handler, left them running (seen once)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    code = ("import sys; from spade.rlhf.cpu.session import run_session; "
            f"run_session(['bash', '-c', 'sleep 300 & echo $! > {pid_file}; wait'], {{}}, {str(tmp_path)!r}, "
            "timeout_s=600)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    os.kill(child, 0)  # the session's sleep runs
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) != 0

    def alive(pid: int) -> bool:  # a killed process not yet reaped by init is a zombie: dead
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child)


def test_padding_responses_are_left_out_of_the_engine_log_prob_check(tmp_path):
    """All pads of an empty slot are one token at one position: a MoE router near-tie there repeats in each (seen
    at 0.25-0.93 in ablation_no_memory_30b's rehearsal); they train nothing. The mutation, counting them, fails."""
    from spade.rlhf.cpu.checks import IntegrationError, check_engine_logprobs

    rows = ([{"batch": 1, "label": "t:7", "designer": False, "pad": True, "logprob_gap": 0.93}] * 8
            + [{"batch": 1, "label": "t:6", "designer": False, "pad": False, "logprob_gap": 0.02}] * 24)
    records = write_records(tmp_path / "pads", experiences=rows)
    assert check_engine_logprobs(records, rehearsal.LOGPROB_TOL, rehearsal.MEAN_LOGPROB_TOL)["samples"] == 24
    counted = write_records(tmp_path / "counted", experiences=[dict(row, pad=False) for row in rows])
    with pytest.raises(IntegrationError, match="0.9300 over its action tokens > 0.5"):
        check_engine_logprobs(counted, rehearsal.LOGPROB_TOL, rehearsal.MEAN_LOGPROB_TOL)
