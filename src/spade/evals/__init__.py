"""Benchmarks behind one interface (``spade.evals.base``); importing this package registers them all."""

from spade.evals import aime, bfcl, gem_games, gpqa, heldout, livecodebench, reasoning_gym  # noqa: F401
from spade.evals.base import (Benchmark, DataMissing, EvalContext, EvalRun, Item, ItemRecord, Metric,  # noqa: F401
                              evaluate, get_benchmark_class, register_benchmark, registry)
