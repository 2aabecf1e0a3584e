"""Adapters between OpenRLHF's vLLM engines and our ``GenerationBackend`` token-id interface.

OpenRLHF hands an agent executor ``llm_engine`` (its ``RolloutRayActor``) whose coroutine
``generate(prompt_token_ids, sampling_params, multi_modal_data=None)`` returns one vLLM
``RequestOutput``: ``outputs[0].token_ids`` (sampled ids, eos included), ``.text``, ``.finish_reason``
("stop" / "length") and, when ``sampling_params.logprobs`` is set, ``.logprobs``: one dict per sampled
position mapping token id -> object with a ``.logprob`` float. OpenRLHF starts its engines with
``logprobs_mode="processed_logprobs"`` whenever ``--algo.advantage.is_correction_level`` is not
``off``. Stock vLLM renormalises those over the tokens top-k/top-p keep; under ``train.rollout_logprobs: reference``
(``spade.inference.vllm_logprobs``, installed in the engine processes by the launch script's site folder) they are
``log_softmax(logits / T)`` over the whole vocabulary, the quantity our HF backend reports and our trainer (and
OpenRLHF's actor, at ``--rollout.temperature``) recomputes.

- ``to_engine_params`` / ``from_request_output``: one request each way;
- ``call_engine``: awaits ``generate`` on a local engine object or on a Ray actor handle;
- ``EngineBackend``: the synchronous ``GenerationBackend`` the coordinator gives the core for the design
  phase (designs, hints, hint arm), spreading prompts over every registered engine.
"""

from __future__ import annotations

import asyncio
import copy

from spade.inference.generation import Generation, SamplingParams, timed_out
from spade.seeding import derive_seed


def to_engine_params(template, params: SamplingParams, seed: int):
    """A copy of OpenRLHF's sampling-params object with our temperature, top-p, top-k, token limit and seed,
    and one log-prob per sampled token (we always need them)."""
    out = copy.deepcopy(template)
    out.temperature = float(params.temperature)
    out.top_p = float(params.top_p)
    out.top_k = int(params.top_k) if params.top_k > 0 else -1  # -1: vLLM's and OpenRLHF's "off"
    out.max_tokens = int(params.max_new_tokens)
    out.seed = int(seed) & 0x7FFF_FFFF
    out.logprobs = 1
    return out


def from_request_output(request_output, tokenizer) -> Generation:
    """Our ``Generation`` from a vLLM ``RequestOutput`` (first completion only)."""
    out = request_output.outputs[0]
    ids = [int(t) for t in out.token_ids]
    if out.logprobs is None:
        raise ValueError("the engine returned no log-probs; sampling_params.logprobs must be set")
    if len(out.logprobs) != len(ids):
        raise ValueError(f"the engine returned {len(out.logprobs)} log-prob entries for {len(ids)} tokens")
    logprobs = [float(entry[token].logprob) for token, entry in zip(ids, out.logprobs)]
    reason = out.finish_reason if out.finish_reason in ("stop", "length") else "stop"
    return Generation(tokenizer.decode(ids, skip_special_tokens=True), ids, logprobs, reason)


async def call_within(engine, prompt_ids: list, engine_params, timeout_s: float):
    """``call_engine`` that gives up after ``timeout_s`` seconds (0 = never) and then returns None (a request past
    ``SamplingParams.timeout_s``, as the reference's asyncio.wait_for around its hint and screen calls)."""
    if not timeout_s:
        return await call_engine(engine, prompt_ids, engine_params)
    try:
        return await asyncio.wait_for(call_engine(engine, prompt_ids, engine_params), timeout_s)
    except asyncio.TimeoutError:
        return None


async def call_engine(engine, prompt_ids: list, engine_params):
    """Await one generation on ``engine``: a Ray actor handle (``generate.remote``) or a local object."""
    method = engine.generate
    if hasattr(method, "remote"):
        return await method.remote(list(prompt_ids), engine_params)
    return await method(list(prompt_ids), engine_params, multi_modal_data=None)


class EngineBackend:
    """``GenerationBackend`` over asynchronous engines, for synchronous core code running in a thread.

    ``generate`` schedules one request per prompt on ``loop`` (the coordinator's event loop), spread
    round-robin over ``engines``, and blocks until all are done. Per-prompt seeds: the list given, or
    ``derive_seed(seed, "prompt", i)`` for one int. Call it from a worker thread, never from ``loop``.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.engines: list = []
        self.loop = None
        self.template = None

    def bind(self, loop, template) -> None:
        self.loop, self.template = loop, template

    def add_engine(self, engine) -> bool:
        if any(e is engine or e == engine for e in self.engines):
            return False
        self.engines.append(engine)
        return True

    def generate(self, prompts, params: SamplingParams, seed) -> list:
        if not self.engines or self.loop is None or self.template is None:
            raise RuntimeError("EngineBackend has no engine, loop or sampling-params template yet")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise RuntimeError("EngineBackend.generate blocks: call it from a worker thread, not the event loop")
        seeds = list(seed) if not isinstance(seed, int) else [derive_seed(seed, "prompt", i) for i in range(len(prompts))]
        if len(seeds) != len(prompts):
            raise ValueError(f"got {len(seeds)} seeds for {len(prompts)} prompts")
        futures = [asyncio.run_coroutine_threadsafe(
            call_within(self.engines[i % len(self.engines)], prompt, to_engine_params(self.template, params, s),
                        params.timeout_s),
            self.loop) for i, (prompt, s) in enumerate(zip(prompts, seeds))]
        outputs = [f.result() for f in futures]
        return [timed_out() if out is None else from_request_output(out, self.tokenizer) for out in outputs]
