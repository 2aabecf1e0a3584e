"""Learning-check environments (issues 16 and 30): small tasks for the tiny model (model card tiny-random-copy: the
tiny random model after a reply-format warm-up, spade.inference.format_warmup), meant to show within a short run of
the default workflow whether the trainer learns.

``copy_span`` (issues 39, 48): the observation shows a row of SHOWN (4) digits from 1-4; the reply's first 4 characters
(spaces removed) are compared with it position by position, and the reply wins (reward 1) when at least NEED of them
are right; otherwise it earns 0 (issue 48: no credit for a right digit, which made every difficulty learnable). Every
NEED asks for the same reply, so what the agent learns at one difficulty carries over to every other; a reply that
ignores the row wins 0.68, 0.26, 0.05 and 0.004 of the time at NEED 1 to 4. The mechanism run's designer writes NEED:
the file, cut just after its last ``NEED = `` (``TEMPLATE_MARKERS``, ``template_source``), opens every design reply,
whose one token ends the module; a token that is no number leaves a module that does not load, and a NEED outside
1-4 one whose class refuses to start (no reply wins NEED 5). The file is kept short
because it is most of the design prompt. Its 32 rows whose checksum (each digit times its position, 1-4) is a
multiple of 8 (``HELD_OUT``, each digit 8 times in each position) are held out: training (``split="train"``) never
draws one, and the ``mechanism_check_heldout`` benchmark opens the class with ``split="heldout"``, the ``need`` it
scores and ``instance`` i, which plays the i-th held-out row.

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
