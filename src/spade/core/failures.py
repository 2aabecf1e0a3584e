"""Why a step earns nothing: the cause of every agent episode and the stage at which every design failed.

Small pure functions over what the runner and the validator already record; ``spade.core.step_metrics`` counts them
into each step's metrics, the run table (``spade.paper.report``) and the environment browser
(``spade.paper.env_cards_pages``) show the counts.

Agent episodes (``episode_cause``), one cause per episode, the first that applies:

- ``env_failure``: the sandbox failed (load, reset or step raised, timed out or crashed);
- ``earned``: the episode return is above 0 (a win or a partial reward): nothing to explain;
- ``context_limit``: the episode's tokens reached ``agent.max_context_tokens``;
- ``cut``: the last reply hit ``agent.max_new_tokens`` (it ended without eos) and either ended the episode there
  (``agent.cut_turns`` 'end', outcome ``cut_turn``) or held no parsable action: the answer may have come after the
  budget, so the cut is the root cause, not the format;
- ``no_action``: the last reply ended by itself but held no parsable action (games: no ``\\boxed{...}``;
  tool use: no ``<answer>``, no ``<tool_call>`` and no JSON object with a ``name``);
- ``wrong_action``: the last reply held an action and the environment ended the episode with return 0;
- ``turn_limit``: the last reply held an action, but the turns ran out (the runner's ``agent.max_turns`` or the
  environment's own truncation) before the environment ended the episode.

Designs (``design_stage``), one stage per rejected attempt, in the order the validator meets them: ``no_code``
(the text holds no Python at all: no code fence and no ``class``/``def``/``import`` line, ``wrote_code``; or nothing
was left after extraction), ``cut`` (code began, the text hit ``designer.max_new_tokens`` and intake could not read
it: the unfinished text is the root cause of its syntax error), ``size`` (too_large), ``syntax`` (syntax_error),
``class`` (no or several environment classes), ``load`` (import or ``__init__``), ``reset``, ``step``, ``checks``
(the validation probes: reward range, determinism, the tool-use reset gate) and ``gates`` (the optional admission
gates and the tool-use LLM screen). Prose cut at the budget counts as ``no_code``, not ``cut``: a larger budget would buy more prose (the toy
designer's 384-token answers were all prose). The reason codes of ``spade.envs.validate.REASONS`` stay in
``reject_reasons``; the stage groups them by where the design broke.
"""

from __future__ import annotations

import re

EPISODE_CAUSES = ("earned", "no_action", "cut", "wrong_action", "turn_limit", "context_limit", "env_failure")
DESIGN_STAGES = ("cut", "size", "no_code", "syntax", "class", "load", "reset", "step", "checks", "gates")
STAGE_OF_REASON = {
    "too_large": "size",
    "empty": "no_code",
    "syntax_error": "syntax",
    "no_env_class": "class",
    "multiple_env_classes": "class",
    "load_failed": "load",
    "reset_failed": "reset",
    "step_failed": "step",
    "reward_out_of_range": "checks",
    "nondeterministic": "checks",
    "reset_gate_error": "checks",
    "reset_gate_presatisfied": "checks",
    "no_solution": "gates",
    "solution_failed": "gates",
    "idle_too_high": "gates",
    "eval_overlap": "gates",
    "screen_rejected": "gates",
    "screen_unclear": "gates",
    "screen_timeout": "gates",
}
# intake failures a text cut short can cause: the rest of the text was never written, so the cut is the root cause
CUT_MASKS = ("syntax_error", "empty", "no_env_class")
# a line that starts Python: a code fence, or a class, function, import or decorator line
CODE_LINE = re.compile(r"^[ \t]*(?:`{3}|~{3}|class\s+\w+\s*[:(]|(?:async\s+)?def\s+\w+\s*\(|import\s+\w"
                       r"|from\s+[\w.]+\s+import\s|@\w)", re.M)


def episode_cause(outcome: str, final_return: float, last_parsed: bool, last_cut: bool) -> str:
    """The cause of one episode (module docstring): ``outcome`` is the runner's (spade.core.agent.OUTCOMES),
    ``last_parsed`` whether its last reply held a parsable action, ``last_cut`` whether that reply hit
    ``max_new_tokens``."""
    if outcome == "env_failure":
        return "env_failure"
    if final_return > 0:
        return "earned"
    if outcome == "context_limit":
        return "context_limit"
    if outcome == "cut_turn":  # agent.cut_turns 'end': the episode ended at the cut, whatever the reply held
        return "cut"
    if not last_parsed:
        return "cut" if last_cut else "no_action"
    return "wrong_action" if outcome == "terminated" else "turn_limit"


def wrote_code(text: str) -> bool:
    """Whether a designer's text began any Python (a ``CODE_LINE``), as opposed to prose only."""
    return CODE_LINE.search(text) is not None


def design_stage(reason: str, cut: bool, code: bool = True) -> str:
    """The stage a design failed at (module docstring); "ok" for a valid one. ``cut``: the text hit
    ``designer.max_new_tokens``; ``code``: it began Python (``wrote_code``). An intake failure (syntax error, no
    code, no class) of a text without code is ``no_code``; of a cut text with code, ``cut``: the unfinished text
    is the root cause of the syntax error."""
    if reason == "ok":
        return "ok"
    if reason in CUT_MASKS and not code:
        return "no_code"
    if cut and reason in CUT_MASKS:
        return "cut"
    if reason not in STAGE_OF_REASON:
        raise ValueError(f"unknown reject reason {reason!r}; known: {', '.join(STAGE_OF_REASON)}")
    return STAGE_OF_REASON[reason]


def report_stage(report: dict) -> str:
    """The stage of one archived validation report: its ``stage`` when recorded, else from its ``reason``, ``cut``
    and ``wrote_code`` (reports written before stages were recorded carry neither: counted as code, not cut)."""
    return report.get("stage") or design_stage(report.get("reason", "ok"), bool(report.get("cut")),
                                               bool(report.get("wrote_code", True)))


def counts(values, names: tuple) -> dict:
    """{name: how often it occurs in ``values``} over every name of ``names`` (zeros kept, so every step logs the
    same keys); a value outside ``names`` raises ValueError."""
    out = dict.fromkeys(names, 0)
    for value in values:
        if value not in out:
            raise ValueError(f"unknown category {value!r}; known: {', '.join(names)}")
        out[value] += 1
    return out


def record_cause(record) -> str:
    """The cause of an ``EpisodeRecord`` (or its summary dict): the ``cause`` it carries, else (a record made
    without the runner, which sets it when the episode ends) ``episode_cause`` of its fields."""
    data = record if isinstance(record, dict) else vars(record)
    return data.get("cause") or episode_cause(data["outcome"], data["final_return"], data.get("last_parsed", False),
                                              data.get("last_cut", False))


def cause_counts(records) -> dict:
    """{cause: episodes} of episode records (``record_cause``)."""
    return counts(map(record_cause, records), EPISODE_CAUSES)


def stage_counts(reports) -> dict:
    """{stage: rejected attempts} of validation report dicts (valid ones are left out)."""
    return counts((report_stage(r) for r in reports if not r.get("valid")), DESIGN_STAGES)


def summed(dicts) -> dict:
    """Entry-wise sum of count dicts (None and non-dicts skipped), in first-seen key order."""
    out: dict = {}
    for entry in dicts:
        for name, count in (entry if isinstance(entry, dict) else {}).items():
            out[name] = out.get(name, 0) + count
    return out


def counts_text(counts_by_name: dict) -> str:
    """"a 3, b 1": the non-zero counts, largest first (ties by name); "" when none."""
    kept = sorted(((k, v) for k, v in counts_by_name.items() if v), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{name} {count}" for name, count in kept)
