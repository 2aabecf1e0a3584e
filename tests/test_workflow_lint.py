"""The workflow is formatted (`snakefmt --check .`) and lint-clean (`snakemake --lint`): every finding left is one
that docs/WORKFLOW.md lists with its reason, and every finding listed there still occurs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXCEPTIONS_DOC = ROOT / "docs" / "WORKFLOW.md"


def parse_lint(output: str) -> set[tuple[str, str]]:
    """(subject, finding) pairs of `snakemake --lint` text output: the subject is a rule name, or the path of a
    Snakefile relative to the repository root; the finding is its title (the line after '* ', without the colon)."""
    findings, subject = set(), None
    for line in output.splitlines():
        if match := re.fullmatch(r"Lints for rule (\S+) \(line \d+, .+\):", line):
            subject = match.group(1)
        elif match := re.fullmatch(r"Lints for snakefile (.+):", line):
            path = Path(match.group(1))
            subject = str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT) else str(path)
        elif match := re.fullmatch(r"    \* (.+):", line):
            assert subject is not None, output
            findings.add((subject, match.group(1)))
    return findings


def documented_exceptions() -> set[tuple[str, str]]:
    """The rows of the table under '### Lint exceptions' in docs/WORKFLOW.md: (`subject`, finding)."""
    section = EXCEPTIONS_DOC.read_text(encoding="utf-8").split("### Lint exceptions", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \| ([^|]+?) \|$", section, re.M)
    assert rows, "docs/WORKFLOW.md has no table of lint exceptions"
    for subject, finding, reason in rows:
        assert len(reason.split()) >= 5, f"the exception {subject!r} / {finding!r} needs its reason"
    return {(subject, finding) for subject, finding, _ in rows}


def lint(*args: str) -> set[tuple[str, str]]:
    run = subprocess.run([sys.executable, "-m", "snakemake", "--lint", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    output = run.stdout + run.stderr
    findings = parse_lint(output)
    # exit status 1 with findings, 0 without; anything else (a workflow that does not parse) is a failure here
    assert (run.returncode, bool(findings)) in ((0, False), (1, True)), output[-3000:]
    return findings


def test_parse_lint_reads_rules_and_snakefiles():
    output = (f"Lints for snakefile {ROOT}/rules/x.smk:\n    * Mixed rules and functions in same snakefile.:\n"
              "      Small one-liner functions ...\n\nLints for rule train (line 9, /somewhere/rules/train.smk):\n"
              "    * No log directive defined:\n      Without a log directive ...\n")
    assert parse_lint(output) == {("rules/x.smk", "Mixed rules and functions in same snakefile."),
                                  ("train", "No log directive defined")}


def test_snakefmt_check_passes():
    run = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert "No module named snakefmt" not in run.stderr, "snakefmt is missing: ./setup.sh installs it (dev extra)"
    if run.returncode != 0:
        diff = subprocess.run([sys.executable, "-m", "snakefmt", "--compact-diff", "."], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        pytest.fail(f"snakefmt --check . failed (run `.venv/bin/snakefmt .`):\n{run.stderr[-2000:]}\n"
                    f"{diff.stdout[-4000:]}")


def test_lint_findings_are_the_documented_exceptions(tmp_path):
    """The toy config, the paper's and a multi-run config with a pending run (each switches rules on or off)."""
    run_file = tmp_path / "alpha.yaml"
    run_file.write_text("run_name: alpha\nmodel_card: tiny-random\n")
    pending = tmp_path / "pending.yaml"
    pending.write_text(yaml.safe_dump({"runs": [str(run_file)], "pending": {"gamma": "needs a checkout of X"}}))
    found = {}
    for name, args in (("configs/default.yaml", []), ("configs/paper.yaml", ["--configfile", "configs/paper.yaml"]),
                       ("a pending run", ["--configfile", str(pending)])):
        for finding in lint(*args):
            found.setdefault(finding, name)
    allowed = documented_exceptions()
    undocumented = {finding: config for finding, config in found.items() if finding not in allowed}
    assert not undocumented, ("lint findings that docs/WORKFLOW.md does not list (fix them, or list each with its "
                              f"reason): {undocumented}")
    stale = allowed - set(found)
    assert not stale, f"docs/WORKFLOW.md lists lint exceptions that no longer occur: {sorted(stale)}"


# `--configfile` takes every word up to the next option, so a target written after its files is read as one more file
# (Snakemake 9: "No such file or directory: 'rehearsal'"); a documented command names its target first, or after `--`
def _configfile_words(command: str) -> list[str]:
    """The words `--configfile` would take in ``command``: up to the next option, a comment or the end."""
    after = re.split(r"[#`|;(\"]", command.split("--configfile", 1)[1])[0]
    words = []
    for word in after.split():
        if word.startswith("-"):
            break
        words.append(word)
    return words


def test_documented_snakemake_commands_name_their_target_before_configfile():
    files = [ROOT / name for name in ("README.md", "REPRODUCING.md", "CHANGELOG.md")]
    files += [*ROOT.glob("docs/*.md"), *ROOT.glob("configs/**/*.yaml"), *ROOT.glob("profiles/**/*.yaml"),
              *ROOT.glob("scripts/*.sh"), *ROOT.glob("rules/*.smk"), ROOT / "Snakefile"]
    wrong = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        spans = [re.sub(r"\n\s*#?\s*", " ", span) for span in re.findall(r"`([^`]+)`", text)]  # wrapped ones too
        lines = [line.strip().lstrip("#").split(" #")[0] for line in text.splitlines()]  # a comment holding a
        # command keeps it; an inline comment after one does not count
        for command in spans + lines:
            if "snakemake" in command and "--configfile" in command:
                for word in _configfile_words(command):
                    if not re.search(r"\.ya?ml$|^<config>$|^\$", word):
                        wrong.append(f"{path.relative_to(ROOT)}: {command.strip()!r} ({word!r})")
    assert not wrong, "a target after --configfile is read as a config file:\n" + "\n".join(wrong)
