"""Issue 16: library difficulty levels, the agent's prompt styles, level arguments reaching the sandbox, and the
learning check (its task, its pool source, its benchmark and its run in the default workflow)."""

from __future__ import annotations

import ast
import json

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


def symbol_copy(split="train"):
    return load(check_source("symbol_copy", "k"), "symbol_copy")(split=split)


@pytest.mark.parametrize("reply, reward", [
    ("KD", 1.0), ("k d", 1.0), (" K D ", 1.0),  # exact: spaces and case ignored
    ("KB", 0.05), ("BD", 0.05), ("DK", 0.0), ("BB", 0.0),  # two letters of the alphabet: credit per right place
    ("K7", 0.0), ("K", 0.0), ("KDB", 0.0), ("CKCK", 0.0),  # any other reply: nothing (merged "ck" tokens included)
    ("", 0.0), ("12", 0.0), ("KQ", 0.0),  # Q, like 1 and 2, is no letter of the alphabet
])
def test_symbol_copy_rewards_by_hand(reply, reward):
    env = symbol_copy()
    env.reset(0)
    env.answer = "KD"
    _, got, terminated, truncated, info = env.step(reply)
    assert (got, terminated, truncated) == (pytest.approx(reward), True, False)
    assert env.step("KD")[1:3] == (0.0, True)  # one turn


def test_symbol_copy_shows_its_answer_and_wins_with_its_solution():
    env = symbol_copy()
    for seed in range(20):
        observation, _ = env.reset(seed)
        assert observation.endswith(": " + env.answer) and env.step(env.solution())[1] == 1.0


def score_per_reply(make_env, reward, replies, instances=1000):
    """Mean reward of each constant reply over the first ``instances`` seeds; ``reward(env, reply)``."""
    envs = []
    for seed in range(instances):
        env = make_env()
        env.reset(seed)
        envs.append(env)
    return {reply: sum(reward(env, reply) for env in envs) / instances for reply in replies}


def replay_reward(env, reply):
    env.done = False
    return env.step(reply)[1]


def constant_replies(alphabet):
    """Every reply that can score: only a reply of two letters of the alphabet (spaces removed, case ignored) earns
    anything."""
    return [a + b for a in alphabet for b in alphabet]


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_no_constant_reply_earns_more_than_0_05(split):
    module = load_module("symbol_copy")
    scores = score_per_reply(lambda: symbol_copy(split), replay_reward, constant_replies(module["ALPHABET"]))
    assert max(scores.values()) <= 0.05
    # the mutation the bound catches: credit for any letter of the alphabet, whatever was shown (digit_reply's flaw)
    def any_letter(env, reply):
        return 1.0 if replay_reward(env, reply) == 1.0 else 0.45 * sum(c in module["ALPHABET"] for c in reply)
    assert max(score_per_reply(lambda: symbol_copy(split), any_letter, ["BB"], 200).values()) > 0.05
    # and digit_reply itself: eight sevens earn 0.9 or more on every instance
    digits = load(check_source("digit_reply", "k"), "digit_reply")
    assert score_per_reply(digits, replay_reward, ["77777777"], 200)["77777777"] >= 0.9


def load_module(name):
    namespace = {"__name__": name}
    exec(compile(check_source(name, "k"), name, "exec"), namespace)  # our own trusted file
    return namespace


def prompts_of(split):
    """Every observation the split can show: one per letter pair of the split."""
    module = load_module("symbol_copy")
    env = symbol_copy(split)
    shown = set()
    for pair in module["split_pairs"](split):
        env.pairs = [pair]
        shown.add(env.reset(0)[0])
    return shown


def test_heldout_prompts_are_never_trained_on():
    module = load_module("symbol_copy")
    train, heldout = prompts_of("train"), prompts_of("heldout")
    assert (len(train), len(heldout)) == (32, 32)  # 8 x 8 pairs, i + j even held out
    assert not train & heldout
    env = symbol_copy("train")  # seeds reach only those prompts, and all of them
    assert {env.reset(seed)[0] for seed in range(3000)} == train
    # every letter is trained on at both positions
    pairs = module["split_pairs"]("train")
    assert {p[0] for p in pairs} == {p[1] for p in pairs} == set(module["ALPHABET"])
    # the mutation the check catches: held-out instances that are only other seeds of the training space
    assert prompts_of("train") & {symbol_copy("train").reset(seed)[0] for seed in range(10_000, 10_050)}
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'heldout'\), got 'test'"):
        symbol_copy("test")


def test_check_source_names_the_key_and_the_allowed_names():
    assert set(CHECKS) == {"copy_span", "digit_reply", "symbol_copy"}
    with pytest.raises(ConfigError, match=r"baseline.pool_envs.*'small_sum'.*\['copy_span', 'digit_reply', 'symbol_copy'\]"):
        check_source("small_sum", "baseline.pool_envs")


def test_checks_stay_out_of_the_library():
    assert not {e.name for e in library()} & set(CHECKS)


def test_the_check_pool_and_benchmark(tiny_model, pool):
    """The pool opens symbol_copy at its training split, the benchmark at its held-out split: every prompt the
    benchmark plays is a held-out pair, and a reply that copies it wins."""
    from spade.core import pool_sources
    from spade.config import load_config
    from spade.evals.registry import registry
    from spade.evals.base import EvalContext

    config = load_config("configs/default.yaml", overrides={
        "baseline": {"mode": "fixed_pool", "pool_source": "checks", "pool_envs": ["symbol_copy"]},
        "selfplay": {"backfill": False, "train_designer": False}})
    (entry,) = pool_sources.make_source(config).entries()
    assert (entry.name, entry.origin) == ("symbol_copy", "check:symbol_copy")
    _, tokenizer = tiny_model
    bench = registry()["learning_check"](config.eval.learning_check)
    items = bench.items()
    assert len(items) == config.eval.learning_check.episodes and items[0].payload["env"] == "symbol_copy"
    heldout, train = prompts_of("heldout"), prompts_of("train")
    ctx = EvalContext(None, seed=0, benchmark="learning_check", max_new_tokens=4, max_context_tokens=2048,
                      pool_factory=lambda: pool)
    shown = [symbol_copy("heldout").reset(ctx.item_seed(item.id))[0] for item in items[:6]]
    ctx.backend = EchoBackend(tokenizer, shown[0][-2:])  # copies the first item's letters
    records = bench.play(items[:6], ctx)
    assert all(sum(text in prompt for text in heldout) == 1 and not any(text in prompt for text in train)
               for prompt in ctx.backend.prompts)
    assert [r.score for r in records] == [1.0 if text == shown[0] else 0.0 for text in shown]
    assert records[0].score == 1.0


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
    assert diff == pytest.approx((0.6 + 0.7) / 2 - (0.0 + 0.1) / 2) and n_first == n_last == 2
    assert 0 < low <= diff <= high
    name, value, detail = learning_signal_row(records)
    assert value == "+0.600" and "excludes 0" in detail and "over steps" in detail
    assert learning_signal_row(records[:1])[1] == "not run"
    # the interval resamples steps, not episodes: two steps per quarter whose means differ by more than the change
    # give an interval that includes 0, though resampling their 200 episodes would exclude it
    records = [{"step": s, "agent_returns": [value] * 50} for s, value in enumerate([0.0, 1.0, 0, 0, 0, 0, 0.5, 1.5])]
    diff, low, high, n_first, n_last = learning_signal(records)
    assert diff == pytest.approx(0.5) and low < 0 < high and n_first == n_last == 2


def test_paired_bootstrap_difference_by_hand():
    from spade.analysis.rates import paired_bootstrap_difference

    assert paired_bootstrap_difference([(0, 1)] * 5) == (1.0, 1.0, 1.0)  # every item gains 1: no spread
    diff, low, high = paired_bootstrap_difference([(0, 1), (1, 0)] * 20, seed=3)
    assert diff == 0.0 and low < 0 < high
    # pairing matters: the same scores, unpaired, would vary far more than the constant item-wise gain of 0.1
    diff, low, high = paired_bootstrap_difference([(x, x + 0.1) for x in (0.0, 0.9) * 10])
    assert diff == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)
    with pytest.raises(ValueError, match="at least one"):
        paired_bootstrap_difference([])


def test_learning_check_table_rows_by_hand(tmp_path):
    from spade.paper.report import ReportInputError
    from tests.paper_scripts import load_script

    table = load_script("table_learning_check")
    base = {f"i{k}": 0.0 for k in range(10)}
    last = {f"i{k}": 1.0 if k < 4 else 0.0 for k in range(10)}  # 4 of 10 won after training, none before
    rows = table.learning_check_rows([("s0", 0, base, 80, last), ("s1", 0, base, 80, base)])
    assert rows[0][:2] == ("s0: held-out win rate, step 0 -> step 80", "0.000 -> 0.400")
    assert "change +0.400" in rows[0][2] and "excludes 0" in rows[0][2] and "10 held-out instances" in rows[0][2]
    assert rows[1][1] == "0.000 -> 0.000" and "[+0.000, +0.000] (includes 0)" in rows[1][2]
    assert rows[2][:2] == ("Mean change over the runs (seeds)", "+0.200")
    assert "resampling the 2 runs [+0.000, +0.400]" in rows[2][2] and "smallest change +0.000" in rows[2][2]
    with pytest.raises(ReportInputError, match="run 's0'.*different held-out items"):
        table.learning_check_rows([("s0", 0, base, 80, {"other": 1.0})])
    # end to end: results and their item records on disk -> the Markdown table
    for step, scores in ((0, base), (80, last)):
        result = tmp_path / f"step_{step:06d}.json"
        result.write_text(json.dumps({"step": step}))
        result.with_name(result.stem + ".items.jsonl").write_text(
            "".join(json.dumps({"id": i, "score": v}) + "\n" for i, v in scores.items()))
    table.main(["--runs", "s0", "--base", str(tmp_path / "step_000000.json"), "--last",
                str(tmp_path / "step_000080.json"), "--out", str(tmp_path / "t.md")])
    assert "| s0: held-out win rate, step 0 -> step 80 | 0.000 -> 0.400 |" in (tmp_path / "t.md").read_text()


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
        self.pool, self.config, self.kwargs = pool, pool.config, []

    def open(self, code, class_name, seed=None, env_kwargs=None, **options):
        self.kwargs.append(dict(env_kwargs or {}))
        return self.pool.open(code, class_name, seed=seed, env_kwargs=env_kwargs, **options)
