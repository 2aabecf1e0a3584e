"""Provenance stamped on every output: git commit, config hash, seed, package version."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import spade


def git_commit() -> str:
    """The checkout's commit (with '+dirty' if tracked files changed), or 'unknown' outside git."""
    root = Path(spade.__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def config_hash(config) -> str:
    """SHA-256 (first 16 hex digits) of the validated config, canonical JSON."""
    return settings_hash(asdict(config))


def settings_hash(settings: dict) -> str:
    """SHA-256 (first 16 hex digits) of a settings mapping, canonical JSON."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def stamp(config) -> dict:
    return {"git_commit": git_commit(), "config_hash": config_hash(config), "seed": config.seed,
            "spade_version": spade.__version__}
