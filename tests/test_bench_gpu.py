"""`spade bench gpu` (issue 31): the whole command on the CPU with a tiny shape (the logic the GPU run uses), its
pieces by hand, and the same command on a GPU where there is one."""

from __future__ import annotations

import json

import pytest
import torch

from spade.cli import main
from spade.train.bench_gpu import (build_model, datasheet, decode_prompts, differing_keys, floor_bytes,
                                   synthetic_samples)

TINY = ["--shape", "tiny", "--step-shape", "tiny", "--train-samples", "8", "--train-tokens", "64", "--micro-batch", "4",
        "--decode-batch", "4", "--decode-prompt-tokens", "32", "--decode-new-tokens", "8", "--decode-calls", "4",
        "--step-new-tokens", "8", "--matmul-n", "256", "--probe-mib", "16"]


def _run(tokenizer_dir, tmp_path, device: str, *extra) -> tuple[int, dict]:
    out = tmp_path / "bench_gpu.json"
    code = main(["bench", "gpu", "--tokenizer", str(tokenizer_dir), "--out", str(out), "--device", device, *TINY,
                 *extra])
    return code, json.loads(out.read_text())


def _check(result: dict, device: str) -> None:
    assert result["errors"] == {} and result["info"]["device"].startswith(device)
    assert set(result["seconds"]) == {"probes", "train", "decode", "step"}
    train = result["train"]
    assert train["optimizer_steps"] == 1 and train["master_weights"] and train["dtype"] == "bfloat16"
    assert train["mfu"] == train["achieved_tflops"] / result["peak_tflops"]["value"] > 0
    calls = result["decode"]["calls"]
    assert [c["kind"] for c in calls] == ["new"] * 4 + ["repeat"]
    shapes = [(c["longest_prompt"], c["shortest_prompt"]) for c in calls]
    assert len(set(shapes[:4])) > 1 and shapes[4] == shapes[3]  # new lengths per call; the repeat is the last one
    assert all(c["new_tokens"] == 4 * 8 and c["ms_per_step"] > 0 and c["ratio_to_floor"] > 0 for c in calls)
    for profile in result["decode"]["profiles"].values():
        assert profile["top_by_cpu"] and profile["wall_seconds"] > 0
    step = result["step"]
    assert step["steps"] == 2 and step["same_metrics_resumed"] and step["differing_keys"] == []
    assert step["checkpoint_master_weights"] and step["checkpoint_on_cpu_max_abs_diff"] == 0.0
    assert step["metrics"][0]["backfilled_share"] == 1.0 and step["metrics"][0]["samples"] > 0


def test_the_whole_command_on_the_cpu(tiny_model_dir, tmp_path, capsys):
    """bf16 on the CPU takes the GPU's path through the trainer (float32 masters, their checkpoint and resume)."""
    code, result = _run(tiny_model_dir, tmp_path, "cpu", "--config", "train.dtype=bfloat16")
    assert code == 0, result["errors"]
    _check(result, "cpu")
    assert result["peak_tflops"]["source"] == "measured" and result["datasheet"] is None
    text = capsys.readouterr().out
    assert "MFU" in text and "call 4 repeat" in text and "resumed run equal: True" in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is False)")
def test_the_whole_command_on_cuda(tiny_model_dir, tmp_path):
    code, result = _run(tiny_model_dir, tmp_path, "cuda")
    assert code == 0, result["errors"]
    _check(result, "cuda")
    assert all(p["top_by_device"][0]["self_device_ms"] > 0 for p in result["decode"]["profiles"].values())


def test_datasheet_by_device_name():
    assert datasheet("NVIDIA H200") == (989.0, 4.8)
    assert datasheet("NVIDIA H200 NVL") == (835.0, 4.8)  # the longest matching key wins
    assert datasheet("NVIDIA H100 PCIe") == (756.0, 2.0) and datasheet("NVIDIA H100 80GB HBM3") == (989.0, 3.35)
    assert datasheet("cpu") is None


def test_floor_bytes_by_hand(tiny_model_dir):
    """Tiny Llama in float32 (4 bytes): every weight once, plus keys and values of 2 layers x 2 key/value heads x
    head dim 16 per position, for 3 rows of 10 positions."""
    from transformers import AutoTokenizer

    model = build_model("tiny", AutoTokenizer.from_pretrained(tiny_model_dir), torch.device("cpu"), torch.float32, 0)
    weights = 4 * sum(p.numel() for p in model.parameters())
    assert floor_bytes(model, 3, 10) == weights + 3 * 10 * (2 * 2 * 2 * 16 * 4)


def test_differing_keys_ignore_timings_and_catch_the_rest():
    a = [{"step": 0, "loss": 1.0, "step_seconds": 3.0, "phase_x_tokens_per_s": 9.0}]
    assert differing_keys(a, [{"step": 0, "loss": 1.0, "step_seconds": 4.0, "phase_x_tokens_per_s": 1.0}]) == []
    assert differing_keys(a, [{"step": 0, "loss": 1.5, "step_seconds": 3.0}]) == ["loss"]
    assert differing_keys(a, [a[0], {"step": 1}]) == ["step"]  # a step only one run has
    assert differing_keys([{"step": 0}], [{"step": 0, "extra": None}]) == ["extra"]


def test_decode_prompts_are_new_per_seed_within_three_quarters_to_one():
    one, two = decode_prompts(6, 40, 100, seed=1), decode_prompts(6, 40, 100, seed=2)
    assert one != two and one == decode_prompts(6, 40, 100, seed=1)
    assert all(30 <= len(p) <= 40 for p in one + two) and len({len(p) for p in one}) > 1


def test_synthetic_samples_train_every_sample():
    samples = synthetic_samples(4, 8, 50, seed=0)
    assert [s.advantage for s in samples] == [1.0, -1.0, 1.0, -1.0]
    assert all(s.loss_mask == [0, 0] + [1] * 6 and len(s.token_ids) == 8 for s in samples)


def test_a_failing_section_keeps_what_it_saved_and_the_others_still_run(tiny_model_dir, tmp_path, monkeypatch):
    from spade.config import load_config
    from spade.train import bench_gpu

    def broken(run, device):
        raise RuntimeError("no profiler here")

    monkeypatch.setattr(bench_gpu, "profile_summary", broken)
    config = load_config(overrides={"model_card": "tiny-random"})
    sizes = dict(device="cpu", shape="tiny", train_samples=4, train_tokens=32, micro_batch=2, decode_batch=2,
                 decode_prompt_tokens=16, decode_new_tokens=4, decode_calls=2, sections=("decode", "train"))
    out = tmp_path / "result.json"
    result = bench_gpu.run_bench_gpu(config, tiny_model_dir, out, peak_tflops=1.0, bandwidth_tbs=1.0, **sizes)
    assert "no profiler here" in result["errors"]["decode"] and "train" not in result["errors"]
    decode = json.loads(out.read_text())["decode"]
    assert decode["unfinished"] and [c["kind"] for c in decode["calls"]] == ["new", "new", "repeat"]
    # neither probes nor a datasheet entry: decode has no bandwidth, and says which flag gives one
    result = bench_gpu.run_bench_gpu(config, tiny_model_dir, out, peak_tflops=1.0, **sizes)
    assert "pass --bandwidth-tbs" in result["errors"]["decode"] and result["train"]["mfu"] > 0


def test_an_unknown_shape_or_section_is_named(tmp_path, capsys):
    base = ["bench", "gpu", "--tokenizer", str(tmp_path), "--out", str(tmp_path / "r.json")]
    assert main([*base, "--shape", "llama-70b"]) == 2
    assert "--shape is 'llama-70b'; allowed: smollm2-1.7b, qwen3-1.7b" in capsys.readouterr().err
    assert main([*base, "--sections", "probes,decoding"]) == 2
    assert "--sections names ['decoding']; allowed: probes, train, decode, step" in capsys.readouterr().err
