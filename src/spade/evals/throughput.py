"""Evaluation throughput: batched items against a naive one-item-at-a-time loop, in the same process.

Both arms play the same items with the same per-item seeds through the same backend and benchmark code;
the only difference is how many items share a ``play`` call (and so a generation batch; the backend's
``eval.max_batch_tokens`` applies to both). The report gives
items/s and generated tokens/s of each arm, the ratio batched/naive, and the share of items whose
response is identical in both arms (per-item seeds make it 1.0 up to float rounding from padding).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from spade.configtools import option
from spade.evals.base import Benchmark, EvalContext, select_items


@dataclass(frozen=True)
class ThroughputConfig:
    benchmark: str = option("reasoning_gym_hard", "Benchmark whose items are timed (the issue asks for the "
                            "Reasoning Gym split on the toy model).")
    items: int = option(16, "Items timed in each arm (the first N by id); the naive arm costs about batch_size "
                        "times more per item, so keep it small on a CPU.", min=1)
    batch_size: int = option(16, "Items per play call (and per generation batch) in the batched arm.", min=1)


def _timed(benchmark: Benchmark, ctx: EvalContext, items, batch_size: int) -> tuple[dict, list]:
    started, records = time.perf_counter(), []
    for start in range(0, len(items), batch_size):
        records += benchmark.play(items[start:start + batch_size], ctx)
    seconds = time.perf_counter() - started
    tokens = sum(r.tokens for r in records)
    return {"items": len(records), "seconds": seconds, "generated_tokens": tokens,
            "items_per_s": len(records) / seconds, "tokens_per_s": tokens / seconds,
            "mean_score": sum(r.score for r in records) / len(records)}, records


def measure(benchmark: Benchmark, ctx: EvalContext, config: ThroughputConfig) -> dict:
    """Time the batched arm, then the naive arm (batch 1), on the same items, after an untimed warm-up."""
    items = select_items(benchmark, config.items)
    try:
        benchmark.play(items[:1], ctx)  # first-call costs (threads, allocator, child processes) hit neither arm
        batched, batched_records = _timed(benchmark, ctx, items, config.batch_size)
        naive, naive_records = _timed(benchmark, ctx, items, 1)
    finally:
        ctx.close()
    same = sum(a.response == b.response for a, b in zip(batched_records, naive_records))
    return {"benchmark": benchmark.name, "items": len(items), "batch_size": config.batch_size,
            "batched": batched, "naive": naive,
            "speedup_items_per_s": batched["items_per_s"] / naive["items_per_s"],
            "speedup_tokens_per_s": batched["tokens_per_s"] / naive["tokens_per_s"],
            "identical_responses": same / len(items)}
