"""What the engine scripts run by the tests (``tests/vllm_*_run.py``) share: one JSON object on stdout, and
everything else the run prints on stderr."""

from __future__ import annotations

import json
import os


def reply(compute) -> int:
    """Call ``compute()`` with file descriptor 1 pointing at stderr (whatever vLLM, torch or their C++ code print lands
    there), then write its result as one JSON line to the real stdout. Returns the exit code 0."""
    result_fd = os.dup(1)
    os.dup2(2, 1)
    result = compute()
    with os.fdopen(result_fd, "w") as out:
        json.dump(result, out)
        out.write("\n")
    return 0
