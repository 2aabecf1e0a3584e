"""Designer feedback revisions (issue 7, item 2b; from AutoEnvScaling's "prompt + execution feedback").

The paper's designer writes each environment in one shot, and a rejected candidate is simply discarded.
In feedback mode, a rejected candidate goes back to the designer as a conversation. The messages are:
the original design request, the designer's own answer, and a user turn that gives the validation report
(reason code, message with any trimmed traceback, the checks that passed) and asks for a complete
corrected environment. There are at most ``MAX_REVISIONS`` (2) such revisions per candidate, as in the
peer's setting. This module only builds the messages. It is pure and deterministic, and it runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from spade.configtools import option

MAX_REVISIONS = 2  # AutoEnvScaling returns build/verifier logs for up to two revisions
DEFAULT_ANSWER_CHARS = 12_000  # the designer's previous answer is trimmed to this (head and tail kept)
DEFAULT_REPORT_CHARS = 3_000  # the report's message (with traceback) is trimmed to this

# What each validator reason code means, phrased as a repair instruction.
REASON_ADVICE = {
    "too_large": "The answer is too long. Write a shorter, self-contained environment.",
    "empty": "No code was found. Answer with one ```python block holding the whole module.",
    "syntax_error": "The code does not compile. Fix the syntax error at the reported line.",
    "no_env_class": "No class defines both reset() and step(). Define exactly one such class.",
    "multiple_env_classes": "Several classes define reset() and step(). Keep exactly one environment class.",
    "load_failed": "Importing the module or calling __init__ failed. Use only the standard library and "
                   "make __init__ call reset().",
    "reset_failed": "reset(seed) failed or did not return (observation: str, info: dict).",
    "step_failed": "step(action) failed or did not return (observation: str, reward: float, terminated: bool, "
                   "truncated: bool, info: dict) for some action; every code path must return that tuple.",
    "reward_out_of_range": "A step returned a reward outside [0, 1].",
    "nondeterministic": "The same seed must give the same first observation and the same responses; draw all "
                        "randomness from a random.Random(seed) created in reset().",
    "reset_gate_error": "A success criterion raised on a freshly reset state; criteria must evaluate safely.",
    "reset_gate_presatisfied": "A success criterion is already True before the agent acts.",
    "no_solution": "Define solution(self): the reference actions from the current state, one per line.",
    "solution_failed": "Replaying solution() line by line did not win the episode (final reward 1). Make "
                       "solution() and step() agree.",
    "idle_too_high": "Doing nothing scores too well. The reward must require real progress.",
    "eval_overlap": "The environment copies text of a held-out evaluation item. Write original content.",
    "screen_rejected": "A reviewer found a success criterion that no tool call can satisfy, that is already met "
                       "after reset, or that needs a value neither the instructions nor any tool reveal.",
    "screen_unclear": "The reviewer of the tool-use task gave no clear verdict; make every criterion plainly "
                      "reachable through the tools and derivable from the instructions and tool outputs.",
    "screen_timeout": "The reviewer of the tool-use task ran out of time; keep the environment short and its "
                      "success criteria simple to check.",
}


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n...[{len(text) - 2 * half} characters omitted]...\n" + text[-half:]


def _check_messages(name: str, messages) -> list:
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{name} must be a non-empty list of chat messages, got {messages!r:.80}")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str) \
                or message.get("role") not in ("system", "user", "assistant"):
            raise ValueError(f"{name}[{i}] must be a mapping with role system/user/assistant and str content, "
                             f"got {message!r:.80}")
    return [dict(message) for message in messages]


def feedback_message(report: Mapping, revision: int, max_revisions: int = MAX_REVISIONS,
                     report_chars: int = DEFAULT_REPORT_CHARS) -> str:
    """The user turn that returns validation report ``report`` (``ValidationReport.to_dict()``) to the
    designer, for revision ``revision`` (1-based) of at most ``max_revisions``."""
    if isinstance(max_revisions, bool) or not isinstance(max_revisions, int) or max_revisions < 1:
        raise ValueError(f"max_revisions must be a whole number >= 1, got {max_revisions!r}")
    if isinstance(revision, bool) or not isinstance(revision, int) or not 1 <= revision <= max_revisions:
        raise ValueError(f"revision must be a whole number in 1..{max_revisions}, got {revision!r}")
    if not isinstance(report, Mapping) or report.get("valid") is not False:
        raise ValueError("report must be the dict of a rejected ValidationReport (valid is False)")
    reason = report.get("reason")
    if reason not in REASON_ADVICE:
        raise ValueError(f"report reason {reason!r} is not a known rejection reason; known: {sorted(REASON_ADVICE)}")
    passed = [str(check) for check in report.get("checks") or []]
    lines = [
        f"Your environment was rejected by the automatic validator (revision {revision} of {max_revisions}).",
        f"Reason: {reason}. {REASON_ADVICE[reason]}",
        "Validator message:",
        _trim(str(report.get("message", "")), report_chars),
        f"Checks passed before the failure: {', '.join(passed) if passed else 'none'}.",
    ]
    changes = [str(change) for change in report.get("changes") or []]
    if changes:
        lines.append("Automatic repairs already applied to your text: " + "; ".join(changes) + ".")
    lines.append("Fix the problem and answer with the complete corrected environment: the whole module in "
                 "one ```python block, following every rule of the original request.")
    return "\n".join(lines)


def revision_chat(design_chat: list, previous_answer: str, report: Mapping, revision: int,
                  max_revisions: int = MAX_REVISIONS, answer_chars: int = DEFAULT_ANSWER_CHARS,
                  report_chars: int = DEFAULT_REPORT_CHARS) -> list[dict]:
    """Chat messages for one feedback revision: ``design_chat`` (the messages that asked for the
    environment; for a second revision, the chat of the first one), the designer's ``previous_answer``
    (trimmed to ``answer_chars``, head and tail kept) as an assistant turn, then :func:`feedback_message`."""
    messages = _check_messages("design_chat", design_chat)
    if messages[-1]["role"] != "user":
        raise ValueError("design_chat must end with the user turn that the designer answered")
    if not isinstance(previous_answer, str):
        raise ValueError(f"previous_answer must be a str, got {type(previous_answer).__name__}")
    if isinstance(answer_chars, bool) or not isinstance(answer_chars, int) or answer_chars < 100:
        raise ValueError(f"answer_chars must be a whole number >= 100, got {answer_chars!r}")
    return messages + [
        {"role": "assistant", "content": _trim(previous_answer, answer_chars)},
        {"role": "user", "content": feedback_message(report, revision, max_revisions, report_chars)},
    ]


@dataclass(frozen=True)
class DesignerFeedbackConfig:
    revisions: int = option(
        0, "Feedback revisions per rejected design candidate (AutoEnvScaling uses 2): the validation report goes "
        "back to the designer, which answers with a corrected environment. 0 = the paper's one-shot designer.",
        min=0)
    answer_chars: int = option(DEFAULT_ANSWER_CHARS, "The previous answer shown to the designer is trimmed to "
                               "this many characters (head and tail kept).", min=100)
    report_chars: int = option(DEFAULT_REPORT_CHARS, "The validator message shown is trimmed to this many characters.",
                               min=100)
