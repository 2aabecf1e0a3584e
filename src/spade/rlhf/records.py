"""The run records of OpenRLHF runs with probes (the CPU integration run, the preflight): JSON lines appended by any
process of the run to ``<SPADE_CPU_RECORDS>/<kind>.jsonl``, read back by the checks (``spade.rlhf.cpu.checks``).
Written by ``spade.rlhf.cpu.probes`` and by the GPU weight sync (``spade.rlhf.weight_sync.synced``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

RECORDS_ENV = "SPADE_CPU_RECORDS"


def record(kind: str, row: dict) -> None:
    """Append ``row`` to ``<SPADE_CPU_RECORDS>/<kind>.jsonl`` (one write per line; nothing without the variable)."""
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{kind}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def read_records(folder, kind: str) -> list:
    path = Path(folder) / f"{kind}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
