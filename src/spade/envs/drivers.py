"""Scripted players used by validation and the library check: the oracle and a random policy.

A driver talks to anything with ``reset(seed) -> (obs, info)``, ``step(action) -> 5-tuple`` and
``solution() -> str``: a sandboxed episode (``spade.sandbox.SandboxedEpisode``) or, in tests of our own
trusted library code only, a plain in-process instance.

Conventions (also stated in the designer prompts): ``solution()`` returns the reference actions from
the current state, one per line. For games each line is the bare answer, which the driver wraps in
``\\boxed{...}`` as the agent would; for tool use each line is a raw action (a tool-call JSON object or
``<answer>done</answer>``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field

from spade.core.rewards import episode_return, is_win

WORD_RE = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass
class EpisodeResult:
    actions: list = field(default_factory=list)  # [T] actions sent
    rewards: list = field(default_factory=list)  # [T] per-step rewards
    terminated: bool = False
    truncated: bool = False

    @property
    def final_return(self) -> float:
        """Episode return (spec section 3.4)."""
        return episode_return(self.rewards[-1], self.terminated) if self.rewards else 0.0

    @property
    def won(self) -> bool:
        return bool(self.rewards) and is_win(self.rewards[-1], self.terminated)


def as_action(line: str, kind: str) -> str:
    """Format one solution line as the agent would write it."""
    line = line.strip()
    if kind == "tool_use" or "\\boxed{" in line:
        return line
    return "\\boxed{" + line + "}"


def _play(env, seed: int, next_action, max_steps: int) -> EpisodeResult:
    result = EpisodeResult()
    observation, info = env.reset(seed)
    for _ in range(max_steps):
        action = next_action(observation, info)
        if action is None:
            break
        observation, reward, terminated, truncated, info = env.step(action)
        result.actions.append(action)
        result.rewards.append(reward)
        result.terminated, result.truncated = terminated, truncated
        if terminated or truncated:
            break
    return result


def play_oracle(env, seed: int, kind: str, max_steps: int = 64) -> EpisodeResult:
    """Reset with ``seed``, ask ``solution()`` once and replay its lines in order."""
    queue: list | None = None

    def next_action(observation, info):
        nonlocal queue
        if queue is None:  # first turn: ask for the plan once, from the freshly reset state
            queue = [as_action(ln, kind) for ln in str(env.solution()).splitlines() if ln.strip()]
        return queue.pop(0) if queue else None

    return _play(env, seed, next_action, max_steps)


def random_action(rng: random.Random, observation: str, info: dict, kind: str) -> str:
    """A plausible but uninformed action: tokens of the observation, numbers, letters or tool calls."""
    if kind == "tool_use":
        tools = info.get("tools") or []
        if rng.random() < 0.1 or not tools:
            return "<answer>done</answer>"
        function = rng.choice(tools)["function"]
        arguments = {}
        words = WORD_RE.findall(observation) or ["x"]
        for arg, spec in function.get("parameters", {}).get("properties", {}).items():
            if "enum" in spec:
                arguments[arg] = rng.choice(spec["enum"])
            elif spec.get("type") in ("integer", "number"):
                arguments[arg] = rng.randint(0, 100)
            elif spec.get("type") == "boolean":
                arguments[arg] = rng.random() < 0.5
            else:
                arguments[arg] = rng.choice(words)
        return json.dumps({"name": function["name"], "arguments": arguments})
    choice = rng.random()
    if choice < 0.4:
        answer = str(rng.randint(0, 100))
    elif choice < 0.8:
        answer = rng.choice(WORD_RE.findall(observation) or ["0"])
    else:
        answer = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 6)))
    return "\\boxed{" + answer + "}"


def play_random(env, seed: int, kind: str, max_steps: int = 64) -> EpisodeResult:
    """Play uniformly uninformed actions until the episode ends.

    Tool schemas arrive in the reset info only; they are remembered for the whole episode.
    """
    rng = random.Random(f"random-policy-{seed}")
    known: dict = {}

    def next_action(observation, info):
        if info.get("tools"):
            known["tools"] = info["tools"]
        return random_action(rng, observation, {**info, **known}, kind)

    return _play(env, seed, next_action, max_steps)
