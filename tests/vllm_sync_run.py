"""The engine half of ``tests/test_weight_sync_gpu_path.py``: the GPU path's weight sync (``spade.rlhf.weight_sync
.patch_worker_wrap``) through vLLM 0.29.0's own layerwise reload, on a model-free layer whose weights are transformed
after loading, as FlashInfer CUTLASS transforms an MoE layer's ``w13`` (gate and up halves swapped in place).

vLLM's CPU build picks no such backend, so the layer is ours: ``SwappedExperts`` holds ``w13_weight`` [E, 2I, H] and
``w2_weight`` [E, H, I] with vLLM's default weight loader, and a ``QuantizeMethodBase`` whose
``process_weights_after_loading`` swaps the halves of ``w13`` in place. Everything else is vLLM's: the engine build
(``record_metadata_for_reloading``, the loads, the processing), the layerwise reload that ``receive`` opens and
closes. ``WorkerWrap`` here stands in for OpenRLHF 0.11.2's (which needs CUDA to receive): its two methods have the
real ones' signatures and call ``self.model_runner.model.load_weights(weights=[(name, weight)])`` as the real ones do
(``tests/test_weight_sync_gpu_path.py`` checks both against OpenRLHF's source).

With ``--moe-priority`` it prints instead vLLM 0.29.0's priority of unquantized MoE backends on a CUDA device of
capability family 90 (H100/H200) and 100 (B200), read by ``_get_priority_backends`` with the platform stood in.

Usage: ``python tests/vllm_sync_run.py [--moe-priority]``; stdout carries one JSON object.
"""

from __future__ import annotations

import sys
import types

from json_reply import reply

E, I, H = 4, 3, 5  # experts, intermediate rows, hidden columns
LAYERS = 2


def build():
    import torch
    from torch import nn
    from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase
    from vllm.model_executor.model_loader.weight_utils import default_weight_loader

    class SwapGateUp(QuantizeMethodBase):
        """What FlashInfer CUTLASS does to an unquantized MoE layer after loading: w13's halves swapped in place."""

        def create_weights(self, layer, *args, **kwargs):
            pass

        def apply(self, layer, *args, **kwargs):
            raise NotImplementedError

        def process_weights_after_loading(self, layer):
            w13 = layer.w13_weight.data
            w13.copy_(torch.cat([w13[:, I:], w13[:, :I]], dim=1))

    class SwappedExperts(nn.Module):
        def __init__(self):
            super().__init__()
            self.w13_weight = nn.Parameter(torch.empty(E, 2 * I, H), requires_grad=False)
            self.w2_weight = nn.Parameter(torch.empty(E, H, I), requires_grad=False)
            self.quant_method = SwapGateUp()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(SwappedExperts() for _ in range(LAYERS))

        def load_weights(self, weights):
            params = dict(self.named_parameters())
            names = set()
            for name, tensor in weights:
                param = params[name]
                getattr(param, "weight_loader", default_weight_loader)(param, tensor)
                names.add(name)
            return names

    return Model


def weights(seed: int) -> list:
    import torch

    generator = torch.Generator().manual_seed(seed)
    out = []
    for layer in range(LAYERS):
        out.append((f"layers.{layer}.w13_weight", torch.randn(E, 2 * I, H, generator=generator)))
        out.append((f"layers.{layer}.w2_weight", torch.randn(E, H, I, generator=generator)))
    return out


def engine(model_cls, named: list):
    """An engine's model built from ``named`` as vLLM builds one: metadata recorded, weights loaded, processed."""
    from vllm.model_executor.model_loader.reload import record_metadata_for_reloading

    model = model_cls()
    record_metadata_for_reloading(model)
    model.load_weights(named)
    for layer in model.modules():
        method = getattr(layer, "quant_method", None)
        if method is not None:
            method.process_weights_after_loading(layer)
    return model


def state(model) -> dict:
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class WorkerWrap:
    """OpenRLHF 0.11.2's ``WorkerWrap`` receiving methods, minus CUDA: the broadcast or the IPC handle hands over
    ``self.incoming[name]``; ``fail_on`` makes the broadcast of that name raise before anything is loaded."""

    def update_weight(self, name, dtype, shape, empty_cache=False):
        if name == self.fail_on:
            raise RuntimeError(f"broadcast of {name} failed")
        weight = self.incoming[name].clone()  # the receive buffer
        self.model_runner.model.load_weights(weights=[(name, weight)])
        del weight

    def update_weight_cuda_ipc(self, name, dtype, shape, ipc_handles=None, empty_cache=False):
        weight = self.incoming[name]  # the actor's own memory, mapped
        self.model_runner.model.load_weights(weights=[(name, weight)])


def worker(model):
    import torch
    from vllm.config import VllmConfig

    w = WorkerWrap()
    w.model_runner = types.SimpleNamespace(model=model)
    w.model_config = types.SimpleNamespace(dtype=torch.float32)
    w.vllm_config = VllmConfig()
    w.fail_on = None
    w.incoming = {}
    return w


def sync(w, named: list, method: str = "update_weight", reuse_memory: bool = False) -> None:
    """One sync in OpenRLHF's order, one call per tensor, the last flagged ``empty_cache``. ``reuse_memory``: after
    each call the sender overwrites the tensor it handed over (the actor's memory after a CUDA-IPC call)."""
    for i, (name, tensor) in enumerate(named):
        w.incoming = {name: tensor.clone()}
        getattr(w, method)(name, tensor.dtype, tuple(tensor.shape), empty_cache=i == len(named) - 1)
        if reuse_memory:
            w.incoming[name].fill_(7.0)


def scenario() -> dict:
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    import torch

    from spade.rlhf import weight_sync

    model_cls = build()
    a, b = weights(0), weights(1)
    fresh = {"a": state(engine(model_cls, a)), "b": state(engine(model_cls, b))}
    out = {"fresh_differ": not same(fresh["a"], fresh["b"])}

    # OpenRLHF's raw per-tensor load into the processed layer: checkpoint rows land in the kernel's layout
    raw = engine(model_cls, a)
    w = worker(raw)
    sync(w, b)
    out["raw_equals_fresh_b"] = same(state(raw), fresh["b"])

    # the same calls with the patch: B, then A, then B again, each equal to an engine built fresh from it
    module = types.SimpleNamespace(WorkerWrap=WorkerWrap)
    weight_sync.patch_worker_wrap(module)
    weight_sync.patch_worker_wrap(module)  # a second install changes nothing
    patched = engine(model_cls, a)
    pointers = {name: p.data_ptr() for name, p in patched.named_parameters()}
    w = worker(patched)
    out["receive"] = []
    for target in ("b", "a", "b"):
        sync(w, b if target == "b" else a)
        out["receive"].append(same(state(patched), fresh[target]))
    out["pointers_kept"] = pointers == {name: p.data_ptr() for name, p in patched.named_parameters()}

    # CUDA IPC: the actor's memory is reused after each call, while a layer waits for its second tensor
    ipc = engine(model_cls, a)
    w = worker(ipc)
    sync(w, b, "update_weight_cuda_ipc", reuse_memory=True)
    out["ipc_equals_fresh_b"] = same(state(ipc), fresh["b"])

    # a sync that dies halfway (the broadcast of layer 1's w13 fails): no layer left on the meta device, no open
    # reload, and the next whole sync lands
    broken = engine(model_cls, a)
    w = worker(broken)
    w.fail_on = "layers.1.w13_weight"
    try:
        sync(w, b)
        out["halfway_raised"] = False
    except RuntimeError:
        out["halfway_raised"] = True
    out["meta_after_failure"] = [name for name, p in broken.named_parameters() if p.device.type == "meta"]
    out["open_after_failure"] = weight_sync.SESSION_ATTR in w.__dict__
    w.fail_on = None
    sync(w, a)
    out["next_sync_equals_fresh_a"] = same(state(broken), fresh["a"])
    out["instance_load_weights_left"] = "load_weights" in patched.__dict__
    return out


def moe_priority() -> dict:
    """{capability family: [backend, ...]} for a bf16 Qwen3-MoE layer (SiLU, no data parallelism)."""
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.oracle import unquantized

    config = types.SimpleNamespace(moe_parallel_config=types.SimpleNamespace(dp_size=1), activation=MoEActivation.SILU)
    real = unquantized.current_platform
    out = {}
    try:
        for family in (90, 100):
            unquantized.current_platform = types.SimpleNamespace(
                is_rocm=lambda: False, is_cuda=lambda: True, is_xpu=lambda: False, is_cpu=lambda: False,
                is_device_capability_family=lambda f, family=family: f == family)
            out[str(family)] = [backend.name for backend in unquantized._get_priority_backends(config)]
    finally:
        unquantized.current_platform = real
    return out


def main() -> int:
    return reply(moe_priority if sys.argv[1:] == ["--moe-priority"] else scenario)


if __name__ == "__main__":
    sys.exit(main())
