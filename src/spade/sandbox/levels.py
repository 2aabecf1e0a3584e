"""Which isolation level to run workers at: the configured one, or for 'auto' the strongest that starts here.

``probe`` starts a ``WorkerProcess`` at a level and pings it (once per level and bwrap path per process);
``resolve_level`` walks the levels from strongest to weakest, refuses a level below
``sandbox.min_isolation`` and warns loudly when the level is weaker than bwrap.
"""

from __future__ import annotations

import logging

from spade.sandbox.config import ISOLATION_LEVELS, SandboxConfig
from spade.sandbox.isolation import IsolationError
from spade.sandbox.worker_process import WorkerLost, WorkerProcess

log = logging.getLogger("spade.sandbox")


def rank(level: str) -> int:
    return ISOLATION_LEVELS.index(level)


_PROBES: dict = {}


def probe(level: str, config: SandboxConfig) -> str:
    """Start a worker at ``level`` and ping it. Returns '' if it works, else the reason it does not."""
    key = (level, config.bwrap_path)
    if key not in _PROBES:
        worker = WorkerProcess(level, config)
        try:
            worker.start()
            _PROBES[key] = ""
        except (WorkerLost, IsolationError, OSError) as exc:
            _PROBES[key] = str(exc)
        finally:
            worker.stop()
    return _PROBES[key]


def resolve_level(config: SandboxConfig) -> str:
    """The isolation level to use: the configured one or, for 'auto', the strongest that starts."""
    candidates = ISOLATION_LEVELS[::-1] if config.isolation == "auto" else (config.isolation,)
    failures = []
    for level in candidates:
        reason = probe(level, config)
        if not reason:
            break
        failures.append(f"{level}: {reason}")
    else:
        raise IsolationError(
            f"no usable isolation level for sandbox.isolation={config.isolation!r}: " + "; ".join(failures)
        )
    if rank(level) < rank(config.min_isolation):
        raise IsolationError(
            f"sandbox isolation '{level}' is below sandbox.min_isolation={config.min_isolation!r} "
            f"(levels weakest to strongest: {list(ISOLATION_LEVELS)}); failures: {'; '.join(failures) or 'none'}"
        )
    if level == "bwrap":
        log.info("sandbox isolation level: bwrap (namespaces, private filesystem view, no network)")
    else:
        log.warning(
            "SANDBOX ISOLATION IS WEAKER THAN bwrap: using '%s' because %s. Generated code can read "
            "host files%s. Set sandbox.min_isolation=bwrap to refuse this.",
            level,
            "; ".join(failures) or "it was requested",
            "" if level == "unshare" else " and reach the network",
        )
    return level
