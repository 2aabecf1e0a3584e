"""Setup shared by the training backends (the local trainer, spade.train.trainer, and the OpenRLHF coordinator,
spade.rlhf.coordinator): the environment memory and the corpus sampler a new :class:`spade.core.selfplay.SelfPlay`
is given.
"""

from __future__ import annotations

from spade.config import SpadeConfig
from spade.designer.memory import EnvironmentMemory
from spade.envs.library.registry import library


def fresh_memory(config: SpadeConfig) -> EnvironmentMemory:
    """A new environment memory, seeded from the built-in library (held-out environments excluded) when
    ``memory.seed_library`` is set."""
    memory = EnvironmentMemory(config.memory)
    if config.memory.seed_library:
        heldout = set(config.eval.heldout_library.environments)
        memory.seed_from_library([e for e in library() if e.name not in heldout])
    return memory


def corpus_sampler(config: SpadeConfig, corpus_path):
    """The grounding-document sampler of a run, or None when the corpus is off or absent."""
    if not (config.corpus.enabled and corpus_path):
        return None
    from spade.designer.corpus import CorpusSampler, load_corpus

    kind = "tool_use" if config.selfplay.flavour == "tool_use" else "games"
    return CorpusSampler(load_corpus(corpus_path), config.seed + config.corpus.seed_offset,
                         config.corpus.max_words_for(kind))

