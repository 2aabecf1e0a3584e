"""One evaluation interface for every benchmark (spec section 9).

A benchmark is a class registered under a name (``spade.evals.registry``). Given its config it lists
its ``Item`` s (stable ids, JSON payloads), plays a batch of items with a generation backend and returns
one ``ItemRecord`` per item, and rolls records into ``Metric`` s. ``evaluate`` drives it:

- items are sorted by id and each item samples with its own seed ``item_seed(seed, benchmark, id)``
  (per-prompt seeds of the backend), so a record does not depend on the order or batch of the items;
- records are appended to ``<result>.items.jsonl`` after every batch; an interrupted evaluation
  rerun with the same config reads that file and plays only the items without a record;
- the result JSON holds tidy rows ``run, step, benchmark, metric, value, n, stderr`` plus provenance
  (config hash, git commit, seeds) and throughput (items/s, generated tokens/s).

Benchmarks whose data the user must download raise ``DataMissing`` from ``check_data`` before any model
is loaded; the message says what to download and which config key points at it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from spade.configtools import ConfigError, option
from spade.inference.generation import GenerationBackend, SamplingParams, cut_to_limit
from spade.io import atomic_write_text
from spade.inference.models import chat_prompt_ids
from spade.seeding import derive_seed

log = logging.getLogger(__name__)


class DataMissing(ConfigError):
    """A user-data benchmark's files are absent; the message says what to get and where to put it."""


@dataclass(frozen=True)
class Item:
    id: str  # stable and unique within the benchmark (e.g. "leg_counting/3")
    payload: dict  # everything needed to play and score the item (JSON-serialisable)
    group: str = ""  # sub-bucket for per-group metrics (category, game, split); "" for none


@dataclass
class ItemRecord:
    id: str
    prompt_hash: str  # sha256 (16 hex) of the first prompt text, see ``prompt_hash``
    response: str  # the model's reply; multi-turn benchmarks say which (last reply, or all joined)
    score: float  # the item's score in [0, 1] (1 = solved/won/passed)
    turns: int = 1  # model turns played
    tokens: int = 0  # tokens the model generated over all turns
    group: str = ""
    extra: dict = field(default_factory=dict)  # benchmark-specific details (return, transcript, error...)


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    n: int
    stderr: float  # standard error of the mean; nan when it is not defined (n < 2)


# ------------------------------------------------------------------------------------------------ sampling keys
# A benchmark section with its own sampling declares these four keys; they apply under `eval.sampling: reference`
# (spade.evals.config.benchmark_sampling), `eval.sampling: shared` replaces them with eval.temperature & co.
def temperature_option(value: float, source: str):
    return option(value, f"Sampling temperature under eval.sampling 'reference' (reference code: {source}).", min=0.0)


def top_p_option(value: float, source: str):
    return option(value, f"Nucleus mass under eval.sampling 'reference'; 1.0 = off (reference code: {source}).",
                  min=0.0)


def top_k_option(value: int, source: str):
    return option(value, f"Top-k under eval.sampling 'reference'; 0 = off (reference code: {source}).", min=0)


def max_new_tokens_option(value: int, source: str):
    return option(value, f"Most tokens per model turn under eval.sampling 'reference' (reference code: {source}); "
                  "a turn also stops at eval.max_context_tokens.", min=1)


@dataclass
class EvalContext:
    """What a benchmark gets to play its items."""

    backend: GenerationBackend
    seed: int  # the evaluation's master seed
    benchmark: str
    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 256  # per model turn
    max_context_tokens: int = 32768
    top_k: int = 0  # 0 = off
    sampling_source: str = ""  # which settings these are: 'reference' (the benchmark's own keys) or 'shared' (eval.*)
    pool_factory: Callable | None = None  # () -> SandboxPool, for benchmarks that run generated code
    _pool: object = None

    def item_seed(self, item_id: str, *parts) -> int:
        return derive_seed(self.seed, "eval", self.benchmark, item_id, *parts)

    def params(self, max_new_tokens: int | None = None) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_p, max_new_tokens or self.max_new_tokens, top_k=self.top_k)

    def sampling(self) -> dict:
        """The settings every reply of this evaluation is sampled with; item records are reused only under equal
        settings (``evaluate``), and the result file states them."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "max_new_tokens": self.max_new_tokens, "max_context_tokens": self.max_context_tokens}

    @property
    def pool(self):
        """A sandbox pool, started on first use and closed by ``evaluate``."""
        if self._pool is None:
            if self.pool_factory is None:
                raise RuntimeError(f"benchmark {self.benchmark!r} needs a sandbox but the context has no pool_factory")
            self._pool = self.pool_factory()
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class Benchmark:
    """Base class. Subclasses set ``name``, ``config_cls`` (the dataclass of their section ``eval.<name>``)
    and implement ``items`` and ``play``."""

    name: str = ""
    config_cls: type = type(None)
    offline: bool = True  # False: the user must provide the data (see ``check_data``)

    def __init__(self, config):
        self.config = config

    def check_data(self) -> None:
        """Raise ``DataMissing`` when the benchmark's data is not where the config says."""

    def items(self) -> list[Item]:
        raise NotImplementedError

    def play(self, items: Sequence[Item], ctx: EvalContext) -> list[ItemRecord]:
        """Play a batch of items; one record per item, in order."""
        raise NotImplementedError

    def protocol(self) -> dict:
        """Settings besides the model and the sampling that change what an item measures (e.g. a tool-call format):
        records made under others are not reused (``records_key``). Default: none."""
        return {}

    def aggregate(self, records: Sequence[ItemRecord]) -> list[Metric]:
        """Default: overall mean score (``score``) and the mean of each group (``score/<group>``)."""
        return score_metrics(records)


# ------------------------------------------------------------------------------------------------ metrics
def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation / sqrt(n)); stderr nan if n < 2."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def mean_metric(name: str, values: Sequence[float]) -> Metric:
    mean, stderr = mean_stderr(list(values))
    return Metric(name, mean, len(values), stderr)


def unit_mean_metric(name: str, records: Sequence[ItemRecord], unit: Callable) -> Metric:
    """Mean over units (a problem, a task) of each unit's mean score, stderr over units: how a benchmark that plays
    every unit k times (samples, trials) reports it. With equal k it equals the mean over all plays, the reference's
    avg@k / pass^1 (``eval_offline/suites/gpqa_diamond.py:130``, ``spade/core/eval/tau2_evaluator.py:373``)."""
    by_unit: dict = {}
    for record in records:
        by_unit.setdefault(unit(record), []).append(record.score)
    return mean_metric(name, [sum(scores) / len(scores) for scores in by_unit.values()])


def score_metrics(records: Sequence[ItemRecord], name: str = "score") -> list[Metric]:
    metrics = [mean_metric(name, [r.score for r in records])]
    for group in sorted({r.group for r in records if r.group}):
        metrics.append(mean_metric(f"{name}/{group}", [r.score for r in records if r.group == group]))
    return metrics


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ chat driver
class Conversation:
    """A multi-turn chat with the model, driven by ``play_conversations``.

    ``messages`` starts with the system/user prompt. ``respond`` consumes the model's reply and returns
    the next user message, a list of messages (e.g. ``tool`` results), or None when the item is finished (it
    scores itself as it goes). ``tools``: schemas the chat template renders (``tools=``), or None.
    """

    def __init__(self, messages: list, tools: list | None = None):
        self.messages = list(messages)
        self.tools = tools
        self.replies: list = []
        self.tokens = 0
        self.stop_reason = ""  # "done", "turn_limit" or "context_limit"

    def respond(self, text: str) -> str | None:
        raise NotImplementedError


def play_conversations(ctx: EvalContext, conversations: Sequence[Conversation], seeds: Sequence[int],
                       max_turns: int, max_new_tokens: int | None = None) -> None:
    """Batch every live conversation's next turn into one backend call until all are finished.

    Prompts are rendered with the tokenizer's chat template, with a conversation's ``tools`` (most benchmarks
    put tool schemas into their own prompt text and have none). Turn ``t`` of conversation ``i`` samples with seed
    ``derive(seeds[i], t)`` and at most ``min(max_new_tokens, context left)`` tokens of its own (a longer
    batch is cut per row), so a conversation's course depends only on its own seed and prompt.
    """
    tokenizer = ctx.backend.tokenizer
    per_turn = max_new_tokens or ctx.max_new_tokens
    live = list(range(len(conversations)))
    for turn in range(max_turns):
        prompts, ids, budgets = [], [], []
        for i in live:
            tokens = chat_prompt_ids(tokenizer, conversations[i].messages, conversations[i].tools)
            if len(tokens) >= ctx.max_context_tokens:
                conversations[i].stop_reason = "context_limit"
                continue
            prompts.append(tokens)
            ids.append(i)
            budgets.append(min(per_turn, ctx.max_context_tokens - len(tokens)))
        if not ids:
            return
        generations = ctx.backend.generate(prompts, ctx.params(max(budgets)),
                                           [derive_seed(seeds[i], "turn", turn) for i in ids])
        live = []
        for i, generation, budget in zip(ids, generations, budgets):
            conversation = conversations[i]
            generation = cut_to_limit(generation, budget, tokenizer)  # the batch may run past this row's budget
            text = generation.text
            conversation.tokens += len(generation.completion_ids)
            conversation.replies.append(text)
            conversation.messages.append({"role": "assistant", "content": text})
            follow_up = conversation.respond(text)
            if follow_up is None:
                conversation.stop_reason = "done"
                continue
            if isinstance(follow_up, str):
                follow_up = [{"role": "user", "content": follow_up}]
            conversation.messages += follow_up
            live.append(i)
        if not live:
            return
    for i in live:
        conversations[i].stop_reason = "turn_limit"


# ------------------------------------------------------------------------------------------------ runner
@dataclass(frozen=True)
class EvalRun:
    """Where and for what an evaluation is run."""

    run: str
    step: int
    out: Path  # the result JSON; records go to <out stem>.items.jsonl beside it
    batch_size: int = 16  # items per ``play`` call
    max_items: int = 0  # 0 = every item; else the first max_items by id (a deterministic subsample)
    provenance: dict = field(default_factory=dict)
    model_identity: str = ""  # model_identity() of the model evaluated: item records of another model (or of other
    # sampling settings, EvalContext.sampling) are not reused


def items_path(out: Path) -> Path:
    return out.with_name(out.stem + ".items.jsonl")


def model_identity(model_dir) -> str:
    """A cheap fingerprint of a model folder: the SHA-256 of its trainer_state.json (a checkpoint: it holds the
    run's resume key, config and base weights, and its step) or of its provenance.json (a prepared base model: it
    holds the weights' SHA-256); '' when it has neither."""
    for name in ("trainer_state.json", "provenance.json"):
        path = Path(model_dir) / name
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return ""


def records_key(identity: str, sampling: dict, protocol: dict | None = None) -> str:
    """What item records are valid for: the model (``model_identity``), the sampling settings (``EvalContext.sampling``)
    and the benchmark's ``protocol()`` (left out when empty: the keys of benchmarks without one stay as they were)."""
    key = {"model": identity, "sampling": sampling, **({"protocol": protocol} if protocol else {})}
    return json.dumps(key, sort_keys=True)


def _records_reusable(record_file: Path, key: str) -> bool:
    """Whether the item records at ``record_file`` may be reused under ``key`` (``records_key``; noted beside them for
    the next call). Records written for another model, other sampling settings or another protocol, or before the key
    was noted, are not: a training started over writes new checkpoints under the same step names, and a record sampled
    at another temperature or in another tool-call format is another measurement."""
    note = record_file.with_name(record_file.name.removesuffix(".jsonl") + ".model")
    same = note.is_file() and note.read_text(encoding="utf-8") == key
    atomic_write_text(note, key)
    return same or not record_file.is_file()


def _load_done(path: Path, wanted: set) -> dict:
    """Records already written by an earlier (interrupted) run; a torn last line is ignored."""
    done = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if data.get("id") in wanted:
            done[data["id"]] = ItemRecord(**data)
    return done


def select_items(benchmark: Benchmark, max_items: int) -> list[Item]:
    items = sorted(benchmark.items(), key=lambda item: item.id)
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"benchmark {benchmark.name!r} lists duplicate item ids")
    return items[:max_items] if max_items else items


def evaluate(benchmark: Benchmark, ctx: EvalContext, spec: EvalRun, progress: bool = True) -> dict:
    """Play every pending item, write the records and the result JSON; returns the result."""
    from tqdm import tqdm

    items = select_items(benchmark, spec.max_items)
    if not items:
        raise ConfigError(f"benchmark {benchmark.name!r} has no items with the given config")
    record_file = items_path(spec.out)
    record_file.parent.mkdir(parents=True, exist_ok=True)
    reusable = _records_reusable(record_file, records_key(spec.model_identity, ctx.sampling(), benchmark.protocol()))
    if not reusable:
        log.warning("%s holds records of another model, other sampling settings or another protocol; evaluating every "
                    "item again",
                    record_file)
    done = _load_done(record_file, {item.id for item in items}) if reusable else {}
    pending = [item for item in items if item.id not in done]
    # rewrite the file with only the valid, wanted records (drops a torn line), then append batches
    atomic_write_text(record_file, "".join(json.dumps(asdict(done[i.id])) + "\n" for i in items if i.id in done))
    started, generated, played = time.perf_counter(), 0, 0
    try:
        with open(record_file, "a", encoding="utf-8") as sink, \
                tqdm(total=len(items), initial=len(done), desc=benchmark.name, disable=not progress) as bar:
            for start in range(0, len(pending), spec.batch_size):
                batch = pending[start:start + spec.batch_size]
                records = benchmark.play(batch, ctx)
                if [r.id for r in records] != [item.id for item in batch]:
                    raise RuntimeError(f"benchmark {benchmark.name!r} returned records out of order or missing")
                for record in records:
                    sink.write(json.dumps(asdict(record)) + "\n")
                    done[record.id] = record
                sink.flush()
                os.fsync(sink.fileno())
                generated += sum(r.tokens for r in records)
                played += len(records)
                bar.update(len(records))
    finally:
        ctx.close()
    elapsed = time.perf_counter() - started
    records = [done[item.id] for item in items]
    metrics = benchmark.aggregate(records)
    result = {
        "run": spec.run,
        "step": spec.step,
        "benchmark": benchmark.name,
        "rows": [{"run": spec.run, "step": spec.step, "benchmark": benchmark.name, "metric": m.name,
                  "value": _finite(m.value), "n": m.n, "stderr": _finite(m.stderr)} for m in metrics],
        "n_items": len(records),
        "items_file": record_file.name,
        "throughput": {"items_played": played, "seconds": elapsed, "generated_tokens": generated,
                       "items_per_s": played / elapsed if played and elapsed > 0 else None,
                       "tokens_per_s": generated / elapsed if played and elapsed > 0 else None},
        "config": asdict(benchmark.config) if hasattr(benchmark.config, "__dataclass_fields__") else {},
        "sampling": {**ctx.sampling(), "source": ctx.sampling_source},
        "provenance": {**spec.provenance, "eval_seed": ctx.seed, "item_seeds": "derive_seed(seed, 'eval', benchmark, item_id)"},
    }
    atomic_write_text(spec.out, json.dumps(result, indent=1, default=str, allow_nan=False) + "\n")
    return result


def _finite(value: float) -> float | None:
    """JSON has no NaN: undefined values (an empty mean, the stderr of one item) are written as null."""
    return None if value is None or not math.isfinite(value) else value
