"""The benchmark registry: each benchmark module registers its class under its name with ``register_benchmark``.

Importing this module runs the package ``spade.evals`` first, whose ``__init__`` imports every benchmark
module, so the registry is full whenever ``registry`` or ``get_benchmark_class`` reads it.
"""

from __future__ import annotations

from spade.configtools import ConfigError

_REGISTRY: dict[str, type] = {}


def register_benchmark(cls: type) -> type:
    """Class decorator; names are unique."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY:
        raise ValueError(f"benchmark {cls.name!r} is already registered (by {_REGISTRY[cls.name].__name__})")
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type]:
    """Every registered benchmark class by name."""
    return dict(_REGISTRY)


def get_benchmark_class(name: str) -> type:
    known = registry()
    if name not in known:
        raise ConfigError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(sorted(known))}")
    return known[name]
