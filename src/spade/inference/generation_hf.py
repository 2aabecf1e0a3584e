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

Prefix reuse (``prefix_cache_tokens`` > 0; issue 17). The keys and values of every sequence the model has processed
(a prompt plus its sampled tokens) are kept per row, up to that many tokens in all (least recently used first out).
A later prompt that starts with tokens of a kept sequence (the next turn of the same episode, another attempt at the
same designer prompt) reuses their keys and values and prefills only the rest; prompts of one call that share a
long common prefix (the system prompt of a group's plays) have it prefilled once. The batch's cached parts are
left-padded and its new parts right-aligned, with the padding masked and positions counted over real tokens only, so
every row attends to exactly its own tokens at their own positions: the same numbers as a full prefill up to float
rounding (``tests/test_generation_hf.py``). The kept entries belong to the weights that computed them: any change
to a parameter (an optimizer step) empties the cache before the next call.

Row prefill (``row_prefill``). A batch whose rows have prompts (beyond their cached parts) of unequal length would
pad the shorter ones to the longest in the batched prefill; with ``row_prefill`` each row is prefilled alone instead
(batch size 1, no padding) and the batch's forward pass takes only each row's last token, as if the rows had come
from the prefix cache: the same numbers up to float rounding. It pays where prefill is compute-bound (a CPU).

Decode kernels (``decode_kernels``, on by default). Grouped-query attention without copying keys and values, and a
cache preallocated for prompt + ``max_new_tokens`` (``spade.inference.hf_decode``): the same numbers up to float rounding;
``decode_kernels=False`` keeps ``transformers``' stock path (``spade bench step`` times both in one run).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Sequence

import torch

from spade.inference.generation import Generation, SamplingParams, generation_stats, timed_out
from spade.inference.hf_decode import grouped_attention, preallocated_cache

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
    """Logits processor: ``logits / T`` (top-k, then top-p masked) plus Gumbel noise from one generator per row.

    The argmax of the result is a draw from the tempered, nucleus-restricted softmax; row ``r``'s noise
    comes only from ``seeds[r]``, so its samples do not depend on the other rows of the batch.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, top_k: int = 0):
        self.generators = [torch.Generator().manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF) for s in seeds]
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k

    def __call__(self, input_ids, scores):
        scores = scores.float() / self.temperature
        if 0 < self.top_k < scores.shape[-1]:  # the k largest stay (ties at the k-th value stay too), as vLLM's
            kth = torch.topk(scores, self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, index = torch.sort(scores, dim=-1, descending=True)
            mass_before = torch.softmax(ordered, dim=-1).cumsum(-1) - torch.softmax(ordered, dim=-1)
            drop = mass_before >= self.top_p  # keep the smallest prefix whose mass reaches top_p
            scores = scores.scatter(-1, index, ordered.masked_fill(drop, float("-inf")))
        uniform = torch.stack([torch.rand(scores.shape[-1], generator=g) for g in self.generators])
        gumbel = -torch.log(-torch.log(uniform.clamp(1e-12, 1.0 - 1e-7)))
        return scores + gumbel.to(scores.device)


class FirstLogitsClock:
    """Logits processor that changes nothing and notes when the first token's logits are ready: what ``generate``
    spent before is the prefill, what it spends after is decoding."""

    def __init__(self):
        self.first = None

    def __call__(self, input_ids, scores):
        if self.first is None:
            if scores.device.type == "cuda":
                torch.cuda.synchronize(scores.device)
            self.first = time.perf_counter()
        return scores


SHARED_PREFIX_MIN_TOKENS = 16  # a common prefix of a call's prompts shorter than this is not prefilled on its own


@dataclass
class CachedSequence:
    """Keys and values of one processed sequence: ``layers[i] = (keys [H, L, D], values [H, L, D])``."""

    tokens: tuple  # [L] the token ids
    layers: list


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """The keys and values of processed sequences, for prompts that start with the same tokens (module docstring).

    ``max_tokens`` bounds the tokens held over all entries; the least recently used entries go first. An entry
    whose tokens are a prefix of a newer entry's is dropped (the newer one serves every prompt it served)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: OrderedDict = OrderedDict()  # id -> CachedSequence, least recently used first
        self.held = 0
        self._ids = 0
        self.weights_key = None  # the parameters' versions the entries were computed with

    def clear(self) -> None:
        self.entries.clear()
        self.held = 0

    def check_weights(self, model) -> None:
        """Empty the cache when any parameter changed since the entries were computed (``Tensor._version`` counts
        in-place writes such as an optimizer step)."""
        key = tuple(p._version for p in model.parameters())
        if key != self.weights_key:
            self.clear()
            self.weights_key = key

    def lookup(self, prompt: Sequence[int]) -> tuple[CachedSequence | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and that length (0 when none)."""
        best, length = None, 0
        for key, entry in self.entries.items():
            shared = common_prefix_length(entry.tokens, prompt)
            if shared > length:
                best, length = key, shared
        if best is None:
            return None, 0
        self.entries.move_to_end(best)
        return self.entries[best], length

    def add(self, tokens: Sequence[int], layers: list) -> None:
        tokens = tuple(tokens)
        if not tokens or len(tokens) > self.max_tokens:
            return
        for key in [k for k, e in self.entries.items() if tokens[:len(e.tokens)] == e.tokens]:
            self.held -= len(self.entries.pop(key).tokens)
        self._ids += 1
        self.entries[self._ids] = CachedSequence(tokens, layers)
        self.held += len(tokens)
        while self.held > self.max_tokens:
            _, evicted = self.entries.popitem(last=False)
            self.held -= len(evicted.tokens)


class HFBackend:
    """``GenerationBackend`` over ``model.generate``; see the module docstring for the guarantees.

    ``model`` must already be on ``device`` (it is shared with the trainer and never moved here).
    ``eos_token_id`` (an id or a list of ids) overrides the tokenizer's eos as the stop token(s).
    """

    def __init__(self, model, tokenizer, device: str | torch.device = "cpu", batch_size: int = 16,
                 eos_token_id: int | Sequence[int] | None = None, max_batch_tokens: int = 0,
                 prefix_cache_tokens: int = 0, decode_kernels: bool = True, row_prefill: bool = False):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens < 0:
            raise ValueError(f"max_batch_tokens must be >= 0 (0 = no limit), got {max_batch_tokens}")
        if prefix_cache_tokens < 0:
            raise ValueError(f"prefix_cache_tokens must be >= 0 (0 = off), got {prefix_cache_tokens}")
        self.plain_kv = _plain_kv_layers(model)  # full-attention layers only: preallocated cache, prefix reuse
        self.decode_kernels = decode_kernels  # spade.inference.hf_decode's attention and cache (False: stock, for benchmarks)
        self.cache = PrefixCache(prefix_cache_tokens) if prefix_cache_tokens and self.plain_kv else None
        self.row_prefill = row_prefill and self.plain_kv  # prefill rows of unequal length one by one (no padding)
        # running totals over the backend's life (spade.core.phases reads differences): prompts, prompt tokens, prompt
        # tokens actually prefilled (the rest came from the prefix cache), the prefill's padded batch slots, sampled
        # tokens, decode slots (rows x steps of every batch: a row that stopped early still takes its slot until
        # the batch's longest row ends), seconds, and of those the seconds ``generate`` spent before the first
        # token's logits (prefill) and after them (decode)
        self.totals = {"prompts": 0, "prompt_tokens": 0, "prefill_tokens": 0, "padded_tokens": 0, "new_tokens": 0,
                       "decode_slots": 0, "seconds": 0.0, "prefill_seconds": 0.0, "decode_seconds": 0.0}
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
        deadline = started + params.timeout_s if params.timeout_s else None  # every request starts with the call
        self._call = {"prefill_tokens": 0, "padded_tokens": 0, "decode_slots": 0, "prefill_seconds": 0.0,
                      "decode_seconds": 0.0}
        results: list[Generation | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
        devices = [self.device] if self.device.type != "cpu" else []
        bos = getattr(self.tokenizer, "bos_token_id", None)
        with torch.random.fork_rng(devices=devices, device_type=self.device.type if devices else "cuda"), \
                torch.no_grad(), _eval_mode(self.model), \
                grouped_attention(self.model) if self.decode_kernels else nullcontext(), \
                _plain_generation_config(self.model, bos, self.eos_token_ids, self.pad_token_id):
            if self.cache is not None:
                self.cache.check_weights(self.model)
                self._prefill_shared_prefix(prompts)
            for batch_index, chunk in enumerate(self._batches(order, prompts, params.max_new_tokens)):
                seeds = None
                if row_seeds is None:
                    torch.manual_seed(batch_seed(seed, batch_index))
                else:
                    seeds = [row_seeds[i] for i in chunk]
                batch = [prompts[i] for i in chunk]
                for i, generation in zip(chunk, self._generate_batch(batch, params, seeds, deadline)):
                    results[i] = generation
        self.last_stats = {**generation_stats(results, time.perf_counter() - started),
                           "prompt_tokens": sum(len(p) for p in prompts), **self._call}
        for key in self.totals:
            self.totals[key] += self.last_stats[key]
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
    def _prefill_shared_prefix(self, prompts: list) -> None:
        """Prefill once the longest prefix all of a call's prompts share (a system prompt), unless cached already."""
        if len(prompts) < 2:
            return
        shared = min(len(p) for p in prompts) - 1  # every prompt keeps at least one token to prefill itself
        first = prompts[0]
        for prompt in prompts[1:]:
            shared = min(shared, common_prefix_length(first, prompt))
        if shared < SHARED_PREFIX_MIN_TOKENS or self.cache.lookup(first)[1] >= shared:
            return
        ids = torch.tensor([first[:shared]], dtype=torch.long, device=self.device)
        past = self.model(input_ids=ids, use_cache=True).past_key_values
        self.cache.add(first[:shared], [(keys[0].clone(), values[0].clone()) for keys, values, *_ in past])
        self._call["prefill_tokens"] += shared
        self._call["padded_tokens"] += shared

    def _layout(self, batch: list[list[int]], max_new_tokens: int):
        """Input ids, attention mask and cache of one batch: each row's cached tokens (from the prefix cache)
        left-padded to the longest cached part, then its other tokens right-aligned (module docstring).
        Returns (input_ids [B, W], attention_mask [B, W], cache or None); the cache is preallocated for
        W + ``max_new_tokens`` positions when the model's layers are plain full attention (``spade.inference.hf_decode``)."""
        hits = [self.cache.lookup(p) if self.cache is not None else (None, 0) for p in batch]
        if self.row_prefill and len({len(p) - min(length, len(p) - 1) for p, (_, length) in zip(batch, hits)}) > 1:
            hits = self._prefill_rows(batch, hits)
        cached = [min(length, len(p) - 1) for p, (_, length) in zip(batch, hits)]
        lc = max(cached)
        width = lc + max(len(p) - c for p, c in zip(batch, cached))
        input_ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (prompt, c) in enumerate(zip(batch, cached)):
            input_ids[row, lc - c:lc] = torch.tensor(prompt[:c], dtype=torch.long)
            attention_mask[row, lc - c:lc] = 1
            input_ids[row, width - len(prompt) + c:] = torch.tensor(prompt[c:], dtype=torch.long)
            attention_mask[row, width - len(prompt) + c:] = 1
        self._call["prefill_tokens"] += sum(len(p) - c for p, c in zip(batch, cached))
        self._call["padded_tokens"] += len(batch) * (width - lc)
        if lc == 0:
            preallocate = self.plain_kv and self.decode_kernels
            return input_ids, attention_mask, preallocated_cache(self.model, width + max_new_tokens) if preallocate else None

        layers = []
        for index, (keys, values) in enumerate(next(e for e, _ in hits if e is not None).layers):
            k = keys.new_zeros((len(batch), keys.shape[0], lc, keys.shape[2]))
            v = values.new_zeros((len(batch), values.shape[0], lc, values.shape[2]))
            for row, ((entry, _), c) in enumerate(zip(hits, cached)):
                if c:
                    k[row, :, lc - c:] = entry.layers[index][0][:, :c]
                    v[row, :, lc - c:] = entry.layers[index][1][:, :c]
            layers.append((k, v))
        if not self.decode_kernels:
            from transformers import DynamicCache

            return input_ids, attention_mask, DynamicCache(ddp_cache_data=layers, config=self.model.config)
        return input_ids, attention_mask, preallocated_cache(self.model, width + max_new_tokens, layers)

    def _prefill_rows(self, batch: list[list[int]], hits: list) -> list:
        """Prefill each row's prompt but its last token alone, at batch size 1 and from its cached part, so that no
        prefill compute goes to padding; the batch's forward pass then only takes each row's last token. Returns
        the rows' (entry, cached length) as ``PrefixCache.lookup`` would, and keeps the entries in the prefix cache
        when there is one (the next turn of an episode starts from them)."""
        from transformers import DynamicCache

        started = time.perf_counter()
        rows = []
        for prompt, (entry, length) in zip(batch, hits):
            target = len(prompt) - 1
            if length >= target:
                rows.append((entry, length))
                continue
            past = None
            if length:
                past = DynamicCache(ddp_cache_data=[(k[None, :, :length], v[None, :, :length]) for k, v in entry.layers],
                                    config=self.model.config)
            ids = torch.tensor([prompt[length:target]], dtype=torch.long, device=self.device)
            out = self.model(input_ids=ids, past_key_values=past, use_cache=True)
            layers = [(keys[0].clone(), values[0].clone()) for keys, values, *_ in out.past_key_values]
            self._call["prefill_tokens"] += target - length
            self._call["padded_tokens"] += target - length
            row = CachedSequence(tuple(prompt[:target]), layers)
            if self.cache is not None:
                self.cache.add(row.tokens, layers)
            rows.append((row, target))
        self._call["prefill_seconds"] += time.perf_counter() - started
        return rows

    def _keep(self, batch, input_ids, attention_mask, past, new_ids, lengths) -> None:
        """Put each row's processed sequence (prompt and the sampled tokens fed back) into the prefix cache."""
        width = input_ids.shape[1]
        fed = past.get_seq_length() - width  # sampled tokens whose keys and values were computed (all but the last)
        for row, prompt in enumerate(batch):
            columns = torch.cat([torch.nonzero(attention_mask[row]).flatten(),
                                 torch.arange(width, width + min(lengths[row], fed))])
            layers = [(keys[row][:, columns].clone(), values[row][:, columns].clone())
                      for keys, values, *_ in past]
            self.cache.add(list(prompt) + new_ids[row, :min(lengths[row], fed)].tolist(), layers)

    def _generate_batch(self, batch: list[list[int]], params: SamplingParams, seeds=None,
                        deadline: float | None = None) -> list[Generation]:
        """One batch; past ``deadline`` (``params.timeout_s`` after the call began) decoding stops and every row
        without its eos by then comes back as ``timed_out()``."""
        from transformers import GenerationConfig, LogitsProcessorList, MaxTimeCriteria, StoppingCriteriaList

        input_ids, attention_mask, past = self._layout(batch, params.max_new_tokens)
        width = input_ids.shape[1]
        sample = params.temperature > 0
        options = dict(max_new_tokens=params.max_new_tokens, do_sample=sample, num_beams=1,
                       eos_token_id=self.eos_token_ids, pad_token_id=self.pad_token_id,
                       output_logits=True, return_dict_in_generate=True)
        if params.min_new_tokens:
            options["min_new_tokens"] = params.min_new_tokens
        clock = FirstLogitsClock()
        processors = LogitsProcessorList([clock])
        if sample and seeds is not None:  # per-row Gumbel-max sampling, decoded greedily
            options["do_sample"] = False
            processors.append(RowSeededGumbel(seeds, params.temperature, params.top_p, params.top_k))
        elif sample:
            options.update(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
        extra = {} if past is None else {"past_key_values": past}
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return [timed_out() for _ in batch]
            extra["stopping_criteria"] = StoppingCriteriaList([MaxTimeCriteria(left)])
        started = time.perf_counter()
        out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                                  generation_config=GenerationConfig(**options, use_cache=True), logits_processor=processors,
                                  **extra)
        ended = time.perf_counter()
        first = clock.first if clock.first is not None else ended
        self._call["prefill_seconds"] += first - started
        self._call["decode_seconds"] += ended - first
        new_ids = out.sequences[:, width:].cpu()
        steps = new_ids.shape[1]
        self._call["decode_slots"] += len(batch) * steps
        logprobs = torch.empty((len(batch), steps), dtype=torch.float32)
        eos = torch.tensor(self.eos_token_ids, dtype=torch.long)
        for t, step_logits in enumerate(out.logits):  # one [B, V] raw-logits tensor per generated position
            scores = step_logits.float()
            if t < params.min_new_tokens:  # masked as generate masked it (vLLM's processed log-probs)
                scores = scores.index_fill(1, eos.to(scores.device), float("-inf"))
            if sample:
                scores = scores / params.temperature
            chosen = new_ids[:, t:t + 1].to(scores.device)
            logprobs[:, t] = torch.log_softmax(scores, dim=-1).gather(1, chosen).squeeze(1).cpu()
        stop = torch.isin(new_ids, eos)
        late = deadline is not None and steps < params.max_new_tokens and time.perf_counter() >= deadline
        generations = []
        for row in range(len(batch)):
            hits = torch.nonzero(stop[row]).flatten()
            if len(hits):
                length, reason = int(hits[0]) + 1, "stop"
            elif late:  # stopped by the time limit before its eos: the request gives nothing back
                generations.append(timed_out())
                continue
            else:
                length, reason = steps, "length"
            ids = new_ids[row, :length].tolist()
            generations.append(Generation(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                completion_ids=ids,
                logprobs=logprobs[row, :length].tolist(),
                finish_reason=reason,
            ))
        if self.cache is not None and out.past_key_values is not None and not late:
            self._keep(batch, input_ids, attention_mask, out.past_key_values, new_ids,
                       [len(g.completion_ids) for g in generations])
        return generations


def _plain_kv_layers(model) -> bool:
    """Whether every layer of the model keeps plain full-length keys and values (no sliding window), which the
    prefix cache assumes; otherwise the backend runs without it."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        layers = DynamicCache(config=model.config).layers
    except Exception:  # noqa: BLE001 -- a model whose config the cache cannot read: no prefix reuse
        return False
    plain = bool(layers) and all(type(layer) is DynamicLayer for layer in layers)
    if not plain:
        log.info("prefix cache off: the model has cache layers other than full attention")
    return plain
