"""In-process checks of the built-in environment library (our own trusted source files only).

Every registered environment is loaded from its source with ``exec`` into a fresh namespace (no
sandbox: these files are ours), then checked against the environment contract: one class, seeded and
deterministic resets, exact builtin types on every step, the oracle wins, a random policy mostly
loses, hidden-state environments pay strictly partial rewards for imperfect play, and tool-use
success criteria start out False.
"""

from __future__ import annotations

import ast
import json
import math

import pytest

from spade.envs.drivers import as_action, play_oracle, play_random
from spade.envs.library.registry import GAME_SKILLS, TOOL_USE_SKILLS, library
from spade.envs.tool_base import ToolUseBaseEnv

ENTRIES = library()
GAME_ENTRIES = [e for e in ENTRIES if e.flavour != "tool_use"]
TOOL_ENTRIES = [e for e in ENTRIES if e.flavour == "tool_use"]
ALLOWED_IMPORTS = {"math", "random", "re", "json", "itertools", "collections", "string", "functools"}
TOOL_BASE_MODULE = "spade.envs.tool_base"


def kind_of(entry) -> str:
    return "tool_use" if entry.flavour == "tool_use" else "game"


def max_turns_of(entry) -> int:
    return 30 if entry.flavour == "tool_use" else 20


def class_names(source: str) -> list[str]:
    return [node.name for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]


def load_class(entry):
    source = entry.source()
    namespace = {"ToolUseBaseEnv": ToolUseBaseEnv, "__name__": f"library_{entry.name}"}
    exec(compile(source, str(entry.path), "exec"), namespace)  # trusted library code only
    (name,) = class_names(source)
    return namespace[name]


def make_env(entry):
    return load_class(entry)(max_turns=max_turns_of(entry))


class CheckedEnv:
    """Delegates to an environment and asserts the exact types of everything it returns."""

    def __init__(self, env):
        self.env = env
        self.steps = 0

    def reset(self, seed=None):
        out = self.env.reset(seed)
        assert type(out) is tuple and len(out) == 2
        observation, info = out
        assert type(observation) is str and observation
        assert type(info) is dict
        json.dumps(info)
        return observation, info

    def step(self, action):
        out = self.env.step(action)
        assert type(out) is tuple and len(out) == 5, out
        observation, reward, terminated, truncated, info = out
        assert type(observation) is str
        assert type(reward) is float and math.isfinite(reward) and 0.0 <= reward <= 1.0, reward
        assert type(terminated) is bool and type(truncated) is bool
        assert type(info) is dict
        json.dumps(info)
        self.steps += 1
        return out

    def solution(self):
        plan = self.env.solution()
        assert type(plan) is str
        return plan


# ----- static checks of the source ------------------------------------------------------------------


def test_registry_covers_every_skill():
    for skill in GAME_SKILLS:
        entries = [e for e in GAME_ENTRIES if e.skill == skill]
        assert len(entries) >= 2, skill
        assert any(e.hidden_state and e.flavour in ("interactive", "game") for e in entries), skill
    assert len(TOOL_ENTRIES) >= 3
    assert all(e.skill in TOOL_USE_SKILLS for e in TOOL_ENTRIES)
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_source_shape(entry):
    source = entry.source()
    tree = ast.parse(source)
    assert len(class_names(source)) == 1
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef, ast.ClassDef, ast.Expr)), (
            f"unexpected top-level statement at line {node.lineno}"
        )
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), "only a docstring"
        if isinstance(node, ast.Import):
            assert all(alias.name in ALLOWED_IMPORTS for alias in node.names)
        if isinstance(node, ast.ImportFrom):
            assert node.module in ALLOWED_IMPORTS or (entry.flavour == "tool_use" and node.module == TOOL_BASE_MODULE)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "print" not in names and "open" not in names
    if entry.flavour == "tool_use":
        assert f"from {TOOL_BASE_MODULE} import" in source


# ----- the Gym-style contract ----------------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_reset_is_seeded_and_deterministic(entry, capsys):
    env = CheckedEnv(make_env(entry))
    observations = []
    for seed in range(5):
        first, _ = env.reset(seed)
        second, _ = env.reset(seed)
        assert first == second, f"seed {seed} is not deterministic"
        observations.append(first)
    assert len(set(observations)) > 1, "observations do not depend on the seed"
    fresh = CheckedEnv(make_env(entry))
    assert fresh.reset(3)[0] == observations[3], "a fresh instance disagrees with a reused one"
    env.env.close()
    assert capsys.readouterr().out == "", "environments must not print"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_oracle_wins(entry):
    env = CheckedEnv(make_env(entry))
    for seed in range(10):
        result = play_oracle(env, seed, kind_of(entry))
        assert result.won, f"oracle lost on seed {seed}: rewards {result.rewards}"
        assert len(result.actions) <= max_turns_of(entry)
        again = play_oracle(env, seed, kind_of(entry))
        assert again.actions == result.actions and again.rewards == result.rewards


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_random_policy_mostly_loses(entry):
    env = CheckedEnv(make_env(entry))
    results = [play_random(env, seed, kind_of(entry)) for seed in range(20)]
    win_rate = sum(r.won for r in results) / len(results)
    assert win_rate <= 0.25, win_rate
    replay = play_random(env, 7, kind_of(entry))
    assert replay.rewards == results[7].rewards and replay.actions == results[7].actions


@pytest.mark.parametrize("entry", GAME_ENTRIES, ids=lambda e: e.name)
def test_game_edge_actions(entry):
    """Missing boxes, junk and empty boxes never end the episode or pay; the turn limit truncates."""
    env = CheckedEnv(make_env(entry))
    env.reset(0)
    for action in ["no box here", "\\boxed{}", "\\boxed{???}", "", "\\boxed{zzz 1 2 3}"]:
        _, reward, terminated, truncated, _ = env.step(action)
        assert reward == 0.0 and not terminated and not truncated
    env.reset(1)
    outcome = None
    for _ in range(max_turns_of(entry)):
        outcome = env.step("\\boxed{nonsense}")
    assert outcome[3] is True and outcome[2] is False


# ----- partial rewards of hidden-state environments -------------------------------------------------


def _replace_last(plan: list[str], new_last: str) -> list[str]:
    return plan[:-1] + [new_last]


def _linear_wrong_value(env, plan):
    words = plan[-1].split()
    words[1] = str(int(words[1]) + 1)
    return _replace_last(plan, " ".join(words))


def _profile_wrong_attribute(env, plan):
    words = plan[-1].split()
    words[1] = "unknownvalue"
    return _replace_last(plan, " ".join(words))


def _treasure_first_then_stop(env, plan):
    return [plan[0], "stop"]


def _cipher_wrong_letter(env, plan):
    command, word = plan[-1].split()
    last = "a" if word[-1] != "a" else "b"
    return _replace_last(plan, f"{command} {word[:-1]}{last}")


def _oil_drill_one_fewer(env, plan):
    words = plan[-1].split()
    if len(words) > 2:
        return _replace_last(plan, " ".join(words[:-1]))
    return _replace_last(plan, "drill " + ("A" if words[1] != "A" else "B"))


def _causal_one_link(env, plan):
    words = plan[-1].split()
    return _replace_last(plan, " ".join(words[:2]))


def _jobs_reversed(env, plan):
    return list(reversed(plan))


# Scripted imperfect plays, built from the reference plan of the freshly reset state.
PARTIAL_PLAYS = {
    "hidden_linear_system": _linear_wrong_value,  # one value off: (n-1)/n
    "secret_profile_probe": _profile_wrong_attribute,  # one attribute wrong: 3/4
    "treasure_distance_scan": _treasure_first_then_stop,  # one treasure then stop: 1/k
    "shift_cipher_probe": _cipher_wrong_letter,  # last letter wrong: (L-1)/L
    "oil_field_survey": _oil_drill_one_fewer,  # drop a plot from the optimal plan
    "causal_switch_intervention": _causal_one_link,  # declare only one of >= 2 true links
}


@pytest.mark.parametrize("entry", [e for e in GAME_ENTRIES if e.hidden_state], ids=lambda e: e.name)
def test_hidden_state_partial_reward(entry):
    assert entry.name in PARTIAL_PLAYS, "every hidden-state environment needs a scripted partial play"
    env = CheckedEnv(make_env(entry))
    finals = []
    for seed in range(10):
        env.reset(seed)
        plan = [line for line in env.solution().splitlines() if line.strip()]
        actions = PARTIAL_PLAYS[entry.name](env.env, plan)
        reward, terminated = 0.0, False
        for action in actions:
            _, reward, terminated, truncated, _ = env.step(as_action(action, "game"))
            if terminated or truncated:
                break
        assert terminated, f"seed {seed}: the scripted play did not end the episode"
        finals.append(reward)
    partial = [r for r in finals if 0.0 < r < 1.0]
    assert len(partial) >= 5, f"too few strictly partial rewards: {finals}"


def test_hidden_state_partial_reward_per_skill():
    for skill in GAME_SKILLS:
        assert any(e.hidden_state and e.skill == skill and e.name in PARTIAL_PLAYS for e in GAME_ENTRIES), skill


def test_job_order_pays_partial_for_suboptimal_orders():
    (entry,) = [e for e in GAME_ENTRIES if e.name == "job_order_game"]
    env = CheckedEnv(make_env(entry))
    rewards = []
    for seed in range(10):
        env.reset(seed)
        plan = [line for line in env.solution().splitlines() if line.strip()]
        last = None
        for action in _jobs_reversed(env.env, plan) + plan:  # rejected jobs fall through to the plan
            last = env.step(as_action(action, "game"))
            if last[2] or last[3]:
                break
        assert last[2]
        rewards.append(last[1])
    assert any(0.0 < r < 1.0 for r in rewards), rewards


# ----- tool use -------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", TOOL_ENTRIES, ids=lambda e: e.name)
def test_tool_use_structure_and_reset_gate(entry):
    cls = load_class(entry)
    assert issubclass(cls, ToolUseBaseEnv)
    env = cls(max_turns=30)
    tools = env._tools
    assert 3 <= len([t for t in tools if t != "decline_request"]) <= 10
    assert any(spec.get("required") or any("enum" in p for p in spec.get("parameters", {}).values()) for spec in tools.values())
    assert any(any("enum" in p for p in spec.get("parameters", {}).values()) for spec in tools.values())
    for name in tools:
        assert callable(getattr(env, f"tool_{name}", None)), name
    for seed in (0, 1, 2):
        _, info = env.reset(seed)
        assert 3 <= len(env._user_messages) <= 5
        assert len(env._message_criteria) == len(env._user_messages)
        for index, criterion in enumerate(env._message_criteria):
            assert criterion(env.state) is False, f"seed {seed}: criterion {index} is already met"
        assert [t["function"]["name"] for t in info["tools"]] == list(tools)
        for line in env.solution().splitlines()[:-1]:
            json.loads(line)
        assert env.solution().splitlines()[-1] == "<answer>done</answer>"


@pytest.mark.parametrize("entry", TOOL_ENTRIES, ids=lambda e: e.name)
def test_tool_use_errors_are_text(entry):
    env = CheckedEnv(make_env(entry))
    env.reset(0)
    for action in [
        "not json at all",
        '{"name": "no_such_tool", "arguments": {}}',
        '{"name": "' + next(iter(env.env._tools)) + '", "arguments": {"bogus": 1}}',
    ]:
        observation, reward, terminated, _, _ = env.step(action)
        assert observation.startswith("Error") and reward == 0.0 and not terminated
    for name, spec in env.env._tools.items():
        arguments = {arg: ("ZZ-0000" if p.get("type", "string") == "string" else 0) for arg, p in spec.get("parameters", {}).items()
                     if "enum" not in p}
        arguments.update({arg: p["enum"][0] for arg, p in spec.get("parameters", {}).items() if "enum" in p})
        observation, reward, terminated, _, _ = env.step(json.dumps({"name": name, "arguments": arguments}))
        assert reward == 0.0 and not terminated
    observation, reward, terminated, _, _ = env.step("<answer>done</answer>")
    assert reward == 0.0 and terminated


@pytest.mark.parametrize("entry", [e for e in TOOL_ENTRIES if e.name == "retail_order_support"], ids=lambda e: e.name)
def test_missing_value_guessed_ids_error(entry):
    env = CheckedEnv(make_env(entry))
    env.reset(0)
    guess = {"name": "cancel_order", "arguments": {"order_id": "ORD-00000", "reason": "found_cheaper"}}
    observation, _, _, _, _ = env.step(json.dumps(guess))
    assert observation.startswith("Error")


@pytest.mark.parametrize("entry", GAME_ENTRIES, ids=lambda e: e.name)
def test_game_fuzz_with_mutated_commands(entry):
    """Well-formed-looking commands with mutated arguments never crash and keep the types exact."""
    import random

    env = CheckedEnv(make_env(entry))
    rng = random.Random(f"fuzz-{entry.name}")
    pieces = ["-1", "0", "1", "7", "99", "A", "Z", "S9", "~S1", "A>A", "B=2", "x", "aaaaa", ",", "K", "N"]
    for seed in range(10):
        env.reset(seed)
        lines = [line for line in env.solution().splitlines() if line.strip()]
        for _ in range(max_turns_of(entry)):
            words = rng.choice(lines).split()
            for _ in range(rng.randint(1, 3)):
                position = rng.randrange(len(words) + 1)
                if rng.random() < 0.5 and words:
                    words[min(position, len(words) - 1)] = rng.choice(pieces)
                else:
                    words.insert(position, rng.choice(pieces))
            _, _, terminated, truncated, _ = env.step("\\boxed{" + " ".join(words) + "}")
            if terminated or truncated:
                break
        env.env.close()
