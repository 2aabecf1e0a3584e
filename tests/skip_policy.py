"""No silent skips under CI (issue 30): with SPADE_NO_SKIP=1 (set by .ci/run) a test that skips for a reason that set-up
could have helped (a package setup.sh installs, Chromium under SPADE_BROWSER=1, TeX under SPADE_LATEX=1, SLURM under SPADE_SLURM=1) fails instead,
so a broken set-up turns the suite red rather than shrinking it. Only the skips listed in UNAVOIDABLE stay skips.

A pytest plugin (registered by tests/conftest.py); ``skip_verdict`` is the pure decision, tested by hand."""

from __future__ import annotations

import os
import re

import pytest

STRICT_VAR = "SPADE_NO_SKIP"
# Skip reasons that no set-up on a CPU machine can help, each with why; matched case-insensitively against the reason
UNAVOIDABLE = {
    r"the GPU stack is installed here": "the test checks the error of a machine without the GPU stack",
    r"no filter for this architecture": "the seccomp filter exists for x86_64 and aarch64 only",
    r"\bno (cuda|gpu)\b|cuda is not available": "GPU checks need a GPU, which CI machines do not have",
    r"shared folder is not next to the checkout": "the project's ../shared folder exists on developer machines only",
}
# Skip reasons that set-up helps only when asked to: allowed unless the variable says set-up installed the tool
OPT_IN = {
    r"pdflatex": "SPADE_LATEX",
    r"chromium": "SPADE_BROWSER",
    r"slurm": "SPADE_SLURM",
}


def skip_verdict(reason: str, environ) -> str | None:
    """None if a skip with ``reason`` may stay a skip under ``environ``, else the message of the failure it becomes."""
    if environ.get(STRICT_VAR, "0") != "1":
        return None
    if any(re.search(pattern, reason, re.IGNORECASE) for pattern in UNAVOIDABLE):
        return None
    for pattern, variable in OPT_IN.items():
        if re.search(pattern, reason, re.IGNORECASE) and environ.get(variable, "0") != "1":
            return None
    return (f"{STRICT_VAR}=1: this test skipped ({reason!r}), but setup.sh installs what it needs, so the skip hides "
            f"a broken set-up. Fix the set-up; if the skip cannot be helped on a CPU machine, add its reason to "
            f"UNAVOIDABLE in tests/skip_policy.py")


def _enforce(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    message = skip_verdict(reason, os.environ)
    if message is not None:
        report.outcome, report.longrepr = "failed", message


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _enforce(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _enforce(outcome.get_result())
