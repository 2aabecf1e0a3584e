"""Seeds: every random choice derives its seed from the master seed and names (no global state)."""

from __future__ import annotations

import hashlib


def derive_seed(*parts) -> int:
    """A stable 31-bit seed from any parts (hash-based, independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
