"""Every CPU adaptation of OpenRLHF 0.11.2 the CPU integration run needs, and nothing else.

Loaded only by the integration run (``spade.rlhf.cpu.run``): its ``site/`` folder is on ``PYTHONPATH`` of the
local Ray cluster and the driver, and ``site/sitecustomize.py`` calls ``install()`` at interpreter start in
every process (driver and Ray workers). Nothing here is imported by the GPU path, so GPU runs execute
OpenRLHF unchanged. Each patch names the OpenRLHF lines it stands in for (paths relative to the installed
``openrlhf/`` package) and is applied right after its module is first imported.

CUDA calls OpenRLHF makes unconditionally (the CPU build of torch raises on each):

- ``torch.cuda.set_device``: ``utils/deepspeed/deepspeed.py:97`` (the Ray launcher sets LOCAL_RANK) -> nothing;
- ``torch.cuda.current_device``: used as a tensor device in ``trainer/ppo_utils/replay_buffer.py:104,129,159,
  165``, ``utils/deepspeed/deepspeed.py:614,633-634``, ``trainer/ray/ppo_actor.py:148,171,627``,
  ``trainer/ray/launcher.py:136,190``, ``models/ring_attn_utils.py:43`` -> ``"cpu"``;
- ``torch.cuda.synchronize``: ``utils/distributed_util.py:10``, ``trainer/ray/launcher.py:65``,
  ``trainer/ray/ppo_actor.py:605``, ``trainer/ray/vllm_worker_wrap.py:70`` -> nothing (CPU ops are synchronous);
- ``torch.cuda.current_stream``: ``trainer/ray/ppo_actor.py:436`` (the stream argument of the weight
  broadcast) -> ``None``;
- ``init_device_mesh("cuda", ...)``: ``utils/deepspeed/deepspeed.py:105`` -> the same mesh on ``"cpu"``
  (DeepSpeed's process group is gloo under ``DS_ACCELERATOR=cpu``);
- ``torch.device(f"cuda:{torch.cuda.current_device()}")``: ``trainer/ppo_utils/replay_buffer.py:40`` ->
  ``torch.device("cpu")``;
- ``torch.empty(shape, dtype=dtype, device="cuda")`` and the stream argument in
  ``trainer/ray/vllm_worker_wrap.py:40,46`` (the engine side of the weight sync) -> the same receive into a
  CPU tensor, then OpenRLHF's own ``load_weights`` call.

Beside them, ``PATCHES`` installs the run's records and mutations (``spade.rlhf.cpu.probes``): weight checksums on
both sides of every sync, the advantages OpenRLHF trains on, the rewards our executor returned.

The other CUDA-only pieces are replaced outside this module: ``vllm`` and ``flash_attn`` by the stand-in
packages in ``site/`` (their docstrings say what they do and do not do).
"""

from __future__ import annotations

import functools
import importlib.abc
import sys

from spade.rlhf.cpu import probes


def _patch_torch(torch) -> None:
    cuda = torch.cuda
    cuda.set_device = lambda device: None
    cuda.current_device = lambda: "cpu"
    cuda.synchronize = lambda device=None: None
    cuda.current_stream = lambda device=None: None


def _patch_deepspeed_strategy(module) -> None:
    real = module.init_device_mesh

    @functools.wraps(real)
    def init_device_mesh(device_type, *args, **kwargs):
        return real("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    module.init_device_mesh = init_device_mesh


class _CpuDevices:
    """``torch`` as the replay-buffer module sees it while its ``__init__`` runs: every attribute is torch's,
    except that ``device("cuda:...")`` is the CPU."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def device(self, spec, *args):
        return self._torch.device("cpu") if str(spec).startswith("cuda") else self._torch.device(spec, *args)


def _patch_replay_buffer(module) -> None:
    cls = module.NaiveReplayBuffer
    real = cls.__init__

    @functools.wraps(real)
    def __init__(self, *args, **kwargs):
        torch = module.torch
        module.torch = _CpuDevices(torch)  # only this module's global name, only for line 40
        try:
            real(self, *args, **kwargs)
        finally:
            module.torch = torch

    cls.__init__ = __init__


def _patch_worker_wrap(module) -> None:
    def update_weight(self, name, dtype, shape, empty_cache=False):
        import torch

        if dtype != self.model_config.dtype:
            raise TypeError(f"weight {name}: trainer sends {dtype}, the engine holds {self.model_config.dtype}")
        weight = torch.empty(shape, dtype=dtype, device="cpu")
        if self._model_update_with_ray:
            import ray.util.collective as collective

            collective.broadcast(weight, 0, group_name=self._model_update_group)
        else:
            self._model_update_group.broadcast(weight, src=0, stream=None)
        probes.engine_loaded(self, name, weight, last=empty_cache)  # OpenRLHF's load_weights call, then the record

    module.WorkerWrap.update_weight = update_weight


PATCHES = {
    "torch": _patch_torch,
    "openrlhf.utils.deepspeed.deepspeed": _patch_deepspeed_strategy,
    "openrlhf.trainer.ppo_utils.replay_buffer": _patch_replay_buffer,
    "openrlhf.trainer.ray.vllm_worker_wrap": _patch_worker_wrap,
    # the run's records and mutations (spade.rlhf.cpu.probes), not CUDA adaptations
    "openrlhf.trainer.ray.ppo_actor": probes.patch_actor,
    "openrlhf.trainer.ppo_utils.experience_maker": probes.patch_experience_maker,
    "spade.rlhf.executor": probes.patch_executor,
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds a patched module with the other finders, then runs its patch right after the module executes."""

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Patch the modules already imported and every patched module imported from now on."""
    if any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        return
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport())
