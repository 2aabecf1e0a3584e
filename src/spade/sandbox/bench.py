"""``spade env bench``: the cost of one environment step through the sandbox, measured three ways.

All figures come from one run on this machine:
- ``sandbox_step_ms``: median round trip of ``step`` to a persistent worker's forked episode;
- ``inprocess_step_ms``: the same step on an instance in this process (the lower bound; only done
  with our own library code, never with generated code);
- ``fresh_process_step_ms``: median cost of the same step when every call starts a fresh sandboxed
  process (start, load, reset, step, exit), which is what a naive runner does;
- ``validations_per_s``: full validations of the built-in library per second at the configured
  ``spare_episode``; ``validations_per_s_spare`` / ``_no_spare`` and ``spare_speedup`` compare the two
  settings in alternating rounds of the same run;
- ``episode_ms`` / ``episode_precompiled_ms``: median cost of one whole episode (open, reset, step, close) as the
  agent's runner plays it, with the episode process compiling the environment's code, and with the code compiled
  once by the host (``SandboxPool.open(compiled=...)``, what the runner passes); ``precompiled_speedup`` is their
  ratio, from alternating rounds of the same run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from spade.envs.intake import intake
from spade.envs.library.registry import get_env, library
from spade.envs.tool_base import ToolUseBaseEnv
from spade.envs.validate import Validator
from spade.sandbox.config import SandboxConfig
from spade.sandbox.pool import SandboxPool, precompile

ACTION = "\\boxed{1}"


def _steps_ms(step, reset, count: int) -> list:
    times = []
    reset()
    for _ in range(count):
        start = time.perf_counter()
        _, _, terminated, truncated, _ = step(ACTION)
        times.append((time.perf_counter() - start) * 1000)
        if terminated or truncated:
            reset()
    return times


def _play_once(episode, seed: int, where: str = "") -> None:
    """Reset ``episode`` with ``seed`` and step it once; a failure (the open's included) stops the benchmark."""
    for outcome in (episode.opened, episode.reset(seed), episode.step(ACTION)):
        if not outcome.ok:
            raise RuntimeError(f"benchmark environment failed{where}: {outcome.describe()}")


def _episodes_ms(pool: SandboxPool, code, kwargs: dict, compiled: str | None, count: int) -> list:
    times = []
    for seed in range(count):
        start = time.perf_counter()
        with pool.open(code.code, code.class_name, seed, kwargs, compiled=compiled) as episode:
            _play_once(episode, seed)
        times.append((time.perf_counter() - start) * 1000)
    return times


def run_bench(config: SandboxConfig, env_name: str = "", steps: int = 2000, fresh_calls: int = 30,
              validation_rounds: int = 3, episodes: int = 200) -> dict:
    entry = get_env(env_name) if env_name else next(e for e in library() if e.flavour != "tool_use")
    code = intake(entry.source())
    kwargs = {"max_turns": 10**9}
    with SandboxPool(config) as pool:
        episode = pool.open(code.code, code.class_name, seed=0, env_kwargs=kwargs)

        def sandbox_step(action):
            outcome = episode.step(action)
            if not outcome.ok:
                raise RuntimeError(f"benchmark environment failed: {outcome.describe()}")
            return outcome.value

        sandbox = _steps_ms(sandbox_step, lambda: episode.reset(0), steps)
        episode.close()

        namespace = {"ToolUseBaseEnv": ToolUseBaseEnv}
        exec(compile(code.code, entry.name, "exec"), namespace)  # trusted library code only
        instance = namespace[code.class_name](**kwargs)
        inprocess = _steps_ms(instance.step, lambda: instance.reset(0), steps)

        fresh = []
        one_worker = replace(config, workers=1)
        for _ in range(fresh_calls):
            start = time.perf_counter()
            with SandboxPool(one_worker) as alone, alone.open(code.code, code.class_name, 0, kwargs) as episode:
                _play_once(episode, 0, " in a fresh worker")
            fresh.append((time.perf_counter() - start) * 1000)

        compiled = precompile(code.code)
        whole = {False: [], True: []}
        for _ in range(4):  # alternating rounds: both see the same machine load
            for precompiled in (False, True):
                whole[precompiled] += _episodes_ms(pool, code, kwargs, compiled if precompiled else None,
                                                   max(1, episodes // 4))

        level = pool.level
        sources = [e.source() for e in library()]
        # The same validations with and without spare episode processes, rounds alternating between the two
        # pools so that both see the same machine load.
        with SandboxPool(replace(config, spare_episode=not config.spare_episode)) as other:
            pools = {config.spare_episode: pool, not config.spare_episode: other}
            seconds = {True: 0.0, False: 0.0}
            for _ in range(validation_rounds):
                for spare, its_pool in pools.items():
                    validator = Validator(its_pool)
                    start = time.perf_counter()
                    for source in sources:
                        validator.validate(source)
                    seconds[spare] += time.perf_counter() - start
        rate = {spare: validation_rounds * len(sources) / elapsed for spare, elapsed in seconds.items()}
    sandbox_ms, inprocess_ms, fresh_ms = (statistics.median(x) for x in (sandbox, inprocess, fresh))
    episode_ms, precompiled_ms = statistics.median(whole[False]), statistics.median(whole[True])
    return {
        "env": entry.name,
        "isolation": level,
        "steps": steps,
        "fresh_calls": fresh_calls,
        "sandbox_step_ms": sandbox_ms,
        "sandbox_step_p90_ms": statistics.quantiles(sandbox, n=10)[-1],
        "inprocess_step_ms": inprocess_ms,
        "fresh_process_step_ms": fresh_ms,
        "speedup_vs_fresh_process": fresh_ms / sandbox_ms,
        "overhead_vs_inprocess_ms": sandbox_ms - inprocess_ms,
        "episode_ms": episode_ms,
        "episode_precompiled_ms": precompiled_ms,
        "precompiled_speedup": episode_ms / precompiled_ms,
        "validations": validation_rounds * len(sources),
        "spare_episode": config.spare_episode,
        "validations_per_s": rate[config.spare_episode],
        "validations_per_s_spare": rate[True],
        "validations_per_s_no_spare": rate[False],
        "spare_speedup": rate[True] / rate[False],
    }
