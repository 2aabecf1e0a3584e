"""``spade bench gpu``: the local backend on one GPU, with random weights of a real model shape (issue 31).

One command for a session that is lent a GPU for a few minutes: no model weights travel there, so the model is a
randomly initialised one of a named shape (``SHAPES``: SmolLM2-1.7B's Llama shape by default, Qwen3-1.7B's, ...) with
a real tokenizer's files (``--tokenizer``). Every size is a flag, so the same command runs a tiny shape on a CPU in
seconds (the tests do). Sections, each timed on its own and written to the JSON as soon as it ends (a failing section
records its error and the others still run; they run in the order probes, train, step, decode, the longest last, and
decode saves every call as it ends, so a run cut short keeps what finished):

1. **probes**: the device's bf16 (fp32 on a CPU) matmul rate, the best of several n x n products, and its copy
   bandwidth (bytes read + written by one large ``copy_``), beside the datasheet values of ``DATASHEET`` for the
   device's name. The peak that MFU is taken against: ``--peak-tflops``, else the datasheet's, else the measured
   matmul rate; the bandwidth of the decode floor likewise (``--bandwidth-tbs``).
2. **train**: ``LocalTrainer.update`` (the trainer's own code: chunked log-probs, GRPO loss, float32 master weights
   and AdamW) on ``--train-samples`` sequences of ``--train-tokens`` tokens, micro-batch ``--micro-batch``, after one
   warm-up micro-batch: useful FLOPs (3 x the forward FLOPs of ``spade.train.bench_step.token_flops``) per second
   as a share of the peak (MFU), tokens per second, peak memory.
3. **decode**: ``HFBackend.generate`` at batch ``--decode-batch`` over a sequence of ``--decode-calls`` calls with new
   random prompts and new lengths each call (rows of ``--decode-prompt-tokens`` x 3/4 to 1, drawn per call, as
   self-play makes them; no prefix cache: the calls share no prefix), then the last call repeated identically, then
   one more new-shape call under ``torch.profiler`` (and the repeated call under it too, for comparison). Per call:
   milliseconds per decode step (the time after the first token's logits, over ``--decode-new-tokens`` - 1 steps)
   and its ratio to the memory floor (weights plus the keys and values of the padded cache, read once per step, at
   the floor's bandwidth), prefill seconds, the whole call's seconds, and the caching allocator's device
   allocations, frees and retries during the call. The profiles list the top operators by device time and by CPU
   time, and how busy the device was over the call.
4. **step**: a whole local self-play run of two steps (``spade.train.trainer.train_run``: designer, sandbox
   validation, backfill from the built-in library, agent episodes in the sandbox, the update, checkpoints) on the
   device, with a model of ``--step-shape`` written to disk, twice: straight, and stopped after one step and resumed
   from its checkpoint. Their metrics (timings aside) must be equal: same seed, same device, same metrics. The last
   checkpoint is then loaded onto the CPU (weights, optimizer, master weights), whichever device wrote it.
   Random weights design nothing valid, so the slots are backfilled (``selfplay.backfill``); the point is that every
   stage runs on the device.
"""

from __future__ import annotations

import gc
import json
import logging
import random
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

from spade.io import atomic_write_json
from spade.train.bench_step import matmul_peak, model_shape, timed, token_flops

log = logging.getLogger(__name__)

# Random-weight model shapes: (transformers config class, its arguments); the vocabulary is the tokenizer's.
SHAPES = {
    "smollm2-1.7b": ("LlamaConfig", dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32,
                                         num_key_value_heads=32, intermediate_size=8192, rope_theta=130000.0,
                                         max_position_embeddings=8192, tie_word_embeddings=True)),
    "qwen3-1.7b": ("Qwen3Config", dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16,
                                       num_key_value_heads=8, head_dim=128, intermediate_size=6144,
                                       rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=True)),
    "smollm2-135m": ("LlamaConfig", dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                                         num_key_value_heads=3, intermediate_size=1536, rope_theta=100000.0,
                                         max_position_embeddings=8192, tie_word_embeddings=True)),
    "tiny": ("LlamaConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                 intermediate_size=128, max_position_embeddings=8192, tie_word_embeddings=True)),
}

# Dense bf16 tensor-core peak (TFLOP/s) and memory bandwidth (TB/s) from NVIDIA's datasheets, by the name torch
# reports (torch.cuda.get_device_name); the longest key contained in the name wins. The sparse figures of the sheets
# are twice these.
DATASHEET = {
    "H200 NVL": (835.0, 4.8), "H200": (989.0, 4.8), "H100 NVL": (835.0, 3.9), "H100 PCIe": (756.0, 2.0),
    "H100": (989.0, 3.35), "A100-SXM4-80GB": (312.0, 2.039), "A100 80GB PCIe": (312.0, 1.935),
    "A100-SXM4-40GB": (312.0, 1.555), "A100-PCIE-40GB": (312.0, 1.555), "L40S": (362.0, 0.864),
}
SECTIONS = ("probes", "train", "decode", "step")
PROFILE_TOP = 25  # operators listed per profile


def datasheet(device_name: str) -> tuple[float, float] | None:
    """(bf16 TFLOP/s, TB/s) of the ``DATASHEET`` entry whose key is the longest one contained in ``device_name``."""
    keys = [key for key in DATASHEET if key in device_name]
    return DATASHEET[max(keys, key=len)] if keys else None


def device_info(device: torch.device) -> dict:
    import transformers

    info = {"device": str(device), "torch": torch.__version__, "transformers": transformers.__version__,
            "cuda": torch.version.cuda, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, memory_gib=props.total_memory / 2**30, capability=f"{props.major}.{props.minor}")
    else:
        info["name"] = "cpu"
    return info


def probes(device: torch.device, dtype: torch.dtype, matmul_n: int, probe_mib: int, repeats: int = 10) -> dict:
    """Measured matmul rate and copy bandwidth of ``device`` (module docstring, section 1)."""
    flops = matmul_peak(matmul_n, repeats, device, dtype)
    source = torch.empty(probe_mib * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    copy = min(timed(lambda: target.copy_(source), device) for _ in range(repeats))
    return {"matmul_n": matmul_n, "matmul_dtype": str(dtype).removeprefix("torch."),
            "matmul_tflops": flops / 1e12, "copy_mib": probe_mib,
            "copy_tbs": 2 * source.numel() / copy / 1e12}


def build_model(shape: str, tokenizer, device: torch.device, dtype: torch.dtype, seed: int):
    """A randomly initialised causal LM of ``shape`` (``SHAPES``) with the tokenizer's vocabulary, on ``device``."""
    import transformers

    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r}; known: {', '.join(SHAPES)}")
    config_class, arguments = SHAPES[shape]
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    config = getattr(transformers, config_class)(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                                 eos_token_id=eos, pad_token_id=eos if pad is None else pad,
                                                 **arguments)
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def write_model(model, tokenizer, folder: Path) -> Path:
    """Save ``model`` and ``tokenizer`` as a model folder ``spade.inference.models.load_model`` reads."""
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def synthetic_samples(count: int, tokens: int, vocab: int, seed: int) -> list:
    """``count`` training samples of ``tokens`` random tokens: a prompt of a quarter, a sampled part of the rest (loss
    mask 1), advantages +1 and -1 in turn (none skipped), rollout log-probs 0 (no TIS: not delayed)."""
    from spade.core.selfplay import Sample

    rng = random.Random(seed)
    prompt = tokens // 4
    return [Sample("agent", [rng.randrange(vocab) for _ in range(tokens)], [0] * prompt + [1] * (tokens - prompt),
                   [0.0] * tokens, advantage=1.0 if i % 2 == 0 else -1.0) for i in range(count)]


def train_rate(config, model, samples: list, micro_batch: int, peak_tflops: float, device: torch.device) -> dict:
    """MFU of one ``LocalTrainer.update`` over ``samples`` (module docstring, section 2)."""
    from spade.train.trainer import LocalTrainer

    train = replace(config.train, global_batch=len(samples), micro_batch=micro_batch, kl_coef=0.0)
    trainer = LocalTrainer(replace(config, train=train), model, pad_id=0)
    trainer.update(samples[:micro_batch])  # warm-up: kernels, allocator, optimizer state
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    stats = {}
    seconds = timed(lambda: stats.update(trainer.update(samples)), device)
    shape = model_shape(model)
    tokens = sum(len(s.token_ids) for s in samples)
    length = len(samples[0].token_ids)
    flops = 3 * tokens * token_flops(shape, length / 2)
    result = {"samples": len(samples), "tokens_per_sample": length, "micro_batch": micro_batch,
              "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
              "master_weights": trainer.masters is not None, "seconds": seconds, "tokens_per_s": tokens / seconds,
              "flops": flops, "achieved_tflops": flops / seconds / 1e12, "mfu": flops / seconds / 1e12 / peak_tflops,
              "optimizer_steps": stats["optimizer_steps"], "loss": stats["loss"]}
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    model.zero_grad(set_to_none=True)
    del trainer
    _release(device)
    return result


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def decode_prompts(batch: int, prompt_tokens: int, vocab: int, seed: int) -> list:
    """``batch`` random prompts of lengths drawn from [3/4, 1] x ``prompt_tokens``: new tokens and lengths per seed."""
    rng = random.Random(seed)
    low = max(1, 3 * prompt_tokens // 4)
    return [[rng.randrange(vocab) for _ in range(rng.randint(low, prompt_tokens))] for _ in range(batch)]


def floor_bytes(model, batch: int, cache_width: float) -> float:
    """Bytes one decode step must read at least: every weight once (a tied embedding once: only the ``batch`` rows
    of the input lookup besides) and the keys and values of ``batch`` rows of ``cache_width`` positions."""
    config = model.config.get_text_config(decoder=True)
    element = next(model.parameters()).element_size()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_per_position = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * element
    return weights + batch * cache_width * kv_per_position


ALLOCATOR_COUNTS = ("num_device_alloc", "num_device_free", "num_alloc_retries")  # torch.cuda.memory_stats keys


def _allocator(device: torch.device) -> dict:
    """The caching allocator's running counts of device allocations (cudaMalloc), frees and retries (a retry frees
    every cached block and allocates again); empty on a CPU."""
    if device.type != "cuda":
        return {}
    stats = torch.cuda.memory_stats(device)
    return {key: stats.get(key, 0) for key in ALLOCATOR_COUNTS}


def decode_call(backend, model, prompts: list, new_tokens: int, seed: int, bandwidth_tbs: float,
                device: torch.device) -> dict:
    """One ``generate`` call at temperature 0.6 (every row decodes ``new_tokens``: the eos is never sampled)."""
    from spade.inference.generation import SamplingParams

    before, allocator = dict(backend.totals), _allocator(device)
    seconds = timed(lambda: backend.generate(prompts, SamplingParams(temperature=0.6, max_new_tokens=new_tokens),
                                              seed), device)
    totals = {key: backend.totals[key] - before[key] for key in before}
    steps = max(new_tokens - 1, 1)  # the first token comes with the prefill
    width = max(len(p) for p in prompts)
    step_ms = totals["decode_seconds"] / steps * 1e3
    floor_ms = floor_bytes(model, len(prompts), width + new_tokens / 2) / (bandwidth_tbs * 1e12) * 1e3
    after = _allocator(device)
    return {"rows": len(prompts), "longest_prompt": width, "shortest_prompt": min(len(p) for p in prompts),
            "new_tokens": totals["new_tokens"], "ms_per_step": step_ms, "floor_ms": floor_ms,
            "ratio_to_floor": step_ms / floor_ms, "prefill_seconds": totals["prefill_seconds"], "call_seconds": seconds,
            "allocator": {key: after[key] - allocator[key] for key in after},
            "reserved_gib": torch.cuda.memory_reserved(device) / 2**30 if device.type == "cuda" else None}


def profile_summary(run, device: torch.device) -> dict:
    """Run ``run()`` under ``torch.profiler``; the top operators and kernels by device and by CPU time, and the
    device's busy share of the call's wall time (the summed durations of its kernels, copies and fills over the wall
    time: low means the device waited for the CPU; None on a CPU)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        seconds = timed(run, device)
    events = prof.key_averages()

    def row(event) -> dict:
        return {"name": event.key, "on": str(event.device_type).rsplit(".", 1)[-1], "calls": event.count,
                "self_cpu_ms": event.self_cpu_time_total / 1e3,
                "cpu_total_ms": event.cpu_time_total / 1e3,
                "self_device_ms": getattr(event, "self_device_time_total", 0.0) / 1e3,
                "device_total_ms": getattr(event, "device_time_total", 0.0) / 1e3}

    rows = [row(e) for e in events]
    device_ms = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA) / 1e3
    on_device = device.type == "cuda"
    return {"wall_seconds": seconds, "device_busy_share": device_ms / 1e3 / seconds if on_device and seconds else None,
            "device_ms": device_ms if on_device else None, "self_cpu_ms_total": sum(r["self_cpu_ms"] for r in rows),
            "top_by_device": sorted(rows, key=lambda r: -r["self_device_ms"])[:PROFILE_TOP],
            "top_by_cpu": sorted(rows, key=lambda r: -r["self_cpu_ms"])[:PROFILE_TOP]}


def decode_sequence(model, tokenizer, batch: int, prompt_tokens: int, new_tokens: int, calls: int,
                    bandwidth_tbs: float, device: torch.device, seed: int, on_call=None) -> dict:
    """Decode timings over new-shape calls, a repeated call and two profiled ones (module docstring, section 3);
    ``on_call(rows)`` after every timed call (the caller saves them: a run cut short keeps the calls that ended)."""
    from spade.inference.generation_hf import HFBackend

    vocab = model.config.get_text_config(decoder=True).vocab_size
    backend = HFBackend(model, tokenizer, device=device, batch_size=batch, eos_token_id=vocab + 1)  # no prefix cache
    rows, prompts = [], []
    for call in range(calls + 1):
        kind = "new" if call < calls else "repeat"
        if kind == "new":
            prompts, call_seed = decode_prompts(batch, prompt_tokens, vocab, seed + call), seed + call
        rows.append({"call": call, "kind": kind, **decode_call(backend, model, prompts, new_tokens, call_seed,
                                                               bandwidth_tbs, device)})
        if on_call is not None:
            on_call(rows)
    fresh = decode_prompts(batch, prompt_tokens, vocab, seed + calls)
    profiles = {}
    for kind, call_prompts, call_seed in (("new", fresh, seed + calls), ("repeat", prompts, seed + calls - 1)):
        profiles[kind] = profile_summary(lambda: decode_call(backend, model, call_prompts, new_tokens, call_seed,
                                                             bandwidth_tbs, device), device)
    new = [r["ms_per_step"] for r in rows if r["kind"] == "new"]
    return {"batch": batch, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "bandwidth_tbs": bandwidth_tbs,
            "calls": rows, "new_ms_per_step_mean": sum(new) / len(new), "repeat_ms_per_step": rows[-1]["ms_per_step"],
            "profiles": profiles}


def differing_keys(run_a: list, run_b: list) -> list:
    """The metric keys whose values differ between two runs' metrics lines, step by step, timings aside (they differ
    between identical runs; token counts do not); a step only one run has counts with all its keys."""
    missing, keys = object(), set()
    for index in range(max(len(run_a), len(run_b))):
        a = run_a[index] if index < len(run_a) else {}
        b = run_b[index] if index < len(run_b) else {}
        keys |= {key for key in set(a) | set(b) if a.get(key, missing) != b.get(key, missing)}
    return sorted(key for key in keys if not key.endswith(("_seconds", "_tokens_per_s")))


def _metrics(run_dir: Path) -> list:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def step_config(config, device: str, new_tokens: int, steps: int):
    """``config`` cut to a short run on ``device``: two backfilled slots, G 2, ``new_tokens`` per generation, a
    checkpoint after every step, no corpus, no live-metrics files (the packages may be missing where it runs)."""
    sp, ds, ag = config.selfplay, config.designer, config.agent
    return replace(
        config, run_name="bench-gpu-step",
        selfplay=replace(sp, active_skills=1, envs_per_skill=2, group_size=2, regen_interval=2, total_steps=steps,
                         checkpoint_every=1, design_attempts=1, backfill=True),
        designer=replace(ds, max_new_tokens=new_tokens, hint_max_new_tokens=new_tokens),
        agent=replace(ag, max_new_tokens=new_tokens, max_turns=2),
        corpus=replace(config.corpus, enabled=False),
        train=replace(config.train, device=device, global_batch=8, micro_batch=4),
        logging=replace(config.logging, tensorboard=False, wandb=False))


def whole_step(config, model_dir: Path, work: Path) -> dict:
    """Two-step runs straight and resumed, compared; the last checkpoint loaded on the CPU (section 4)."""
    from spade.inference.models import load_model
    from spade.train.trainer import LocalTrainer, train_run

    straight, resumed = work / "straight", work / "resumed"
    started = time.perf_counter()
    train_run(config, model_dir, None, straight)
    straight_seconds = time.perf_counter() - started
    train_run(config, model_dir, None, resumed, stop_after=1)
    train_run(config, model_dir, None, resumed)
    a, b = _metrics(straight), _metrics(resumed)
    differing = differing_keys(a, b)
    last = sorted((straight / "checkpoints").glob("step_*"))[-1]
    model, _ = load_model(last, device="cpu")
    cpu = replace(config, train=replace(config.train, device="cpu", dtype="float32"))
    trainer = LocalTrainer(cpu, model, pad_id=0)
    trainer.load_state(last)  # float32 on the CPU: the saved masters (if any) become the weights
    masters = last / "master_weights.safetensors"
    if masters.is_file():
        from safetensors.torch import load_file

        saved = load_file(masters)
        reference = {name: saved[name] for name in trainer.names}
    else:
        reference = {name: p.detach().clone() for name, p in load_model(last, device="cpu")[0].named_parameters()}
    cpu_diff = max(float((p.detach() - reference[name].float()).abs().max())
                   for name, p in zip(trainer.names, trainer.params))
    keep = ("step_seconds", "samples", "agent_mean_return", "backfilled_share", "train_loss", "train_tokens",
            "train_grad_norm")
    return {"steps": len(a), "straight_seconds": straight_seconds,
            "metrics": [{k: m.get(k) for k in keep} | {k: v for k, v in m.items() if k.startswith("phase_")}
                        for m in a],
            "same_metrics_resumed": len(a) == config.selfplay.total_steps and not differing,
            "differing_keys": differing, "checkpoint": last.name,
            "checkpoint_master_weights": masters.is_file(),
            "checkpoint_on_cpu_max_abs_diff": cpu_diff}  # CPU weights vs the checkpoint's masters (or weights)


def run_bench_gpu(config, tokenizer_dir: str | Path, out: str | Path, *, device: str = "auto",
                  shape: str = "smollm2-1.7b", step_shape: str = "smollm2-135m", train_samples: int = 192,
                  train_tokens: int = 1280, micro_batch: int = 8, decode_batch: int = 192,
                  decode_prompt_tokens: int = 1024, decode_new_tokens: int = 96, decode_calls: int = 4,
                  step_new_tokens: int = 64, peak_tflops: float = 0.0, bandwidth_tbs: float = 0.0,
                  matmul_n: int = 8192, probe_mib: int = 1024, sections=SECTIONS, work_dir: str | Path | None = None,
                  seed: int = 0) -> dict:
    """Run the sections of the module docstring; write the result to ``out`` after each; return it."""
    from transformers import AutoTokenizer

    from spade.train.trainer import train_device, train_dtype

    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
    if decode_calls < 1:
        raise ValueError(f"decode_calls must be >= 1, got {decode_calls}")
    train = replace(config.train, device=device)
    config = replace(config, train=train)
    place = train_device(train)
    dtype = train_dtype(train, place)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side="left")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    info = device_info(place)
    sheet = datasheet(info["name"]) if place.type == "cuda" else None
    result = {"info": info, "shape": shape, "step_shape": step_shape, "dtype": str(dtype).removeprefix("torch."),
              "datasheet": None if sheet is None else {"bf16_tflops": sheet[0], "tbs": sheet[1]},
              "seconds": {}, "errors": {}}
    out = Path(out)
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="spade-bench-gpu-"))

    def section(name, body):
        """Run ``body(save)`` as section ``name``: its result, or its error and what it saved so far with
        ``save(partial)``, goes to ``out`` at once."""
        if name not in sections:
            return
        started, partial = time.perf_counter(), {}
        print(f"spade bench gpu: {name} ...", file=sys.stderr, flush=True)  # progress on a one-shot remote run

        def save(values: dict) -> None:
            partial.update(values, unfinished=True)
            atomic_write_json(out, {**result, name: partial})

        try:
            result[name] = body(save)
        except Exception as exc:  # noqa: BLE001 -- one failing section must not lose the others' numbers
            result["errors"][name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            log.error("section %s failed: %s", name, exc)
            if partial:
                result[name] = partial
        result["seconds"][name] = time.perf_counter() - started
        atomic_write_json(out, result)

    try:
        section("probes", lambda _: probes(place, dtype, matmul_n, probe_mib))
        measured = result.get("probes", {})
        peak = peak_tflops or (sheet[0] if sheet else measured.get("matmul_tflops"))
        bandwidth = bandwidth_tbs or (sheet[1] if sheet else measured.get("copy_tbs"))
        for key, value, flag in (("peak_tflops", peak, peak_tflops), ("bandwidth_tbs", bandwidth, bandwidth_tbs)):
            result[key] = {"value": value, "source": "flag" if flag else "datasheet" if sheet else "measured"}
        big = {}  # the model of ``shape``, built once for train and decode

        def measured_model(value, flag: str):
            if not value:
                raise ValueError(f"the probes section did not run and {info['name']!r} is not in the datasheet "
                                 f"table; pass {flag}")
            if "model" not in big:
                big["model"] = build_model(shape, tokenizer, place, dtype, seed)
            return big["model"]

        section("train", lambda _: train_rate(config, measured_model(peak, "--peak-tflops"),
                                              synthetic_samples(train_samples, train_tokens, len(tokenizer), seed),
                                              micro_batch, peak, place))

        def step(_):
            folder = write_model(build_model(step_shape, tokenizer, place, dtype, seed), tokenizer, scratch / "model")
            _release(place)
            return whole_step(step_config(config, device, step_new_tokens, 2), folder, scratch / "runs")

        section("step", step)  # before decode, the longest section: a run cut short still has the step
        section("decode", lambda save: decode_sequence(measured_model(bandwidth, "--bandwidth-tbs"), tokenizer,
                                                       decode_batch, decode_prompt_tokens, decode_new_tokens,
                                                       decode_calls, bandwidth, place, seed,
                                                       on_call=lambda rows: save({"calls": rows})))
    finally:
        if not work_dir:
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def render(result: dict) -> str:
    """The benchmark's headline numbers as text (the JSON holds everything)."""
    info = result["info"]
    lines = [f"device: {info['name']} ({info['device']}), torch {info['torch']}, transformers {info['transformers']}, "
             f"dtype {result['dtype']}, shape {result['shape']}"]
    peak, bandwidth = result.get("peak_tflops", {}), result.get("bandwidth_tbs", {})
    if "probes" in result:
        p = result["probes"]
        lines.append(f"probes: {p['matmul_dtype']} matmul {p['matmul_n']}^3 {p['matmul_tflops']:.1f} TFLOP/s, copy "
                     f"{p['copy_tbs']:.2f} TB/s; peak used {peak.get('value') or 0:.1f} TFLOP/s "
                     f"({peak.get('source')}), "
                     f"bandwidth used {bandwidth.get('value') or 0:.2f} TB/s ({bandwidth.get('source')})")
    if "train" in result and "unfinished" not in result["train"]:
        t = result["train"]
        memory = f", peak memory {t['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in t else ""
        lines.append(f"train: {t['samples']} x {t['tokens_per_sample']} tokens, micro-batch {t['micro_batch']}, "
                     f"{t['dtype']}{' + fp32 masters' if t['master_weights'] else ''}: {t['seconds']:.2f} s, "
                     f"{t['tokens_per_s']:.0f} tokens/s, {t['achieved_tflops']:.1f} TFLOP/s = MFU "
                     f"{t['mfu']:.1%}{memory}")
    if "decode" in result:
        d = result["decode"]
        lines.append(f"decode: batch {d['calls'][0]['rows']}, {d['calls'][0]['new_tokens'] // d['calls'][0]['rows']} "
                     "new tokens per row (ms/step; floor; ratio; prefill s; call s; device allocs/frees/retries):")
        for row in d["calls"]:
            lines.append(f"  call {row['call']} {row['kind']:<6} {row['ms_per_step']:8.2f} {row['floor_ms']:8.2f} "
                         f"{row['ratio_to_floor']:6.2f}x {row['prefill_seconds']:7.2f} {row['call_seconds']:7.2f} "
                         f"{'/'.join(str(v) for v in row['allocator'].values()) or '-'}")
        for kind, prof in d.get("profiles", {}).items():
            busy = prof["device_busy_share"]
            lines.append(f"  profiled {kind} call: {prof['wall_seconds']:.2f} s, device busy "
                         f"{'-' if busy is None else f'{busy:.0%}'}; top by device time:")
            key = "top_by_device" if info["device"].startswith("cuda") else "top_by_cpu"
            for op in prof[key][:8]:
                lines.append(f"    {op['name'][:60]:<60} {op['calls']:>7} calls {op['self_device_ms']:9.1f} ms device "
                             f"{op['self_cpu_ms']:9.1f} ms cpu")
    if "step" in result and "unfinished" not in result["step"]:
        s = result["step"]
        times = ", ".join(f"{m['step_seconds']:.1f} s" for m in s["metrics"])
        lines.append(f"step: {s['steps']} steps ({times}); resumed run equal: {s['same_metrics_resumed']}"
                     f"{'' if not s['differing_keys'] else ' (differ: ' + ', '.join(s['differing_keys']) + ')'}; "
                     f"{s['checkpoint']} (masters: {s['checkpoint_master_weights']}) on the CPU, max |weight - saved| "
                     f"{s['checkpoint_on_cpu_max_abs_diff']:.3g}")
    for name, error in result["errors"].items():
        lines.append(f"ERROR in {name}: {error.splitlines()[0]}")
    lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result["seconds"].items()))
    return "\n".join(lines)
