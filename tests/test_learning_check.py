"""Issue 16: library difficulty levels, the agent's prompt styles, level arguments reaching the sandbox, and the
learning check (its task, its pool source, its benchmark and its run in the default workflow)."""

from __future__ import annotations

import ast
import random

import pytest

from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRunner
from spade.configtools import ConfigError
from spade.designer.prompts import agent_prompt, agent_system_prompt
from spade.envs.checks import CHECKS, check_source
from spade.envs.drivers import play_oracle
from spade.envs.intake import intake
from spade.envs.library.registry import get_env, level_kwargs, library
from spade.inference.generation import Generation

LEVELLED = [e for e in library() if "easy" in e.levels]


def load(source: str, name: str):
    namespace = {"__name__": name}
    exec(compile(source, name, "exec"), namespace)  # our own trusted files only
    (cls,) = [node.name for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
    return namespace[cls]


# ----- library levels ---------------------------------------------------------------------------------
def test_the_single_turn_puzzles_have_an_easy_level():
    assert sorted(e.name for e in LEVELLED) == ["crt_residue_puzzle", "knapsack_selection", "knights_knaves_puzzle",
                                                "sequence_next_terms", "switch_lamp_log"]
    assert all(e.levels[0] == "standard" for e in library())


@pytest.mark.parametrize("entry", LEVELLED, ids=lambda e: e.name)
def test_easy_instances_are_smaller_and_still_solvable(entry):
    cls = load(entry.source(), entry.name)
    for seed in range(8):
        env = cls(max_turns=5, level="easy")
        assert play_oracle(env, seed, "game").won, (entry.name, seed)
        env.reset(seed)
        standard = cls(max_turns=5)
        standard.reset(seed)
        if entry.name == "knights_knaves_puzzle":
            assert len(env.names) == 2 < len(standard.names)
        elif entry.name == "switch_lamp_log":
            assert (env.switches, len(env.wiring)) == (2, 1) and standard.switches >= 4
        elif entry.name == "knapsack_selection":
            assert len(env.names) == 3 < len(standard.names)
        elif entry.name == "crt_residue_puzzle":
            assert len(env.moduli) == 2 and set(env.moduli) <= {3, 4, 5}
        else:  # sequence_next_terms: arithmetic with step 1 or 2
            steps = {b - a for a, b in zip(env.terms, env.terms[1:])}
            assert len(steps) == 1 and steps <= {1, 2}


def test_an_unknown_level_is_refused_with_the_allowed_ones():
    cls = load(get_env("knights_knaves_puzzle").source(), "kk")
    with pytest.raises(ValueError, match=r"'standard', 'easy'.*'hard'"):
        cls(level="hard")
    with pytest.raises(ConfigError, match=r"eval.heldout_library.level.*oil_field_survey.*\['standard'\]"):
        level_kwargs(get_env("oil_field_survey"), "easy", "eval.heldout_library.level")
    assert level_kwargs(get_env("crt_residue_puzzle"), "standard", "k") == {}
    assert level_kwargs(get_env("crt_residue_puzzle"), "easy", "k") == {"level": "easy"}


# ----- prompt styles --------------------------------------------------------------------------------------
def test_prompt_styles():
    assert agent_prompt("game") == [{"role": "system", "content": agent_system_prompt("game")}]
    shown = agent_prompt("game", "demonstration")
    assert [m["role"] for m in shown] == ["system", "user", "assistant"]
    assert "\\boxed{12}" in shown[2]["content"]
    assert agent_prompt("tool_use", "demonstration") == agent_prompt("tool_use")  # its format is a tool call
    with pytest.raises(ValueError, match="agent.prompt_style.*'paper', 'demonstration'.*'fewshot'"):
        agent_prompt("game", "fewshot")


class EchoBackend:
    """Replies with a fixed text; records the decoded prompts."""

    def __init__(self, tokenizer, text):
        self.tokenizer, self.text, self.prompts = tokenizer, text, []

    def generate(self, prompts, params, seed):
        self.prompts += [self.tokenizer.decode(p) for p in prompts]
        ids = self.tokenizer(self.text, add_special_tokens=False)["input_ids"]
        return [Generation(text=self.text, completion_ids=ids + [self.tokenizer.eos_token_id],
                           logprobs=[0.0] * (len(ids) + 1)) for _ in prompts]


def test_the_level_and_the_demonstration_reach_the_episode(tiny_model, pool):
    """The job's env_kwargs open the sandboxed environment at its level: the easy CRT puzzle's answer (N < 20)
    wins; the demonstration exchange sits between the system prompt and the first observation."""
    _, tokenizer = tiny_model
    entry = get_env("crt_residue_puzzle")
    code = intake(entry.source())
    env = load(entry.source(), "crt")(level="easy")
    env.reset(7)
    backend = EchoBackend(tokenizer, f"\\boxed{{{env.solution()}}}")
    runner = EpisodeRunner(backend, pool, AgentConfig(max_turns=1, max_new_tokens=16, max_context_tokens=2048),
                           {"game": agent_prompt("game", "demonstration")})
    easy, standard = runner.run([EpisodeJob("e", code.code, code.class_name, "game", 7, env_kwargs={"level": "easy"}),
                                 EpisodeJob("s", code.code, code.class_name, "game", 7)], seed=0)
    assert easy.won and not standard.won
    first = backend.prompts[0]
    assert first.index("You are playing") < first.index("What is 7 + 5?") < first.index("N divided by")


# ----- the learning check ----------------------------------------------------------------------------------
@pytest.mark.parametrize("reply, length, reward", [
    ("1234", 4, 1.0), ("12 34", 4, 1.0), ("12ab", 4, 0.5), ("12345", 4, 0.9), ("abcd", 4, 0.0), ("99", 4, 0.5),
])
def test_digit_reply_rewards_by_hand(reply, length, reward):
    env = load(check_source("digit_reply", "k"), "digit_reply")()
    for seed in range(50):
        env.reset(seed)
        if env.length == length:
            break
    _, got, terminated, truncated, _ = env.step(reply)
    assert (got, terminated, truncated) == (reward, True, False)


def test_check_source_names_the_key_and_the_allowed_names():
    assert set(CHECKS) == {"digit_reply"}
    with pytest.raises(ConfigError, match=r"baseline.pool_envs.*'small_sum'.*\['digit_reply'\]"):
        check_source("small_sum", "baseline.pool_envs")


def test_checks_stay_out_of_the_library():
    assert not {e.name for e in library()} & set(CHECKS)


def test_the_check_pool_and_benchmark(tiny_model, pool):
    from spade.core import pool_sources
    from spade.config import load_config
    from spade.evals.registry import registry
    from spade.evals.base import EvalContext

    config = load_config("configs/default.yaml", overrides={
        "baseline": {"mode": "fixed_pool", "pool_source": "checks", "pool_envs": ["digit_reply"]},
        "selfplay": {"backfill": False, "train_designer": False}})
    (entry,) = pool_sources.make_source(config).entries()
    assert (entry.name, entry.origin) == ("digit_reply", "check:digit_reply")
    _, tokenizer = tiny_model
    bench = registry()["learning_check"](config.eval.learning_check)
    items = bench.items()
    assert len(items) == config.eval.learning_check.episodes
    ctx = EvalContext(EchoBackend(tokenizer, "12345678"), seed=0, benchmark="learning_check", max_new_tokens=16,
                      max_context_tokens=2048, pool_factory=lambda: pool)
    metrics = {m.name: m.value for m in bench.aggregate(bench.play(items[:6], ctx))}
    lengths = [load(check_source("digit_reply", "k"), "d")().reset(ctx.item_seed(i.id))[1]["length"] for i in items[:6]]
    assert metrics["mean_return"] == pytest.approx(sum(1.0 if n == 8 else 0.9 for n in lengths) / 6)


# ----- the learning signal of the run table ---------------------------------------------------------------------
def test_bootstrap_mean_difference_by_hand():
    from spade.analysis.rates import bootstrap_mean_difference

    diff, low, high = bootstrap_mean_difference([0.0, 0.0, 0.0], [1.0, 1.0])
    assert (diff, low, high) == (1.0, 1.0, 1.0)  # constant samples: every resample gives the same difference
    diff, low, high = bootstrap_mean_difference([0.0, 1.0] * 20, [0.0, 1.0] * 20, seed=3)
    assert diff == 0.0 and low < 0 < high
    with pytest.raises(ValueError, match="both samples"):
        bootstrap_mean_difference([], [1.0])


def test_learning_signal_compares_the_first_and_last_quarter():
    from spade.paper.report import learning_signal, learning_signal_row

    records = [{"step": s, "agent_returns": [s / 10] * 4} for s in range(8)]  # quarters: steps 0-1 and 6-7
    diff, low, high, n_first, n_last = learning_signal(records)
    assert diff == pytest.approx((0.6 + 0.7) / 2 - (0.0 + 0.1) / 2) and n_first == n_last == 8
    assert 0 < low <= diff <= high
    name, value, detail = learning_signal_row(records)
    assert value == "+0.600" and "excludes 0" in detail
    assert learning_signal_row(records[:1])[1] == "not run"


# ----- the easy level in self-play --------------------------------------------------------------------------------
def test_backfill_at_the_easy_level_plays_it_and_keeps_it(tiny_model, pool):
    """selfplay.library_level 'easy' backfills only environments that have the level, outside the held-out set; the
    slot carries the level to its episodes, into a designed pool's entries and across a fixed set's windows."""
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.validate import Validator
    from spade.core.fixed_envs import reopened
    from spade.core.selfplay import SelfPlay
    from spade.core.slots import EnvSlot
    from tests.test_baselines import config_with, make_core

    config = config_with({"selfplay": {"backfill": True, "library_level": "easy",
                                       "skills": ["optimization", "causal_inference"]}})
    _, tokenizer = tiny_model
    core, _ = make_core(config, pool, tokenizer)
    assert sorted(e.name for e in core.backfill_pool) == ["knapsack_selection", "knights_knaves_puzzle",
                                                          "sequence_next_terms", "switch_lamp_log"]
    slots = [EnvSlot(f"s-{skill}", skill, 0, "designer") for skill in ("optimization", "causal_inference")]
    core._backfill(slots, 0)
    assert [s.source for s in slots] == ["backfill:knapsack_selection", "backfill:switch_lamp_log"]
    assert all(s.env_kwargs == {"level": "easy"} for s in slots)
    assert reopened(slots[0], 4).env_kwargs == {"level": "easy"}
    core.runner.pool = _Recording(pool)  # the jobs of a play open the environment with the slot's arguments
    core.play(slots[:1], 0, "no_hint", 1)
    assert core.runner.pool.kwargs == [{"max_turns": config.agent.max_turns, "level": "easy"}]
    with pytest.raises(ConfigError, match="selfplay.library_level.*'easy'"):
        SelfPlay(config_with({"selfplay": {"backfill": True, "library_level": "easy"}},
                             {"eval": {"heldout_library": {"environments": [e.name for e in LEVELLED]}}}),
                 core.backend, Validator(pool), EnvironmentMemory(config.memory), None)


class _Recording:
    """A sandbox pool that records the constructor arguments of every episode it opens."""

    def __init__(self, pool):
        self.pool, self.kwargs = pool, []

    def open(self, code, class_name, seed=None, env_kwargs=None):
        self.kwargs.append(dict(env_kwargs or {}))
        return self.pool.open(code, class_name, seed=seed, env_kwargs=env_kwargs)
