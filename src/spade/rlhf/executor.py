"""``SpadeAgentExecutor``: OpenRLHF's agent-executor hook, served by the SPADE coordinator.

OpenRLHF instantiates ``AgentExecutor()`` once per vLLM engine (``RolloutRayActor``) and, for every
ticket, awaits ``execute(...)`` G times concurrently with ``llm_engine`` = that engine. Each call:

1. asks the coordinator what it is (``assign``): an agent episode, a designer replay or padding;
2. agent: plays the episode with the core's ``EpisodeRunner.run_one`` (token ids in and out of
   ``llm_engine.generate``; the environment runs only in this engine's sandbox pool), reports the
   outcome and waits for the slot's advantage (``report``);
3. returns OpenRLHF's response dict (``spade.rlhf.plan``): ``observation_tokens``, ``action_ranges``
   (only the agent's sampled tokens train), ``rollout_log_probs``, ``reward`` (= our advantage),
   ``scores`` and ``extra_logs``.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from openrlhf.utils.agent import AgentExecutorBase

from spade.config import logprob_temperature
from spade.core.agent import loss_masked
from spade.inference.generation import SamplingParams
from spade.rlhf import plan
from spade.rlhf.engine import call_engine, from_request_output, to_engine_params
from spade.seeding import derive_seed


class _Local:
    """An in-process coordinator behind the same call shape as the Ray actor."""

    def __init__(self, target):
        self.target = target

    async def call(self, name: str, *args):
        return await getattr(self.target, name)(*args)


class _Remote:
    def __init__(self, handle):
        self.handle = handle

    async def call(self, name: str, *args):
        return await getattr(self.handle, name).remote(*args)


class _TokenizerOnly:
    """What ``EpisodeRunner`` needs of a backend when turns are generated elsewhere."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, *args, **kwargs):
        raise RuntimeError("turns are generated through the vLLM engine (EpisodeRunner.run_one)")


class _LockedTokenizer:
    """A tokenizer whose calls run one at a time: the sandbox threads share one fast (Rust) tokenizer, which
    may raise "Already borrowed" when two threads use it at once. Attributes pass through unchanged."""

    def __init__(self, tokenizer):
        self._tokenizer, self._lock = tokenizer, threading.Lock()

    def __call__(self, *args, **kwargs):
        with self._lock:
            return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        value = getattr(self._tokenizer, name)
        if not callable(value):
            return value

        def locked(*args, **kwargs):
            with self._lock:
                return value(*args, **kwargs)

        return locked


class SpadeAgentExecutor(AgentExecutorBase):
    """See the module docstring. ``coordinator``: an in-process ``SpadeCoordinator`` (tests); by default the
    run's named Ray actor. ``pool``: a ``SandboxPool`` (tests); by default one per engine, made on first use
    with ``openrlhf.sandbox_workers_per_engine`` workers. The blocking sandbox work of the engine's concurrent
    episodes runs in as many threads as the pool has workers (tokenizer calls among it take turns)."""

    def __init__(self, coordinator=None, pool=None):
        self._client = _Local(coordinator) if coordinator is not None else None
        self._in_process = coordinator is not None
        self._pool, self._config, self._runner, self._threads, self._tokenizer = pool, None, None, None, None

    async def _in_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    async def _connect(self, prompt: str):
        if self._client is None:
            from spade.rlhf.coordinator import ray_coordinator

            self._client = _Remote(ray_coordinator(plan.run_dir_of(prompt)))
        if self._config is None:
            self._config = await self._client.call("settings")
        return self._client

    def _engine_ref(self, llm_engine):
        if self._in_process:
            return llm_engine
        import ray

        return ray.get_runtime_context().current_actor

    def _episode_runner(self, tokenizer):
        if self._runner is None:
            from spade.core.agent import EpisodeRunner
            from spade.designer.prompts import agent_prompt
            from spade.sandbox.pool import SandboxPool

            if self._pool is None:
                workers = self._config.openrlhf.sandbox_workers_per_engine
                self._pool = SandboxPool(replace(self._config.sandbox, workers=workers))
            self._threads = ThreadPoolExecutor(max_workers=len(self._pool.workers), thread_name_prefix="spade-sandbox")
            prompts = {kind: agent_prompt(kind, self._config.agent.prompt_style) for kind in ("game", "tool_use")}
            self._runner = EpisodeRunner(_TokenizerOnly(tokenizer), self._pool, self._config.agent, prompts)
        return self._runner

    def _check(self, sampling_params, max_length: int) -> None:
        agent, designer = self._config.agent, self._config.designer
        temperature, expected = getattr(sampling_params, "temperature", None), logprob_temperature(self._config)
        if temperature is not None and abs(float(temperature) - expected) > 1e-9:
            raise ValueError(f"--rollout.temperature {temperature} differs from train.logprob_temperature {expected} "
                             "(null: agent.temperature); OpenRLHF's actor takes its log-probs at --rollout.temperature")
        if self._config.train.logprob_temperature is None and abs(designer.temperature - agent.temperature) > 1e-9:
            raise ValueError(f"designer.temperature {designer.temperature} differs from agent.temperature "
                             f"{agent.temperature} while train.logprob_temperature is null (the sampling temperature): "
                             "OpenRLHF takes every sample's log-probs at one temperature")
        if agent.max_context_tokens > max_length:
            raise ValueError(f"agent.max_context_tokens {agent.max_context_tokens} exceeds --data.max_len {max_length}")

    def _locked(self, hf_tokenizer) -> _LockedTokenizer:
        if self._tokenizer is None or self._tokenizer._tokenizer is not hf_tokenizer:
            self._tokenizer = _LockedTokenizer(hf_tokenizer)
        return self._tokenizer

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        hf_tokenizer = self._locked(hf_tokenizer)  # shared with the sandbox threads
        client = await self._connect(prompt)
        self._check(sampling_params, max_length)
        job = await client.call("assign", label, self._engine_ref(llm_engine), sampling_params)

        async def agenerate(prompt_ids, params, seed):
            output = await call_engine(llm_engine, prompt_ids, to_engine_params(sampling_params, params, seed))
            return from_request_output(output, hf_tokenizer)

        async def pad(reward: float = 0.0):
            """One token sampled after the ticket's own prompt, with its real log-prob."""
            prompt_ids = hf_tokenizer(prompt, add_special_tokens=False)["input_ids"]
            agent = self._config.agent
            params = SamplingParams(agent.temperature, agent.top_p, 1, top_k=agent.top_k)
            out = await agenerate(prompt_ids, params, derive_seed(self._config.seed, "pad", job.step, job.role, job.index))
            return plan.pad_response(prompt, label, job.step, prompt_ids, out.completion_ids[0], out.logprobs[0], reward)

        if job.kind == "pad":
            out = await pad()
        elif job.kind == "designer":
            out = plan.designer_response(prompt, label, job.step, job.entry, max_length)
        else:
            runner = self._episode_runner(hf_tokenizer)
            record = await runner.run_one(job.job, agenerate, in_thread=self._in_thread)
            advantage = await client.call("report", job.step, job.role, job.index, record.summary())
            if advantage is None:  # dropped for an environment failure (agent.failed_plays 'drop'): trains nothing
                out = await pad()
            elif not any(record.loss_mask) or loss_masked(record, self._config.agent):
                # failed before its first turn ('zero'), or loss-masked (agent.truncated_episodes 'mask'): dr_grpo
                # re-centres every group, so a pad carries the advantage and keeps the group's sum (one token trains)
                out = await pad(advantage)
            else:
                out = plan.agent_response(prompt, label, job.step, record, advantage, max_length)
        await client.call("wait_finished", job.step)  # the step's last engine call is over (SpadeCoordinator)
        return out
