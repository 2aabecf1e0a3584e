"""The run configuration: layered YAML files merged in order, then validated into typed sections.

Later issues add the recipe, model and training sections; every section is a dataclass whose fields
carry a description and a default (``spade config schema`` prints them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spade.configtools import ConfigError, from_dict, load_yaml, option
from spade.envs.library_check import LibraryCheckConfig
from spade.envs.validate import ValidationConfig
from spade.sandbox.config import SandboxConfig

__all__ = ["SpadeConfig", "ConfigError", "load_config", "deep_merge"]


@dataclass(frozen=True)
class SpadeConfig:
    seed: int = option(0, "Master seed; every random choice of a run derives from it.")
    results_dir: str = option("results", "Folder of all generated outputs (git-ignored).")
    sandbox: SandboxConfig = option(SandboxConfig(), "The sandbox that runs generated code.")
    validation: ValidationConfig = option(ValidationConfig(), "Checks a candidate environment must pass.")
    library_check: LibraryCheckConfig = option(LibraryCheckConfig(), "The built-in library's oracle/random check.")

    def __post_init__(self):
        seeds = self.validation.seeds
        if len(seeds) != 2 or len(set(seeds)) != 2 or not all(isinstance(s, int) for s in seeds):
            raise ConfigError(f"config key 'validation.seeds' must be two different integers, got {seeds!r}")


def deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(*paths: str | Path, overrides: dict | None = None) -> SpadeConfig:
    """Merge the YAML files in order (later wins), apply ``overrides``, validate."""
    data: dict = {}
    for path in paths:
        data = deep_merge(data, load_yaml(path))
    return from_dict(SpadeConfig, deep_merge(data, overrides or {}))
