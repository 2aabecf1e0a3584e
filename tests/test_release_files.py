"""The files a reader looks for before citing or reusing the repository, and the one version they all refer to.

- The version is one field, ``version`` in pyproject.toml: ``spade.__version__`` reads it, every provenance record
  carries it, and CHANGELOG.md's top heading names it.
- CITATION.cff is valid against the CFF 1.2.0 schema (``cffconvert --validate``, installed by setup.sh) and names the
  paper it reproduces.
- LICENSE, pyproject.toml, CITATION.cff and the README's last lines name the same license.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import spade
from spade.config import load_config
from spade.paper.report import provenance_record
from spade.provenance import stamp

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
LICENSE_ID = "Apache-2.0"


def test_version_is_the_pyproject_field():
    assert spade.read_version() == VERSION
    assert spade.__version__ == VERSION
    assert not re.search(r"^__version__\s*=", (ROOT / "src/spade/__init__.py").read_text(), re.M), \
        "src/spade/__init__.py holds a second copy of the version"


def test_version_reads_a_given_pyproject_and_falls_back_to_the_metadata(tmp_path):
    ours = tmp_path / "ours.toml"
    ours.write_text('[project]\nname = "spade-repro"\nversion = "9.8.7"\n')
    assert spade.read_version(ours) == "9.8.7"
    other = tmp_path / "other.toml"
    other.write_text('[project]\nname = "someone-else"\nversion = "1.0"\n')
    installed = importlib.metadata.version("spade-repro")
    assert spade.read_version(other) == installed
    assert spade.read_version(tmp_path / "missing.toml") == installed


def test_provenance_records_the_version(tmp_path):
    assert stamp(load_config(ROOT / "configs/default.yaml"))["spade_version"] == VERSION
    out = tmp_path / "table.md"
    out.write_text("| a |\n")
    assert provenance_record("script.py", [], [out])["spade_version"] == VERSION


def test_changelog_top_heading_is_the_current_version():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings, "CHANGELOG.md has no '## <version>' heading"
    assert headings[0] == VERSION, f"CHANGELOG.md's top heading is {headings[0]}, pyproject.toml's version {VERSION}"


def cffconvert() -> str:
    found = shutil.which("cffconvert", path=str(Path(sys.executable).parent)) or shutil.which("cffconvert")
    if found is None:
        pytest.skip("cffconvert is not installed (setup.sh installs it)")
    return found


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([cffconvert(), "--validate", "-i", str(path)], capture_output=True, text=True, timeout=60)


def test_citation_cff_is_valid_cff_1_2(tmp_path):
    result = validate(ROOT / "CITATION.cff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid according to schema version 1.2.0" in result.stdout
    broken = tmp_path / "CITATION.cff"  # the check can fail: an unknown key and no authors
    broken.write_text((ROOT / "CITATION.cff").read_text().replace("cff-version: 1.2.0", "cff-version: 1.2.0\ncolour: red")
                      .replace('  - name: "The SPADE reproduction contributors"', "  []"))
    assert validate(broken).returncode != 0


def test_citation_names_the_paper_and_the_license():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == LICENSE_ID
    paper = cff["references"][0]
    assert paper["title"].startswith("SPADE: Self-Play in Adaptive Synthetic Executable Environments")
    assert paper["year"] == 2026 and "2608.19197" in paper["url"]


def test_one_license_everywhere():
    assert PROJECT["license"] == {"text": LICENSE_ID}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    tail = "\n".join((ROOT / "README.md").read_text().rstrip().splitlines()[-6:])
    assert LICENSE_ID in tail and "LICENSE" in tail, "the README's last lines say which license and why"
