"""Quoted numbers 'valid_env_rate' of the paper: the valid-environment rate of the designer's attempts and the
executability of raw designer output, as LaTeX macros beside the paper's values.

    python paper/scripts/num_valid_env_rate.py --mapping paper/number_runs.yaml --runs-root results/runs \
        --reported-dir paper/reported --out results/paper/numbers/valid_env_rate.tex

The valid-environment rate of the designer's attempts with its Wilson interval
(:func:`spade.analysis.valid_env_rate_from_sets`) and the executability of raw designer output, from the
per-attempt validation reports of the environment archives (:func:`attempt_executability`). Reported:
``quoted_numbers.csv`` (the paper gives no valid rate). Runs: key ``numbers.valid_env_rate`` of the run mapping.

Writes the macro file (each \\Num... macro and its \\Num...Reported twin; the definitions in its comment block) and
the provenance sidecar <out>.provenance.json, through spade.paper.numbers.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from spade.analysis import valid_env_rate_from_sets
from spade.paper.env_tables import env_sets_with_paths
from spade.paper.numbers import (
    PCT,
    PERCENT,
    Group,
    Number,
    NumberContext,
    mark_missing,
    number_main,
    number_section,
    quoted_value,
    run_or_missing,
)
from spade.paper.report import ReportInputError, run_script
from spade.paper.tables import NO_DATA

NOT_COMPILED = ("syntax_error", "empty", "too_large")  # intake reasons after which no compiling code exists
_FENCE_NOTE = re.compile(r"^removed \d+ stray fence line\(s\)$")
_BOXED_NOTE = "is not defined in the module)"  # escapes of \boxed{NAME} made to code that already compiles


def is_fence_repair(note: str) -> bool:
    return bool(_FENCE_NOTE.match(note))


def is_brace_repair(note: str) -> bool:
    """An intake change that made an f-string compile (spade.envs.intake.repair_fstring_braces)."""
    return note.startswith("escaped ") and " in f-string on line " in note and not note.endswith(_BOXED_NOTE)


def attempt_executability(reports: Sequence[dict]) -> dict:
    """Executability of raw designer output, one validation report per design attempt.

    Each attempt falls in one class:

    * ``raw``: its code compiled (the report's reason is not one of :data:`NOT_COMPILED`) with neither a
      stray-fence removal nor an f-string brace repair among the intake changes (extracting the fenced block,
      dropping ``<think>`` text, line ends or indentation are not repairs);
    * ``fence``: compiled after a stray-fence removal ("removed N stray fence line(s)") and no brace repair;
    * ``brace``: compiled with an f-string brace repair ("escaped ... in f-string on line ...", not the escapes
      of undefined ``\\boxed{NAME}`` fields, which are made to code that already compiles);
    * ``failed``: did not compile (syntax_error, empty, too_large).

    Returns the counts, ``attempts`` and the shares ``raw_share`` = raw / attempts, ``after_fence_share`` =
    (raw + fence) / attempts, ``brace_share`` = brace / attempts (the further share the brace repair fixes) and
    ``compiled_share`` = (raw + fence + brace) / attempts (None without attempts).
    """
    counts = {"raw": 0, "fence": 0, "brace": 0, "failed": 0}
    for i, report in enumerate(reports):
        if not isinstance(report, dict) or not isinstance(report.get("reason"), str):
            raise ReportInputError(f"validation report {i} has no 'reason' (is it a report of spade.envs.validate?)")
        changes = report.get("changes") or []
        if report["reason"] in NOT_COMPILED:
            counts["failed"] += 1
        elif any(is_brace_repair(c) for c in changes):
            counts["brace"] += 1
        elif any(is_fence_repair(c) for c in changes):
            counts["fence"] += 1
        else:
            counts["raw"] += 1
    n = len(reports)

    def share(k):
        return k / n if n else None

    return {**counts, "attempts": n, "raw_share": share(counts["raw"]),
            "after_fence_share": share(counts["raw"] + counts["fence"]), "brace_share": share(counts["brace"]),
            "compiled_share": share(n - counts["failed"])}


def valid_env_rate(ctx: NumberContext) -> list[Number]:
    """Valid-environment rate of the design attempts (Wilson interval) and the executability shares."""
    section = number_section(ctx.mapping, "valid_env_rate")
    conf = section["confidence"]
    pct = f"{conf * 100:g}%"
    none = "the paper gives no value"
    rate = Number("NumValidEnvRate", "valid-environment rate of design attempts (percent)", None, 1, None, none,
                  scale=PERCENT, unit=PCT)
    low = Number("NumValidEnvRateLow", f"lower end of its Wilson {pct} interval (percent)", None, 1, None, none,
                 scale=PERCENT, unit=PCT)
    high = Number("NumValidEnvRateHigh", f"upper end of its Wilson {pct} interval (percent)", None, 1, None, none,
                  scale=PERCENT, unit=PCT)
    attempts = Number("NumDesignAttempts", "design attempts (validation reports)", None, 0, None, none)
    shares = []
    for key, name, what, signed in (
            ("raw_share", "NumExecRaw", "compiled with no repair (percent of attempts)", False),
            ("after_fence_share", "NumExecAfterFence", "compiled after stray-fence removal (percent)", False),
            ("brace_share", "NumExecBraceFurther", ("further share compiled by f-string brace repair (percent of "
                                                    "attempts)"), True),
            ("compiled_share", "NumExecCompiled", "compiled after all intake repairs (percent)", False)):
        quoted = {"raw_share": "exec_raw", "after_fence_share": "exec_after_fence", "brace_share": "exec_brace_further"}
        reported, source = quoted_value(ctx.reported_dir, quoted[key]) if key in quoted else (None, none)
        shares.append((key, Number(name, what, None, 1, reported, source, signed=signed, scale=PERCENT, unit=PCT)))
    numbers = [rate, low, high, attempts] + [n for _, n in shares]
    folder = run_or_missing(ctx, section["run"], numbers)
    if folder is None:
        return numbers
    sets = env_sets_with_paths(folder)
    ctx.inputs += [p for p, _ in sets]
    reports = [r for _, s in sets for env in s["environments"] for r in env.get("reports") or []]
    detail = {"run": section["run"], "sets": len(sets), "attempts": len(reports)}
    for number in numbers:
        number.detail = dict(detail)
    if not reports:
        for number in numbers:
            mark_missing(number, NO_DATA, f"run {section['run']} has no validation reports in envs/set_*.json")
        return numbers
    estimate = valid_env_rate_from_sets([s for _, s in sets], conf)
    rate.value, low.value, high.value = estimate.rate, estimate.low, estimate.high
    rate.detail.update(valid=estimate.successes, confidence=conf)
    attempts.value = float(len(reports))
    classes = attempt_executability(reports)
    for key, number in shares:
        number.value = classes[key]
        number.detail.update({k: classes[k] for k in ("raw", "fence", "brace", "failed")})
    return numbers


GROUP = Group("valid_env_rate", "Valid-environment rate and executability of raw designer output", valid_env_rate, (
    "Valid rate: validation reports with valid true / all reports (one per design attempt), Wilson interval.",
    ("Raw: attempts whose code compiled with neither a stray-fence removal nor an f-string brace repair; "
     "after fence: raw plus those compiled after removing stray fence lines (and no brace repair); brace "
     "further: compiled with an f-string brace repair; compiled: all that compiled. Not compiled: reasons "
     "syntax_error, empty, too_large. Every share is of all design attempts.")))


def main(argv=None) -> None:
    number_main(GROUP, "paper/scripts/num_valid_env_rate.py", argv)


if __name__ == "__main__":
    sys.exit(run_script(main))
