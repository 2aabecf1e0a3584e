"""OpenRLHF 0.11.2's real train_ppo_ray loop on this CPU (spade.rlhf.cpu): the integration run of the GPU path.

The run itself (about 2.5 minutes: three trainings of 4 SPADE steps) happens once per session in ``integration``;
every test reads what it produced. The stand-in pieces (vllm, flash_attn, the CUDA patches) get their own unit
tests here, in a fresh interpreter with the run's environment, so that nothing of them leaks into this process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("deepspeed", reason="the integration run needs deepspeed 0.19.6 (./setup.sh installs it)")
pytest.importorskip("tensorboard", reason="the integration run reads OpenRLHF's TensorBoard logs")

from spade.rlhf.cpu import SITE, environment  # noqa: E402
from spade.rlhf.cpu.run import IntegrationError, check_resume, metrics_lines, run  # noqa: E402


@pytest.fixture(scope="module")
def integration(tmp_path_factory):
    out = tmp_path_factory.mktemp("integration_openrlhf")
    return {"out": out, "report": run(out)}


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
        assert all(row["openrlhf_num_samples"] == 8 for row in rows)  # one global batch per rollout (item 7)


def test_openrlhf_diagnostics_are_finite_on_every_step(integration):
    diagnostics = integration["report"]["finite_diagnostics"]
    assert sorted(diagnostics) == ["train/logprobs_diff", "train/policy_loss", "train/ppo_kl", "train/vllm_kl"]
    assert all(len(values) == 4 for values in diagnostics.values())
    assert all(abs(v) < 1e-3 for v in diagnostics["train/vllm_kl"])  # engine and actor agree on the log-probs


def test_designer_samples_train_k_steps_after_generation(integration):
    rows = integration["report"]["designer_replay"]
    # set of step 0 closes at step 2 (k = 2); the set of step 2 is flushed at the final step 3
    assert [(row["step"], row["designed_at"]) for row in rows] == [(2, 0), (3, 2)]
    assert all(row["designer_samples"] == 2 and row["openrlhf_share"] == pytest.approx(2 / 8) for row in rows)


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


# ----- the stand-ins, in a fresh interpreter with the run's environment -------------------------------------------
def _in_run_env(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_environment_puts_the_stand_ins_first_only_there():
    env = environment({"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(":") == [str(SITE), "/elsewhere"]
    assert env["DS_ACCELERATOR"] == "cpu"
    import importlib.util

    spec = importlib.util.find_spec("vllm")  # this process (the test suite) never sees the stand-in
    assert spec is None or not spec.origin.startswith(str(SITE))


def test_patches_replace_the_cuda_calls_openrlhf_makes():
    out = _in_run_env("""
import torch, vllm
from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer
from openrlhf.utils.deepspeed import deepspeed as strategy
import flash_attn.bert_padding as bp
torch.cuda.set_device(0); torch.cuda.synchronize()
print(torch.cuda.current_device(), torch.cuda.current_stream(), NaiveReplayBuffer(4).target_device)
print(strategy.init_device_mesh.__wrapped__ is not None, vllm.__file__.endswith('site/vllm/__init__.py'))
x = torch.arange(12.).reshape(2, 3, 2); mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
flat, idx, cu, longest, used = bp.unpad_input(x, mask)
print(flat.tolist(), idx.tolist(), cu.tolist(), longest, bp.pad_input(flat, idx, 2, 3).tolist())
""").splitlines()
    assert out[0] == "cpu None cpu"
    assert out[1] == "True True"
    assert out[2] == ("[[0.0, 1.0], [2.0, 3.0], [8.0, 9.0], [10.0, 11.0]] [0, 1, 4, 5] [0, 2, 4] 2 "
                      "[[[0.0, 1.0], [2.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [8.0, 9.0], [10.0, 11.0]]]")


def test_standin_engine_samples_by_seed_and_takes_synced_weights(tiny_model_dir):
    out = _in_run_env(f"""
import asyncio, torch, vllm
args = vllm.AsyncEngineArgs(model={str(tiny_model_dir)!r}, dtype="bfloat16", seed=0,
                            worker_extension_cls="openrlhf.trainer.ray.vllm_worker_wrap.WorkerWrap")
engine = vllm.AsyncLLMEngine.from_engine_args(args)

async def one(seed):
    params = vllm.SamplingParams(temperature=0.6, max_tokens=5, seed=seed, logprobs=1)
    async for out in engine.generate({{"prompt_token_ids": [1, 5, 9]}}, params, "r"):
        return out.outputs[0]

async def main():
    a, b, c = await one(7), await one(7), await one(8)
    print(a.token_ids == b.token_ids, len(a.logprobs) == len(a.token_ids), a.logprobs[0][a.token_ids[0]].logprob < 0)
    name, param = next(iter(engine.worker.model_runner.params.items()))
    engine.worker.model_runner.load_weights([(name, torch.ones_like(param))])
    print(bool((engine.worker.model_runner.params[name] == 1).all()))
asyncio.run(main())
""").split()
    assert out == ["True", "True", "True", "True"]
