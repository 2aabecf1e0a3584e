"""A stand-in for the few vLLM names OpenRLHF 0.11.2 uses, for the CPU integration run only.

vLLM has no build for this machine's CPU that runs inside CI's time, so this package takes its place on
``PYTHONPATH`` of the integration run (``spade.rlhf.cpu``) and nowhere else: the GPU image installs the real
vLLM 0.29.0. Everything OpenRLHF does around the engine is its own code, unchanged: its ``RolloutRayActor``
(a real Ray actor) builds this engine from the same ``AsyncEngineArgs``, awaits ``generate`` for every turn,
and syncs weights into it through ``collective_rpc`` and OpenRLHF's own ``WorkerWrap`` over a real gloo
process group. Generation is our ``HFBackend`` (Hugging Face ``generate`` with per-request seeds and
temperature-scaled log-probs, the quantity ``logprobs_mode="processed_logprobs"`` reports).

What differs from vLLM, and so is not tested by the integration run: paged attention and prefix caching,
continuous batching (requests run one at a time), sleep mode (CUDA-only in vLLM; here a state flag), and tensor
parallelism (one worker per engine). As in vLLM, ``top_k`` limits the draws (-1 or 0 = off), ``min_tokens``
(OpenRLHF passes 1) masks the eos until that many tokens were sampled, in the samples and the reported log-probs,
and ``stop`` strings end a completion (``stop_string_cut``).
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass, field

__version__ = "0.29.0"  # the version OpenRLHF 0.11.2 pins; its engine checks ``> 0.8.5`` and ``> 0.10.0``


@dataclass
class SamplingParams:
    """The fields OpenRLHF's samples generator sets and our executor copies and changes."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    min_tokens: int = 0
    seed: int | None = None
    logprobs: int | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    stop: list = field(default_factory=list)


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None
    logprobs: list | None  # one {token id: Logprob} per sampled token, or None
    finish_reason: str | None = None  # "stop" (eos or a stop string) or "length"
    stop_reason: str | None = None  # the stop string that ended the completion, or None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list
    outputs: list
    finished: bool = True


class AsyncEngineArgs:
    """Keeps the keyword arguments OpenRLHF's ``create_vllm_engines`` builds (model, dtype, seed, ...)."""

    def __init__(self, *args, **kwargs):
        if args:
            raise TypeError(f"AsyncEngineArgs takes keyword arguments only, got positional {args!r}")
        self.kwargs = kwargs


@dataclass
class _ModelConfig:
    dtype: object  # torch dtype; OpenRLHF's WorkerWrap checks the trainer's weights against it


class _ModelRunner:
    """``model_runner.model.load_weights`` as vLLM's workers expose it, over a Hugging Face model."""

    def __init__(self, model):
        self.model = self
        self.hf_model = model
        self.params = dict(model.named_parameters())

    def load_weights(self, weights):
        import torch

        with torch.no_grad():
            for name, tensor in weights:
                if name not in self.params:
                    raise KeyError(f"weight {name!r} is not a parameter of the engine's model")
                target = self.params[name]
                if tuple(target.shape) != tuple(tensor.shape):
                    raise ValueError(f"weight {name!r}: engine shape {tuple(target.shape)}, got {tuple(tensor.shape)}")
                target.copy_(tensor.to(target.dtype))


class _Worker:
    """The worker OpenRLHF's ``worker_extension_cls`` (``WorkerWrap``) is mixed into, as vLLM does: it has
    ``device``, ``model_config``, ``model_runner`` and a single-rank default process group (vLLM workers
    initialise torch.distributed for their tensor-parallel group; ``WorkerWrap`` asserts it)."""

    def __init__(self, model_path: str, dtype: str, seed: int):
        import torch
        import torch.distributed as dist
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(seed)
        self.device = torch.device("cpu")
        self.model_config = _ModelConfig(getattr(torch, dtype) if isinstance(dtype, str) else dtype)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=self.model_config.dtype)
        model.eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model_runner = _ModelRunner(model)
        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _OutputProcessor:
    def __init__(self):
        self.unfinished = 0

    def get_num_unfinished_requests(self) -> int:
        return self.unfinished


def _worker_class(extension: str | None):
    if not extension:
        return _Worker
    module_name, _, class_name = extension.rpartition(".")
    extension_cls = getattr(importlib.import_module(module_name), class_name)
    return type("WorkerWithExtension", (extension_cls, _Worker), {})


class AsyncLLMEngine:
    """``generate`` / ``collective_rpc`` / sleep and pause calls of vLLM's async engine, on one CPU worker.

    Requests run one at a time, in arrival order, each with its own seed: a sample then depends only on the
    prompt, the seed and the weights, never on which requests ran beside it (what the kill-and-resume check
    of the integration run needs; vLLM batches continuously instead)."""

    def __init__(self, args: AsyncEngineArgs):
        from spade.inference.generation_hf import HFBackend

        kwargs = args.kwargs
        if int(kwargs.get("tensor_parallel_size", 1)) != 1:
            raise ValueError("the CPU stand-in engine has one worker: --vllm.tensor_parallel_size must be 1")
        self.worker = _worker_class(kwargs.get("worker_extension_cls"))(
            kwargs["model"], kwargs.get("dtype", "float32"), int(kwargs.get("seed", 0)))
        self.backend = HFBackend(self.worker.model_runner.hf_model, self.worker.tokenizer, batch_size=1)
        self.output_processor = _OutputProcessor()
        self.sleeping = False
        self._lock = asyncio.Lock()  # held by a running request and by a paused engine (weight sync)

    @classmethod
    def from_engine_args(cls, engine_args: AsyncEngineArgs) -> "AsyncLLMEngine":
        return cls(engine_args)

    # ----- control calls ---------------------------------------------------------------------------
    async def is_sleeping(self) -> bool:
        return self.sleeping

    async def sleep(self, level: int = 1) -> None:
        self.sleeping = True

    async def wake_up(self, tags=None) -> None:
        self.sleeping = False

    async def reset_prefix_cache(self) -> None:
        return None

    async def pause_generation(self, mode: str = "keep") -> None:
        await self._lock.acquire()

    async def resume_generation(self) -> None:
        if self._lock.locked():
            self._lock.release()

    async def collective_rpc(self, method: str, args=(), kwargs=None):
        """Runs ``method`` of the worker (``WorkerWrap``'s weight-sync calls) off the event loop; returns one
        result per worker, as vLLM does."""
        return [await asyncio.to_thread(getattr(self.worker, method), *args, **(kwargs or {}))]

    # ----- generation ------------------------------------------------------------------------------
    async def generate(self, prompt, sampling_params: SamplingParams, request_id: str):
        self.output_processor.unfinished += 1
        try:
            async with self._lock:
                if self.sleeping:
                    raise RuntimeError("generate() on a sleeping engine: OpenRLHF wakes its engines first")
                output = await asyncio.to_thread(self._generate, list(prompt["prompt_token_ids"]),
                                                 sampling_params, request_id)
        finally:
            self.output_processor.unfinished -= 1
        yield output

    def _generate(self, prompt_ids: list, p: SamplingParams, request_id: str) -> RequestOutput:
        from spade.inference.generation import SamplingParams as Ours

        if p.max_tokens is None or int(p.max_tokens) < 1:
            raise ValueError(f"max_tokens must be a positive int, got {p.max_tokens!r}")
        ours = Ours(temperature=float(p.temperature), top_p=float(p.top_p), max_new_tokens=int(p.max_tokens),
                    min_new_tokens=int(p.min_tokens or 0), top_k=max(int(p.top_k or 0), 0))
        g = self.backend.generate([prompt_ids], ours, [int(p.seed) if p.seed is not None else 0])[0]
        ids, lps, reason = list(g.completion_ids), list(g.logprobs), g.finish_reason
        text = self.worker.tokenizer.decode(ids, skip_special_tokens=p.skip_special_tokens)
        cut = stop_string_cut(ids, p, self.worker.tokenizer) if p.stop else None
        stop_reason = None
        if cut is not None:
            length, text, stop_reason = cut
            ids, lps, reason = ids[:length], lps[:length], "stop"
        logprobs = [{t: Logprob(lp)} for t, lp in zip(ids, lps)] if p.logprobs is not None else None
        return RequestOutput(request_id, prompt_ids, [CompletionOutput(
            0, text, ids, float(sum(lps)), logprobs, reason, stop_reason)])


def stop_string_cut(ids: list, p: SamplingParams, tokenizer):
    """Where vLLM would have stopped ``ids`` for one of ``p.stop``: (tokens kept, text, the stop string), or None.
    vLLM checks the text after every sampled token, keeps the token that completed the stop string and, unless
    ``include_stop_str_in_output``, cuts the text before it. Later tokens were never sampled there; here they were
    sampled and are dropped, which leaves the earlier ones unchanged (each row's draws are its own)."""
    stops = [p.stop] if isinstance(p.stop, str) else list(p.stop)
    for length in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:length], skip_special_tokens=p.skip_special_tokens)
        hits = [(text.find(stop), stop) for stop in stops if stop and stop in text]
        if hits:
            at, stop = min(hits)
            return length, (text[:at + len(stop)] if p.include_stop_str_in_output else text[:at]), stop
    return None
