"""OpenRLHF 0.11.2's real train_ppo_ray loop on this CPU (spade.rlhf.cpu): the integration run of the GPU path.

The run itself (three trainings of 4 SPADE steps) happens once per session in ``integration``, and one short run
with the probes' mutations on in ``mutated``; every test reads what they produced. Each check of ``report.json`` is
shown to raise when its property breaks: on the mutated run (weight sync skipped, advantage signs flipped) or on a
tampered copy of the real run's artifacts (the test names which); the checks of records also on hand-made ones.
The stand-in pieces (vllm, flash_attn, the CUDA patches) get their own unit tests here, in a fresh interpreter with
the run's environment, so that nothing of them leaks into this process.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed", reason="the integration run needs deepspeed 0.19.6 (./setup.sh installs it)")
pytest.importorskip("tensorboard", reason="the integration run reads OpenRLHF's TensorBoard logs")

from spade.rlhf.cpu import SITE, environment  # noqa: E402
from spade.rlhf import vllm_cpu  # noqa: E402
from spade.rlhf.cpu.checks import (ADVANTAGE_TOL, IntegrationError, check_designer_advantages,  # noqa: E402
                                   check_designer_replay, check_engine_logprobs, check_finite,
                                   check_greedy_after_sync, check_launches_agree, check_live_metrics,
                                   check_nonzero_groups, check_params_moved, check_policy_moved, check_real_vllm,
                                   check_resume, check_resumed_sync, check_rewards, check_same_weights,
                                   check_trained_advantages, check_weight_sync, metrics_lines)
from spade.rlhf.cpu.patches import canonical_order  # noqa: E402
from spade.rlhf.cpu.probes import FROZEN_PARAM, PROBE_PROMPTS, read_records  # noqa: E402
from spade.rlhf.cpu.run import CONFIGS, run, train  # noqa: E402

MUTATIONS = ("skip_sync", "corrupt_weight", "flip_advantages", "freeze_param", "unweight_designer")


@pytest.fixture(scope="module")
def integration(tmp_path_factory):
    out = tmp_path_factory.mktemp("integration_openrlhf")
    return {"out": out, "report": run(out)}


@pytest.fixture(scope="module")
def mutated(integration, tmp_path_factory):
    """Real mutations of the code path: the same config cut to 2 steps, trained with the engine loading none of the
    weights it receives and receiving the first of each sync changed, OpenRLHF's advantages negated before the actors
    train, one parameter put back after every step, and the executor returning designer samples without their
    up-weight (spade.rlhf.cpu.probes)."""
    out = tmp_path_factory.mktemp("integration_openrlhf_mutated")
    short = out / "short.yaml"
    short.write_text("selfplay: {total_steps: 2, checkpoint_every: 2}\n")
    done = train(CONFIGS + (short,), Path(integration["report"]["model"]), out / "run", out / "run.log",
                 records=out / "records", mutate=MUTATIONS)
    assert done["returncode"] == 0, (out / "run.log").read_text()[-3000:]
    return out


def test_the_full_run_trains_every_step_and_writes_checkpoints(integration):
    report, out = integration["report"], integration["out"]
    assert report["checkpoints"]["full"] == ["global_step2_hf", "global_step4_hf"]
    assert report["checkpoints"]["resumed"] == ["global_step2_hf", "global_step4_hf"]
    assert (out / "full" / "summary.json").is_file()
    assert sorted(p.name for p in (out / "full" / "checkpoints").iterdir()) == ["step_000002", "step_000004"]
    log = (out / "logs" / "full.log").read_text()
    assert all(f"Global step {n}:" in log for n in (1, 2, 3, 4))  # OpenRLHF's own trainer logged 4 optimizer steps


def test_rewards_we_sent_are_the_rewards_openrlhf_logged(integration):
    for name in ("full", "resumed"):
        rows = integration["report"]["rewards"][name]
        assert [row["step"] for row in rows] == [0, 1, 2, 3]
        assert all(row["openrlhf_num_samples"] == 32 for row in rows)  # one global batch per rollout (item 7)


def test_openrlhf_diagnostics_are_finite_on_every_step(integration):
    diagnostics = integration["report"]["finite_diagnostics"]
    assert sorted(diagnostics) == ["train/logprobs_diff", "train/policy_loss", "train/ppo_kl", "train/vllm_kl"]
    assert all(len(values) == 4 for values in diagnostics.values())
    # engine and actor agree on the log-probs of what the engine just sampled (global steps 1-2); at steps 3-4 the
    # batch also holds designer samples replayed k = 2 steps late with the log-probs of the policy that wrote them
    assert all(abs(v) < 1e-3 for v in diagnostics["train/vllm_kl"][:2])


def test_designer_samples_train_k_steps_after_generation(integration):
    rows = integration["report"]["designer_replay"]
    # set of step 0 closes at step 2 (k = 2); the set of step 2 is flushed at the final step 3
    assert [(row["step"], row["designed_at"]) for row in rows] == [(2, 0), (3, 2)]
    assert all(row["designer_samples"] == 2 and row["openrlhf_share"] == pytest.approx(2 / 32) for row in rows)


def test_a_run_killed_after_generation_resumes_to_the_same_metrics(integration):
    report, out = integration["report"], integration["out"]
    assert report["timings"]["killed"]["killed"]
    # killed after step 2's generation: OpenRLHF had saved global_step2, the coordinator spade_state/step_2 (and,
    # had the kill come after the generation of a checkpoint step, a state ahead of the weights)
    assert report["killed_with_latest_checkpoint"] == "global_step2"
    assert report["resume_equal_steps"] == 4
    log = (out / "logs" / "resumed.log").read_text()
    # steps 1-2 trained once (the resume starts from global_step2, not from scratch); 3 and 4 after the resume
    assert (log.count("Global step 1:"), log.count("Global step 2:"), log.count("Global step 4:")) == (1, 1, 1)


def test_spade_metrics_reach_tensorboard_beside_openrlhfs_own(integration):
    """The coordinator (a Ray actor) wrote our tags through spade.train.live_metrics, equal to metrics.jsonl at every step;
    the killed run's step 3 was replaced by the resumed one (run.check_live_metrics raises otherwise)."""
    for name in ("full", "resumed"):
        live = integration["report"]["live_metrics"][name]
        assert live["steps"] == [1, 2, 3, 4] and len(live["agent/return"]) == 4 and live["tags"] > 40, name
    assert len(list((integration["out"] / "resumed" / "tensorboard").glob("events.out.tfevents.*"))) == 2


def test_check_resume_names_the_first_difference(integration, tmp_path):
    full = integration["out"] / "full"
    lines = metrics_lines(full)
    lines[1]["episodes"] += 1
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(IntegrationError, match="step 1: episodes"):
        check_resume(full, tmp_path)


def test_half_the_groups_openrlhf_trained_on_have_a_nonzero_advantage(integration, tmp_path):
    groups = integration["report"]["nonzero_advantage_groups"]
    assert groups["groups"] == 8 and groups["nonzero"] >= 4  # 2 tickets x 4 steps
    # tampered copy: every advantage of the real run's records set to 0 (a task the policy never earns a reward on)
    rows = read_records(integration["out"] / "records" / "full", "experiences")
    _write_jsonl(tmp_path / "experiences.jsonl", [{**row, "advantage_min": 0.0, "advantage_max": 0.0} for row in rows])
    with pytest.raises(IntegrationError, match="0 of 8 groups have a nonzero advantage"):
        check_nonzero_groups(tmp_path)


def test_the_run_generates_with_the_real_vllm(integration, tmp_path):
    for name in ("full", "killed", "resumed"):
        seen = integration["report"]["vllm"][name]
        assert seen["vllm"] == vllm_cpu.VERSION and seen["distribution"] == f"vllm-cpu {vllm_cpu.VERSION}", seen
        assert Path(seen["file"]).is_relative_to(vllm_cpu.SITE)
    rows = read_records(integration["out"] / "records" / "full", "engine")
    _write_jsonl(tmp_path / "engine.jsonl", [{**rows[0], "vllm_file": str(SITE / "vllm" / "__init__.py")}])
    with pytest.raises(IntegrationError, match="expected the real vllm-cpu"):
        check_real_vllm(tmp_path)  # tampered: an engine that imported a stand-in


def test_after_every_sync_the_engine_received_the_actors_weights(integration, mutated):
    syncs = integration["report"]["weight_sync"]
    assert [len(syncs[name]) for name in ("full", "killed", "resumed")] == [4, 2, 3]
    # the resumed launch first pushes the weights it loaded from global_step2: the killed launch's after step 2
    assert integration["report"]["resumed_sync"]["checksum"] == syncs["killed"][1]["checksum"]
    with pytest.raises(IntegrationError, match=r"engine worker \d+ received \[\(1, .* where the actor sent \[\(1, "):
        check_weight_sync(mutated / "records", 2)  # real mutation: the first tensor of each sync arrived changed
    with pytest.raises(IntegrationError, match="the resumed launch first synced weights"):
        check_resumed_sync(syncs["killed"][:1], syncs["resumed"])  # tampered: as if resumed from global_step1


def test_after_every_sync_the_engine_decodes_as_the_actor(integration, mutated):
    """vLLM's loader put every synced weight where its kernels read it: the engine's greedy continuation after each
    sync is the actor's, with its log-probs (what no checksum of the received tensors shows), on every probe prompt."""
    probes = list(range(len(PROBE_PROMPTS)))
    for name, syncs in (("full", [1, 2, 3, 4]), ("killed", [1, 2]), ("resumed", [1, 2, 3])):
        rows = integration["report"]["greedy_after_sync"][name]
        # every sync: a generation call follows even the last one (it finds the prompts exhausted)
        assert sorted((row["sync"], row["probe"]) for row in rows) == [(s, p) for s in syncs for p in probes], name
        assert all(sum(row["tokens_compared"] for row in rows if row["sync"] == s) >= 1 for s in syncs), name
    with pytest.raises(IntegrationError, match="sync 1: engine 0"):
        check_greedy_after_sync(mutated / "records")  # real mutation: the engine loaded none of the synced weights


def test_every_parameter_of_the_actor_moved_in_one_step(integration, mutated):
    moved = integration["report"]["params_moved"]
    assert moved["params"] == 21 and moved["syncs"] == [1, 2]  # 2 layers x 9, embeddings, final norm, lm_head
    with pytest.raises(IntegrationError, match=f"1 of 21 parameters did not change.*{FROZEN_PARAM}"):
        check_params_moved(mutated / "records")  # real mutation: one parameter put back after every step


def test_openrlhf_trained_on_the_advantages_our_executor_returned(integration, mutated):
    for name in ("full", "resumed"):
        trained = integration["report"]["trained_advantages"][name]
        assert trained["positive"] > 0 and trained["negative"] > 0, trained
    assert integration["report"]["trained_advantages"]["full"]["samples"] == 4 * 32
    with pytest.raises(IntegrationError, match="OpenRLHF trained on advantages"):
        check_trained_advantages(mutated / "records")  # real mutation: the sign flipped inside OpenRLHF's trainer


def test_the_policy_moved_toward_positively_rewarded_responses(integration, mutated):
    moved = integration["report"]["policy_moved"]
    assert moved["positive_after"] > moved["positive_before"]
    # real mutation: with the advantages negated the same responses lose probability
    with pytest.raises(IntegrationError, match="it should rise"):
        check_policy_moved(mutated / "records", Path(integration["report"]["model"]),
                           mutated / "run" / "openrlhf" / "ckpt" / "global_step2_hf", mutated / "run")


def test_the_resumed_run_ends_with_the_full_runs_weights(integration):
    same = integration["report"]["same_final_weights"]
    assert same["ratio"] <= same["tolerance"] and same["tensors"] > 10
    ckpt, base = integration["out"] / "full" / "openrlhf" / "ckpt", Path(integration["report"]["model"])
    # tampered: the final weights of a run two steps short, where a resume from the base weights would end
    with pytest.raises(IntegrationError, match="ratio .* > tolerance"):
        check_same_weights(ckpt / "global_step4_hf", ckpt / "global_step2_hf", base, same["tolerance"])


def test_designer_packs_carry_the_coordinators_nonzero_advantages_into_openrlhf(integration, mutated, tmp_path):
    """Each set's two designs differ (one tail broke the module), so the designer samples replayed at steps 2 and 3
    have nonzero advantages, and OpenRLHF trained on exactly the ones our coordinator packed."""
    for name in ("full", "resumed"):  # the resumed launch trains steps 2 and 3 again
        seen = integration["report"]["designer_advantages"][name]
        assert seen["samples"] == 4 and seen["nonzero"] >= 2 and seen["max_abs_difference"] <= ADVANTAGE_TOL, seen
        assert sorted({row["step"] for row in seen["rows"]}) == [2, 3]
        for step in (2, 3):  # a skill's designer advantages sum to 0, and so do the rewards OpenRLHF trained on
            assert abs(sum(row["trained"] for row in seen["rows"] if row["step"] == step)) <= ADVANTAGE_TOL
    # real mutation: the executor returned the designer samples' advantages before the up-weight, and OpenRLHF then
    # negated them (flip_advantages); our coordinator packed the weighted ones
    packed = read_records(mutated / "records", "coordinator_designer")
    trained = {row["key"]: row["advantage_min"] for row in read_records(mutated / "records", "experiences")
               if row["designer"]}
    assert len(packed) == 2 and all(row["weight"] > 1 and row["advantage"] != 0 for row in packed), packed
    assert all(trained[row["key"]] == pytest.approx(-row["advantage"], abs=ADVANTAGE_TOL) for row in packed)
    with pytest.raises(IntegrationError, match="OpenRLHF trained on advantage .*, our coordinator computed"):
        check_designer_advantages(mutated / "records")
    # the mutated run's records with flip_advantages undone: the executor's records agree with what OpenRLHF trained
    # on (check_trained_advantages passes), only the coordinator's side shows the lost up-weight
    unflipped = tmp_path / "unflipped"
    _write_jsonl(unflipped / "experiences.jsonl", [
        {**row, "advantage_min": -row["advantage_max"], "advantage_max": -row["advantage_min"]}
        for row in read_records(mutated / "records", "experiences")])
    for kind in ("executor", "coordinator_designer"):
        shutil.copy(mutated / "records" / f"{kind}.jsonl", unflipped)
    assert check_trained_advantages(unflipped)["samples"] == 2 * 32
    with pytest.raises(IntegrationError, match="OpenRLHF trained on advantage .*, our coordinator computed"):
        check_designer_advantages(unflipped)
    # tampered copy: the two designer samples of step 2 trained on each other's advantage (their sum, and so
    # OpenRLHF's group mean, unchanged), which the executor's records cannot show
    records = integration["out"] / "records" / "full"
    swap = {row["key"]: row for row in integration["report"]["designer_advantages"]["full"]["rows"] if row["step"] == 2}
    (a, b), rows = sorted(swap), read_records(records, "experiences")
    values = {a: swap[b]["trained"], b: swap[a]["trained"]}
    _write_jsonl(tmp_path / "experiences.jsonl", [{**row, "advantage_min": values[row["key"]],
                                                   "advantage_max": values[row["key"]]} if row["key"] in values
                                                  else row for row in rows])
    shutil.copy(records / "coordinator_designer.jsonl", tmp_path)
    with pytest.raises(IntegrationError, match="step 2, designer sample .*OpenRLHF trained on advantage"):
        check_designer_advantages(tmp_path)


def _designer_records(folder: Path, trained: list, packed: list, weight: float = 4.0) -> Path:
    """Hand-made records: OpenRLHF's ``trained`` advantages of designer samples s0, s1, ... (and one agent sample),
    our coordinator's ``packed`` designer advantages of the same samples with ``weight``."""
    experiences = [{"batch": 1, "label": "spade-ticket:0", "group": 0, "key": f"s{i}", "designer": True,
                    "advantage_min": value, "advantage_max": value} for i, value in enumerate(trained)]
    experiences.append({"batch": 1, "label": "spade-ticket:1", "group": 1, "key": "agent", "designer": False,
                        "advantage_min": 3.0, "advantage_max": 3.0})
    _write_jsonl(folder / "experiences.jsonl", experiences)
    _write_jsonl(folder / "coordinator_designer.jsonl", [
        {"step": 2, "pack": 0, "index": i, "group": "set0:logic", "key": f"s{i}", "advantage": value, "weight": weight,
         "reward": value * weight, "pack_shift": 0.0} for i, value in enumerate(packed)])
    return folder


def test_check_designer_advantages_on_hand_made_records(tmp_path):
    seen = check_designer_advantages(_designer_records(tmp_path / "ok", [2.0, -2.0 + 1e-7, 0.0], [0.5, -0.5, 0.0]))
    assert (seen["samples"], seen["nonzero"]) == (3, 2) and seen["max_abs_difference"] == pytest.approx(1e-7)
    with pytest.raises(IntegrationError, match=r"designer sample s1: OpenRLHF trained on advantage -1.5, our "
                                               r"coordinator computed -2.0 \(designer advantage -0.5 x "
                                               r"up-weight 4.0\)"):
        check_designer_advantages(_designer_records(tmp_path / "off", [2.0, -1.5], [0.5, -0.5]))
    with pytest.raises(IntegrationError, match=r"OpenRLHF trained 2 designer samples, our coordinator packed 3; "
                                               r"sequences whose counts differ \(trained, packed\): "
                                               r"\[\('s2', 0, 1\)\]"):
        check_designer_advantages(_designer_records(tmp_path / "lost", [2.0, -2.0], [0.5, -0.5, 0.0]))
    with pytest.raises(IntegrationError, match="OpenRLHF trained 0 designer samples"):
        check_designer_advantages(_designer_records(tmp_path / "none", [], []))
    with pytest.raises(IntegrationError, match="all 2 designer advantages OpenRLHF trained on are 0"):
        check_designer_advantages(_designer_records(tmp_path / "zero", [0.0, 0.0], [0.0, 0.0]))
    folder = _designer_records(tmp_path / "unweighted", [2.0, -2.0], [0.5, -0.5])
    rows = read_records(folder, "coordinator_designer")
    _write_jsonl(folder / "coordinator_designer.jsonl", [{**rows[0], "reward": 0.5}, rows[1]])
    with pytest.raises(IntegrationError, match=r"pack entry carries 0.5, not advantage 0.5 x up-weight 4.0 = 2.0"):
        check_designer_advantages(folder)


def test_engine_logprobs_agree_with_the_actors_on_fresh_samples(integration, tmp_path):
    # each launch trains 2 or 4 steps of 32 samples: 2 designer samples each and the empty slots' pads are left out
    # (seen on CI: 32 fresh samples in the resumed launch's 2 steps)
    for name in ("full", "killed", "resumed"):
        seen = integration["report"]["engine_logprobs"][name]
        assert seen["samples"] >= 24 and seen["max_gap"] <= seen["tol"], (name, seen)
    rows = read_records(integration["out"] / "records" / "full", "experiences")
    _write_jsonl(tmp_path / "experiences.jsonl", [{**row, "logprob_gap": (row["logprob_gap"] or 0) + 0.1}
                                                  for row in rows])
    with pytest.raises(IntegrationError, match=r"mean \|engine - actor\| log-prob"):
        check_engine_logprobs(tmp_path)  # tampered: every fresh sample 0.1 apart


def test_two_launches_of_one_config_train_the_same_weights(integration):
    syncs = integration["report"]["weight_sync"]
    assert integration["report"]["launches_agree"] == {"equal_syncs": 2}
    tampered = [dict(syncs["killed"][0]), dict(syncs["killed"][1], checksum=syncs["full"][2]["checksum"])]
    with pytest.raises(IntegrationError, match="sync 2: the killed launch trained weights"):
        check_launches_agree(syncs["full"], tampered)  # tampered: the second step trained other weights


def _experience(sampled, reward, prompt=(1, 4)):
    import torch
    from types import SimpleNamespace

    tokens = list(prompt) + list(sampled)
    mask = [0] * (len(prompt) - 1) + [1] * len(sampled)  # OpenRLHF's action_mask is aligned to tokens[1:]
    return SimpleNamespace(sequences=torch.tensor([tokens]), action_mask=torch.tensor([mask]),
                           rewards=torch.tensor([reward]), name=f"{list(sampled)}/{reward}")


def test_canonical_order_depends_only_on_contents_and_keeps_groups_whole():
    groups = [[_experience([1, 9], 0.5), _experience([1, 2], -0.5), _experience([1, 2], 0.25)],
              [_experience([3], 1.0), _experience([0, 7], -1.0), _experience([3], 0.0)]]
    arrived = groups[1][::-1] + [groups[0][1], groups[0][2], groups[0][0]]  # another finishing order of the same
    first = [e.name for e in canonical_order(groups[0] + groups[1], 3)]
    assert first == [e.name for e in canonical_order(arrived, 3)]
    assert first == ["[0, 7]/-1.0", "[3]/0.0", "[3]/1.0", "[1, 2]/-0.5", "[1, 2]/0.25", "[1, 9]/0.5"]
    # the sampled tokens come first: another prompt (another run folder's ticket) does not move a group
    moved = [_experience(e.sequences[0].tolist()[2:], float(e.rewards[0]), prompt=(1, 0)) for e in groups[0]]
    assert [e.name for e in canonical_order(moved + groups[1], 3)] == first
    with pytest.raises(ValueError, match="5 experiences do not split into groups of 3"):
        canonical_order(arrived[:5], 3)


# ----- the older checkers on tampered copies of the real run's artifacts ------------------------------------------
def _write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _run_copy(integration, tmp_path, change) -> Path:
    """A copy of the full run's metrics and TensorBoard folders, with ``change(lines)`` applied to metrics.jsonl."""
    full, copy = integration["out"] / "full", tmp_path / "run"
    for folder in ("tensorboard", "openrlhf/tensorboard"):
        shutil.copytree(full / folder, copy / folder)
    lines = metrics_lines(full)
    change(lines)
    _write_jsonl(copy / "metrics.jsonl", lines)
    return copy


def test_check_rewards_raises_when_a_sent_reward_differs_from_openrlhfs(integration, tmp_path):
    copy = _run_copy(integration, tmp_path, lambda lines: lines[2].update(openrlhf_reward_mean=0.5))
    with pytest.raises(IntegrationError, match="step 2: we sent openrlhf_reward_mean = 0.5"):
        check_rewards(copy, 4, 32)


def test_check_live_metrics_raises_when_tensorboard_differs_from_metrics_jsonl(integration, tmp_path):
    copy = _run_copy(integration, tmp_path, lambda lines: lines[1].update(episodes=lines[1]["episodes"] + 1))
    with pytest.raises(IntegrationError, match="step 2: TensorBoard has"):
        check_live_metrics(copy, "integration_openrlhf")


def test_check_designer_replay_raises_when_samples_train_at_the_wrong_step(integration, tmp_path):
    copy = _run_copy(integration, tmp_path, lambda lines: lines[2].update(closed_set_step=1))
    with pytest.raises(IntegrationError, match="step 2 trained designer samples of the set of step 1"):
        check_designer_replay(copy, 2, 4)


def test_check_finite_raises_on_a_nan_diagnostic(integration, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    copy = _run_copy(integration, tmp_path, lambda lines: None)
    writer = SummaryWriter(str(copy / "openrlhf" / "tensorboard" / "tampered"))  # written later: this value wins
    writer.add_scalar("train/ppo_kl", math.nan, 3)
    writer.close()
    with pytest.raises(IntegrationError, match="train/ppo_kl"):
        check_finite(copy, 4)


# ----- the CPU patches, in a fresh interpreter with the run's environment ------------------------------------------
def _in_run_env(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # vLLM's logger writes to stdout: keep the script's own lines
    return "\n".join(line for line in done.stdout.splitlines() if not re.match(r"(DEBUG|INFO|WARNING) \d\d-\d\d ", line))


def test_the_environment_puts_the_patches_first_and_the_real_vllm_only_there():
    env = environment({"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(":") == [str(SITE), "/elsewhere", str(vllm_cpu.SITE)]
    assert env["DS_ACCELERATOR"] == "cpu" and env["VLLM_TARGET_DEVICE"] == "cpu"
    import importlib.util

    assert importlib.util.find_spec("vllm") is None  # the test suite's own interpreter has no vLLM


def test_patches_replace_the_cuda_calls_openrlhf_makes():
    out = _in_run_env("""
import torch, vllm
from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer
from openrlhf.utils.deepspeed import deepspeed as strategy
from openrlhf.utils import distributed_util
import flash_attn.bert_padding as bp
from vllm.platforms.cpu import CpuPlatform
torch.cuda.set_device(0); torch.cuda.synchronize()
print(torch.cuda.current_device(), torch.cuda.current_stream(), NaiveReplayBuffer(4).target_device)
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
print(strategy.init_device_mesh.__wrapped__ is not None, vllm.__version__,
      hasattr(SamplesGenerator._generate_vllm, '__wrapped__'), CpuPlatform().is_sleep_mode_available(),
      distributed_util.stateless_init_process_group.__module__)
x = torch.arange(12.).reshape(2, 3, 2); mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
flat, idx, cu, longest, used = bp.unpad_input(x, mask)
print(flat.tolist(), idx.tolist(), cu.tolist(), longest, bp.pad_input(flat, idx, 2, 3).tolist())
""").splitlines()
    assert out[0] == "cpu None cpu"
    assert out[1] == f"True {vllm_cpu.VERSION} True True spade.rlhf.cpu.patches"
    assert out[2] == ("[[0.0, 1.0], [2.0, 3.0], [8.0, 9.0], [10.0, 11.0]] [0, 1, 4, 5] [0, 2, 4] 2 "
                      "[[[0.0, 1.0], [2.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [8.0, 9.0], [10.0, 11.0]]]")


def test_engines_prefill_whole_prompts_on_the_cpu(integration):
    """The engine-args patch: no chunked prefill, a step's token budget at least the model length (a chunked seeded
    request makes vLLM rewind a CPU generator, which raises). Read from the engine config vLLM builds."""
    out = _in_run_env(f"""
from vllm.engine.arg_utils import EngineArgs
config = EngineArgs(model={integration["report"]["model"]!r}, max_model_len=4096, enforce_eager=True).create_engine_config()
print(config.scheduler_config.enable_chunked_prefill, config.scheduler_config.max_num_batched_tokens)
""").split()
    assert out == ["False", "4096"]
