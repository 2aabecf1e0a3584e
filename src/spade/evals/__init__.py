"""Benchmarks behind one interface (``spade.evals.base``); importing this package registers them all."""

from spade.evals import (acebench, aime, bfcl, gem_games, gpqa, heldout, heldout_mechanisms,  # noqa: F401
                         livecodebench, reasoning_gym, tau2)
from spade.evals.base import (Benchmark, DataMissing, EvalContext, EvalRun, Item, ItemRecord, Metric,  # noqa: F401
                              evaluate, get_benchmark_class, register_benchmark, registry)
