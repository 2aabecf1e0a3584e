"""The local cluster's profile: ``profiles/slurm/config.yaml`` with the overlay ``profiles/local_slurm.yaml`` laid over
it (its ``edit`` placeholders replaced wherever they appear, its ``set`` keys set or removed), written to
``OUT/config.yaml`` for ``snakemake --profile OUT``. Nothing else of the cluster profile changes, so a run through it
tests the profile the paper's jobs use.

Usage: python -m spade.cluster.profile OUT [--base profiles/slurm/config.yaml] [--overlay profiles/local_slurm.yaml]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from spade.io import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[3]
BASE = REPO_ROOT / "profiles" / "slurm" / "config.yaml"
OVERLAY = REPO_ROOT / "profiles" / "local_slurm.yaml"
PLACEHOLDER = "EDIT-"


class ProfileError(ValueError):
    """The overlay does not fit the profile; the message names the file and the value."""


def _replace(value, edits: dict, seen: set):
    if isinstance(value, dict):
        return {key: _replace(item, edits, seen) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item, edits, seen) for item in value]
    if isinstance(value, str) and value in edits:
        seen.add(value)
        return edits[value]
    return value


def _placeholders(value) -> set:
    if isinstance(value, dict):
        return set().union(*map(_placeholders, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_placeholders, value)) if value else set()
    return {value} if isinstance(value, str) and value.startswith(PLACEHOLDER) else set()


def local_profile(base: dict, overlay: dict, where: str = str(OVERLAY)) -> dict:
    """``base`` with ``overlay`` laid over it. Every ``edit`` key must occur in the base and no ``EDIT-`` value may
    remain, so that a profile that gained or renamed a placeholder fails here, not at the first sbatch."""
    unknown = set(overlay) - {"edit", "set"}
    if unknown:
        raise ProfileError(f"{where}: keys {sorted(unknown)} are not overlay keys; allowed: ['edit', 'set']")
    edits, settings = overlay.get("edit") or {}, overlay.get("set") or {}
    seen: set = set()
    profile = _replace(base, edits, seen)
    if set(edits) - seen:
        raise ProfileError(f"{where}: edit {sorted(set(edits) - seen)} does not occur in the cluster profile")
    left = _placeholders(profile)
    if left:
        raise ProfileError(f"{where}: the cluster profile's {sorted(left)} has no value under 'edit'")
    for key, value in settings.items():
        if value is None:
            profile.pop(key, None)
        else:
            profile[key] = value
    return profile


def write_local_profile(out: str | Path, base: str | Path = BASE, overlay: str | Path = OVERLAY) -> Path:
    """Write ``out/config.yaml`` (atomically) and return it."""
    data = local_profile(yaml.safe_load(Path(base).read_text()), yaml.safe_load(Path(overlay).read_text()) or {},
                         str(overlay))
    header = (f"# Written by spade.cluster.profile: {base} with the overlay {overlay}; do not edit, change those.\n")
    return atomic_write_text(Path(out) / "config.yaml", header + yaml.safe_dump(data, sort_keys=False))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spade.cluster.profile", description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write config.yaml into (snakemake --profile OUT)")
    parser.add_argument("--base", default=str(BASE))
    parser.add_argument("--overlay", default=str(OVERLAY))
    args = parser.parse_args(argv)
    try:
        print(write_local_profile(args.out, args.base, args.overlay))
    except ProfileError as exc:
        parser.exit(2, f"error: {exc}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
