"""The environment designer's building blocks: skills and curricula, prompts, the grounding corpus
and the environment memory (spec sections 2, 3, 5 and 7). Standard library and pyyaml only."""

from spade.designer.corpus import (
    CorpusConfig,
    CorpusError,
    CorpusSampler,
    Document,
    build_offline_corpus,
    load_corpus,
    truncate_words,
)
from spade.designer.memory import EnvironmentMemory, MemoryConfig, MemoryRecord
from spade.designer.prompts import (
    agent_system_prompt,
    design_prompt,
    extract_hint,
    flavour_kind,
    hint_prompt,
    with_hint,
)
from spade.designer.skills import (
    DOMAINS,
    GAME_SKILLS,
    SKILLS,
    TOOL_USE_SKILLS,
    VARIANTS,
    Domain,
    Skill,
    Variant,
    active_skills,
    get_domain,
    get_skill,
    get_variant,
    sample_domain,
    sample_variant,
    skill_kind,
)

__all__ = [
    "CorpusConfig", "CorpusError", "CorpusSampler", "DOMAINS", "Document", "Domain", "EnvironmentMemory",
    "GAME_SKILLS", "MemoryConfig", "MemoryRecord", "SKILLS", "Skill", "TOOL_USE_SKILLS", "VARIANTS",
    "Variant", "active_skills", "agent_system_prompt", "build_offline_corpus", "design_prompt",
    "extract_hint", "flavour_kind", "get_domain", "get_skill", "get_variant", "hint_prompt",
    "load_corpus", "sample_domain", "sample_variant", "skill_kind", "truncate_words", "with_hint",
]
