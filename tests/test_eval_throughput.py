"""`spade eval throughput`: padding share and useful FLOPs by hand, and a real measurement on the tiny model."""

from __future__ import annotations

import math

from spade.train.bench_step import token_flops
from spade.config import load_config
from spade.evals.throughput import measure, padding_share, useful_flops


def test_padding_share_by_hand():
    # prefill: 2 rows padded to 10 slots each = 20 slots for 15 real tokens (5 wasted);
    # decode: 2 rows x 8 steps = 16 slots for 8 + 3 sampled tokens (5 wasted) -> 10 of 36 slots
    counts = {"prompts": 2, "prompt_tokens": 15, "prefill_tokens": 15, "padded_tokens": 20, "new_tokens": 11,
              "decode_slots": 16}
    assert padding_share(counts) == 10 / 36
    assert math.isnan(padding_share({**counts, "padded_tokens": 0, "decode_slots": 0}))


def test_useful_flops_by_hand():
    shape = {"layers": 2, "width": 8, "non_embedding_params": 1000, "vocab": 50}
    counts = {"prompts": 2, "prompt_tokens": 20, "prefill_tokens": 12, "padded_tokens": 0, "new_tokens": 5,
              "decode_slots": 0}
    # mean prompt 10 tokens: prefilled tokens see 5 on average, sampled ones 10
    assert useful_flops(counts, shape) == 12 * token_flops(shape, 5) + 5 * token_flops(shape, 10)


def test_measure_reports_padding_and_flops(tiny_model_dir):
    from spade.evals.evaluate import hf_context, make_benchmark

    config = load_config(overrides={"eval": {"max_new_tokens": 6, "heldout_library": {
        "environments": ["crt_residue_puzzle"], "episodes": 3, "max_turns": 2}}})
    benchmark = make_benchmark(config, "heldout_library")
    settings = type(config.eval.throughput)(benchmark="heldout_library", items=3, batch_size=3)
    report = measure(benchmark, hf_context(config, tiny_model_dir, "heldout_library", 3), settings)
    assert report["peak_flops_per_s"] > 0
    for name in ("batched", "naive"):
        arm = report[name]
        counts = arm["counts"]
        assert counts["prompts"] >= 3 and counts["new_tokens"] == arm["generated_tokens"] > 0
        assert counts["decode_slots"] >= counts["new_tokens"] and counts["padded_tokens"] >= counts["prefill_tokens"]
        assert 0 <= arm["padding_share"] < 1 and 0 < arm["fraction_of_peak"] == arm["flops_per_s"] / report["peak_flops_per_s"]
    # one item per call: a batch of one row pads nothing
    assert report["naive"]["padding_share"] == 0
    # each arm starts with an empty prefix cache: had the naive arm kept the batched arm's entries (the same
    # prompts and replies), it would prefill about one token per prompt
    batched, naive = report["batched"]["counts"], report["naive"]["counts"]
    assert naive["prompt_tokens"] == batched["prompt_tokens"] and naive["prefill_tokens"] > 2 * naive["prompts"]
