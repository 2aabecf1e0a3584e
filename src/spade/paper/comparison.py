"""What the environment-source comparison's table script and the workflow share: the source mapping and its runs.

The comparison (issue 7, item 4; ours, not in the paper) is a table, ``paper/scripts/table_env_sources.py`` (one row
per source of environments: SPADE's designer one-shot, with feedback revisions, a fixed library pool, mechanism
families, ...; its columns and marks are defined there), and a figure, ``paper/scripts/fig_env_sources.py``, drawn
from the table's sidecar. This module holds only what the table script and rules/paper_common.smk (when it parses
the workflow) share:

* the mapping of sources to runs, ``paper/comparison_runs.yaml`` (paper scale) or
  ``paper/toy/comparison_runs.yaml`` (toy scale), picked by config key ``paper.comparison_runs``; its keys are
  documented in the file and validated by :func:`load_comparison_runs`, with the value columns it may not repeat
  (:data:`BASE_COLUMNS`) and the embeddings it may name (:data:`EMBEDDINGS`);
* the runs it reads (:func:`comparison_runs`) and the files of their folders (:func:`run_files`,
  :func:`run_fingerprint`: the Snakemake parameter that reruns the table when one changes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from spade.paper.report import ReportInputError, files_fingerprint, read_yaml
from spade.paper.table_runs import (
    COLUMN_METRICS,
    check_keys,
    mapping_error,
    mapping_int,
    mapping_runs,
    mapping_step_rule,
)

KINDS = ("designer", "pool")  # designer: a model writes the environments; pool: a fixed procedural pool
EMBEDDINGS = {"sbert": "sbert", "tfidf": "tfidf_lsa"}  # mapping value -> key of env_tables.default_embedders
BALANCE_BY = ("skill", "none")
STEP_RULES = ("last", "selected")
_TOP_KEYS = ("sources", "heldout", "base_run", "step", "learnable_band", "vendi", "embedding", "field", "confidence")
_SOURCE_KEYS = ("label", "kind", "run")
_HELDOUT_KEYS = ("key", "header", "parts")
VENDI_DEFAULTS = {"size": "common", "draws": 20, "balance_by": "skill", "seed": 0, "min_envs": 2}
DEFAULT_BAND = (0.2, 0.8)  # spec 9 / spade.analysis.learnability: learnable = win rate in [0.2, 0.8]
RUN_FILE_PATTERNS = ("summary.json", "metrics.jsonl", "envs/set_*.json", "eval/*/step_*.json",
                     "selected_checkpoint.json")
# the table's columns before the held-out gains: (key, header; [CI] becomes the confidence of the interval)
BASE_COLUMNS = (("valid_env_rate", "Valid-env rate [CI] (valid/attempts)"),
                ("tokens_per_valid_env", "Tokens / valid env"),
                ("learnable_share", "Learnable share (learnable/slots)"), ("vendi_per_n", "Vendi/n (n)"))


# ----- the mapping -------------------------------------------------------------------------------------------
def _text(path, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise mapping_error(path, key, f"must be non-empty text, got {value!r}")
    return value


def _part(path, key: str, value) -> tuple[str, str]:
    """A suite part: 'benchmark:metric', or a paper column of spade.paper.table_runs.COLUMN_METRICS."""
    if isinstance(value, str) and ":" in value:
        benchmark, _, metric = value.partition(":")
        if benchmark and metric:
            return benchmark, metric
    elif isinstance(value, str) and value in COLUMN_METRICS:
        return COLUMN_METRICS[value]
    raise mapping_error(path, key, f"must be 'benchmark:metric' or a paper column ({', '.join(COLUMN_METRICS)}), "
                                   f"got {value!r}")


def _sources(path, value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise mapping_error(path, "sources",
                            f"must be a non-empty list of {{label, kind, run}} entries, got {value!r}")
    out, labels = [], set()
    for i, entry in enumerate(value):
        where = f"sources[{i}]"
        if not isinstance(entry, dict):
            raise mapping_error(path, where, f"must be a mapping, got {entry!r}")
        check_keys(path, where, entry, _SOURCE_KEYS)
        for key in _SOURCE_KEYS:
            if key not in entry:
                raise mapping_error(path, f"{where}.{key}", "is missing" + (" (write `run: null` for a source we have "
                                                                             "no run for)" if key == "run" else ""))
        label = _text(path, f"{where}.label", entry["label"])
        if label in labels:
            raise mapping_error(path, f"{where}.label", f"repeats the label {label!r}")
        labels.add(label)
        if entry["kind"] not in KINDS:
            raise mapping_error(path, f"{where}.kind", f"must be one of {', '.join(KINDS)}, got {entry['kind']!r}")
        runs = mapping_runs(path, f"{where}.run", entry["run"])
        if len(runs) > 1:
            raise mapping_error(path, f"{where}.run", f"must name one run (or null), got {runs!r}")
        out.append({"where": where, "label": label, "kind": entry["kind"], "run": runs[0] if runs else None})
    return out


def _heldout(path, value) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise mapping_error(path, "heldout", f"must be a list of {{key, header, parts}} entries, got {value!r}")
    out, keys = [], set()
    for i, entry in enumerate(value):
        where = f"heldout[{i}]"
        if not isinstance(entry, dict):
            raise mapping_error(path, where, f"must be a mapping, got {entry!r}")
        check_keys(path, where, entry, _HELDOUT_KEYS)
        key = entry.get("key")
        if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9_]+", key):
            raise mapping_error(path, f"{where}.key",
                                f"must be a name of lower-case letters, digits and _, got {key!r}")
        if key in keys or key in dict(BASE_COLUMNS):
            raise mapping_error(path, f"{where}.key", f"repeats the column {key!r}")
        keys.add(key)
        parts = entry.get("parts")
        if not isinstance(parts, list) or not parts:
            raise mapping_error(path, f"{where}.parts", f"must be a non-empty list of suite metrics, got {parts!r}")
        out.append({"key": key, "header": _text(path, f"{where}.header", entry.get("header")),
                    "parts": [_part(path, f"{where}.parts[{j}]", p) for j, p in enumerate(parts)]})
    return out


def _vendi(path, value) -> dict:
    value = value or {}
    if not isinstance(value, dict):
        raise mapping_error(path, "vendi", f"must be a mapping, got {value!r}")
    check_keys(path, "vendi", value, tuple(VENDI_DEFAULTS))
    vendi = {**VENDI_DEFAULTS, **value}
    if vendi["size"] != "common":
        vendi["size"] = mapping_int(path, "vendi.size", vendi["size"], 2)
    vendi["draws"] = mapping_int(path, "vendi.draws", vendi["draws"], 1)
    vendi["seed"] = mapping_int(path, "vendi.seed", vendi["seed"], 0)
    vendi["min_envs"] = mapping_int(path, "vendi.min_envs", vendi["min_envs"], 2)
    if vendi["balance_by"] not in BALANCE_BY:
        raise mapping_error(path, "vendi.balance_by", f"must be one of {', '.join(BALANCE_BY)}, "
                                                      f"got {vendi['balance_by']!r}")
    return vendi


def _number(path, key: str, value, low: float, high: float, open_interval: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (low < value < high if open_interval else low <= value <= high)
    if not ok:
        bounds = f"({low:g}, {high:g})" if open_interval else f"[{low:g}, {high:g}]"
        raise mapping_error(path, key, f"must be a number in {bounds}, got {value!r}")
    return float(value)


def load_comparison_runs(path: str | Path) -> dict:
    """The validated source mapping (``paper/comparison_runs.yaml``; its keys are documented in the file).

    Returns ``{"path", "sources": [{"where", "label", "kind", "run"}], "heldout": [{"key", "header", "parts"}],
    "base_run", "step", "band", "vendi", "embedding", "field", "confidence"}``. A missing file, bad YAML, an unknown
    key or a bad value raises :class:`ReportInputError` naming the file and the key.
    """
    path = Path(path)
    data = read_yaml(path, "source comparison mapping")
    if not isinstance(data, dict):
        raise ReportInputError(f"{path} must hold a mapping at the top level")
    check_keys(path, "", data, _TOP_KEYS)
    base = mapping_runs(path, "base_run", data.get("base_run"))
    if len(base) > 1:
        raise mapping_error(path, "base_run", f"must name one run (or null), got {base!r}")
    step = data.get("step", "last")
    if step == "base" or step == 0:
        raise mapping_error(path, "step", "must be last, selected or a trained step number > 0 (the gain is measured "
                                          f"against step 0), got {step!r}")
    if isinstance(step, str) and step not in STEP_RULES:
        raise mapping_error(path, "step", f"must be one of {', '.join(STEP_RULES)} or a step number > 0, got {step!r}")
    mapping_step_rule(path, "step", step)
    band = data.get("learnable_band", list(DEFAULT_BAND))
    if not (isinstance(band, list) and len(band) == 2):
        raise mapping_error(path, "learnable_band", f"must be [low, high], got {band!r}")
    low, high = (_number(path, "learnable_band", b, 0.0, 1.0) for b in band)
    if low > high:
        raise mapping_error(path, "learnable_band", f"low {low:g} is above high {high:g}")
    embedding = data.get("embedding", "sbert")
    if embedding not in EMBEDDINGS:
        raise mapping_error(path, "embedding", f"must be one of {', '.join(EMBEDDINGS)}, got {embedding!r}")
    return {"path": str(path), "sources": _sources(path, data.get("sources")),
            "heldout": _heldout(path, data.get("heldout")), "base_run": base[0] if base else None, "step": step,
            "band": (low, high), "vendi": _vendi(path, data.get("vendi")), "embedding": embedding,
            "field": _text(path, "field", data.get("field", "code")),
            "confidence": _number(path, "confidence", data.get("confidence", 0.95), 0.0, 1.0, open_interval=True)}


def comparison_runs(mapping: dict) -> list[str]:
    """Every run the mapping reads (the sources' runs and the base run), sorted."""
    runs = {s["run"] for s in mapping["sources"] if s["run"]}
    return sorted(runs | ({mapping["base_run"]} if mapping["base_run"] else set()))


def run_files(runs_root: str | Path, runs: Sequence[str]) -> list[Path]:
    """The existing files of the named run folders that the comparison reads, sorted."""
    found = set()
    for run in runs:
        folder = Path(runs_root) / run
        if folder.is_dir():
            for pattern in RUN_FILE_PATTERNS:
                found.update(p for p in folder.glob(pattern) if p.is_file())
    return sorted(found)


def run_fingerprint(runs_root: str | Path, runs: Sequence[str]) -> str:
    """The Snakemake parameter of the table rule: :func:`spade.paper.report.files_fingerprint` of :func:`run_files`."""
    return files_fingerprint(runs, run_files(runs_root, runs))
