"""``spade bench step``: one training step's profile, and the achieved FLOP/s of prefill, decode and training
against this machine's matmul peak, all measured in the same run (issue 17).

What it does, in order:

1. **Peak.** The best of several fp32 ``torch.matmul`` calls of two n x n matrices (n = 2048): 2 n^3 / seconds.
2. **Step profile, before and after.** The first step of the configured run (``selfplay.total_steps`` cut to 1, and
   its checkpoint), once with the prefix cache off (``inference.prefix_cache_mb: 0``) and once with it as configured,
   each in a fresh run folder under ``--out-dir``: the ``phase_*`` metrics of spade.core.phases (seconds, prompt
   tokens, tokens actually prefilled, tokens sampled per phase). Same seed, same model: the two differ only in
   what the cache saves (and float rounding).
3. **Kernels.** On the same model: a prefill (one forward pass over ``--prefill-tokens`` tokens), a decode
   (``--decode-tokens`` new tokens at batch ``--decode-batch`` after prompts of ``--decode-context`` tokens and
   16 fewer per row, so that rows are padded as in rollouts; the time after the first token's logits, measured
   inside ``generate``; once through ``transformers``' stock attention and cache, once through
   ``spade.inference.hf_decode``'s) and a
   training forward and backward (``train.micro_batch`` sequences of ``--train-tokens``), each timed as the best
   of ``--repeats``. FLOPs per token: 2 x the non-embedding parameters plus attention, 2 x layers x context x
   width for a prefill or decode token (causal: the mean context), times 3 for forward and backward (times 4 with
   gradient checkpointing, which recomputes the forward).

4. **Design samples.** ``train.micro_batch`` one-token replies to one prompt of ``--train-tokens`` tokens, forward and
   backward of their log-probs, through the trainer's shared pass (``spade.train.trainer.sequence_logprobs``) and
   through a pass per sample (what the trainer did before): both times and their ratio.
5. **A design round's optimizer step** (``mixed_step_seconds``): the same design samples after 3.5 micro batches of
   short agent samples, through ``LocalTrainer.update`` in micro batches split by length
   (``spade.train.trainer.micro_batch_groups``) and in fixed groups (before issue 48, when a group held both and padded
   each agent sample to the prompt's length): both times and their ratio.

Each achieved rate is reported as a fraction of the peak measured in step 1. These are estimates of useful work
(no padding, no re-computation counted), so a fraction is a lower bound on how busy the cores were.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import torch

MATMUL_N = 2048
DECODE_LENGTH_STEP = 16  # row r of the decode benchmark's batch has decode_context - 16 r prompt tokens
KERNELS = {"prefill": "one forward pass", "decode_stock": "after the first; transformers' stock attention + cache",
           "decode": "after the first; spade.inference.hf_decode", "train": "forward + backward"}


def matmul_peak(n: int = MATMUL_N, repeats: int = 5, device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32) -> float:
    """FLOP/s of the best of ``repeats`` n x n matmuls on ``device`` in ``dtype`` (after one warm-up call)."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    best = min(timed(lambda: torch.matmul(a, b), a.device) for _ in range(repeats))
    return 2 * n**3 / best


def _sync(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(call, device: torch.device | None = None) -> float:
    """Wall seconds of ``call()``; on a cuda ``device`` the queued kernels are waited for before and after."""
    _sync(device)
    started = time.perf_counter()
    call()
    _sync(device)
    return time.perf_counter() - started


def model_shape(model) -> dict:
    """Layers, width and non-embedding parameters of a decoder (what the FLOP estimates need)."""
    config = model.config.get_text_config(decoder=True)
    embedding = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings()
    total = sum(p.numel() for p in model.parameters())
    tied = head is not None and head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    return {"layers": config.num_hidden_layers, "width": config.hidden_size,
            "non_embedding_params": total - embedding - (0 if tied or head is None else head.weight.numel()),
            "vocab": config.vocab_size}


def token_flops(shape: dict, context: float) -> float:
    """Forward FLOPs of one token attending to ``context`` earlier tokens: the matmuls of every weight (2 per
    parameter, the output projection included) and of attention (scores and weighted sum, 2 x 2 x context x width
    per layer)."""
    return 2 * (shape["non_embedding_params"] + shape["vocab"] * shape["width"]) + \
        4 * shape["layers"] * context * shape["width"]


def kernel_rates(model, tokenizer, prefill_tokens: int, decode_context: int, decode_tokens: int, decode_batch: int,
                 train_tokens: int, train_batch: int, repeats: int) -> dict:
    """Achieved FLOP/s of a prefill, a decode and a training forward+backward on ``model`` (module docstring)."""
    from spade.inference.generation import SamplingParams
    from spade.inference.generation_hf import HFBackend

    shape = model_shape(model)
    vocab = shape["vocab"]
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, prefill_tokens), generator=generator)
    model.eval()
    with torch.no_grad():
        model(input_ids=ids)  # warm-up
        seconds = min(timed(lambda: model(input_ids=ids)) for _ in range(repeats))
    prefill = {"tokens": prefill_tokens, "seconds": seconds,
               "flops": prefill_tokens * token_flops(shape, prefill_tokens / 2)}

    # rows of unequal length (as in rollouts and evaluations): the shorter ones are padded and masked
    lengths = [max(1, decode_context - DECODE_LENGTH_STEP * row) for row in range(decode_batch)]
    prompts = [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in lengths]
    params = SamplingParams(temperature=0.0, max_new_tokens=decode_tokens)
    steps = decode_tokens - 1  # the first token comes with the prefill
    context = sum(lengths) / len(lengths) + decode_tokens / 2
    decodes = {}
    for name, kernels in (("decode_stock", False), ("decode", True)):
        backend = HFBackend(model, tokenizer, batch_size=decode_batch, eos_token_id=vocab + 1,  # never sampled:
                            decode_kernels=kernels)  # every row decodes all tokens
        seconds = []
        for _ in range(repeats):  # the decode part of each call, timed inside generate (HFBackend.totals)
            before = backend.totals["decode_seconds"]
            backend.generate(prompts, params, seed=0)
            seconds.append(backend.totals["decode_seconds"] - before)
        decodes[name] = {"tokens": decode_batch * steps, "seconds": max(min(seconds), 1e-9),
                         "flops": decode_batch * steps * token_flops(shape, context)}

    batch = torch.randint(0, vocab, (train_batch, train_tokens), generator=generator)
    checkpointing = bool(getattr(model, "is_gradient_checkpointing", False))
    model.train()

    def train_pass():
        model.zero_grad(set_to_none=True)
        model(input_ids=batch).logits.float().logsumexp(-1).mean().backward()

    train_pass()
    seconds = min(timed(train_pass) for _ in range(repeats))
    model.zero_grad(set_to_none=True)
    model.eval()
    factor = 4 if checkpointing else 3
    train = {"tokens": train_batch * train_tokens, "seconds": seconds, "gradient_checkpointing": checkpointing,
             "flops": factor * train_batch * train_tokens * token_flops(shape, train_tokens / 2)}
    return {"shape": shape, "prefill": prefill, **decodes, "train": train,
            "design_samples": design_sample_seconds(model, batch[0], train_batch, repeats)}


def design_sample_seconds(model, prompt: torch.Tensor, samples: int, repeats: int) -> dict:
    """Forward + backward of the log-probs of ``samples`` one-token replies to one ``prompt`` (a design round's
    samples of one skill), through the trainer's ``sequence_logprobs`` (one shared pass, the head on the replies
    only) and through the baseline it replaced (every sample's own pass, the head on every position); best of
    ``repeats`` each."""
    from spade.core.losses import chunked_token_logprobs
    from spade.train.trainer import sequence_logprobs

    ids = torch.cat([prompt.repeat(samples, 1), torch.arange(samples)[:, None] % model.config.vocab_size], dim=1)
    attention, mask = torch.ones_like(ids), torch.zeros(ids.shape)
    mask[:, -1] = 1

    def baseline():
        hidden = model.get_decoder()(input_ids=ids, attention_mask=attention).last_hidden_state[:, :-1]
        return chunked_token_logprobs(hidden, model.get_output_embeddings().weight, ids[:, 1:], 1.0) * mask[:, 1:]

    model.train()
    out = {"samples": samples, "prompt_tokens": prompt.numel()}
    for name, call in (("one_pass_per_sample", baseline),
                       ("shared", lambda: sequence_logprobs(model, ids, attention, mask, 1.0))):
        def step():
            model.zero_grad(set_to_none=True)
            call().sum().backward()

        step()
        out[name] = min(timed(step) for _ in range(repeats))
    model.zero_grad(set_to_none=True)
    model.eval()
    return out


def mixed_step_seconds(config, model, prompt_tokens: int, repeats: int) -> dict:
    """One optimizer step of ``LocalTrainer.update`` over a design round's step: ``train.micro_batch`` one-token replies
    to one ``prompt_tokens``-token design prompt, after 3.5 micro batches of 34-token agent samples (so that a fixed
    group of ``train.micro_batch`` would put short and long samples together), once in the micro batches of
    ``spade.train.trainer.micro_batch_groups`` (a sample over twice its group's first length starts a new group) and once
    in fixed groups (before issue 48); each on its own copy of ``model``, best of ``repeats``."""
    import copy

    from spade.core.selfplay import Sample
    from spade.train.trainer import LocalTrainer

    size, vocab = config.train.micro_batch, model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (prompt_tokens,), generator=generator).tolist()
    agents = [Sample("agent", torch.randint(0, vocab, (34,), generator=generator).tolist(), [0] * 30 + [1] * 4,
                     [0.0] * 30 + [-1.4] * 4, 0.5 if i % 2 else -0.5) for i in range(3 * size + size // 2)]
    designs = [Sample("designer", prompt + [i % vocab], [0] * prompt_tokens + [1], [0.0] * prompt_tokens + [-1.4],
                      0.5 if i % 2 else -0.5) for i in range(size)]
    out = {"agent_samples": len(agents), "design_samples": size, "prompt_tokens": prompt_tokens}
    for name, split in (("fixed_groups", False), ("length_groups", True)):
        trainer = LocalTrainer(config, copy.deepcopy(model), pad_id=0)
        trainer.split_lengths = split
        trainer.update(agents + designs)  # warm-up
        out[name] = min(timed(lambda: trainer.update(agents + designs)) for _ in range(repeats))
    return out


def profile_step(config, model_dir: str | Path, corpus_path, run_dir: Path) -> dict:
    """The metrics line of the first step of ``config`` run in a fresh ``run_dir`` (one step and its checkpoint)."""
    from spade.train.trainer import train_run

    cfg = replace(config, selfplay=replace(config.selfplay, total_steps=1, checkpoint_every=1))
    if run_dir.exists():
        shutil.rmtree(run_dir)
    train_run(cfg, model_dir, corpus_path, run_dir)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return lines[0]


def run_bench_step(config, model_dir: str | Path, corpus_path, out_dir: str | Path, *, prefill_tokens: int = 1500,
                   decode_context: int = 1500, decode_tokens: int = 32, decode_batch: int = 8, train_tokens: int = 512,
                   repeats: int = 3) -> dict:
    """Peak, the step profile without and with the prefix cache, and the kernels' achieved FLOP/s (module doc)."""
    from spade.inference.models import load_model

    out_dir = Path(out_dir)
    peak = matmul_peak()
    off = replace(config.inference, prefix_cache_mb=0)
    profiles = {}
    for label, inference in (("prefix_cache_off", off), ("prefix_cache_on", config.inference)):
        profiles[label] = {"prefix_cache_mb": inference.prefix_cache_mb,
                           **profile_step(replace(config, inference=inference), model_dir, corpus_path, out_dir / label)}
    model, tokenizer = load_model(model_dir)
    kernels = kernel_rates(model, tokenizer, prefill_tokens, decode_context, decode_tokens, decode_batch,
                           train_tokens, config.train.micro_batch, repeats)
    kernels["mixed_step"] = mixed_step_seconds(config, model, train_tokens, repeats)
    for name in KERNELS:
        entry = kernels[name]
        entry["flops_per_s"] = entry["flops"] / entry["seconds"]
        entry["fraction_of_peak"] = entry["flops_per_s"] / peak
    return {"peak_flops_per_s": peak, "matmul_n": MATMUL_N, "profiles": profiles, "kernels": kernels,
            "threads": torch.get_num_threads()}


def render(result: dict) -> str:
    """The benchmark as text: the peak, the per-phase split before and after, the kernels against the peak."""
    peak = result["peak_flops_per_s"]
    lines = [f"matmul peak (fp32, n = {result['matmul_n']}, {result['threads']} threads): {peak / 1e9:.1f} GFLOP/s", "",
             "one step, by phase (seconds; prompt tokens -> prefilled; sampled):"]
    off, on = result["profiles"]["prefix_cache_off"], result["profiles"]["prefix_cache_on"]
    from spade.core.phases import PHASES

    lines.append(f"  {'phase':<12} {'cache off':>28}   {'cache on':>28}")
    for name in (*PHASES, "other"):
        cells = []
        for profile in (off, on):
            seconds = profile.get(f"phase_{name}_seconds")
            if seconds is None:
                cells.append(f"{'-':>28}")
                continue
            prompt = profile.get(f"phase_{name}_prompt_tokens")
            tokens = "" if prompt is None else (f"{prompt}->{profile.get(f'phase_{name}_prefill_tokens', 0)}; "
                                                f"{profile.get(f'phase_{name}_decode_tokens', 0)}")
            cells.append(f"{seconds:8.1f} s {tokens:>17}")
        lines.append(f"  {name:<12} {cells[0]}   {cells[1]}")
    lines.append(f"  {'step':<12} {off['step_seconds']:8.1f} s {'':>17}   {on['step_seconds']:8.1f} s")
    prefilled = [sum(p.get(f"phase_{n}_prefill_tokens", 0) for n in PHASES) for p in (off, on)]
    if prefilled[1]:
        lines.append(f"  prefilled tokens, off / on: {prefilled[0]} / {prefilled[1]} = {prefilled[0] / prefilled[1]:.2f}x; "
                     f"step time off / on: {off['step_seconds'] / on['step_seconds']:.2f}x")
    lines += ["", "kernels (achieved FLOP/s of useful work against the peak above):"]
    for name, what in KERNELS.items():
        k = result["kernels"][name]
        lines.append(f"  {name:<12} {k['tokens']:>6} tokens in {k['seconds']:7.2f} s ({what}): "
                     f"{k['flops_per_s'] / 1e9:6.1f} GFLOP/s = {k['fraction_of_peak']:.0%} of peak")
    stock, ours = result["kernels"]["decode_stock"], result["kernels"]["decode"]
    lines.append(f"  decode kernels: {stock['seconds'] / ours['seconds']:.2f}x the stock path's tokens/s")
    design = result["kernels"]["design_samples"]
    lines.append(f"  design samples ({design['samples']} one-token replies to one {design['prompt_tokens']}-token "
                 f"prompt, forward + backward): one pass per sample {design['one_pass_per_sample']:.3f} s, shared "
                 f"{design['shared']:.3f} s = {design['one_pass_per_sample'] / design['shared']:.2f}x")
    mixed = result["kernels"]["mixed_step"]
    lines.append(f"  a design round's optimizer step ({mixed['agent_samples']} agent samples, {mixed['design_samples']} "
                 f"one-token replies to one {mixed['prompt_tokens']}-token prompt): fixed micro batches "
                 f"{mixed['fixed_groups']:.3f} s, split by length {mixed['length_groups']:.3f} s = "
                 f"{mixed['fixed_groups'] / mixed['length_groups']:.2f}x")
    return "\n".join(lines)
