"""What the CPU integration run records inside OpenRLHF's processes, and the mutations its tests switch on.

Installed with the CUDA patches (``spade.rlhf.cpu.patches.PATCHES``) in the integration run's processes, and alone
(``GPU_PATCHES``) in the preflight's (``spade.rlhf.preflight``); a paper run installs none. With
``SPADE_CPU_RECORDS=<folder>`` every process appends JSON lines there:

- ``actor_sync.jsonl``: after each ``ActorPPOTrainer.broadcast_to_vllm`` (``trainer/ray/ppo_actor.py:409``), rank 0's
  checksum of the DeepSpeed actor's weights as it sent them (``param.dtype``: the engine refuses any other dtype
  than its own, ``patches._patch_worker_wrap``, so this is the engine's dtype);
- ``engine_sync.jsonl``: after the engine has loaded the last weight of a sync (OpenRLHF marks it
  ``empty_cache=True``), the checksum of the stand-in engine's weights as it now holds them (on a real vLLM engine,
  ``patch_worker_received``: of the weights each worker process received);
- ``experiences.jsonl``: per sample, the advantages OpenRLHF's trainer holds after
  ``RemoteExperienceMaker.compute_advantages_and_returns`` (``trainer/ppo_utils/experience_maker.py:238``), i.e.
  what the actors train on, with the sample's label, token ids and action positions;
- ``executor.jsonl``: per response, the ``reward`` our ``SpadeAgentExecutor.execute`` returned to OpenRLHF.

``SPADE_CPU_MUTATE`` (comma-separated, for the checks' mutation tests): ``skip_sync`` makes the engine receive each
weight but not load it; ``flip_advantages`` negates every advantage after OpenRLHF computed it (before the record).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

RECORDS_ENV = "SPADE_CPU_RECORDS"
MUTATE_ENV = "SPADE_CPU_MUTATE"
MUTATIONS = ("skip_sync", "flip_advantages")


def mutations() -> set:
    names = {name for name in os.environ.get(MUTATE_ENV, "").split(",") if name}
    unknown = sorted(names - set(MUTATIONS))
    if unknown:
        raise ValueError(f"environment variable {MUTATE_ENV} names {unknown}; allowed: {list(MUTATIONS)}")
    return names


def record(kind: str, row: dict) -> None:
    """Append ``row`` to ``<SPADE_CPU_RECORDS>/<kind>.jsonl`` (one write per line; nothing without the variable)."""
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{kind}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def read_records(folder, kind: str) -> list:
    path = Path(folder) / f"{kind}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def tensor_digest(name: str, tensor) -> str:
    """SHA-256 of one tensor's name, dtype, shape and raw bytes."""
    import torch

    data = tensor.detach().cpu().contiguous()
    digest = hashlib.sha256(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
    digest.update(data.flatten().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def combined_checksum(digests: dict) -> str:
    """One checksum of {name: tensor_digest}, in name order: equal iff every tensor is bit-identical."""
    return hashlib.sha256("".join(f"{name}={digests[name]};" for name in sorted(digests)).encode()).hexdigest()


def weights_checksum(named_tensors) -> str:
    return combined_checksum({name: tensor_digest(name, tensor) for name, tensor in named_tensors})


def sequence_key(token_ids) -> str:
    """A short hash of a response's full token sequence (prompt and response), to pair samples across records."""
    return hashlib.sha256(json.dumps([int(t) for t in token_ids]).encode()).hexdigest()[:20]


def patch_actor(module) -> None:
    cls = module.ActorPPOTrainer
    real = cls.broadcast_to_vllm

    @functools.wraps(real)
    def broadcast_to_vllm(self):
        import deepspeed
        import torch

        real(self)
        params = list(self.actor.model.module.named_parameters())
        # under ZeRO-3 every rank holds a shard: all ranks gather (a collective), rank 0 computes
        with deepspeed.zero.GatheredParameters([p for _, p in params], enabled=self.strategy.args.ds.zero_stage == 3):
            if torch.distributed.get_rank() == 0:
                self._spade_syncs = getattr(self, "_spade_syncs", 0) + 1
                record("actor_sync", {"sync": self._spade_syncs, "params": len(params),
                                      "checksum": weights_checksum(params)})

    cls.broadcast_to_vllm = broadcast_to_vllm


def engine_loaded(worker, name: str, weight, last: bool) -> None:
    """The engine side of one received weight (``patches._patch_worker_wrap``): its digest, then its load into vLLM's
    model unless ``skip_sync``; after the last weight of a sync, record the checksum of what the engine received.
    What vLLM's loader made of it (its CPU kernels repack the weights, so they cannot be read back bit for bit) is
    checked by behaviour: the greedy decode after each sync (``patch_samples_generator``) and the engine's sampled
    log-probs against the actor's (``experiences.jsonl``)."""
    received = worker.__dict__.setdefault("_spade_received", {})
    received[name] = tensor_digest(name, weight)
    if "skip_sync" not in mutations():
        pending = worker.__dict__.setdefault("_spade_pending", [])  # PROVISIONAL: until spade.rlhf.weight_sync
        pending.append((name, weight))
        if last:
            worker.model_runner.reload_weights(weights_iterator=iter(pending), is_checkpoint_format=True)
            pending.clear()
    if last:
        worker._spade_syncs = getattr(worker, "_spade_syncs", 0) + 1
        record("engine_sync", {"sync": worker._spade_syncs, "params": len(received), "worker": os.getpid(),
                               "checksum": combined_checksum(received)})
        received.clear()


def patch_worker_received(module) -> None:
    """On a real vLLM engine (the preflight, ``spade.rlhf.preflight``): record the checksum of the weights the engine
    received in each sync, as handed to its ``load_weights`` by OpenRLHF's ``WorkerWrap.update_weight`` (NCCL) or
    ``update_weight_cuda_ipc`` (CUDA IPC), under the names the actor sent. What vLLM's loader then does with them
    (fused projections, sharding) is not read back: the preflight shows loading through OpenRLHF's ``logprobs_diff``
    and ``vllm_kl`` on the steps after a sync."""
    cls = module.WorkerWrap
    for method in ("update_weight", "update_weight_cuda_ipc"):
        setattr(cls, method, _recording_update(getattr(cls, method)))


def _recording_update(real):
    @functools.wraps(real)
    def update(self, name, *args, **kwargs):
        model = self.model_runner.model
        load = model.load_weights
        received = self.__dict__.setdefault("_spade_received", {})

        def recording_load(weights, *load_args, **load_kwargs):
            weights = list(weights)
            for weight_name, tensor in weights:
                received[weight_name] = tensor_digest(weight_name, tensor)
            return load(weights, *load_args, **load_kwargs)

        model.load_weights = recording_load  # an instance attribute over the method, for this call only
        try:
            result = real(self, name, *args, **kwargs)
        finally:
            del model.load_weights
        if kwargs.get("empty_cache"):  # OpenRLHF marks the sync's last weight
            self._spade_syncs = getattr(self, "_spade_syncs", 0) + 1
            record("engine_sync", {"sync": self._spade_syncs, "params": len(received), "worker": os.getpid(),
                                   "checksum": combined_checksum(received)})
            received.clear()
        return result

    return update


def patch_experience_maker(module) -> None:
    cls = module.RemoteExperienceMaker
    real = cls.compute_advantages_and_returns

    @functools.wraps(real)
    def compute_advantages_and_returns(self, experiences):
        experiences = real(self, experiences)
        if "flip_advantages" in mutations():
            for experience in experiences:
                experience.advantages = -experience.advantages
        self._spade_batches = getattr(self, "_spade_batches", 0) + 1
        group = self.strategy.args.rollout.n_samples_per_prompt
        for experience in experiences:
            for i, label in enumerate(experience.labels):
                tokens = experience.sequences[i][experience.attention_mask[i].bool()].tolist()
                mask = experience.action_mask[i].bool()
                advantages = experience.advantages[i][mask]
                record("experiences", {
                    "batch": self._spade_batches, "label": label, "group": experience.index[i] // group,
                    "key": sequence_key(tokens), "tokens": tokens,
                    "actions": [int(j) + 1 for j in mask.nonzero().flatten().tolist()],  # action_mask is sequences[1:]
                    "advantage_min": float(advantages.min()) if len(advantages) else None,
                    "advantage_max": float(advantages.max()) if len(advantages) else None,
                    "reward": float(experience.info["reward"][i])})
        return experiences

    cls.compute_advantages_and_returns = compute_advantages_and_returns


def patch_executor(module) -> None:
    cls = module.SpadeAgentExecutor
    real = cls.execute

    @functools.wraps(real)
    async def execute(self, *args, **kwargs):
        out = await real(self, *args, **kwargs)
        record("executor", {"label": out["label"], "key": sequence_key(out["observation_tokens"]),
                            "reward": out["reward"], "step": out["extra_logs"]["spade_step"]})
        return out

    cls.execute = execute


# the probes of a run on real GPUs (spade.rlhf.preflight): records only, no CUDA stand-in, no mutation hook on the
# engine side (patch_worker_received replaces nothing)
GPU_PATCHES = {
    "openrlhf.trainer.ray.ppo_actor": patch_actor,
    "openrlhf.trainer.ray.vllm_worker_wrap": patch_worker_received,
    "openrlhf.trainer.ppo_utils.experience_maker": patch_experience_maker,
    "spade.rlhf.executor": patch_executor,
}
