"""The library's registry: ``LibraryEnv`` (one built-in environment), its skills and flavours, and lookup.

``catalog`` registers every entry; importing any module of this package runs the package ``__init__``,
which imports ``catalog``, so the registry is full whenever it is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LIBRARY_DIR = Path(__file__).parent

GAME_SKILLS = (
    "mathematical_reasoning",
    "logical_deduction",
    "spatial_reasoning",
    "pattern_recognition",
    "optimization",
    "causal_inference",
)
TOOL_USE_SKILLS = (
    "api_orchestration",
    "data_retrieval",
    "state_modification",
    "error_recovery",
    "tool_selection",
    "multi_step_workflows",
)
FLAVOURS = ("puzzle", "game", "interactive", "tool_use")


@dataclass(frozen=True)
class LibraryEnv:
    name: str  # unique id, also the file stem
    skill: str  # one of GAME_SKILLS or TOOL_USE_SKILLS
    flavour: str  # one of FLAVOURS
    hidden_state: bool  # multi-turn with hidden state and partial reward
    description: str
    levels: tuple = ("standard",)  # difficulty tiers its constructor takes as ``level`` (first = default)

    @property
    def path(self) -> Path:
        folder = "tool_use" if self.flavour == "tool_use" else "games"
        return LIBRARY_DIR / folder / f"{self.name}.py"

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


_REGISTRY: dict[str, LibraryEnv] = {}


def register_env(entry: LibraryEnv) -> LibraryEnv:
    """Add one environment to the library; names are unique."""
    if entry.name in _REGISTRY:
        raise ValueError(f"library environment {entry.name!r} is already registered")
    allowed = TOOL_USE_SKILLS if entry.flavour == "tool_use" else GAME_SKILLS
    if entry.skill not in allowed:
        raise ValueError(f"library environment {entry.name!r}: skill {entry.skill!r} is not one of {allowed}")
    if entry.flavour not in FLAVOURS:
        raise ValueError(f"library environment {entry.name!r}: flavour {entry.flavour!r} is not one of {FLAVOURS}")
    if not entry.levels or entry.levels[0] != "standard":
        raise ValueError(f"library environment {entry.name!r}: levels {entry.levels!r} must start with 'standard'")
    _REGISTRY[entry.name] = entry
    return entry


def library() -> list[LibraryEnv]:
    """All registered environments, sorted by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def level_kwargs(entry: LibraryEnv, level: str, key: str) -> dict:
    """Constructor arguments that play ``entry`` at ``level`` ({} for 'standard'); ``key`` names the config key."""
    from spade.configtools import ConfigError

    if level not in entry.levels:
        raise ConfigError(f"config key '{key}': library environment {entry.name!r} has no level {level!r}; "
                          f"its levels are {list(entry.levels)}")
    return {} if level == "standard" else {"level": level}


def get_env(name: str) -> LibraryEnv:
    if name not in _REGISTRY:
        raise KeyError(f"no library environment {name!r}; known: {sorted(_REGISTRY)}")
    return _REGISTRY[name]
