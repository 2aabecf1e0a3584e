"""``HFBackend``: batched sampling with Hugging Face ``transformers``, on a CPU or one GPU.

The backend shares its model object with the local trainer, so it never copies or moves weights; it
only switches the model to eval mode for the duration of a call and then restores every submodule's
previous train/eval flag.

Log-probs. For each sampled token the backend reports ``log_softmax(logits / T)[token]`` where
``logits`` are the model's raw next-token logits (``output_logits``, before any processor) and ``T``
the sampling temperature; for ``T == 0`` (greedy) the raw logits are used. Top-p truncation changes
which tokens can be drawn but not the reported value. This is what a plain forward pass over
``prompt + completion`` gives for the same positions (``tests/test_generation_hf.py`` checks the two
agree to 1e-4), so the trainer's ratio pi_theta / pi_rollout starts at 1 for unchanged weights.

Reproducibility. Prompts are sorted by length into batches of at most ``batch_size`` prompts and, if
``max_batch_tokens`` is set, at most that many padded tokens (less padding); batch ``b`` of a call with
``seed`` draws from ``torch.manual_seed(derive(seed, b))`` inside ``torch.random.fork_rng``, so the same
prompts, parameters and seed give the same samples, and the caller's global RNG stream is left as it
was. Greedy results do not depend on how prompts are batched (up to float rounding).

Per-prompt seeds. ``seed`` may also be a list with one seed per prompt (evaluation uses this so that an
item's sample depends only on its own seed, not on which items share its batch or in which order they
come). Each row then samples by the Gumbel-max trick: ``argmax(logits / T + g)`` with ``g`` standard
Gumbel noise drawn from the row's own ``torch.Generator``, which draws exactly from
``softmax(logits / T)`` (restricted to the top-p nucleus when ``top_p < 1``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from contextlib import contextmanager
from typing import Sequence

import torch

from spade.generation import Generation, SamplingParams, generation_stats

log = logging.getLogger(__name__)


def batch_seed(seed: int, batch_index: int) -> int:
    """The torch seed of batch ``batch_index`` in a call made with ``seed`` (63-bit, well mixed)."""
    digest = hashlib.sha256(f"spade-hf-backend:{seed}:{batch_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@contextmanager
def _eval_mode(model):
    """Put ``model`` in eval mode; afterwards restore each submodule's own ``training`` flag."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in flags:
            module.training = training


@contextmanager
def _plain_generation_config(model, bos_token_id, eos_token_ids, pad_token_id):
    """Hide the model's own ``generation_config`` during a call.

    ``generate`` fills every option we leave unset from ``model.generation_config`` (a checkpoint may
    ship ``repetition_penalty``, ``top_k`` and the like); a bare config keeps sampling exactly to
    ``SamplingParams``.
    """
    from transformers import GenerationConfig

    saved = model.generation_config
    model.generation_config = GenerationConfig(bos_token_id=bos_token_id, eos_token_id=eos_token_ids,
                                               pad_token_id=pad_token_id)
    try:
        yield
    finally:
        model.generation_config = saved


class RowSeededGumbel:
    """Logits processor: ``logits / T`` (top-p masked) plus Gumbel noise from one generator per row.

    The argmax of the result is a draw from the tempered, nucleus-restricted softmax; row ``r``'s noise
    comes only from ``seeds[r]``, so its samples do not depend on the other rows of the batch.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float):
        self.generators = [torch.Generator().manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF) for s in seeds]
        self.temperature, self.top_p = temperature, top_p

    def __call__(self, input_ids, scores):
        scores = scores.float() / self.temperature
        if self.top_p < 1.0:
            ordered, index = torch.sort(scores, dim=-1, descending=True)
            mass_before = torch.softmax(ordered, dim=-1).cumsum(-1) - torch.softmax(ordered, dim=-1)
            drop = mass_before >= self.top_p  # keep the smallest prefix whose mass reaches top_p
            scores = scores.scatter(-1, index, ordered.masked_fill(drop, float("-inf")))
        uniform = torch.stack([torch.rand(scores.shape[-1], generator=g) for g in self.generators])
        gumbel = -torch.log(-torch.log(uniform.clamp(1e-12, 1.0 - 1e-7)))
        return scores + gumbel.to(scores.device)


class HFBackend:
    """``GenerationBackend`` over ``model.generate``; see the module docstring for the guarantees.

    ``model`` must already be on ``device`` (it is shared with the trainer and never moved here).
    ``eos_token_id`` (an id or a list of ids) overrides the tokenizer's eos as the stop token(s).
    """

    def __init__(self, model, tokenizer, device: str | torch.device = "cpu", batch_size: int = 16,
                 eos_token_id: int | Sequence[int] | None = None, max_batch_tokens: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens < 0:
            raise ValueError(f"max_batch_tokens must be >= 0 (0 = no limit), got {max_batch_tokens}")
        self.max_batch_tokens = max_batch_tokens
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.batch_size = batch_size
        if eos_token_id is None:
            eos_token_id = tokenizer.eos_token_id
        if eos_token_id is None:
            raise ValueError("the tokenizer has no eos token; pass eos_token_id")
        self.eos_token_ids = [int(eos_token_id)] if isinstance(eos_token_id, int) else [int(i) for i in eos_token_id]
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad) if pad is not None else self.eos_token_ids[0]
        self.last_stats: dict = {}

    # ------------------------------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 seed: int | Sequence[int]) -> list[Generation]:
        prompts = [list(map(int, p)) for p in prompts]
        row_seeds = None if isinstance(seed, int) else [int(s) for s in seed]
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ValueError(f"got {len(row_seeds)} seeds for {len(prompts)} prompts; pass one seed per prompt or one int")
        for index, prompt in enumerate(prompts):
            if not prompt:
                raise ValueError(f"prompt {index} is empty; every prompt needs at least one token")
        if params.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {params.temperature}")
        started = time.perf_counter()
        results: list[Generation | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
        devices = [self.device] if self.device.type != "cpu" else []
        bos = getattr(self.tokenizer, "bos_token_id", None)
        with torch.random.fork_rng(devices=devices, device_type=self.device.type if devices else "cuda"), \
                torch.no_grad(), _eval_mode(self.model), \
                _plain_generation_config(self.model, bos, self.eos_token_ids, self.pad_token_id):
            for batch_index, chunk in enumerate(self._batches(order, prompts, params.max_new_tokens)):
                seeds = None
                if row_seeds is None:
                    torch.manual_seed(batch_seed(seed, batch_index))
                else:
                    seeds = [row_seeds[i] for i in chunk]
                for i, generation in zip(chunk, self._generate_batch([prompts[i] for i in chunk], params, seeds)):
                    results[i] = generation
        self.last_stats = generation_stats(results, time.perf_counter() - started)
        log.debug("generated %(new_tokens)d tokens for %(prompts)d prompts in %(seconds).2f s", self.last_stats)
        return results

    def _batches(self, order: list[int], prompts: list, max_new_tokens: int) -> list[list[int]]:
        """Consecutive runs of ``order`` (prompts sorted by length) of at most ``batch_size`` prompts and, when
        ``max_batch_tokens`` is set, at most that many padded tokens (rows x (longest prompt + max_new_tokens)):
        long prompts then go in small batches instead of padding many short ones to their length."""
        batches, current = [], []
        for i in order:
            width = len(prompts[i]) + max_new_tokens  # the longest so far: order is by length
            fits = len(current) < self.batch_size and (
                not self.max_batch_tokens or (len(current) + 1) * width <= self.max_batch_tokens)
            if current and not fits:
                batches.append(current)
                current = []
            current.append(i)
        return batches + ([current] if current else [])

    # ------------------------------------------------------------------------------------------------
    def _generate_batch(self, batch: list[list[int]], params: SamplingParams, seeds=None) -> list[Generation]:
        from transformers import GenerationConfig, LogitsProcessorList

        width = max(len(p) for p in batch)
        input_ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, prompt in enumerate(batch):
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt):] = 1
        sample = params.temperature > 0
        options = dict(max_new_tokens=params.max_new_tokens, do_sample=sample, num_beams=1,
                       eos_token_id=self.eos_token_ids, pad_token_id=self.pad_token_id,
                       output_logits=True, return_dict_in_generate=True)
        processors = LogitsProcessorList()
        if sample and seeds is not None:  # per-row Gumbel-max sampling, decoded greedily
            options["do_sample"] = False
            processors.append(RowSeededGumbel(seeds, params.temperature, params.top_p))
        elif sample:
            options.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                                  generation_config=GenerationConfig(**options), logits_processor=processors)
        new_ids = out.sequences[:, width:].cpu()
        steps = new_ids.shape[1]
        logprobs = torch.empty((len(batch), steps), dtype=torch.float32)
        for t, step_logits in enumerate(out.logits):  # one [B, V] tensor per generated position
            scores = step_logits.float()
            if sample:
                scores = scores / params.temperature
            chosen = new_ids[:, t:t + 1].to(scores.device)
            logprobs[:, t] = torch.log_softmax(scores, dim=-1).gather(1, chosen).squeeze(1).cpu()
        stop = torch.isin(new_ids, torch.tensor(self.eos_token_ids, dtype=torch.long))
        generations = []
        for row in range(len(batch)):
            hits = torch.nonzero(stop[row]).flatten()
            if len(hits):
                length, reason = int(hits[0]) + 1, "stop"
            else:
                length, reason = steps, "length"
            ids = new_ids[row, :length].tolist()
            generations.append(Generation(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                completion_ids=ids,
                logprobs=logprobs[row, :length].tolist(),
                finish_reason=reason,
            ))
        return generations
