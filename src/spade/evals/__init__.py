"""Benchmarks behind one interface (``spade.evals.base``); importing this package registers them all
(each benchmark module registers its class in ``spade.evals.registry``)."""

from spade.evals import (acebench, aime, bfcl, gem_games, gpqa, heldout, heldout_mechanisms,  # noqa: F401
                         livecodebench, reasoning_gym, tau2)
