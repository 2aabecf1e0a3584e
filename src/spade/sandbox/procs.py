"""Process-tree helpers (Linux ``/proc``), used to tear a worker down child-first."""

from __future__ import annotations

import os


def _parents() -> dict:
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list:
    """Pids of every live process below ``pid``, parents before children."""
    children, found, queue = _parents(), [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found
