"""The sandboxed runtime for generated environments.

Host-side names are loaded lazily (PEP 562) because the worker imports ``spade.sandbox.worker``
inside the sandbox, where only the standard library exists.
"""

_EXPORTS = {
    "SandboxPool": "spade.sandbox.pool",
    "SandboxedEpisode": "spade.sandbox.pool",
    "Outcome": "spade.sandbox.pool",
    "OUTCOME_KINDS": "spade.sandbox.pool",
    "SandboxConfig": "spade.sandbox.config",
    "SandboxLimits": "spade.sandbox.config",
    "ISOLATION_LEVELS": "spade.sandbox.config",
    "IsolationError": "spade.sandbox.isolation",
}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'spade.sandbox' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
