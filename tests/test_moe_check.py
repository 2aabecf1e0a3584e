"""The preflight's MoE step (``spade.rlhf.moe_check``) on the real vLLM's CPU build: a tiny random Qwen3-MoE synced
with other weights and then its own decodes as it did first; the step fails when the sync corrupts the experts.

On the CPU the corruption is made by leaving out the hook that re-packs vLLM's CPU MoE kernels after a reload
(``spade.rlhf.vllm_cpu.reset_moe_kernels``): the experts then compute from stale packed weights, as a GPU MoE
backend's transformed weights would after a raw second load. vLLM's raw per-tensor load cannot even run twice on a
CPU engine (its linear layers drop their loaders after the first load)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("vllm_moe_check_run.py")


def run_step(mode: str, folder: Path) -> dict:
    from spade.rlhf import vllm_cpu

    done = subprocess.run([sys.executable, str(SCRIPT), mode, str(folder)], env=vllm_cpu.environment(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{SCRIPT.name} {mode} exited with {done.returncode}:\n{done.stderr[-6000:]}"
    return json.loads(done.stdout)


def test_a_sync_back_decodes_as_before(tmp_path):
    result = run_step("layerwise", tmp_path / "model")
    assert result == {"moe_backends": ["CPU"], "equal": True, "changed_by_b": True}


@pytest.mark.parametrize("mode, error", [("no_moe_hook", "MoeSyncMismatch"), ("raw", "AttributeError")])
def test_a_corrupting_sync_fails_the_step(tmp_path, mode, error):
    result = run_step(mode, tmp_path / "model")
    assert result["error"] == error, result
    if mode == "no_moe_hook":
        assert "synced B then A back decodes" in result["message"] and "vllm #42821" in result["message"]
