"""Minimal checkpoint evaluation: the agent on held-out built-in environments (no hints).

The held-out environments (``eval.heldout``) are never used for backfill or memory seeding, so they
measure transfer within the built-in library. Seeds are fixed per (environment, episode), so every
checkpoint of a run sees the same tasks. The full benchmark suite of the paper is a later stage.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from spade.agent import EpisodeJob, EpisodeRunner
from spade.config import SpadeConfig
from spade.configtools import ConfigError
from spade.designer.prompts import agent_system_prompt
from spade.envs.intake import intake
from spade.envs.library import get_env
from spade.provenance import stamp
from spade.selfplay import derive_seed

BENCHMARK = "heldout_library"


def evaluate_checkpoint(config: SpadeConfig, model_dir: str | Path, step: int) -> dict:
    """Play ``eval.episodes`` episodes on every held-out environment; returns the eval record."""
    from spade.generation_hf import HFBackend
    from spade.models import load_model
    from spade.sandbox.pool import SandboxPool

    if not config.eval.heldout:
        raise ConfigError("config key 'eval.heldout' is empty; name at least one built-in environment to evaluate on")
    entries = [get_env(name) for name in config.eval.heldout]
    model, tokenizer = load_model(model_dir)
    agent = replace(config.agent, temperature=config.eval.temperature)
    jobs = []
    for entry in entries:
        code = intake(entry.source())
        kind = "tool_use" if entry.flavour == "tool_use" else "game"
        jobs += [EpisodeJob(entry.name, code.code, code.class_name, kind,
                            derive_seed(config.seed, "eval", entry.name, i)) for i in range(config.eval.episodes)]
    with SandboxPool(config.sandbox) as pool:
        prompts = {kind: agent_system_prompt(kind) for kind in ("game", "tool_use")}
        records = EpisodeRunner(HFBackend(model, tokenizer), pool, agent, prompts).run(
            jobs, derive_seed(config.seed, "eval-sampling"))
    rows = []
    for entry in entries:
        mine = [r for r in records if r.env_id == entry.name]
        rows.append({"env": entry.name, "n": len(mine), "win_rate": sum(r.won for r in mine) / len(mine),
                     "mean_return": sum(r.final_return for r in mine) / len(mine)})
    return {
        "run": config.run_name,
        "step": step,
        "benchmark": BENCHMARK,
        "environments": rows,
        "win_rate": sum(r.won for r in records) / len(records),
        "mean_return": sum(r.final_return for r in records) / len(records),
        "n": len(records),
        "env_failures": sum(r.outcome == "env_failure" for r in records),
        "provenance": stamp(config),
    }
