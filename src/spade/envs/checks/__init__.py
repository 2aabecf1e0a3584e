"""Learning-check environments (issue 16): tasks a very small model wins sometimes, so a trainer that works must
raise its win rate within a few steps.

They are not paper environments. Nothing draws them unless a config asks for them by name
(``baseline.pool_source: checks``, the ``learning_check`` benchmark, ``selfplay.backfill_checks`` of the OpenRLHF
CPU integration run): they are never backfilled unasked, seeded into the
designer's memory, offered to a library pool or counted by ``spade env check-library``. Like the library, the
files are data, run only inside the sandbox.
"""

from __future__ import annotations

from pathlib import Path

CHECKS_DIR = Path(__file__).parent
CHECKS = {"digit_reply": "pattern_recognition"}  # file stem -> skill label


def check_names() -> list:
    return sorted(CHECKS)


def check_source(name: str, key: str) -> str:
    """The file of check environment ``name``; ``key`` names the config key that chose it."""
    from spade.configtools import ConfigError

    if name not in CHECKS:
        raise ConfigError(f"config key '{key}' names {name!r}, which is not a learning-check environment; "
                          f"allowed: {check_names()}")
    return (CHECKS_DIR / f"{name}.py").read_text(encoding="utf-8")
