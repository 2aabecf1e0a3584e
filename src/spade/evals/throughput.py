"""Evaluation throughput: batched items against a naive one-item-at-a-time loop, in the same process.

Both arms play the same items with the same per-item seeds through the same backend and benchmark code;
the only difference is how many items share a ``play`` call (and so a generation batch; the backend's
``eval.max_batch_tokens`` applies to both). The report gives
items/s and generated tokens/s of each arm, the ratio batched/naive, and the share of items whose
response is identical in both arms (per-item seeds make it 1.0 up to float rounding from padding).

With the Hugging Face backend (which counts its tokens, ``HFBackend.totals``) each arm also reports:
- ``padding_share``: the share of the batch slots computed for nothing: prefill slots of padding
  (``padded_tokens - prefill_tokens``) plus decode slots of rows that had already stopped while their batch went on
  (``decode_slots - new_tokens``), over all slots (``padded_tokens + decode_slots``). The backend sorts a call's
  prompts by length before batching them, which keeps the first part small; the second is what a batch of replies
  of unequal length costs.
- ``flops_per_s`` and ``fraction_of_peak``: useful work (prefilled and sampled tokens, ``spade.train.bench_step.token_flops``
  with the mean prompt length as context) per second, against an fp32 matmul peak measured in the same run.
"""

from __future__ import annotations

import time

from spade.evals.base import Benchmark, EvalContext, select_items
from spade.evals.config import ThroughputConfig


COUNTS = ("prompts", "prompt_tokens", "prefill_tokens", "padded_tokens", "new_tokens", "decode_slots")


def padding_share(counts: dict) -> float:
    """Share of computed batch slots that held no real token (module docstring); nan when nothing was computed."""
    slots = counts["padded_tokens"] + counts["decode_slots"]
    wasted = counts["padded_tokens"] - counts["prefill_tokens"] + counts["decode_slots"] - counts["new_tokens"]
    return wasted / slots if slots else float("nan")


def useful_flops(counts: dict, shape: dict) -> float:
    """Estimated FLOPs of the prefilled and sampled tokens (module docstring)."""
    from spade.train.bench_step import token_flops

    context = counts["prompt_tokens"] / counts["prompts"] if counts["prompts"] else 0.0
    return counts["prefill_tokens"] * token_flops(shape, context / 2) + counts["new_tokens"] * token_flops(shape, context)


def _timed(benchmark: Benchmark, ctx: EvalContext, items, batch_size: int) -> tuple[dict, list]:
    cache = getattr(ctx.backend, "cache", None)
    if cache is not None:  # each arm starts cold: neither reuses the prompts the other (or the warm-up) processed
        cache.clear()
    totals = getattr(ctx.backend, "totals", None)
    before = dict(totals) if isinstance(totals, dict) else None
    started, records = time.perf_counter(), []
    for start in range(0, len(items), batch_size):
        records += benchmark.play(items[start:start + batch_size], ctx)
    seconds = time.perf_counter() - started
    tokens = sum(r.tokens for r in records)
    arm = {"items": len(records), "seconds": seconds, "generated_tokens": tokens,
           "items_per_s": len(records) / seconds, "tokens_per_s": tokens / seconds,
           "mean_score": sum(r.score for r in records) / len(records)}
    if before is not None:
        arm["counts"] = {key: totals[key] - before[key] for key in COUNTS}
        arm["padding_share"] = padding_share(arm["counts"])
    return arm, records


def measure(benchmark: Benchmark, ctx: EvalContext, config: ThroughputConfig) -> dict:
    """Time the batched arm, then the naive arm (batch 1), on the same items, after an untimed warm-up."""
    items = select_items(benchmark, config.items)
    try:
        benchmark.play(items[:1], ctx)  # first-call costs (threads, allocator, child processes) hit neither arm
        batched, batched_records = _timed(benchmark, ctx, items, config.batch_size)
        naive, naive_records = _timed(benchmark, ctx, items, 1)
        peak = _add_flops(ctx, (batched, naive))
    finally:
        ctx.close()
    same = sum(a.response == b.response for a, b in zip(batched_records, naive_records))
    return {"benchmark": benchmark.name, "items": len(items), "batch_size": config.batch_size,
            "batched": batched, "naive": naive,
            "speedup_items_per_s": batched["items_per_s"] / naive["items_per_s"],
            "speedup_tokens_per_s": batched["tokens_per_s"] / naive["tokens_per_s"],
            "identical_responses": same / len(items), **peak}


def _add_flops(ctx: EvalContext, arms) -> dict:
    """Achieved FLOP/s of each arm against a matmul peak measured now (HF backend only; module docstring)."""
    model = getattr(ctx.backend, "model", None)
    if model is None or any("counts" not in arm for arm in arms):
        return {}
    from spade.train.bench_step import MATMUL_N, matmul_peak, model_shape

    peak, shape = matmul_peak(), model_shape(model)
    for arm in arms:
        arm["flops_per_s"] = useful_flops(arm["counts"], shape) / arm["seconds"]
        arm["fraction_of_peak"] = arm["flops_per_s"] / peak
    return {"peak_flops_per_s": peak, "matmul_n": MATMUL_N}
