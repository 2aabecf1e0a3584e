"""`spade bench step` on the tiny model: a step profile without and with the prefix cache, kernels against a peak
measured in the same run. Timings are not asserted (a benchmark, not a timed test); what must hold is that both
profiles come from real one-step runs and that the cache only changes how many prompt tokens were prefilled."""

from __future__ import annotations

import json

from spade.train.bench_step import render, run_bench_step, token_flops
from spade.cli import main
from spade.config import load_config
from spade.core.phases import PHASES
from test_training import TINY_RUN

SMALL_KERNELS = {"prefill_tokens": 64, "decode_context": 32, "decode_tokens": 4, "decode_batch": 2, "train_tokens": 32,
                 "repeats": 1}


def test_step_profile_without_and_with_the_prefix_cache(tiny_model_dir, tmp_path):
    config = load_config(overrides=TINY_RUN)
    result = run_bench_step(config, tiny_model_dir, None, tmp_path, **SMALL_KERNELS)
    off, on = result["profiles"]["prefix_cache_off"], result["profiles"]["prefix_cache_on"]
    assert off["prefix_cache_mb"] == 0 and on["prefix_cache_mb"] == config.inference.prefix_cache_mb > 0
    assert (tmp_path / "prefix_cache_off" / "metrics.jsonl").is_file() and off["step"] == on["step"] == 0
    for name in ("design", "no_hint_arm", "optimizer"):
        assert off[f"phase_{name}_seconds"] > 0 and on[f"phase_{name}_seconds"] > 0, name
    prompt = sum(off.get(f"phase_{p}_prompt_tokens", 0) for p in PHASES)
    assert prompt == sum(off.get(f"phase_{p}_prefill_tokens", 0) for p in PHASES)  # no cache: everything prefilled
    assert sum(on.get(f"phase_{p}_prefill_tokens", 0) for p in PHASES) < prompt  # the 2-turn plays reuse turn 1
    assert result["peak_flops_per_s"] > 0
    for name in ("prefill", "decode_stock", "decode", "train"):
        kernel = result["kernels"][name]
        assert kernel["flops"] > 0 and kernel["seconds"] > 0
        assert kernel["fraction_of_peak"] == kernel["flops_per_s"] / result["peak_flops_per_s"]
    design = result["kernels"]["design_samples"]
    assert design["samples"] == config.train.micro_batch and design["prompt_tokens"] == SMALL_KERNELS["train_tokens"]
    assert design["shared"] > 0 and design["one_pass_per_sample"] > 0
    text = render(result)
    assert "matmul peak" in text and "no_hint_arm" in text and "of peak" in text and "decode kernels" in text
    assert "design samples" in text
    mixed = result["kernels"]["mixed_step"]
    assert mixed["design_samples"] == config.train.micro_batch and mixed["agent_samples"] % config.train.micro_batch
    assert mixed["fixed_groups"] > 0 and mixed["length_groups"] > 0 and "optimizer step" in text


def test_token_flops_by_hand():
    """2 x (non-embedding parameters + output projection) + 4 x layers x context x width."""
    shape = {"layers": 2, "width": 8, "non_embedding_params": 1000, "vocab": 50}
    assert token_flops(shape, 10) == 2 * (1000 + 50 * 8) + 4 * 2 * 10 * 8


def test_cli_writes_the_result(tiny_model_dir, tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps(TINY_RUN))
    args = ["bench", "step", "--config", str(config), "--model", str(tiny_model_dir), "--out-dir", str(tmp_path / "b")]
    args += [f"--{key.replace('_', '-')}={value}" for key, value in SMALL_KERNELS.items()]
    assert main(args) == 0
    assert "matmul peak" in capsys.readouterr().out
    saved = json.loads((tmp_path / "b" / "bench_step.json").read_text())
    assert set(saved["profiles"]) == {"prefix_cache_off", "prefix_cache_on"} and saved["provenance"]["seed"] == 0
