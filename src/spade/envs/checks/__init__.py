"""Learning-check environments (issues 16 and 30): small tasks for the tiny model (model card tiny-random-copy: the
tiny random model after a reply-format warm-up, spade.inference.format_warmup), meant to show within a short run of
the default workflow whether the trainer learns.

``copy_span`` (issue 39): copy a row of digits with at least NEED of them right; the mechanism run's designer writes NEED
(``TEMPLATE_MARKERS``, ``template_source``).

``symbol_copy`` (the default check, issue 30): copy two letters. Its answer is a function of the observation (a
reply that ignores it earns under 0.05 on average) and its held-out instances (constructor argument
``split="heldout"``, ``HELDOUT_ARGS``) are letter pairs training never shows. ``digit_reply`` (issue 16, kept for the
OpenRLHF integration run): its reward pays up to 0.9 for any reply made of digits, whatever the prompt asks, so
learning it shows only that the trainer moves the policy, not that it reads the observation; it has no held-out
instance space (another seed picks one of 5 prompts).

They are not paper environments. Nothing draws them unless a config asks for them by name
(``baseline.pool_source: checks``, the ``learning_check`` benchmark, ``selfplay.backfill_checks`` of the OpenRLHF
CPU integration run): they are never backfilled unasked, seeded into the
designer's memory, offered to a library pool or counted by ``spade env check-library``. Like the library, the
files are data, run only inside the sandbox.
"""

from __future__ import annotations

from pathlib import Path

CHECKS_DIR = Path(__file__).parent
CHECKS = {"copy_span": "pattern_recognition", "digit_reply": "pattern_recognition",
          "symbol_copy": "pattern_recognition"}  # file stem -> skill label
# constructor arguments that open a check's held-out instance space (training uses the defaults); a check missing here
# has none, and the learning_check benchmark then plays other seeds of the training space
HELDOUT_ARGS = {"symbol_copy": {"split": "heldout"}}


# checks whose file, cut just after the last occurrence of the marker, opens a design reply (``designer.response_template``,
# the mechanism run of issue 39): the designer's own tokens complete the module
TEMPLATE_MARKERS = {"copy_span": "NEED = "}


def check_names() -> list:
    return sorted(CHECKS)


def check_source(name: str, key: str) -> str:
    """The file of check environment ``name``; ``key`` names the config key that chose it."""
    from spade.configtools import ConfigError

    if name not in CHECKS:
        raise ConfigError(f"config key '{key}' names {name!r}, which is not a learning-check environment; "
                          f"allowed: {check_names()}")
    return (CHECKS_DIR / f"{name}.py").read_text(encoding="utf-8")


def template_source(name: str, key: str) -> str:
    """The text that opens every design reply under ``designer.response_template: name``: the check's file up to and
    including the last occurrence of its marker; ``key`` names the config key that chose it."""
    from spade.configtools import ConfigError

    if name not in TEMPLATE_MARKERS:
        raise ConfigError(f"config key '{key}' names {name!r}, which is not an environment template; "
                          f"allowed: {sorted(TEMPLATE_MARKERS)}")
    text, marker = check_source(name, key), TEMPLATE_MARKERS[name]
    return text[:text.rindex(marker) + len(marker)]
